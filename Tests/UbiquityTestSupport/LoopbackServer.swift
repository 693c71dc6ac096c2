import Logging
import UbiquityGRPC

/// The real server transport on an ephemeral loopback port, for transport and client tests.
public enum LoopbackServer {
    /// Starts a server with `router` on port 0 (the kernel picks; read `server.port`).
    /// `configure` adjusts the configuration first; `tls` makes it serve TLS.
    public static func start(_ router: Router, tls: TLSContextStore? = nil,
                             configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> GRPCServer {
        var config = ServerConfiguration()
        config.port = 0
        configure(&config)
        let server = GRPCServer(configuration: config, router: router, logger: Logger(label: "test"), tls: tls)
        try server.start()
        return server
    }

    /// Graceful shutdown, waiting until every loop thread has ended.
    public static func stop(_ server: GRPCServer?) {
        server?.beginShutdown()
        server?.waitUntilFinished()
    }
}

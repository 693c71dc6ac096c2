import ArgumentParser
import Foundation
import UbiquityGRPC

/// How `ubiq` speaks TLS, for every subcommand (through `ServerOptions`) and for `health`:
/// one place, so a command cannot grow a TLS flag the others lack. Without a CA the
/// connection is h2c, which ubiquityd serves only on loopback unless told otherwise.
struct TLSOptions: ParsableArguments {
    @Option(help: "Speak TLS, trusting this PEM CA bundle; the server's certificate must name HOST (or set UBIQ_TLS_CA).")
    var tlsCa: String?

    @Option(help: "With a CA: present this PEM client certificate (chain), for a server started with --tls-client-ca (or set UBIQ_TLS_CERT).")
    var tlsCert: String?

    @Option(help: "The private key of the client certificate (PEM; or set UBIQ_TLS_KEY).")
    var tlsKey: String?

    // The environment fills what the command line left out (containers set these once).
    private static let environment = ProcessInfo.processInfo.environment
    private var ca: String? { tlsCa ?? Self.environment["UBIQ_TLS_CA"] }
    private var cert: String? { tlsCert ?? Self.environment["UBIQ_TLS_CERT"] }
    private var key: String? { tlsKey ?? Self.environment["UBIQ_TLS_KEY"] }

    func validate() throws {
        if (cert == nil) != (key == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if cert != nil && ca == nil { throw ValidationError("--tls-cert needs --tls-ca (a client certificate is only sent over TLS)") }
    }

    /// The client context, or nil for h2c. Throws naming the file OpenSSL could not use.
    func context() throws -> TLSContext? {
        guard let ca else { return nil }
        do {
            return try TLSContext(clientTrusting: ca, certificateChainFile: cert, privateKeyFile: key)
        } catch {
            throw CLIError("TLS: cannot use \(error)")
        }
    }
}

import ArgumentParser
import Foundation
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityProtos

/// `ubiq health`: one grpc.health.v1.Health/Check, for container HEALTHCHECKs and Kubernetes
/// exec probes. Kubernetes' own gRPC probe speaks only plaintext, and a ubiquityd on a
/// non-loopback address serves TLS, so the probe runs this inside the pod instead.
/// The health service needs no credentials.
struct Health: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that ubiquityd is serving (grpc.health.v1): exit 0 if SERVING, 1 if not, 2 if it cannot be asked.")

    @Option(name: .long, help: "ubiquityd address as HOST:PORT (or set UBIQ_SERVER).")
    var server: String = ProcessInfo.processInfo.environment["UBIQ_SERVER"] ?? "127.0.0.1:50051"
    @OptionGroup var tls: TLSOptions
    @Option(help: "The service to ask about; empty: the server as a whole.")
    var service = ""
    @Option(help: "Seconds before the check gives up.")
    var timeout: Double = 5

    func run() async throws {
        let (host, port) = try ServerOptions.address(server)
        var request = Grpc_Health_V1_HealthCheckRequest()
        request.service = service
        let status: Grpc_Health_V1_HealthCheckResponse.ServingStatus
        do {
            let channel = try await GRPCChannel(host: host, port: port, tls: try tls.context())
            defer { channel.close() }
            status = try await channel.unary("/grpc.health.v1.Health/Check", request, as: Grpc_Health_V1_HealthCheckResponse.self,
                                             timeout: timeout).status
        } catch {
            FileHandle.standardError.write(Data("ubiq health: cannot ask \(server): \(error)\n".utf8))
            throw ExitCode(2)
        }
        print(status == .serving ? "SERVING" : "\(status)")
        if status != .serving { throw ExitCode(1) }
    }
}

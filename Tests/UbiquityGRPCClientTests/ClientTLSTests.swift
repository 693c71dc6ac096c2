import Foundation
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityProtos
import UbiquityTestSupport
import XCTest

/// The client's TLS (`ClientConnectionOptions.tls`, `GRPCChannel(tls:)`) against the server
/// transport serving TLS on a loopback port: calls of every size go through, and the client
/// refuses a server whose certificate it cannot verify or that does not name the host.
final class ClientTLSTests: XCTestCase {
    typealias Ping = Ubiquity_V1_PingRequest
    typealias Pong = Ubiquity_V1_PingResponse

    nonisolated(unsafe) static var pki: TestCertificates?
    private var server: GRPCServer!

    override class func setUp() {
        super.setUp()
        do { pki = try TestCertificates() } catch { XCTFail("making test certificates: \(error)") }
    }

    override class func tearDown() {
        pki?.remove()
        super.tearDown()
    }

    override func setUpWithError() throws {
        let pki = try XCTUnwrap(Self.pki)
        var router = Router()
        router.unary("/test.Echo/Ping") { (req: Ping, _) in
            var res = Pong()
            res.payload = req.payload
            return res
        }
        let tls = try TLSContextStore(TLSConfiguration(certificateChainFile: pki.crt("server"), privateKeyFile: pki.key("server")))
        server = try LoopbackServer.start(router, tls: tls)
    }

    override func tearDown() {
        LoopbackServer.stop(server)
        server = nil
    }

    func testCallsOverTLS() async throws {
        let pki = try XCTUnwrap(Self.pki)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port, tls: TLSContext(clientTrusting: pki.crt("ca")))
        defer { channel.close() }
        for size in [0, 1, 20_000, 1_000_000] {
            var req = Ping()
            req.payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0) })
            let res = try await channel.unary("/test.Echo/Ping", req, as: Pong.self)
            XCTAssertEqual(res.payload, req.payload, "payload of \(size) bytes")
        }
        XCTAssertEqual(server.counters.openConnections.load(ordering: .relaxed), 1)
    }

    func testClientRefusesServerItCannotVerify() async throws {
        let pki = try XCTUnwrap(Self.pki)
        // A second server whose certificate (from the trusted CA) names another host only.
        let elsewhere = try LoopbackServer.start(Router(), tls: TLSContextStore(TLSConfiguration(
            certificateChainFile: pki.crt("server-elsewhere"), privateKeyFile: pki.key("server-elsewhere"))))
        defer { LoopbackServer.stop(elsewhere) }
        for (name, context, port) in [
            ("another CA", try TLSContext(clientTrusting: pki.crt("other-ca")), server.port),
            ("a certificate for another name", try TLSContext(clientTrusting: pki.crt("ca")), elsewhere.port),
        ] {
            do {
                let channel = try await GRPCChannel(host: "127.0.0.1", port: port, tls: context)
                channel.close()
                XCTFail("\(name): connected")
            } catch let error as RPCError {
                // The error says why, in OpenSSL's words.
                XCTAssertEqual(error.code, .unavailable, "\(name): \(error)")
                XCTAssertTrue(error.message.contains("certificate verify failed"), "\(name): \(error.message)")
            }
        }
        // The server is still serving.
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port, tls: TLSContext(clientTrusting: pki.crt("ca")))
        defer { channel.close() }
        var req = Ping()
        req.payload = Data("after".utf8)
        let after = try await channel.unary("/test.Echo/Ping", req, as: Pong.self)
        XCTAssertEqual(after.payload, Data("after".utf8))
    }
}

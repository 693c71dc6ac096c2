import UbiquityTestSupport
import XCTest
@testable import UbiquityGRPC

/// The TLS record layer without a socket: two `TLSSession`s (our server, a client made from the
/// same code) pass ciphertext back and forth in memory. Certificates are made per test class
/// with the openssl CLI.
final class TLSSessionTests: XCTestCase {
    nonisolated(unsafe) static var pki: TestCertificates?

    override class func setUp() {
        super.setUp()
        do {
            pki = try TestCertificates()
        } catch {
            XCTFail("making test certificates: \(error)")
        }
    }

    override class func tearDown() {
        pki?.remove()
        super.tearDown()
    }

    private var dir: TemporaryDirectory { Self.pki!.directory }

    private func server(clientCA: Bool = false) throws -> TLSSession {
        let config = TLSConfiguration(certificateChainFile: dir.file("server.crt"), privateKeyFile: dir.file("server.key"),
                                      clientCAFile: clientCA ? dir.file("ca.crt") : nil)
        return try TLSSession(context: TLSContext(server: config), role: .server)
    }

    private func client(alpn: [String] = ["h2"], certificate: String? = nil, maxTLS12: Bool = false) throws -> TLSSession {
        let ctx = try TLSContext(clientTrusting: dir.file("ca.crt"), alpn: alpn,
                                 certificateChainFile: certificate.map { dir.file("\($0).crt") },
                                 privateKeyFile: certificate.map { dir.file("\($0).key") }, maxTLS12: maxTLS12)
        return try TLSSession(context: ctx, role: .client)
    }

    /// Moves ciphertext both ways until neither side has any left; returns each side's last
    /// result and the plaintext each received.
    private func exchange(_ c: TLSSession, _ s: TLSSession, rounds: Int = 20)
        -> (client: TLSSession.ReceiveResult, server: TLSSession.ReceiveResult, toClient: [UInt8], toServer: [UInt8]) {
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        var cr = TLSSession.ReceiveResult.ok, sr = TLSSession.ReceiveResult.ok
        var toClient: [UInt8] = [], toServer: [UInt8] = []
        for _ in 0..<rounds {
            let fromClient = Array(c.outgoing); c.consumeOutgoing()
            let fromServer = Array(s.outgoing); s.consumeOutgoing()
            if fromClient.isEmpty && fromServer.isEmpty { break }
            scratch.withUnsafeMutableBytes { buf in
                if !fromClient.isEmpty, sr == .ok {
                    sr = fromClient.withUnsafeBytes { s.receive($0, scratch: buf) { toServer += $0; return true } }
                }
                if !fromServer.isEmpty, cr == .ok {
                    cr = fromServer.withUnsafeBytes { c.receive($0, scratch: buf) { toClient += $0; return true } }
                }
            }
        }
        return (cr, sr, toClient, toServer)
    }

    private func handshake(_ c: TLSSession, _ s: TLSSession) -> (client: TLSSession.ReceiveResult, server: TLSSession.ReceiveResult) {
        XCTAssertEqual(c.startHandshake(), .ok)
        let r = exchange(c, s)
        return (r.client, r.server)
    }

    /// Many records in one read reach HTTP/2 as one delivery (one nghttp2 pass, one flush, one
    /// SSL_write for all the answers), split only where the scratch buffer is full; and a
    /// delivery that writes (HTTP/2 flushing from inside didRead) does not disturb the reading.
    func testRecordsOfOneReadAreDeliveredTogetherUntilScratchIsFull() throws {
        // 40 records of 1,000 bytes, as a client flushing once per call sends them.
        let sent = (0..<40).flatMap { [UInt8](repeating: UInt8($0), count: 1000) }
        for (scratchSize, deliveries) in [(64 * 1024, 1), (16 * 1024, 3)] {
            let c = try client(), server = try server()
            XCTAssertEqual(handshake(c, server).server, .ok)
            for i in 0..<40 {
                XCTAssertTrue(sent[i * 1000..<(i + 1) * 1000].withUnsafeBytes { c.encrypt($0) })
            }
            let records = Array(c.outgoing); c.consumeOutgoing()
            var scratch = [UInt8](repeating: 0, count: scratchSize)
            var received: [[UInt8]] = []
            let result = scratch.withUnsafeMutableBytes { buf in
                records.withUnsafeBytes { server.receive($0, scratch: buf) { bytes in
                    received.append(Array(bytes))
                    // An answer written from inside the delivery, as HTTP2Connection's flush does.
                    _ = Array("answer".utf8).withUnsafeBytes { server.encrypt($0) }
                    return true
                } }
            }
            XCTAssertEqual(result, .ok)
            XCTAssertEqual(received.count, deliveries, "scratch \(scratchSize)")
            XCTAssertEqual(Array(received.joined()), sent)
        }
    }

    func testHandshakeSelectsH2ThenCarriesBytesBothWaysAndCloses() throws {
        let c = try client(), s = try server()
        XCTAssertEqual(s.machine.state, .handshaking)
        // The server's HTTP/2 SETTINGS are written before the handshake ends: not yet.
        XCTAssertFalse(Array("early".utf8).withUnsafeBytes { s.encrypt($0) })
        let r = handshake(c, s)
        XCTAssertEqual(r.client, .ok)
        XCTAssertEqual(r.server, .ok)
        XCTAssertEqual(s.machine.state, .established)
        XCTAssertEqual(c.machine.state, .established)
        XCTAssertEqual(s.protocolVersion, "TLSv1.3")

        let big = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        XCTAssertTrue(big.withUnsafeBytes { c.encrypt($0) })
        XCTAssertTrue(Array("settings".utf8).withUnsafeBytes { s.encrypt($0) })
        let data = exchange(c, s)
        XCTAssertEqual(data.toServer, big)
        XCTAssertEqual(data.toClient, Array("settings".utf8))

        s.closeNotify()
        XCTAssertEqual(s.machine.state, .closing)
        XCTAssertFalse(Array("late".utf8).withUnsafeBytes { s.encrypt($0) }, "nothing is encrypted after close_notify")
        let end = exchange(c, s)
        XCTAssertEqual(end.client, .endOfInput)
        XCTAssertEqual(c.machine.state, .closed)
    }

    func testTLS12AlsoServesAndRenegotiationIsRefused() throws {
        let c = try client(maxTLS12: true), s = try server()
        let r = handshake(c, s)
        XCTAssertEqual(r.server, .ok)
        XCTAssertEqual(s.protocolVersion, "TLSv1.2")
        XCTAssertTrue(c.requestRenegotiation())
        let after = exchange(c, s)
        guard case .refused(let why) = after.client else {
            return XCTFail("the client's renegotiation went through: \(after)")
        }
        XCTAssertTrue(why.lowercased().contains("renegotiation"), why)
    }

    func testClientOfferingNoH2IsRefusedDuringTheHandshake() throws {
        for alpn in [["http/1.1"], [], ["h2c"]] {
            let c = try client(alpn: alpn), s = try server()
            let r = handshake(c, s)
            guard case .refused = r.server else { return XCTFail("ALPN \(alpn): server \(r.server)") }
            guard case .refused = r.client else { return XCTFail("ALPN \(alpn): client \(r.client)") }
            XCTAssertEqual(s.machine.state, .closed)
        }
    }

    func testPlaintextHTTP2IsNotATLSRecord() throws {
        let s = try server()
        var scratch = [UInt8](repeating: 0, count: 1024)
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        let r = scratch.withUnsafeMutableBytes { buf in
            preface.withUnsafeBytes { s.receive($0, scratch: buf) { _ in XCTFail("plaintext delivered"); return true } }
        }
        guard case .refused = r else { return XCTFail("\(r)") }
        XCTAssertEqual(s.machine.state, .closed)
    }

    func testClientCertificateRequiredAndVerified() throws {
        let good = handshake(try client(certificate: "client"), try server(clientCA: true))
        XCTAssertEqual(good.server, .ok)
        for certificate in [nil, "client-other"] {
            let s = try server(clientCA: true)
            let r = handshake(try client(certificate: certificate), s)
            guard case .refused(let why) = r.server else { return XCTFail("\(certificate ?? "no certificate"): \(r.server)") }
            XCTAssertEqual(s.machine.state, .closed, why)
        }
    }

    func testServerContextNamesTheFileThatFails() throws {
        let missing = TLSConfiguration(certificateChainFile: dir.file("nope.crt"), privateKeyFile: dir.file("server.key"))
        XCTAssertThrowsError(try TLSContextStore(missing)) { XCTAssertTrue("\($0)".contains("nope.crt"), "\($0)") }
        let mismatched = TLSConfiguration(certificateChainFile: dir.file("server.crt"), privateKeyFile: dir.file("client.key"))
        XCTAssertThrowsError(try TLSContextStore(mismatched)) { XCTAssertTrue("\($0)".contains("client.key"), "\($0)") }
    }
}

final class TLSStateMachineTests: XCTestCase {
    func testHandshakeThenCloseNotify() {
        var m = TLSStateMachine()
        XCTAssertFalse(m.mayEncrypt)
        XCTAssertFalse(m.readsRecords)
        XCTAssertEqual(m.event(.handshakeFinished(alpnSelectedH2: true)), .releaseHeldOutput)
        XCTAssertTrue(m.mayEncrypt)
        XCTAssertEqual(m.event(.localClose), .sendCloseNotify)
        XCTAssertEqual(m.state, .closing)
        XCTAssertFalse(m.mayEncrypt)
        XCTAssertTrue(m.readsRecords, "the peer's last records are still read while closing")
        XCTAssertEqual(m.event(.localClose), .none, "one close_notify")
        XCTAssertEqual(m.event(.peerClosed), .endOfInput)
        XCTAssertEqual(m.state, .closed)
    }

    func testRefusals() {
        var noH2 = TLSStateMachine()
        XCTAssertEqual(noH2.event(.handshakeFinished(alpnSelectedH2: false)), .refuse(.noH2))
        XCTAssertEqual(noH2.state, .closed)
        var failed = TLSStateMachine()
        XCTAssertEqual(failed.event(.handshakeFailed), .refuse(.handshakeFailed))
        XCTAssertEqual(failed.event(.peerClosed), .none, "nothing after the end")
        var bad = TLSStateMachine()
        _ = bad.event(.handshakeFinished(alpnSelectedH2: true))
        XCTAssertEqual(bad.event(.recordError), .refuse(.recordError))
        XCTAssertFalse(bad.readsRecords)
    }

    func testCloseDuringHandshakeSendsNothing() {
        var m = TLSStateMachine()
        XCTAssertEqual(m.event(.localClose), .none)
        XCTAssertEqual(m.state, .closed)
        XCTAssertEqual(m.event(.handshakeFinished(alpnSelectedH2: true)), .none)
    }

    func testLoopbackAddresses() {
        for host in ["127.0.0.1", "127.3.2.1", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"] {
            XCTAssertTrue(ServerConfiguration.isLoopback(host: host), host)
        }
        for host in ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "::2", "fe80::1", "localhost", ""] {
            XCTAssertFalse(ServerConfiguration.isLoopback(host: host), host)
        }
    }
}

import Foundation
import Testing
import Ubiquity

/// A CA and certificates made at test time with the openssl CLI (Debian's `openssl`, which
/// scripts/test installs), as tests/python/tls_material.py makes them: P-256 keys, a server
/// certificate for 127.0.0.1 and localhost, a client certificate for mutual TLS.
struct TLSMaterial {
    let dir: URL
    var path: (String) -> String { { dir.appendingPathComponent($0).path } }

    init(in dir: URL) throws {
        self.dir = dir
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try makeCA("ca")
        try makeCA("other-ca")
        try makeLeaf("server", ca: "ca", server: true)
        try makeLeaf("client", ca: "ca", server: false)
    }

    private func makeCA(_ name: String) throws {
        try openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("\(name).key"),
            "-out", path("\(name).crt"), "-days", "2", "-subj", "/CN=\(name)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    }

    private func makeLeaf(_ name: String, ca: String, server: Bool) throws {
        let ext = ["basicConstraints=CA:FALSE", "extendedKeyUsage=\(server ? "serverAuth" : "clientAuth")"]
            + (server ? ["subjectAltName=DNS:localhost,IP:127.0.0.1"] : [])
        try (ext.joined(separator: "\n") + "\n").write(toFile: path("\(name).ext"), atomically: true, encoding: .utf8)
        try openssl(
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("\(name).key"),
            "-out", path("\(name).csr"), "-subj", "/CN=\(name)")
        try openssl(
            "x509", "-req", "-in", path("\(name).csr"), "-CA", path("\(ca).crt"), "-CAkey", path("\(ca).key"),
            "-CAcreateserial", "-out", path("\(name).crt"), "-days", "2", "-extfile", path("\(name).ext"))
    }

    private func openssl(_ arguments: String...) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["openssl"] + arguments
        p.currentDirectoryURL = dir
        let log = dir.appendingPathComponent("openssl.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        p.standardOutput = try FileHandle(forWritingTo: log)
        p.standardError = p.standardOutput
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw ServerError("openssl \(arguments.joined(separator: " ")) failed: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
    }
}

/// The client over TLS against ubiquityd's own TLS (docs/tls.md): a server verified against a CA
/// made here, a client certificate for a server that asks for one, and the refusals.
@Suite(.timeLimit(.minutes(2))) struct TLSTests {
    /// A server serving TLS with the material's server certificate (and asking for a client
    /// certificate of its CA with `mutual`).
    func tlsServer(mutual: Bool = false) async throws -> (Server, TLSMaterial) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ubiq-swift-tls-\(UUID().uuidString)")
        let tls = try TLSMaterial(in: dir)
        let options = ["--tls-cert", tls.path("server.crt"), "--tls-key", tls.path("server.key")]
            + (mutual ? ["--tls-client-ca", tls.path("ca.crt")] : [])
        return (try await Server(options: options).start(), tls)
    }

    @Test func aClientTrustingTheServersCAWorksOverTLS() async throws {
        let (server, tls) = try await tlsServer()
        defer { server.kill(); try? FileManager.default.removeItem(at: tls.dir) }
        let security = ConnectionSecurity.tls(trustRoots: tls.path("ca.crt"))
        let key = try await makeApiKey(server, security: security)
        // By name, so the certificate's name is checked too (it names localhost and 127.0.0.1).
        let client = try UbiquityClient(target: "localhost:\(server.port)", credentials: .apiKey(key, deviceID: "tls"), security: security)
        defer { Task { await client.close() } }
        let store = try await client.openStore("over-tls")
        try await store.registerModel(personModel())
        let ids = try await addPeople(store, [["name": "Ann"]])
        #expect(try await store.get(ids)[ids[0]]?["name"]?.string == "Ann")
    }

    @Test func aServerCertificateFromAnotherCAOrPlaintextIsRefused() async throws {
        let (server, tls) = try await tlsServer()
        defer { server.kill(); try? FileManager.default.removeItem(at: tls.dir) }
        // Calls wait for a usable connection up to their deadline, so these fail at it (2 s).
        for security in [ConnectionSecurity.tls(trustRoots: tls.path("other-ca.crt")), .plaintext] {
            let client = try UbiquityClient(target: server.target, credentials: .sessionToken(try server.operatorKey),
                                            security: security, timeout: .seconds(2))
            defer { Task { await client.close() } }
            let e = await #expect(throws: UbiquityError.self) { try await client.listStores() }
            #expect(e?.kind == .unavailable || e?.kind == .deadlineExceeded, "\(String(describing: e))")
        }
    }

    @Test func aServerAskingForAClientCertificateGetsOne() async throws {
        let (server, tls) = try await tlsServer(mutual: true)
        defer { server.kill(); try? FileManager.default.removeItem(at: tls.dir) }
        let mutual = ConnectionSecurity.tls(trustRoots: tls.path("ca.crt"), certificate: tls.path("client.crt"), key: tls.path("client.key"))
        let key = try await makeApiKey(server, security: mutual)
        let client = try UbiquityClient(target: server.target, credentials: .apiKey(key, deviceID: "mtls"), security: mutual)
        defer { Task { await client.close() } }
        #expect(try await client.listStores().isEmpty)
        // Without a certificate the handshake fails: no call gets through.
        let anonymous = try UbiquityClient(target: server.target, credentials: .apiKey(key, deviceID: "anon"),
                                           security: .tls(trustRoots: tls.path("ca.crt")), timeout: .seconds(2))
        defer { Task { await anonymous.close() } }
        let e = await #expect(throws: UbiquityError.self) { try await anonymous.listStores() }
        #expect(e?.kind == .unavailable || e?.kind == .deadlineExceeded, "\(String(describing: e))")
    }
}

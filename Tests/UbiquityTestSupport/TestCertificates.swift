import Foundation

/// A CA and certificates made with the openssl CLI in a temporary directory, for TLS tests:
/// nothing secret is committed and every run has fresh keys. Files: `NAME.crt`, `NAME.key`.
public struct TestCertificates: Sendable {
    public let directory: TemporaryDirectory

    /// CAs `ca` and `other-ca`; servers `server` (localhost, 127.0.0.1) and `server-elsewhere`
    /// (elsewhere.example only) by `ca`; clients `client` by `ca` and `client-other` by `other-ca`.
    public init() throws {
        directory = try TemporaryDirectory(prefix: "ubiq-tls")
        try makeCA("ca")
        try makeCA("other-ca")
        try makeLeaf("server", ca: "ca", server: true)
        try makeLeaf("server-elsewhere", ca: "ca", server: true, names: "DNS:elsewhere.example")
        try makeLeaf("client", ca: "ca", server: false)
        try makeLeaf("client-other", ca: "other-ca", server: false)
    }

    public func crt(_ name: String) -> String { directory.file("\(name).crt") }
    public func key(_ name: String) -> String { directory.file("\(name).key") }
    public func remove() { directory.remove() }

    public struct OpenSSLFailed: Error { public let arguments: [String] }

    private func openssl(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: directory.path)
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw OpenSSLFailed(arguments: args) }
    }

    private func makeCA(_ name: String) throws {
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", "\(name).key", "-out", "\(name).crt", "-days", "2", "-subj", "/CN=\(name)",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
    }

    private func makeLeaf(_ name: String, ca: String, server: Bool, names: String = "DNS:localhost,IP:127.0.0.1") throws {
        let ext = "basicConstraints=CA:FALSE\nextendedKeyUsage=\(server ? "serverAuth" : "clientAuth")\n"
            + (server ? "subjectAltName=\(names)\n" : "")
        try ext.write(toFile: directory.file("\(name).ext"), atomically: true, encoding: .utf8)
        try openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(name)"])
        try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).crt", "-CAkey", "\(ca).key",
                     "-CAcreateserial", "-out", "\(name).crt", "-days", "2", "-extfile", "\(name).ext"])
    }
}

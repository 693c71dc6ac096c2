import COpenSSL
import UbiquityLock

/// Where the server's certificate, key and (optionally) client CA live (docs/tls.md).
public struct TLSConfiguration: Sendable, Equatable {
    /// PEM: the server certificate first, then any intermediates.
    public var certificateChainFile: String
    /// PEM private key matching the certificate.
    public var privateKeyFile: String
    /// PEM CA bundle: when set, every client must present a certificate that chains to it.
    public var clientCAFile: String?

    public init(certificateChainFile: String, privateKeyFile: String, clientCAFile: String? = nil) {
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.clientCAFile = clientCAFile
    }
}

/// A certificate, key or CA file that OpenSSL refused, with OpenSSL's reason.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }

    init(_ what: String) {
        message = "\(what): \(TLSError.opensslReason())"
    }

    init(message: String) {
        self.message = message
    }

    /// The oldest queued OpenSSL error as text; empties this thread's error queue.
    static func opensslReason() -> String {
        var buf = [CChar](repeating: 0, count: 256)
        ubq_ssl_error_string(&buf, buf.count)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// One OpenSSL `SSL_CTX`: the settings every connection's `SSL` is made from.
///
/// Server defaults (docs/tls.md says why): TLS 1.2 and 1.3 only; TLS 1.2 suites are ECDHE with
/// an AEAD (AES-GCM, ChaCha20-Poly1305) — forward secrecy, and none on HTTP/2's blocklist (RFC
/// 7540 §9.2.2, appendix A); TLS 1.3 suites are OpenSSL's three; key exchange groups X25519,
/// P-256, P-384; no renegotiation, no compression; ALPN must select `h2`.
public final class TLSContext: @unchecked Sendable {
    // @unchecked: the SSL_CTX is configured in init and never changed after; OpenSSL 3 makes
    // SSL_new on a shared SSL_CTX safe from any thread (it takes its own reference).
    let raw: OpaquePointer

    static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        + "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        + "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
    static let tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
    static let groups = "X25519:P-256:P-384"

    private init(method: OpaquePointer?) throws(TLSError) {
        guard let ctx = SSL_CTX_new(method) else { throw TLSError("SSL_CTX_new") }
        raw = ctx
        guard ubq_ssl_ctx_set_min_tls12(ctx) == 1,
              SSL_CTX_set_cipher_list(ctx, TLSContext.tls12Ciphers) == 1,
              SSL_CTX_set_ciphersuites(ctx, TLSContext.tls13Suites) == 1,
              ubq_ssl_ctx_set_groups(ctx, TLSContext.groups) == 1 else {
            throw TLSError("TLS protocol settings")
        }
    }

    /// The server context: loads the certificate chain and key (and client CA) from disk.
    convenience init(server configuration: TLSConfiguration) throws(TLSError) {
        try self.init(method: TLS_server_method())
        ubq_ssl_ctx_set_server_options(raw)
        ubq_ssl_ctx_require_alpn_h2(raw)
        guard SSL_CTX_use_certificate_chain_file(raw, configuration.certificateChainFile) == 1 else {
            throw TLSError("certificate chain \(configuration.certificateChainFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(raw, configuration.privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            throw TLSError("private key \(configuration.privateKeyFile)")
        }
        guard SSL_CTX_check_private_key(raw) == 1 else {
            throw TLSError("private key \(configuration.privateKeyFile) does not match certificate \(configuration.certificateChainFile)")
        }
        if let ca = configuration.clientCAFile {
            guard SSL_CTX_load_verify_locations(raw, ca, nil) == 1, let names = SSL_load_client_CA_file(ca) else {
                throw TLSError("client CA \(ca)")
            }
            // Tells clients which CAs we accept (CertificateRequest), so one with several
            // certificates picks the right one.
            SSL_CTX_set_client_CA_list(raw, names)
            SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
    }

    /// A client context (`ubiquity-load --tls-ca`, the transport tests' peer): trusts
    /// `trustedCAFile`, offers `alpn` (protocol names; empty: no ALPN extension), and presents a
    /// certificate if given one.
    public convenience init(clientTrusting trustedCAFile: String, alpn: [String] = ["h2"],
                     certificateChainFile: String? = nil, privateKeyFile: String? = nil,
                     maxTLS12: Bool = false) throws(TLSError) {
        try self.init(method: TLS_client_method())
        if maxTLS12 { _ = ubq_ssl_ctx_set_max_tls12(raw) }
        guard SSL_CTX_load_verify_locations(raw, trustedCAFile, nil) == 1 else { throw TLSError("CA \(trustedCAFile)") }
        SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nil)
        if !alpn.isEmpty {
            let wire = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
            guard ubq_ssl_ctx_offer_alpn(raw, wire, UInt32(wire.count)) == 0 else { throw TLSError("ALPN") }
        }
        if let certificateChainFile, let privateKeyFile {
            guard SSL_CTX_use_certificate_chain_file(raw, certificateChainFile) == 1,
                  SSL_CTX_use_PrivateKey_file(raw, privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
                throw TLSError("client certificate \(certificateChainFile)")
            }
        }
    }

    deinit { SSL_CTX_free(raw) }
}

/// The server's current TLS context. `reload()` (on SIGHUP) reads the files again and swaps the
/// context in: handshakes that start afterwards use the new certificate, while connections
/// already open keep the `SSL` (and through it the old context) they were made with.
public final class TLSContextStore: Sendable {
    public let configuration: TLSConfiguration
    private let current: Lock<TLSContext>

    /// Loads the files; throws (naming the file and OpenSSL's reason) if any is unusable.
    public init(_ configuration: TLSConfiguration) throws(TLSError) {
        self.configuration = configuration
        current = Lock(try TLSContext(server: configuration))
    }

    /// Loads the files again. On failure the previous context stays in use.
    public func reload() throws(TLSError) {
        let next = try TLSContext(server: configuration)
        current.withLock { $0 = next }
    }

    var context: TLSContext { current.withLock { $0 } }
}

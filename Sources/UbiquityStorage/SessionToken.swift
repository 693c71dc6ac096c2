/// The bearer token of a session (docs/accounts.md "Token format"): `ubs_` and base64url
/// characters of a random secret. Only its SHA-256 is kept (`Credentials.sessionID`), so the
/// length of a token is seen only here, where it is minted, and where a call's value is parsed.
public enum SessionToken {
    public static let prefix = "ubs_"

    /// 128 random bits, issued since issue 18: 22 base64url characters. A session identifier
    /// needs enough entropy that guessing a live one is hopeless (OWASP: at least 64 bits), not
    /// the 256 bits of a long-lived key. Each character costs every call of the session: the
    /// `authorization` value is sent never-indexed (RFC 7541 §7.1.3), so the server Huffman-decodes,
    /// checks and copies it on every call. 43 → 22 characters saved ~800 instructions per W1 call
    /// (callgrind; docs/benchmarks.md "What authentication costs").
    static let secretBytes = 16

    /// Lengths of the secret a session token may have: 22 (128 bits, issued now) and 43 (256 bits,
    /// issued before issue 18). Sessions are persisted, so tokens of the old form stay valid until
    /// their sessions expire: an upgrade signs no device out. (Once every old session has expired,
    /// 43 only lets an unknown token reach the lookup, which answers `unknown`.)
    public static let secretLengths: (current: Int, previous: Int) = (22, 43)

    /// A new token from the system CSPRNG.
    static func mint() -> String { prefix + Credentials.randomText(bytes: secretBytes) }
}

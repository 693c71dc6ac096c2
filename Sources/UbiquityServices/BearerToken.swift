/// The `authorization` metadata value of a call (docs/accounts.md, "Token format").
enum BearerToken: Equatable, Sendable {
    /// `Bearer ubs_<43 base64url characters>`: a session token.
    case session(String)
    /// `Bearer <anything else non-empty>`: an operator key or an API key, for `Accounts`.
    case other(String)

    enum Problem: Error, Equatable { case missing, malformed }

    /// Longest value looked at; anything longer is malformed (tokens are under 100 bytes).
    static let maxLength = 512

    static func parse(_ header: String?) -> Result<BearerToken, Problem> {
        guard let header, !header.isEmpty else { return .failure(.missing) }
        guard header.utf8.count <= maxLength else { return .failure(.malformed) }
        // RFC 6750: the scheme is case-insensitive, followed by one or more spaces.
        // (byte | 0x20) folds an ASCII capital to lower case (the space is matched exactly): no
        // allocation per call
        let bytes = header.utf8
        guard bytes.count > 7,
              bytes.prefix(7).elementsEqual("bearer ".utf8, by: { $0 == $1 || ($1 != 0x20 && $0 | 0x20 == $1) }) else {
            return .failure(.malformed)
        }
        // Bytes, not Characters or scalars: every call carries this header, and walking it as
        // Characters (grapheme breaking) and scalars was a third of what authentication cost per
        // call (callgrind, W1: BearerToken.parse 9,868 of Authenticator.account's 29,857
        // instructions; docs/benchmarks.md, "What authentication costs"). Only printable ASCII
        // is accepted, so a byte outside 0x21-0x7e (any byte of a non-ASCII scalar among them)
        // refuses the value exactly as the scalar test did, and every index is a Character's.
        var start = bytes.index(bytes.startIndex, offsetBy: 7)
        while start != bytes.endIndex && bytes[start] == 0x20 { start = bytes.index(after: start) }
        let token = bytes[start...]
        guard !token.isEmpty, token.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return .failure(.malformed) }
        let text = String(header[start...])
        if token.starts(with: "ubs_".utf8) {
            guard token.count == 47 else { return .failure(.malformed) }
            return .success(.session(text))
        }
        return .success(.other(text))
    }
}

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
        guard header.utf8.count > 7,
              header.utf8.prefix(7).elementsEqual("bearer ".utf8, by: { $0 == $1 || ($1 != 0x20 && $0 | 0x20 == $1) }) else {
            return .failure(.malformed)
        }
        let token = header.dropFirst(7).drop(while: { $0 == " " })
        guard !token.isEmpty, token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else { return .failure(.malformed) }
        if token.hasPrefix("ubs_") {
            guard token.utf8.count == 47 else { return .failure(.malformed) }
            return .success(.session(String(token)))
        }
        return .success(.other(String(token)))
    }
}

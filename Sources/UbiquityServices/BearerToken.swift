import UbiquityStorage

/// The `authorization` metadata value of a call (docs/accounts.md, "Token format").
enum BearerToken: Equatable, Sendable {
    /// `Bearer ubs_<22 or 43 base64url characters>`: a session token (`SessionToken`: 128-bit
    /// tokens are issued now, 256-bit ones issued before stay valid until their sessions expire).
    case session(String)
    /// `Bearer <anything else non-empty>`: an operator key or an API key, for `Accounts`.
    case other(String)

    enum Problem: Error, Equatable { case missing, malformed }

    /// Longest value looked at; anything longer is malformed (tokens are under 100 bytes).
    static let maxLength = 512

    static func parse(_ header: String?) -> Result<BearerToken, Problem> {
        guard let header, !header.isEmpty else { return .failure(.missing) }
        guard header.utf8.count <= maxLength else { return .failure(.malformed) }
        // Bytes, not Characters or scalars, over the value's contiguous storage (a native
        // string's; a bridged one takes a copy): every call carries this header, and walking it
        // as Characters (grapheme breaking) and scalars was a third of what authentication cost
        // per call (callgrind, W1: BearerToken.parse 9,868 of Authenticator.account's 29,857
        // instructions; docs/benchmarks.md, "What authentication costs"). Only printable ASCII
        // is accepted, so a byte outside 0x21-0x7e (any byte of a non-ASCII scalar among them)
        // refuses the value exactly as the scalar test did.
        var value = header
        let (offset, session) = value.withUTF8 { b -> (Int?, Bool) in
            // RFC 6750: the scheme is case-insensitive, followed by one or more spaces.
            // (byte | 0x20) folds an ASCII capital to lower case (the space is matched exactly)
            let scheme: StaticString = "bearer "
            guard b.count > 7 else { return (nil, false) }
            for i in 0..<7 {
                let want = scheme.utf8Start[i]
                guard b[i] == want || (want != 0x20 && b[i] | 0x20 == want) else { return (nil, false) }
            }
            var i = 7
            while i < b.count && b[i] == 0x20 { i += 1 }
            guard i < b.count else { return (nil, false) }
            for j in i..<b.count where !(b[j] > 0x20 && b[j] < 0x7f) { return (nil, false) }
            let session = b.count - i >= 4 && b[i] == 0x75 && b[i + 1] == 0x62 && b[i + 2] == 0x73 && b[i + 3] == 0x5f  // "ubs_"
            if session {
                let secret = b.count - i - 4
                guard secret == SessionToken.secretLengths.current || secret == SessionToken.secretLengths.previous else { return (nil, true) }
            }
            return (i, session)
        }
        guard let offset, let text = String(value.utf8.dropFirst(offset)) else { return .failure(.malformed) }
        return .success(session ? .session(text) : .other(text))
    }
}

import UbiquityGRPC

/// What one session call of a connection resolved to (docs/accounts.md "Per call"): the exact
/// `authorization` value, the account it acted for, and the credentials epoch it was resolved at.
/// A later call of the connection that carries the byte-identical value, while the epoch is
/// unchanged and before the session's expiry, acts for the same account without parsing, hashing
/// or looking up anything; any other call resolves in full and leaves its own memo. A connection
/// keeps up to `SessionMemoTable.capacity` of them, one per session it carries.
///
/// What it keeps: values the peer sent on this connection while it lives (the transport keeps
/// the connection's last `authorization` value itself, in its `HeaderStrings`). The table is in
/// the connection's `ConnectionLocal` and goes with it: no token is kept for a connection that is
/// gone, and none in a table that outlives connections (which a token → session cache would be).
/// HPACK does not help here: nghttp2's encoder sends `authorization` never-indexed (RFC 7541
/// §7.1.3), so the value crosses the wire and is decoded on every call whatever the server does.
///
/// Why a revocation still applies to the very next call: `Credentials.epoch` changes under the
/// credentials lock with every change that can make a token resolve differently (sign-out, key
/// revocation, archive and delete, the purge of ended sessions) before the change's RPC answers;
/// a memo from an older epoch is not used. Expiry is checked on every call against the wall clock.
///
/// Measured gain (callgrind, W1, `flock /tmp/ubiq-bench.lock scripts/auth-cost --callgrind`):
/// `Authenticator.account` 8,160 → 841 instructions per call; a W1 call with authentication
/// against one without, 1.189 → 1.061-1.074, of which the code now +721 instructions over the
/// header's own transport cost (`--header-side`; docs/benchmarks.md "What authentication
/// costs"). With a table per connection instead of one memo (`SessionMemoTable`; `scripts/w6-cost
/// --sides w1,w6-fetch`, docs/benchmarks.md "The session memo as a table per connection"): a W6
/// fetch 76,097 → 70,637 instructions (`Authenticator.account` 9,204 → 3,016, most of what is
/// left the counted run's first call of each session on each new connection; ~1,560 once warm);
/// W1's `Authenticator.account` 648 → 674.
struct SessionMemo: Sendable, Equatable {
    /// The `authorization` value exactly as the call carried it.
    let header: String
    let account: Account
    /// `Credentials.epoch` read before the lookup that resolved `header`.
    let epoch: UInt64

    /// Whether a call carrying `header`, at credentials epoch `epoch` and wall clock `now`, acts
    /// for `account`; false when it must resolve in full. (A Bool, not the account itself: the
    /// caller reads `account` in place from the box, so nothing of the memo is copied but that.)
    func matches(_ header: String, epoch: UInt64, now: Double) -> Bool {
        epoch == self.epoch && now < account.expiresAt && Self.equal(header, self.header)
    }

    /// Byte equality whose time depends on the lengths only, not on where the values differ: a
    /// peer probing another token's bytes on its own connection learns nothing from timing.
    /// Eight bytes at a time (a session's value is 33 bytes, 4 words and 1 byte; 54 with a token
    /// issued before issue 18).
    static func equal(_ a: String, _ b: String) -> Bool {
        a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                guard x.count == y.count else { return false }
                guard let px = x.baseAddress, let py = y.baseAddress else { return true }  // both empty
                let n = x.count
                var d: UInt64 = 0
                var i = 0
                while i + 8 <= n {
                    d |= UnsafeRawPointer(px).loadUnaligned(fromByteOffset: i, as: UInt64.self)
                        ^ UnsafeRawPointer(py).loadUnaligned(fromByteOffset: i, as: UInt64.self)
                    i += 8
                }
                while i < n {
                    d |= UInt64(px[i] ^ py[i])
                    i += 1
                }
                return d == 0
            } ?? false
        } ?? false  // (not contiguous: never for the transport's strings; resolved in full)
    }
}

import UbiquityGRPC

/// What the last session call of one connection resolved to (docs/accounts.md "Per call"): the
/// exact `authorization` value, the account it acted for, and the credentials epoch it was
/// resolved at. The next call of the connection that carries the byte-identical value, while the
/// epoch is unchanged and before the session's expiry, acts for the same account without parsing,
/// hashing or looking up anything; any other call resolves in full and leaves its own memo.
///
/// Why it keeps no secret the server did not hold already: the peer sends `authorization` on
/// every call of the connection, and the transport already keeps the value per connection (its
/// `HeaderStrings` interns repeated metadata values, so every call's metadata shares one copy).
/// The memo is one value per connection, in the connection's `ConnectionLocal`, and goes with
/// it: no token is kept for a connection that is gone, and none in a table that outlives
/// connections (which a token → session cache would be). HPACK does not help here: nghttp2's
/// encoder sends `authorization` never-indexed (RFC 7541 §7.1.3), so the value crosses the wire
/// and is decoded on every call whatever the server does.
///
/// Why a revocation still applies to the very next call: `Credentials.epoch` changes under the
/// credentials lock with every change that can make a token resolve differently (sign-out, key
/// revocation, archive and delete, the purge of ended sessions) before the change's RPC answers;
/// a memo from an older epoch is not used. Expiry is checked on every call against the wall clock.
///
/// Measured gain: see docs/benchmarks.md "What authentication costs".
struct SessionMemo: Sendable, Equatable {
    /// The `authorization` value exactly as the call carried it.
    let header: String
    let account: Account
    /// `Credentials.epoch` read before the lookup that resolved `header`.
    let epoch: UInt64

    /// The memo's account for a call carrying `header`, at credentials epoch `epoch` and wall
    /// clock `now`; nil when the call must resolve in full.
    func account(for header: String, epoch: UInt64, now: Double) -> Account? {
        guard epoch == self.epoch, now < account.expiresAt, Self.equal(header, self.header) else { return nil }
        return account
    }

    /// Byte equality whose time depends on the lengths only, not on where the values differ: a
    /// peer probing another token's bytes on its own connection learns nothing from timing.
    static func equal(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                guard x.count == y.count else { return false }
                var d: UInt8 = 0
                for i in 0..<x.count { d |= x[i] ^ y[i] }
                return d == 0
            }
        }
    }

    /// Keeps a memo in a `ConnectionLocal` (which holds objects).
    final class Box: Sendable {
        let memo: SessionMemo
        init(_ memo: SessionMemo) { self.memo = memo }
    }
}

import UbiquityGRPC
import UbiquityLock

/// The session memos of one connection (docs/accounts.md "The connection's session memo"): up to
/// `capacity` `SessionMemo`s, each found by a keyed hash of its `authorization` value and confirmed
/// by `SessionMemo.matches` (constant-time bytes, epoch, expiry). So a connection carrying many
/// sessions — a gateway, a multi-user proxy, W6's 100 sessions over 4 connections — answers each
/// session's calls from its memo, as a connection carrying one does.
///
/// Why the key reveals nothing: `Hasher` is SipHash-1-3 under a seed drawn at random per process,
/// and its time does not depend on the bytes; which slot a value lands in, or whether two values
/// share one, tells a peer nothing it could aim with (it knows neither the seed nor the hashes).
/// A hit is only ever confirmed with `SessionMemo.equal`, never `==` on the strings.
///
/// Why every memo here shares one epoch: `Credentials.epoch` only grows, and a memo resolved at an
/// older epoch can never answer again; so the first memo stored at a newer epoch empties the table,
/// and one resolved before a change the table has already seen (a slow call racing a faster one
/// on the same connection) is not stored — stored, it would be trusted under the newer epoch.
///
/// A value type with no lock of its own (tested alone); `Box` keeps one per connection.
struct SessionMemoTable: Sendable {
    /// Why 128: W6, the issue's own shape of many accounts (scripts/bench), sends each of 100 active
    /// sessions over every one of its 4 connections, so a table under 100 would miss on a third of
    /// its calls or more (~capacity/100 hit at random access, whatever is evicted); 128 holds them
    /// all with room for the set rotating. The bound is memory: a slot keeps the value (~33 bytes)
    /// and the `Account` (one shared reference), ~200 bytes, so ~25 KB for a connection that
    /// actually carries 128 sessions; a connection of one session keeps one slot.
    static let capacity = 128

    /// The credentials epoch every memo here was resolved at.
    private(set) var epoch: UInt64 = 0
    private var slots: [Slot] = []
    /// `slots` index by the keyed hash of the slot's value.
    private var positions: [Int: Int] = [:]
    /// The slot the eviction looks at next (the "clock" of CLOCK, an approximation of least
    /// recently used that writes one flag per hit instead of reordering a list).
    private var hand = 0
    /// The memo that answered through its hash or was stored last: tried first, with no hash and
    /// no write, so a connection of one session (W1) costs what the single memo before this table
    /// cost. Its slot needs no `referenced` mark for these answers: it was marked when it became
    /// `last`, and only a store clears marks — which makes another memo `last`.
    private var last: SessionMemo?

    private struct Slot {
        var memo: SessionMemo
        var key: Int
        /// Stored, or answered through its hash, since the hand last passed: spared once by the
        /// eviction.
        var referenced: Bool
    }

    /// How many memos are kept.
    var count: Int { slots.count }

    /// The account a call carrying `header` acts for, at credentials epoch `epoch` and wall clock
    /// `now`, if one of the memos answers for it; nil when the call must resolve in full.
    /// (Inlined into the caller, the rest kept apart: a connection of one session runs these
    /// few instructions only. Measured, callgrind `scripts/auth-cost --callgrind`: W1's
    /// `Authenticator.account` +48 instructions per call over the one-memo design without the
    /// inlining, +22 to +26 with it; docs/benchmarks.md "The session memo as a table".)
    @inline(__always)
    mutating func account(for header: String, epoch: UInt64, now: Double) -> Account? {
        // optional chaining reads `last` in place; `if let` would copy it (two retains and releases)
        if last?.matches(header, epoch: epoch, now: now) == true, let account = last?.account { return account }
        return accountByHash(for: header, epoch: epoch, now: now)
    }

    @inline(never)
    private mutating func accountByHash(for header: String, epoch: UInt64, now: Double) -> Account? {
        guard epoch == self.epoch, !slots.isEmpty, let key = Self.key(header), let i = positions[key],
              slots[i].memo.matches(header, epoch: epoch, now: now) else { return nil }
        slots[i].referenced = true
        last = slots[i].memo
        return slots[i].memo.account
    }

    /// Keeps `memo` (with `key`, `Self.key(memo.header)`), evicting when full: the first slot the
    /// hand finds unmarked (`Slot.referenced`). An expired memo is never answered, so it loses its
    /// mark when the hand first passes and goes when it comes round again; a memo from an epoch
    /// older than the table's is not kept.
    mutating func store(_ memo: SessionMemo, key: Int) {
        guard memo.epoch >= epoch else { return }
        if memo.epoch > epoch {
            slots.removeAll(keepingCapacity: true)
            positions.removeAll(keepingCapacity: true)
            hand = 0
            epoch = memo.epoch
        }
        last = memo
        let slot = Slot(memo: memo, key: key, referenced: true)
        if let i = positions[key] {  // the same value again (resolved anew), or another with its hash
            slots[i] = slot
            return
        }
        if slots.count < Self.capacity {
            positions[key] = slots.count
            slots.append(slot)
            return
        }
        while slots[hand].referenced {
            slots[hand].referenced = false
            hand = (hand + 1) % Self.capacity
        }
        positions[slots[hand].key] = nil
        positions[key] = hand
        slots[hand] = slot
        hand = (hand + 1) % Self.capacity
    }

    /// The keyed hash of `header`'s bytes; nil when they are not contiguous (never for the
    /// transport's strings), which `SessionMemo.equal` could not confirm anyway.
    static func key(_ header: String) -> Int? {
        header.utf8.withContiguousStorageIfAvailable { bytes in
            var hasher = Hasher()
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            return hasher.finalize()
        }
    }

    /// Keeps a connection's table in its `ConnectionLocal` (which holds objects); calls of one
    /// connection run on several threads at once, hence the lock.
    final class Box: Sendable {
        private let table = Lock(SessionMemoTable())

        /// The table of `connection`, made by its first session call (nil only if something
        /// else were kept there: nothing else is).
        static func of(_ connection: ConnectionLocal) -> Box? {
            (connection.value ?? connection.value(orInsert: { Box() })) as? Box
        }

        /// Inlined with `SessionMemoTable.account(for:)` (same measured gain: +48 → +22–26
        /// instructions per W1 call).
        @inline(__always)
        func account(for header: String, epoch: UInt64, now: Double) -> Account? {
            table.withLock { $0.account(for: header, epoch: epoch, now: now) }
        }

        func store(_ memo: SessionMemo) {
            guard let key = SessionMemoTable.key(memo.header) else { return }
            table.withLock { $0.store(memo, key: key) }
        }

        var count: Int { table.withLock { $0.count } }
    }
}

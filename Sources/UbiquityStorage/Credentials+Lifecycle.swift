import Foundation

// The account lifecycle's records (docs/accounts.md "Archive, restore, delete"): each account's
// state, written before its files move, is what makes a transition resumable after kill -9.
extension Credentials {
    /// What finishing a deletion removed from this database.
    public struct Removed: Sendable, Equatable {
        public var keys = 0
        public var sessions = 0
    }

    /// Adds `ubq_accounts.state` to a database from before the lifecycle (every account active).
    static func addStateColumn(_ c: Connection) throws {
        // (the hardened connection's authorizer refuses pragma_table_info: probe the column instead)
        do { try c.query("SELECT state FROM ubq_accounts LIMIT 1") { _ in } } catch {
            try c.exec("ALTER TABLE ubq_accounts ADD COLUMN state TEXT NOT NULL DEFAULT 'active'")
        }
    }

    /// The account's lifecycle state; nil if it has no record. A key or session of an account
    /// without a record (storage tests) counts as active.
    public func accountState(_ id: String) -> AccountState? {
        state.withLock { s in s.accounts[id] == nil ? nil : s.inactive[id] ?? .active }
    }

    /// Starts a transition: the in-between state and the removal of the account's sessions are
    /// written in one SQLite transaction (synchronous=FULL) before anything else happens, so from
    /// here on no call, session or sign-in acts for the account, and a restart resumes the
    /// transition. Returns the sessions it removed (the caller ends the live ones' streams and
    /// contexts). Beginning the transition an account is already in again is a retry of one that
    /// stopped half-way (the caller makes sure it is not still running).
    /// Throws `AccountLifecycle.Refusal` (`.gone` for an account with no record) and changes
    /// nothing then.
    public func beginTransition(_ t: AccountLifecycle.Transition, account id: String) throws -> [SessionRecord] {
        try withConnection { c, s in
            guard s.accounts[id] != nil else { throw AccountLifecycle.Refusal.gone }
            var machine = AccountLifecycle(s.inactive[id] ?? .active)
            let next = try machine.begin(t).get()
            // erasing: a deletion's sessions leave no row in a free page
            try c.erasing {
                try c.run("BEGIN IMMEDIATE")
                do {
                    try c.run("UPDATE ubq_accounts SET state = ? WHERE id = ?", [.text(next.rawValue), .text(id)])
                    try c.run("DELETE FROM ubq_sessions WHERE account = ?", [.text(id)])
                    try c.run("COMMIT")
                } catch { try? c.run("ROLLBACK"); throw error }
            }
            s.inactive[id] = next
            let ended = s.sessions.values.filter { $0.account == id }
            for r in ended { s.sessions[r.id] = nil }
            return ended
        }
    }

    /// Ends the account's running transition once its work is done: archived or active again,
    /// or — for a deletion — its keys, sessions and record removed (the tombstone last, so a
    /// crash before this line resumes the deletion). Returns the state it ended in and what a
    /// deletion removed here. Idempotent: with nothing running it changes nothing.
    @discardableResult
    public func finishTransition(account id: String) throws -> (AccountState, Removed) {
        try withConnection { c, s in
            var machine = AccountLifecycle(s.inactive[id] ?? .active)
            guard s.accounts[id] != nil, let end = machine.finish() else { return (s.inactive[id] ?? .deleted, Removed()) }
            let removed = try c.erasing { try Self.write(end, account: id, c) }
            switch end {
            case .active: s.inactive[id] = nil
            case .deleted:
                s.inactive[id] = nil
                s.accounts[id] = nil
                s.keys = s.keys.filter { $0.value.account != id }
                s.sessions = s.sessions.filter { $0.value.account != id }
            default: s.inactive[id] = end
            }
            return (end, removed)
        }
    }

    /// Writes a transition's end state in one SQLite transaction: for `.deleted`, the removal
    /// of the account's keys, sessions and record.
    private static func write(_ end: AccountState, account id: String, _ c: Connection) throws -> Removed {
        var removed = Removed()
        try c.run("BEGIN IMMEDIATE")
        do {
            if end == .deleted {
                try c.query("SELECT count(*) FROM ubq_api_keys WHERE account = ?", [.text(id)]) { removed.keys = Int($0.int(0)) }
                try c.query("SELECT count(*) FROM ubq_sessions WHERE account = ?", [.text(id)]) { removed.sessions = Int($0.int(0)) }
                try c.run("DELETE FROM ubq_api_keys WHERE account = ?", [.text(id)])
                try c.run("DELETE FROM ubq_sessions WHERE account = ?", [.text(id)])
                try c.run("DELETE FROM ubq_accounts WHERE id = ?", [.text(id)])
            } else {
                try c.run("UPDATE ubq_accounts SET state = ? WHERE id = ?", [.text(end.rawValue), .text(id)])
            }
            try c.run("COMMIT")
        } catch { try? c.run("ROLLBACK"); throw error }
        return removed
    }

    /// API keys of the account (a deletion's receipt counts them before they go).
    public func keyCount(account id: String) -> Int {
        state.withLock { s in s.keys.values.reduce(0) { $0 + ($1.account == id ? 1 : 0) } }
    }

    /// Accounts a start finds in the middle of a transition, with the transition to complete.
    public func pendingTransitions() -> [(account: String, transition: AccountLifecycle.Transition)] {
        state.withLock { s in
            s.inactive.compactMap { id, st in AccountLifecycle.resumption(of: st).map { (id, $0) } }.sorted { $0.account < $1.account }
        }
    }

    /// Accounts whose stores sit in their archive (archived, or on the way in or out).
    public func accountsWithArchive() -> [String] {
        state.withLock { s in s.inactive.filter { $0.value == .archived || $0.value == .archiving || $0.value == .restoring }.map(\.key) }
    }
}

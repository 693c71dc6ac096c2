/// Where an account is in its lifecycle (SPEC §2, §4.6; docs/accounts.md "Archive, restore,
/// delete"). The in-between states are written to `credentials.sqlite` before any file moves, so
/// a process killed half-way finds them at its next start and finishes the transition the same
/// way (`AccountLifecycle.resumption`).
public enum AccountState: String, Sendable, Hashable, CaseIterable {
    case active
    /// Sessions dropped, stores being closed and moved into the account's archive.
    case archiving
    /// Every store in the archive; no session, no sign-in.
    case archived
    /// Stores moving back from the archive.
    case restoring
    /// The tombstone: from the moment it is written the account is invisible, and its files,
    /// key-value entries, keys and sessions are being removed.
    case deleting
    /// Everything removed: never stored (the account's records are gone), only returned by
    /// `AccountLifecycle.finish()`.
    case deleted

    /// Only an active account serves calls and signs in.
    public var serves: Bool { self == .active }
    /// A deleting or deleted account answers as one that never existed.
    public var visible: Bool { self != .deleting && self != .deleted }
}

/// The account lifecycle as a value: `begin` a transition, `finish` it once its work is done.
///
/// ```
/// active ──archive──▶ archiving ──finish──▶ archived ──restore──▶ restoring ──finish──▶ active
///   └─────────┬──────────────────────────────────┘
///          delete ──▶ deleting ──finish──▶ deleted
/// ```
/// A transition begun while another is half-done is refused (`.busy`): that one owns the
/// account's files until it finishes, so a second one could only race it. Beginning the same
/// one again is a retry (an archive that stopped on a busy store); the service refuses it while
/// the first is still running in this process. Archiving an archived
/// account and restoring an active one are refused as well, with what to do instead.
public struct AccountLifecycle: Sendable, Equatable {
    public enum Transition: String, Sendable, CaseIterable { case archive, restore, delete }

    public enum Refusal: Error, Sendable, Equatable {
        /// Another transition is running (its state).
        case busy(AccountState)
        case alreadyArchived
        case notArchived
        /// The account is being deleted or is deleted: it answers as unknown.
        case gone
    }

    public private(set) var state: AccountState

    public init(_ state: AccountState) { self.state = state }

    /// Starts `t`; returns the in-between state to write down before any work, or why not.
    public mutating func begin(_ t: Transition) -> Result<AccountState, Refusal> {
        let next: AccountState
        switch (state, t) {
        case (.deleting, _), (.deleted, _): return .failure(.gone)
        // the same transition again: a retry of one that stopped half-way (its steps are idempotent)
        case (.archiving, .archive), (.restoring, .restore): next = state
        case (.archiving, _), (.restoring, _): return .failure(.busy(state))
        case (.active, .archive): next = .archiving
        case (.archived, .archive): return .failure(.alreadyArchived)
        case (.archived, .restore): next = .restoring
        case (.active, .restore): return .failure(.notArchived)
        case (.active, .delete), (.archived, .delete): next = .deleting
        }
        state = next
        return .success(next)
    }

    /// Ends the running transition; returns the state it ends in (nil: nothing was running).
    public mutating func finish() -> AccountState? {
        switch state {
        case .archiving: state = .archived
        case .restoring: state = .active
        case .deleting: state = .deleted
        case .active, .archived, .deleted: return nil
        }
        return state
    }

    /// The transition a start finds half-done in `state` and completes before serving (nil: none).
    /// Each runs forwards only — a half-moved archive is finished, not undone — because every
    /// step is idempotent and its inputs (which files still sit where) are on disk.
    public static func resumption(of state: AccountState) -> Transition? {
        switch state {
        case .archiving: .archive
        case .restoring: .restore
        case .deleting: .delete
        case .active, .archived, .deleted: nil
        }
    }
}

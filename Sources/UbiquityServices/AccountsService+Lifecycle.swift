import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

// Accounts.ArchiveAccount / RestoreAccount / DeleteAccount (operator calls; docs/accounts.md
// "Archive, restore, delete"). Each: check the request, claim the account for this transition
// (one at a time per account), write the in-between state with the sessions' removal
// (`Credentials.beginTransition`), end those sessions' streams and contexts, then do the file
// work (`AccountTransitions.perform…`).
extension AccountsService {
    func archiveAccount(_ req: Ubiquity_V1_ArchiveAccountRequest, _ call: ServerCall) async throws -> Ubiquity_V1_Account {
        try auth.requireOperator(call.context.metadata)
        let id = try lifecycleTarget(req.accountID)
        return try await transition(.archive, id) {
            try await transitions.performArchive(id)
        }
    }

    func restoreAccount(_ req: Ubiquity_V1_RestoreAccountRequest, _ call: ServerCall) async throws -> Ubiquity_V1_Account {
        try auth.requireOperator(call.context.metadata)
        let id = try lifecycleTarget(req.accountID, allowDefault: true)
        return try await transition(.restore, id) {
            try await transitions.performRestore(id)
        }
    }

    func deleteAccount(_ req: Ubiquity_V1_DeleteAccountRequest, _ call: ServerCall) async throws -> Ubiquity_V1_DeleteAccountResponse {
        try auth.requireOperator(call.context.metadata)
        let id = try lifecycleTarget(req.accountID)
        var receipt = AccountTransitions.Receipt()
        var sessions = 0
        _ = try await transition(.delete, id, sessionsEnded: { sessions = $0 }) {
            // the destructive step: everything of the account goes, after StoresWillChange
            // (CONTENT_REMOVED) and the contexts' chance to save (`transition`); no DID_CHANGE
            // follows, the stores it would go to are gone
            receipt = try await transitions.performDelete(id)
        }
        var res = Ubiquity_V1_DeleteAccountResponse()
        res.storesRemoved = UInt32(receipt.stores)
        res.archivedStoresRemoved = UInt32(receipt.archivedStores)
        res.keyValueEntriesRemoved = UInt32(receipt.keyValueEntries)
        res.apiKeysRemoved = UInt32(receipt.apiKeys)
        res.sessionsRemoved = UInt32(sessions + receipt.sessions)
        res.bytesRemoved = UInt64(max(0, receipt.bytes))
        return res
    }

    /// The account a lifecycle call names: NOT_FOUND for none (or one being deleted), and the
    /// built-in account refused — every start re-creates it and `--auth off` serves it.
    private func lifecycleTarget(_ id: String, allowDefault: Bool = false) throws -> String {
        guard !id.isEmpty else { throw ServiceError.invalid("account_id", "an account_id is required", reason: .missingField) }
        guard auth.credentials.account(id) != nil else { throw ServiceError.notFound("no account \(id.prefix(40))", reason: .notFound) }
        if id == Account.defaultAccount.id && !allowDefault {
            throw ServiceError.precondition("the built-in account \"default\" cannot be archived or deleted: use a created account", reason: .defaultAccount)
        }
        return id
    }

    /// Runs one transition of `id`: claimed in this process, begun on disk, its sessions ended,
    /// then `work`. Returns the account as it ends (a deleted one: its last record).
    @discardableResult
    private func transition(_ t: AccountLifecycle.Transition, _ id: String, sessionsEnded: (Int) -> Void = { _ in },
                            _ work: () async throws -> Void) async throws -> Ubiquity_V1_Account {
        let record = auth.credentials.account(id)
        let done: Void? = try await transitions.exclusively(id) {
            // the sessions the transition removed: their streams and contexts end once the
            // devices were told (an archive's: after its DID_CHANGE)
            var removedSessions = Set<String>()
            func begin() async throws {
                let removed: [Credentials.SessionRecord]
                do { removed = try auth.credentials.beginTransition(t, account: id) } catch let r as AccountLifecycle.Refusal {
                    throw Self.refusal(r, id)
                }
                sessionsEnded(removed.count)
                removedSessions = Set(removed.filter { !$0.revoked }.map(\.id))
                CrashPoint.reach("\(t.rawValue).begun")
            }
            // StoresWillChange and the contexts' chance to save come before `beginTransition`,
            // which removes the account's sessions; so the refusals it would give are checked
            // first, and nothing is announced for them.
            guard let announced = try announcement(t, id) else {
                try await begin()
                ended(removedSessions)
                return try await work()
            }
            let told = try await StoreTransitions(backend: backend, contexts: contexts).run(announced, scope: .account(id)) {
                // killed here: the account is whole, the next start closes the WILL_CHANGE as cancelled
                CrashPoint.reach("\(t.rawValue).will")
                try await begin()
                guard t == .delete else { return }
                // a delete removes the stores a DID_CHANGE would go to: its sessions' streams end
                // (SESSION_REVOKED) and the files go inside the transition, no DID_CHANGE follows
                ended(removedSessions)
                try await work()
            }
            guard t != .delete else { return }
            // an archive's DID_CHANGE is in every store before the files move (a history row
            // written while the store is still open); its devices' streams end after it
            ended(removedSessions, after: told.didChange)
            CrashPoint.reach("\(t.rawValue).did")
            try await work()
        }
        guard done != nil else {
            throw ServiceError.precondition("account \(id) has a transition running: wait for it (GetAccount shows its state)", reason: .accountBusy)
        }
        guard let a = auth.credentials.account(id) ?? record else { throw ServiceError.notFound("no account \(id.prefix(40))", reason: .notFound) }
        return accountMessage(a)
    }

    /// The store transition `t` announces to the account's devices around its sessions' removal,
    /// or nil: a delete of an active account is CONTENT_REMOVED, an archive ACCOUNT_REMOVED (for
    /// every device). A delete of an archived account has no devices connected and no stores to
    /// write to; a restore announces ACCOUNT_ADDED in each store once it is back
    /// (`AccountTransitions.performRestore`: nobody can follow an archived account before).
    /// Throws the refusal `beginTransition` would give, before anything is announced.
    private func announcement(_ t: AccountLifecycle.Transition, _ id: String) throws -> StoreEventRecord.Transition? {
        let state = auth.credentials.accountState(id) ?? .active
        var lifecycle = AccountLifecycle(state)
        if case .failure(let r) = lifecycle.begin(t) { throw Self.refusal(r, id) }
        guard state == .active else { return nil }
        switch t {
        case .delete: return .contentRemoved
        case .archive: return .accountRemoved
        case .restore: return nil
        }
    }

    private static func refusal(_ r: AccountLifecycle.Refusal, _ id: String) -> ServiceError {
        switch r {
        case .gone: .notFound("no account \(id.prefix(40))", reason: .notFound)
        case .busy(let state):
            .precondition("account \(id) is \(state.rawValue): that transition must finish first (retry it, or restart the server to resume it)", reason: .accountBusy)
        case .alreadyArchived: .precondition("account \(id) is archived already: RestoreAccount brings it back", reason: .accountArchived)
        // issue 19: restoring a live account is ALREADY_EXISTS (the live account is what a restore would create)
        case .notArchived: ServiceError(code: .alreadyExists, reason: .accountNotArchived,
                                        message: "account \(id) is active: only an archived account can be restored")
        }
    }

    /// The account's message with its lifecycle state.
    func accountMessage(_ a: Credentials.AccountRecord) -> Ubiquity_V1_Account {
        var m = Self.message(a)
        switch auth.credentials.accountState(a.id) ?? .active {
        case .active: m.state = .active
        case .archiving: m.state = .archiving
        case .archived: m.state = .archived
        case .restoring: m.state = .restoring
        case .deleting, .deleted: m.state = .deleting
        }
        return m
    }
}

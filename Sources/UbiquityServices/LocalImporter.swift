import Foundation
import Synchronization
import UbiquityStorage

/// The first-sign-in import (SPEC §4.6, docs/accounts.md "Local stores"): a device's local stores
/// are copied into the account's stores of the same names, deduplicated through the model's
/// uniqueness constraints with relationships kept, then removed. The job's states and why each
/// step is safe to redo after a crash are in `ImportJobState`.
///
/// `runImportJob` is the one call that does the whole import; `AccountsService.importLocalStores`
/// wraps it (with the job's recording) in the store transition: StoresWillChange
/// INITIAL_IMPORT_COMPLETED, the contexts' chance to save, StoresDidChange with the counts and
/// `using_local_storage: false` (docs/lifecycle.md "First sign-in import").
struct LocalImporter: Sendable {
    let backend: Backend
    let contexts: ContextRegistry
    var credentials: Credentials { backend.authenticator.credentials }

    /// Runs a recorded job to its end from whatever state it is in; returns its counts.
    func runImportJob(_ job: Credentials.ImportJob) async throws -> ImportJobCounts {
        var state = job.state
        if state.step == .copyLocalStores {
            let (counts, stores) = try await copyLocalStores(job)
            try state.copied(counts, into: stores)
            try credentials.advance(job, to: state)
            Self.testStep()
        }
        if state.step == .removeLocalStores {
            let keyValues = try await removeLocalStores(job)
            try state.removed(keyValuesMoved: keyValues.moved, keyValuesKept: keyValues.kept)
            try credentials.advance(job, to: state)
            Self.testStep()
        }
        if state.step == .announce {
            try await announce(job, state)
            try state.announced()
            try credentials.advance(job, to: state)
            Self.testStep()
        }
        return state.counts ?? ImportJobCounts()
    }

    /// Finishes the jobs a stopped process left (run at startup, before serving). Returns how many.
    func resumePending() async throws -> Int {
        let jobs = try credentials.pendingImports()
        for job in jobs { _ = try await runImportJob(job) }
        return jobs.count
    }

    /// Refuses, before anything is recorded, an import that could not apply: an account's store
    /// of a local store's name with another model than the local store's.
    func checkCompatible(localAccount: String, account: String) async throws {
        for local in backend.catalog.stores(account: localAccount) {
            guard let (dest, _) = try backend.catalog.store(account: account, name: local.name, create: false) else { continue }
            let localHash = try await backend.directory.withStore(local.id, create: true) { $0.modelVersionHash }
            let destHash = try await backend.directory.withStore(dest.id, create: true) { $0.modelVersionHash }
            if let l = localHash, let d = destHash, l != d {
                throw ServiceError.precondition(
                    "the account's store \"\(local.name.prefix(100))\" has model version \(d.prefix(16))…, the local store \(l.prefix(16))…: register the same model on both, then sign in again",
                    reason: .localImportConflict)
            }
        }
    }

    /// Step 1: each local store's objects into the account's store of the same name (created
    /// with the local store's model if it has none), one save per store under the job's client
    /// transaction ID — a save that committed before a crash is replayed, not applied again.
    /// Returns the counts and the account's stores copied into.
    private func copyLocalStores(_ job: Credentials.ImportJob) async throws -> (ImportJobCounts, [UUID]) {
        var total = ImportJobCounts()
        var stores: [UUID] = []
        for local in backend.catalog.stores(account: job.localAccount) {
            try await waitUntilUnused(local.id)
            let (dump, model) = try await backend.directory.withStore(local.id, create: true) { s in (try await s.dump(), s.modelDefinition) }
            guard let (dest, _) = try backend.catalog.store(account: job.account, name: local.name, create: true) else { continue }
            stores.append(dest.id)
            let counts = try await backend.directory.withStore(dest.id, create: true, model: model) { store in
                if store.modelDefinition == nil, let model { _ = try await store.migrate(to: model) }
                guard !dump.objects.isEmpty else { return ImportJobCounts() }
                var s = StoreImport.saveRequest(dump, deduplicate: true, author: job.deviceID, contextName: "local-import")
                s.clientTransactionID = "ubiquity.local-import:" + job.id
                let r = try await contexts.save(s, on: store, model: backend.modelIfAny(of: store))
                return ImportJobCounts(result: r, objects: dump.objects.count)
            }
            total = total + counts
            Self.testStep()
        }
        return (total, stores)
    }

    /// Refuses, before anything is recorded, an import whose local key-value entries would take
    /// the account over a key-value quota (RESOURCE_EXHAUSTED KEY_VALUE_QUOTA): the local session
    /// still works, so the device can delete local keys (or the account's) and sign in again.
    func checkKeyValueQuotas(localAccount: String, account: String) throws {
        let plan = try backend.keyValues.planMove(from: localAccount, to: account)
        guard let v = backend.keyValues.quotas.check(from: plan.usageBefore, to: plan.usage) else { return }
        var e = KeyValueErrors.quota(v, field: "local_device_secret")
        e.message = "the device's local key-value entries (\(plan.written.count) keys the account does not have) do not fit the account: "
            + e.message + "; or delete local keys with the local session, then sign in again"
        throw e
    }

    /// Step 2: the device's local key-value entries moved into the account's
    /// (`KeyValueStore.moveLocalEntries`: a key the account has set keeps the account's value;
    /// one transaction, so a redo finds nothing left to move), the account's key-value
    /// subscribers woken (the moved keys reach them with reason ACCOUNT_CHANGE); then the local
    /// stores destroyed through the engine (pools closed first, SPEC §4.8) and forgotten, then
    /// their folder (migration backups included). Each part is a no-op when already done.
    /// Returns the key-value counts (a redo: those the move recorded).
    private func removeLocalStores(_ job: Credentials.ImportJob) async throws -> KeyValueStore.MoveCounts {
        let moved = try backend.keyValues.moveLocalEntries(from: job.localAccount, to: job.account)
        TestSequence.reach("import.kv.moved")
        if !moved.written.isEmpty {
            backend.keyValueFeed.committed(account: job.account, seq: moved.seq)
            // other devices filled the account since the sign-in checked: the device's keys are
            // kept all the same, and the account's devices told it is over its quota
            if backend.keyValues.quotas.excess(moved.usage) != nil {
                backend.keyValueFeed.quotaViolation(account: job.account, key: "", author: job.deviceID)
            }
        }
        Self.testStep()
        for local in backend.catalog.stores(account: job.localAccount) {
            await contexts.storeWillChange(local.id)
            await backend.subscriptions.storeWillChange(local.id, .storeDestroyed)
            try await destroyWhenUnused(local.id)
            Self.testStep()
            try backend.catalog.removeStore(id: local.id)
            Self.testStep()
        }
        let folder = backend.directory.root + "/accounts/" + job.localAccount
        if FileManager.default.fileExists(atPath: folder) { try FileManager.default.removeItem(atPath: folder) }
        return moved.counts
    }

    /// Step 3: StoresDidChange(INITIAL_IMPORT_COMPLETED), `using_local_storage: false`, with the
    /// counts, on each account store the copies went to — durable, so the device's new
    /// subscriptions replay it after the imported transaction, whether the SignIn finished the job
    /// or a restart did (nobody is connected then: the history is how they hear of it). Each append
    /// is keyed by the job, so a redo after a kill never writes a second one.
    private func announce(_ job: Credentials.ImportJob, _ state: ImportJobState) async throws {
        let c = state.counts ?? ImportJobCounts()
        let did = StoreEventRecord(phase: .didChange, transition: .initialImportCompleted, usingLocalStorage: false, importCounts: .init(c))
        let present = Set(backend.catalog.stores(account: job.account).map(\.id))
        // a store destroyed since the copy has no subscribers left to tell
        for id in state.stores where present.contains(id) {
            _ = try await backend.directory.withStore(id, create: true) { try await $0.appendEvent(did, once: "import:" + job.id) }
            Self.testStep()
        }
    }

    /// The device's sessions were revoked when the job began, so no new call reaches its stores;
    /// but one it started just before may still run, and a save of it committing after the copy
    /// read the store would be lost with the store. Such calls are short (their streams were
    /// ended with the sessions): wait for them, up to a bound, then leave the job for a retry
    /// (the next SignIn with the secret, or the next start).
    private func waitUntilUnused(_ id: UUID) async throws {
        var waits = 0
        while backend.directory.isInUse(id) {
            guard waits < 500 else {
                throw ServiceError(code: .unavailable, reason: .storeBusy,
                                   message: "the device's local store is still in use by running calls: sign in again shortly (the import resumes)")
            }
            waits += 1
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    /// `destroy` refuses a store in use (STORE_BUSY): waited for as above.
    private func destroyWhenUnused(_ id: UUID) async throws {
        while true {
            try await waitUntilUnused(id)
            do { return try await backend.directory.destroy(id) } catch let e as StorageError where e.reason == .busy {}
        }
    }

    // MARK: test hook

    /// A step boundary of an import job: `UBIQUITYD_TEST_CRASH_AT=import.step:<n>` kills the
    /// process at the n-th one (`CrashPoint`, tests/python/test_local_store_crash.py).
    static func testStep() { CrashPoint.reach("import.step") }
}

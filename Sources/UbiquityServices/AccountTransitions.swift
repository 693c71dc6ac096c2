import Foundation
import UbiquityLock
import UbiquityStorage

/// The file work of ArchiveAccount, RestoreAccount and DeleteAccount (docs/accounts.md
/// "Archive, restore, delete"), separate from the RPCs so a start can finish a transition a
/// kill left half-done before it serves (`resumePending`). Each `perform…` expects the account's
/// in-between state already written (`Credentials.beginTransition`) and is idempotent: run again
/// after a crash at any point, it moves or removes only what is left, and writes the end state
/// last.
final class AccountTransitions: Sendable {
    let backend: Backend
    /// Accounts with a transition running in this process: a second call on one of them is
    /// refused (ACCOUNT_BUSY) while the first still works, even if it is the same transition.
    private let running = Lock<Set<String>>([])

    /// How long an archive or restore waits for calls still holding one of the account's stores
    /// (their sessions are gone, so they only finish): 200 tries, 25 ms apart.
    static let busyRetries = 200
    static let busyPause: UInt64 = 25_000_000

    init(backend: Backend) { self.backend = backend }

    /// What DeleteAccount removed.
    struct Receipt: Sendable, Equatable {
        var stores = 0
        var archivedStores = 0
        var keyValueEntries = 0
        var apiKeys = 0
        var sessions = 0
        var bytes: Int64 = 0
    }

    /// Runs `body` as the account's only transition in this process; nil if another is running.
    func exclusively<T>(_ account: String, _ body: () async throws -> T) async throws -> T? {
        guard running.withLock({ $0.insert(account).inserted }) else { return nil }
        defer { running.withLock { _ = $0.remove(account) } }
        return try await body()
    }

    /// Closes every store of the account (pools first) and moves it into the archive, then
    /// writes `archived`. Each store says ACCOUNT_REMOVED happened before it moves — normally
    /// `StoreTransitions.run` wrote that already; a start resuming a killed archive, or a store
    /// created during the chance to save, writes it here (`AnnouncementLog.closing`).
    func performArchive(_ account: String) async throws {
        backend.catalog.acceptStores(account: account, false)
        try await eachStore(of: account) { r in
            if FileManager.default.fileExists(atPath: backend.directory.livePath(for: r.id, account: account)) {
                // a start parked it with the account; nothing is served before this resume ends
                backend.directory.unpark(r.id)
                try await announce(.accountRemoved, on: r.id)
            }
            try await whenIdle { try backend.directory.archive(r.id, account: account) }
            CrashPoint.reach("archive.store")
        }
        try backend.authenticator.credentials.finishTransition(account: account)
    }

    /// Moves every archived store back where it is served and announces ACCOUNT_ADDED in it
    /// (WILL_CHANGE and DID_CHANGE together: no device can follow an archived account's stores,
    /// so there is no one to give a chance to save; a device resuming from a token of before the
    /// archive replays both transitions), then writes `active`.
    func performRestore(_ account: String) async throws {
        for r in backend.catalog.stores(account: account) {
            try await whenIdle { try backend.directory.unarchive(r.id, account: account) }
            CrashPoint.reach("restore.store")
            try await announce(.accountAdded, on: r.id)
            CrashPoint.reach("restore.announced")
        }
        try backend.authenticator.credentials.finishTransition(account: account)
        backend.catalog.acceptStores(account: account, true)
    }

    /// Appends to the store what its history still lacks to say that `transition` happened for
    /// every device — nothing if it says so already (a resumed transition writes nothing twice).
    /// A store whose file was never created has no history to write to.
    private func announce(_ transition: StoreEventRecord.Transition, on id: UUID) async throws {
        do {
            try await backend.directory.withStore(id) { store in
                for e in try await store.announcementLog().closing(transition, transitionID: UUID().uuidString.lowercased()) {
                    _ = try await store.appendEvent(e)
                }
            }
        } catch let e as StorageError where e.reason == .notFound {}
    }

    /// Removes everything of the account: each store's files (closed first, live or archived),
    /// its folder, its catalog records, its key-value entries, then — last — its keys, sessions
    /// and the tombstone itself. `StoresWillChange(CONTENT_REMOVED)` is announced before the
    /// tombstone is written (AccountsService+Lifecycle.swift, `transition`).
    func performDelete(_ account: String) async throws -> Receipt {
        var receipt = Receipt()
        let directory = backend.directory
        receipt.bytes = directory.accountBytes(account)
        receipt.apiKeys = backend.authenticator.credentials.keyCount(account: account)
        if let usage = try? backend.keyValues.position(account: account).usage { receipt.bytes += usage.bytes }
        backend.catalog.acceptStores(account: account, false)
        try await eachStore(of: account) { r in
            if FileManager.default.fileExists(atPath: directory.archivePath(for: r.id, account: account)) {
                receipt.archivedStores += 1
            } else if FileManager.default.fileExists(atPath: directory.livePath(for: r.id, account: account)) {
                receipt.stores += 1
            }
            try await whenIdle { try directory.removeForDeletion(r.id, account: account) }
            CrashPoint.reach("delete.store")
        }
        try directory.removeAccountFolder(account)
        CrashPoint.reach("delete.files")
        try backend.catalog.removeAccount(account)
        CrashPoint.reach("delete.catalog")
        receipt.keyValueEntries = try backend.keyValues.removeAccount(account)
        CrashPoint.reach("delete.keyvalue")
        let (_, removed) = try backend.authenticator.credentials.finishTransition(account: account)
        receipt.sessions += removed.sessions
        return receipt
    }

    /// Before serving: parks the stores of archived accounts (so nothing opens them), then
    /// finishes every transition a previous process left half-done, forwards.
    func resumePending() async throws {
        let credentials = backend.authenticator.credentials
        for account in credentials.accountsWithArchive() {
            backend.directory.park(backend.catalog.stores(account: account).map(\.id))
            backend.catalog.acceptStores(account: account, false)
        }
        for (account, transition) in credentials.pendingTransitions() {
            switch transition {
            case .archive: try await performArchive(account)
            case .restore: try await performRestore(account)
            case .delete: _ = try await performDelete(account)
            }
        }
    }

    /// Runs `body` on each store of the account, then on any a call still running when the
    /// transition began added meanwhile (the catalog takes no new one after that), until none
    /// is left.
    private func eachStore(of account: String, _ body: (Catalog.StoreRecord) async throws -> Void) async throws {
        var done = Set<UUID>()
        while case let pending = backend.catalog.stores(account: account).filter({ !done.contains($0.id) }), !pending.isEmpty {
            for r in pending {
                try await body(r)
                done.insert(r.id)
            }
        }
    }

    /// Runs a file operation on a store, waiting while running calls still hold it.
    private func whenIdle(_ body: () throws -> Void) async throws {
        var tries = 0
        while true {
            do { return try body() } catch let e as StorageError where e.reason == .busy && tries < Self.busyRetries {
                tries += 1
                try await Task.sleep(nanoseconds: Self.busyPause)
            }
        }
    }
}

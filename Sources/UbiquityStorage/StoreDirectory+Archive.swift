import Foundation

// An account's archive and its removal (docs/accounts.md "Archive, restore, delete"). Every file
// operation runs with the store closed through `closedForFileOperation` — its pools shut and its
// slot held, so no call reopens it meanwhile (SPEC §4.8: never move or delete an open database's
// files) — and every one is idempotent: a start that finds a transition half-done runs it again
// and it moves or removes only what is still left.
extension StoreDirectory {
    /// The folder of an account's archived stores, beside its live ones.
    public static func archiveFolder(account: String) -> String { "accounts/\(account)/archive" }

    /// Where a store of `account` lives while the account is active.
    public func livePath(for id: UUID, account: String) -> String {
        root + "/" + Self.folder(account: account) + "/" + id.uuidString.lowercased() + ".sqlite"
    }

    /// Where a store of `account` lives while the account is archived.
    public func archivePath(for id: UUID, account: String) -> String {
        root + "/" + Self.archiveFolder(account: account) + "/" + id.uuidString.lowercased() + ".sqlite"
    }

    /// Marks stores as never to be opened (an archived account's, at startup).
    public func park(_ ids: some Sequence<UUID>) { state.withLock { $0.parked.formUnion(ids) } }

    /// Lets a parked store open again: a resumed archive announces in a store before it moves.
    public func unpark(_ id: UUID) { state.withLock { _ = $0.parked.remove(id) } }

    /// Whether a store is parked (archived or being deleted).
    public func isParked(_ id: UUID) -> Bool { state.withLock { $0.parked.contains(id) } }

    /// Closes the store (pools first) and moves its files into the account's archive; from here
    /// on it is parked. A running call on it refuses the move (`.busy`).
    public func archive(_ id: UUID, account: String) throws {
        try closedForFileOperation(id) {
            state.withLock { _ = $0.parked.insert(id) }
            try Self.move(livePath(for: id, account: account), to: archivePath(for: id, account: account))
        }
    }

    /// Moves an archived store's files back to where they are served, then unparks it.
    public func unarchive(_ id: UUID, account: String) throws {
        try closedForFileOperation(id) {
            try Self.move(archivePath(for: id, account: account), to: livePath(for: id, account: account))
            state.withLock { _ = $0.parked.remove(id) }
        }
    }

    /// Closes the store and removes its files wherever they are (live or archived); it stays
    /// parked, so nothing recreates it before its catalog record is gone.
    public func removeForDeletion(_ id: UUID, account: String) throws {
        try closedForFileOperation(id) {
            state.withLock { _ = $0.parked.insert(id) }
            for p in [livePath(for: id, account: account), archivePath(for: id, account: account)] {
                // the database first: a crash after it leaves sidecars no one opens, never a
                // database without the WAL that holds its last commits
                for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: p + suffix) {
                    try FileManager.default.removeItem(atPath: p + suffix)
                }
            }
        }
    }

    /// Bytes of every file under the account's folder (live stores, archive, sidecars).
    public func accountBytes(_ account: String) -> Int64 {
        let base = root + "/accounts/" + account
        guard let e = FileManager.default.enumerator(atPath: base) else { return 0 }
        var total: Int64 = 0
        while let rel = e.nextObject() as? String {
            let attrs = try? FileManager.default.attributesOfItem(atPath: base + "/" + rel)
            if attrs?[.type] as? FileAttributeType == .typeRegular { total += (attrs?[.size] as? NSNumber)?.int64Value ?? 0 }
        }
        return total
    }

    /// Removes the account's folder and everything left in it. Call only once every store of
    /// the account was removed through `removeForDeletion` (none is open then).
    public func removeAccountFolder(_ account: String) throws {
        let base = root + "/accounts/" + account
        if FileManager.default.fileExists(atPath: base) { try FileManager.default.removeItem(atPath: base) }
        Self.syncDirectory(root + "/accounts")
    }

    /// Moves a closed database and its sidecars: sidecars first, the database last, so a crash
    /// in between leaves the database where the resumed move finds it again (its WAL is moved
    /// beside it before it is ever opened: a resume runs before the server serves).
    private static func move(_ from: String, to: String) throws {
        let fm = FileManager.default
        let folder = (to as NSString).deletingLastPathComponent
        try fm.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for suffix in ["-wal", "-shm", ""] where fm.fileExists(atPath: from + suffix) {
            guard rename(from + suffix, to + suffix) == 0 else { throw StorageError(.io, "cannot move \(from + suffix) to \(to + suffix): errno \(errno)") }
        }
        // the renames reach the disk before the state that says they happened is written
        syncDirectory(folder)
        syncDirectory((from as NSString).deletingLastPathComponent)
    }

    private static func syncDirectory(_ path: String) {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        Glibc.close(fd)
    }
}

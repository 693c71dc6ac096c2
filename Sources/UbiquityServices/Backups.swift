import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

/// Online backups and restores (docs/operations.md "Back up and restore"): `Admin.Backup`,
/// `Admin.RestoreStore` and the offline full restore (`ubiquityd --restore-from`). Every copy
/// goes through SQLite (VACUUM INTO out, the backup API in), never a file copy behind its back
/// (SPEC §4.8).
public struct Backups: Sendable {
    let backend: Backend
    let contexts: ContextRegistry
    let serverVersion: String

    public init(backend: Backend, contexts: ContextRegistry, serverVersion: String) {
        self.backend = backend
        self.contexts = contexts
        self.serverVersion = serverVersion
    }

    /// Backup and RestoreStore are operator calls (`authorization: Bearer <operator key>`,
    /// docs/accounts.md): they read and write the server's file system and every account's data.
    func requireOperator(_ call: ServerCall) throws {
        try backend.authenticator.requireOperator(call.context.metadata)
    }

    // MARK: Backup

    /// Backs up one store (`storeID`) or, with nil, every store of every account plus the
    /// catalog and the key-value store, into `directory` (new or empty). Saves go on meanwhile;
    /// each store's copy is at the generation of its last commit when its copy began.
    func backup(to directory: String, storeID: UUID?) async throws -> BackupManifest {
        let records: [Catalog.StoreRecord]
        if let storeID {
            guard let r = backend.catalog.store(id: storeID) else { throw ServiceError.notFound("no store \(storeID.uuidString.lowercased())", reason: .storeNotFound) }
            records = [r]
        } else {
            records = backend.catalog.allStores().sorted { $0.id.uuidString < $1.id.uuidString }
        }
        try Self.mapping { try BackupFiles.prepare(directory) }
        // Stores first, the catalog after them: every store in the manifest then has its record
        // in the catalog copy (a store created meanwhile may be in the catalog copy without a
        // file — the restore skips it: it had nothing acknowledged before the backup began).
        var stores: [BackupManifest.StoreEntry] = []
        for r in records {
            let file = BackupFiles.storeFile(r.id)
            let copied: (generation: Int64, epoch: UInt64)?
            do {
                copied = try await backend.directory.withStore(r.id) { try await $0.backup(to: directory + "/" + file) }
            } catch let e as StorageError where e.reason == .notFound {
                copied = nil  // destroyed since the list was read, or never opened: nothing to copy
            }
            guard let copied else { continue }
            let (sha, size) = try BackupFiles.seal(directory, file)
            stores.append(.init(account: r.account, storeID: r.id.uuidString.lowercased(), name: r.name, generation: copied.generation,
                                epoch: copied.epoch, file: file, sha256: sha, sizeBytes: size))
        }
        var databases: [BackupManifest.FileEntry] = []
        if storeID == nil {
            for (file, copy) in serverDatabases {
                try copy(directory + "/" + file)
                let (sha, size) = try BackupFiles.seal(directory, file)
                databases.append(.init(file: file, sha256: sha, sizeBytes: size))
            }
        }
        let manifest = BackupManifest(serverVersion: serverVersion, stores: stores, databases: databases)
        try BackupFiles.writeManifest(manifest, to: directory)
        return manifest
    }

    /// The server-wide databases a full backup copies (each under its name in the data
    /// directory), the catalog first.
    private var serverDatabases: [(file: String, copy: (String) throws -> Void)] {
        [(BackupFiles.catalogFile, backend.catalog.backup(to:)),
         (BackupFiles.keyValueFile, backend.keyValues.backup(to:)),
         (BackupFiles.credentialsFile, backend.authenticator.credentials.backup(to:))]
    }

    // MARK: Restore one store (online)

    /// Restores one store of a finished backup into this running server, the way ReplaceStore
    /// replaces a store: calls on it end (contexts STORE_CHANGED, subscribers STORE_REPLACED),
    /// the store is closed, its contents copied in with SQLite's backup API, and it gets a new
    /// epoch. Returns the restored store's record and token.
    func restoreStore(from directory: String, storeID: UUID?, replaceExisting: Bool) async throws -> (Catalog.StoreRecord, GenerationToken) {
        let manifest = try Self.mapping { try BackupFiles.load(directory) }
        let entry: BackupManifest.StoreEntry
        if let storeID {
            guard let e = manifest.stores.first(where: { UUID(uuidString: $0.storeID) == storeID }) else {
                throw ServiceError.notFound("the backup in \(directory) holds no store \(storeID.uuidString.lowercased())", reason: .storeNotFound)
            }
            entry = e
        } else {
            guard manifest.stores.count == 1, let e = manifest.stores.first else {
                throw ServiceError.invalid("store_id", "the backup holds \(manifest.stores.count) stores: name the one to restore", reason: .missingField)
            }
            entry = e
        }
        guard let id = UUID(uuidString: entry.storeID) else { throw Self.mapped(BackupError.unreadableManifest("bad store ID \(entry.storeID)")) }
        let record = Catalog.StoreRecord(id: id, account: entry.account, name: entry.name, createdAt: Date().timeIntervalSince1970)
        if backend.catalog.store(id: id) != nil {
            guard replaceExisting else {
                throw ServiceError.precondition("store \(entry.storeID) (\"\(entry.name)\") exists in this server: restoring replaces it; pass replace_existing (ubiq admin restore --replace)", reason: .storeExists)
            }
        } else {
            do { try backend.catalog.restoreStore(record) } catch let e as StorageError where e.reason == .invalidArgument {
                throw ServiceError.precondition(e.message, reason: .storeExists)
            }
        }
        await contexts.storeWillChange(id)
        await backend.subscriptions.storeWillChange(id, .storeReplaced)
        do {
            try await backend.directory.replace(id, from: directory + "/" + entry.file)
        } catch let e as StorageError where e.reason == .busy {
            throw ServiceError(code: .unavailable, reason: .storeBusy, message: "the store is in use by running calls; retry shortly")
        }
        let token = try await backend.directory.withStore(id) { $0.currentToken }
        return (backend.catalog.store(id: id) ?? record, token)
    }

    // MARK: Restore everything (offline)

    /// Restores a full backup into `dataDirectory`, which must not exist or be empty: the
    /// server-wide databases are copied in first, then `open` opens the server's
    /// storage on the directory (so store files land where its path function puts them) and each
    /// store is copied in through it, with a new epoch. Returns the manifest.
    public static func restoreAll(from directory: String, into dataDirectory: String,
                                  open: (String) throws -> Backend) async throws -> BackupManifest {
        let manifest = try BackupFiles.load(directory)
        guard manifest.isFullBackup else {
            throw BackupError.badDirectory("\(directory) is a backup of one store, not of a server: restore it into a running server (ubiq admin restore --from)")
        }
        let fm = FileManager.default
        if fm.fileExists(atPath: dataDirectory), !(try fm.contentsOfDirectory(atPath: dataDirectory)).isEmpty {
            throw BackupError.directoryNotEmpty(dataDirectory)
        }
        try fm.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        for db in manifest.databases {
            try BackupFiles.copyDatabase(from: directory + "/" + db.file, to: dataDirectory + "/" + db.file)
        }
        let backend = try open(dataDirectory)
        do {
            for s in manifest.stores {
                guard let id = UUID(uuidString: s.storeID) else { throw BackupError.unreadableManifest("bad store ID \(s.storeID)") }
                try await backend.directory.replace(id, from: directory + "/" + s.file)
            }
        } catch {
            await backend.shutdown()
            throw error
        }
        await backend.shutdown()
        return manifest
    }

    // MARK: Errors

    static func mapping<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as BackupError { throw mapped(e) }
    }

    static func mapped(_ e: BackupError) -> ServiceError {
        switch e {
        case .directoryNotEmpty: ServiceError.precondition(e.description, reason: .backupDirectoryNotEmpty)
        case .incomplete: ServiceError.precondition(e.description, reason: .backupIncomplete)
        case .checksumMismatch: ServiceError(code: .dataLoss, reason: .backupChecksumMismatch, message: e.description)
        case .unreadableManifest: ServiceError(code: .dataLoss, reason: .backupChecksumMismatch, message: e.description)
        case .badDirectory: ServiceError.invalid("directory", e.description, reason: .invalidArgument)
        }
    }
}

extension BackupManifest {
    /// The manifest as Admin.Backup returns it.
    func message(directory: String) -> Ubiquity_V1_BackupManifest {
        var m = Ubiquity_V1_BackupManifest()
        m.formatVersion = UInt32(formatVersion)
        m.serverVersion = serverVersion
        m.createdAt = createdAt
        m.directory = directory
        m.stores = stores.map { s in
            var e = Ubiquity_V1_BackupStoreEntry()
            e.account = s.account; e.storeID = s.storeID; e.name = s.name; e.generation = s.generation
            e.epoch = s.epoch; e.file = s.file; e.sha256 = s.sha256; e.sizeBytes = s.sizeBytes
            return e
        }
        m.databases = databases.map { f in
            var e = Ubiquity_V1_BackupFileEntry()
            e.file = f.file; e.sha256 = f.sha256; e.sizeBytes = f.sizeBytes
            return e
        }
        return m
    }
}

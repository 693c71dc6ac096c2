internal import CSQLite
import Crypto
import Foundation

/// What a backup directory holds (docs/operations.md "Back up and restore"):
///
///     <dir>/stores/<store id>.sqlite   one file per store, each a consistent copy (VACUUM INTO)
///     <dir>/catalog.sqlite             the server-wide databases, under their data-directory
///     <dir>/keyvalue.sqlite            names (a backup of every store only): store names,
///     <dir>/credentials.sqlite         every account's key-value entries, accounts and API
///                                      keys (no sessions: `Credentials.backup`)
///     <dir>/manifest.json              written last, after every file above is synced
///
/// The manifest is the commit point: a directory without one is an interrupted backup (a crash
/// or kill -9 mid-copy) and is never restored. Each file's SHA-256 and size are in it, so a
/// file changed or cut short since is refused too.
public struct BackupManifest: Codable, Sendable, Equatable {
    /// Bumped when a restore could no longer read an older layout.
    public static let currentFormatVersion = 1
    public static let fileName = "manifest.json"

    /// One store file of the backup.
    public struct StoreEntry: Codable, Sendable, Equatable {
        public var account: String
        /// Lower-case UUID; also the file's name (`file`).
        public var storeID: String
        public var name: String
        /// The generation the copy holds: every save acknowledged before the backup began is at
        /// or below it.
        public var generation: Int64
        /// The store's epoch when copied (a restore gives the store a new one: docs/operations.md).
        public var epoch: UInt64
        public var file: String
        public var sha256: String
        public var sizeBytes: Int64

        public init(account: String, storeID: String, name: String, generation: Int64, epoch: UInt64, file: String, sha256: String, sizeBytes: Int64) {
            self.account = account; self.storeID = storeID; self.name = name; self.generation = generation
            self.epoch = epoch; self.file = file; self.sha256 = sha256; self.sizeBytes = sizeBytes
        }

        enum CodingKeys: String, CodingKey {
            case account, storeID = "store_id", name, generation, epoch, file, sha256, sizeBytes = "size_bytes"
        }
    }

    /// A server-wide database copied whole (the catalog, the key-value store); `file` is also
    /// its name in a data directory.
    public struct FileEntry: Codable, Sendable, Equatable {
        public var file: String
        public var sha256: String
        public var sizeBytes: Int64

        public init(file: String, sha256: String, sizeBytes: Int64) { self.file = file; self.sha256 = sha256; self.sizeBytes = sizeBytes }

        enum CodingKeys: String, CodingKey { case file, sha256, sizeBytes = "size_bytes" }
    }

    public var formatVersion: Int
    public var serverVersion: String
    /// ISO 8601, UTC, when the backup finished.
    public var createdAt: String
    public var stores: [StoreEntry]
    /// The server-wide databases; a backup of the whole server only (then `stores` is every
    /// store it had), empty for a backup of one store.
    public var databases: [FileEntry]

    public var isFullBackup: Bool { databases.contains { $0.file == BackupFiles.catalogFile } }

    // The file's keys are snake_case, spelled out: the format is read by other tools too.
    enum CodingKeys: String, CodingKey {
        case formatVersion = "format_version", serverVersion = "server_version", createdAt = "created_at", stores, databases
    }

    public init(serverVersion: String, stores: [StoreEntry], databases: [FileEntry]) {
        formatVersion = Self.currentFormatVersion
        self.serverVersion = serverVersion
        createdAt = ISO8601DateFormatter().string(from: Date())
        self.stores = stores
        self.databases = databases
    }
}

/// Why a backup directory cannot be written to or restored from. The services layer gives each
/// its gRPC status; the storage layer knows none.
public enum BackupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A backup goes only into a new or empty directory (it never mixes with an older one).
    case directoryNotEmpty(String)
    /// No manifest: the backup never finished.
    case incomplete(String)
    /// A file's checksum or size differs from the manifest's (or the file is gone).
    case checksumMismatch(file: String)
    /// A manifest this server cannot read.
    case unreadableManifest(String)
    /// Not a directory path this server can use (relative, or unusable).
    case badDirectory(String)

    public var description: String {
        switch self {
        case .directoryNotEmpty(let d): "backup directory \(d) exists and is not empty; back up into a new or empty directory"
        case .incomplete(let d): "\(d) holds no \(BackupManifest.fileName): the backup did not finish (interrupted or still running) and cannot be restored"
        case .checksumMismatch(let f): "\(f) does not match the backup manifest's SHA-256 and size: the backup was changed or damaged since it was taken"
        case .unreadableManifest(let why): "the backup manifest cannot be read: \(why)"
        case .badDirectory(let why): why
        }
    }
}

/// Reading and writing backup directories (the copies themselves are `Store.backup`,
/// `Catalog.backup`, `KeyValueStore.backup`, each through its own SQLite connection).
public enum BackupFiles {
    public static let storesFolder = "stores"
    public static let catalogFile = "catalog.sqlite"
    public static let keyValueFile = "keyvalue.sqlite"
    public static let credentialsFile = "credentials.sqlite"

    public static func storeFile(_ id: UUID) -> String { storesFolder + "/" + id.uuidString.lowercased() + ".sqlite" }

    /// Creates `dir` (and its `stores` folder), or accepts it if it exists and is empty.
    public static func prepare(_ dir: String) throws {
        guard dir.hasPrefix("/") else { throw BackupError.badDirectory("the backup directory must be an absolute path on the server, not \"\(dir)\"") }
        let fm = FileManager.default
        var isDir: ObjCBool = false
        if fm.fileExists(atPath: dir, isDirectory: &isDir) {
            guard isDir.boolValue else { throw BackupError.badDirectory("\(dir) exists and is not a directory") }
            guard try fm.contentsOfDirectory(atPath: dir).isEmpty else { throw BackupError.directoryNotEmpty(dir) }
        }
        try fm.createDirectory(atPath: dir + "/" + storesFolder, withIntermediateDirectories: true)
    }

    /// Syncs `file` and returns its SHA-256 (hex) and size: a file is in the manifest only once
    /// it is on disk.
    public static func seal(_ dir: String, _ file: String) throws -> (sha256: String, size: Int64) {
        let path = dir + "/" + file
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StorageError(.io, "cannot open \(path): errno \(errno)") }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw StorageError(.io, "cannot sync \(path): errno \(errno)") }
        return try digest(fd: fd, path: path)
    }

    /// SHA-256 (hex) and size of `path`.
    public static func digest(_ path: String) throws -> (sha256: String, size: Int64) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StorageError(.notFound, "cannot open \(path): errno \(errno)") }
        defer { Glibc.close(fd) }
        return try digest(fd: fd, path: path)
    }

    private static func digest(fd: Int32, path: String) throws -> (sha256: String, size: Int64) {
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var size: Int64 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(size)) }
            if n < 0 { if errno == EINTR { continue }; throw StorageError(.io, "cannot read \(path): errno \(errno)") }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            size += Int64(n)
        }
        return (hasher.finalize().hex, size)
    }

    /// Writes the manifest — the backup's commit point — atomically: a temporary file, synced,
    /// renamed over the final name, and the directory synced.
    public static func writeManifest(_ manifest: BackupManifest, to dir: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(manifest)
        let tmp = dir + "/." + BackupManifest.fileName + ".tmp"
        guard FileManager.default.createFile(atPath: tmp, contents: data) else { throw StorageError(.io, "cannot write \(tmp)") }
        _ = try seal(dir, "." + BackupManifest.fileName + ".tmp")
        guard rename(tmp, dir + "/" + BackupManifest.fileName) == 0 else { throw StorageError(.io, "cannot rename \(tmp): errno \(errno)") }
        let dfd = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); Glibc.close(dfd) }
    }

    /// Reads the manifest of `dir` and checks every file it names against its checksum and size.
    public static func load(_ dir: String) throws -> BackupManifest {
        let path = dir + "/" + BackupManifest.fileName
        guard let data = FileManager.default.contents(atPath: path) else {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
                throw BackupError.badDirectory("no backup directory \(dir)")
            }
            throw BackupError.incomplete(dir)
        }
        let manifest: BackupManifest
        do { manifest = try JSONDecoder().decode(BackupManifest.self, from: data) } catch {
            throw BackupError.unreadableManifest("\(error)")
        }
        guard manifest.formatVersion == BackupManifest.currentFormatVersion else {
            throw BackupError.unreadableManifest("format version \(manifest.formatVersion); this server reads version \(BackupManifest.currentFormatVersion)")
        }
        var files = manifest.stores.map { ($0.file, $0.sha256, $0.sizeBytes) }
        for f in manifest.databases {
            // restored under this name into a data directory: a plain file name only
            guard !f.file.contains("/") else { throw BackupError.unreadableManifest("database file \(f.file) is not a plain file name") }
            files.append((f.file, f.sha256, f.sizeBytes))
        }
        for (file, sha, size) in files {
            // names come from this format only: a manifest may not point outside its directory
            guard !file.contains(".."), !file.hasPrefix("/"), let actual = try? digest(dir + "/" + file),
                  actual.sha256 == sha, actual.size == size else { throw BackupError.checksumMismatch(file: file) }
        }
        return manifest
    }

    /// Copies a closed, standalone SQLite file (a backup's copy of a server-wide database) into a new
    /// database at `destination` with SQLite's backup API, in WAL mode like the server's own.
    public static func copyDatabase(from source: String, to destination: String) throws {
        var src: OpaquePointer?
        guard sqlite3_open_v2(source, &src, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let src else {
            if let src { sqlite3_close_v2(src) }
            throw StorageError(.notFound, "cannot open \(source)")
        }
        defer { sqlite3_close_v2(src) }
        let dst = try Connection(path: destination, readOnly: false, vfs: nil, busyTimeoutMS: 5000)
        defer { dst.close() }
        try dst.backup(from: src)
        try dst.exec("PRAGMA journal_mode=WAL")
    }
}

extension Connection {
    /// Copies every page of `source`'s main database into this connection's (SQLite's backup
    /// API, in one step: the destination is not open elsewhere).
    func backup(from source: OpaquePointer) throws {
        guard let b = sqlite3_backup_init(db, "main", source, "main") else { throw error(sqlite3_errcode(db), sql: "backup") }
        let rc = sqlite3_backup_step(b, -1)
        sqlite3_backup_finish(b)
        guard rc == SQLITE_DONE else { throw error(rc, sql: "backup") }
    }
}

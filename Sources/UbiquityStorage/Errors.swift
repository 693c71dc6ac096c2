internal import CSQLite
import Foundation

/// The one error type of the storage engine. `reason` is stable (services map it to a gRPC
/// status, see docs/storage.md "Error mapping"); SQLite's primary and extended result codes are
/// kept when the error came from SQLite.
public struct StorageError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Reason: Sendable, Equatable {
        case generationExpired
        case storeReplaced
        /// A well-formed token of another store (its ID): the services decide whether that store
        /// was this one's predecessor under the same name (STORE_REPLACED) or another (BAD_TOKEN).
        case tokenOfAnotherStore(UUID)
        case generationNotReached
        case historyExpired
        case mergeConflict([ConflictRecord])
        case constraintConflict([ConflictRecord])
        case validationFailed([ValidationIssue])
        case notFound
        case busy
        case full
        case corrupt
        case io
        case readOnly
        case modelVersionMismatch
        /// The store has no model yet (RegisterModel first): every read and write needs one.
        case noModel
        case migrationNotInferable([String])
        case invalidArgument
        case cancelled
        case storeClosed
        case directoryLocked
        case internalError

        /// A short stable name (used as `ErrorInfo.reason` by the services layer).
        public var name: String {
            switch self {
            case .generationExpired: "GENERATION_EXPIRED"
            case .storeReplaced: "STORE_REPLACED"
            case .tokenOfAnotherStore: "BAD_TOKEN"
            case .generationNotReached: "GENERATION_NOT_REACHED"
            case .historyExpired: "HISTORY_EXPIRED"
            case .mergeConflict: "MERGE_CONFLICT"
            case .constraintConflict: "CONSTRAINT_CONFLICT"
            case .validationFailed: "VALIDATION_FAILED"
            case .notFound: "NOT_FOUND"
            case .busy: "BUSY"
            case .full: "STORAGE_FULL"
            case .corrupt: "CORRUPT"
            case .io: "IO_ERROR"
            case .readOnly: "READ_ONLY"
            case .modelVersionMismatch: "MODEL_VERSION_MISMATCH"
            case .noModel: "NO_MODEL"
            case .migrationNotInferable: "MIGRATION_NOT_INFERABLE"
            case .invalidArgument: "INVALID_ARGUMENT"
            case .cancelled: "CANCELLED"
            case .storeClosed: "STORE_CLOSED"
            case .directoryLocked: "DATA_DIRECTORY_LOCKED"
            case .internalError: "INTERNAL"
            }
        }
    }

    public var reason: Reason
    public var message: String
    /// SQLite primary result code (extended & 0xff), if the error came from SQLite.
    public var sqlitePrimaryCode: Int32? { sqliteExtendedCode.map { $0 & 0xff } }
    /// SQLite extended result code, if the error came from SQLite.
    public var sqliteExtendedCode: Int32?
    /// The SQL that failed (never in `description`: it may carry identifiers only, but stays out of logs by default).
    public var sql: String?
    /// With `.historyExpired`: what the client can do instead (`HistoryExpiredDetails`).
    public var historyExpiry: HistoryExpiry?

    public init(_ reason: Reason, _ message: String, sqliteCode: Int32? = nil, sql: String? = nil) {
        self.reason = reason
        self.message = message
        self.sqliteExtendedCode = sqliteCode
        self.sql = sql
    }

    public var description: String {
        var s = "\(reason.name): \(message)"
        if let c = sqliteExtendedCode { s += " (sqlite \(c & 0xff)/\(c))" }
        if case .validationFailed(let issues) = reason { s += " " + issues.map(\.description).joined(separator: "; ") }
        if case .migrationNotInferable(let why) = reason { s += " " + why.joined(separator: "; ") }
        return s
    }

    /// Maps a SQLite result code to a reason (primary code decides).
    static func sqlite(_ rc: Int32, _ msg: String, sql: String?) -> StorageError {
        let reason: Reason
        switch rc & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED: reason = .busy
        case SQLITE_FULL: reason = .full
        case SQLITE_CORRUPT, SQLITE_NOTADB: reason = .corrupt
        case SQLITE_IOERR, SQLITE_CANTOPEN: reason = .io
        case SQLITE_CONSTRAINT: reason = .constraintConflict([])
        case SQLITE_READONLY: reason = .readOnly
        case SQLITE_INTERRUPT: reason = .cancelled
        case SQLITE_AUTH: reason = .invalidArgument
        case SQLITE_NOMEM, SQLITE_MISUSE, SQLITE_INTERNAL: reason = .internalError
        default: reason = .internalError
        }
        return StorageError(reason, msg, sqliteCode: rc, sql: sql)
    }

    public static func invalid(_ msg: String) -> StorageError { StorageError(.invalidArgument, msg) }

    /// `.historyExpired` for a position before `expiry.oldestRetained`.
    static func historyExpired(_ expiry: HistoryExpiry, _ msg: String) -> StorageError {
        var e = StorageError(.historyExpired, msg)
        e.historyExpiry = expiry
        return e
    }
    static var noModelYet: StorageError { StorageError(.noModel, "the store has no model yet: call Models.RegisterModel first") }

    /// At most this many issues are listed in a validation failure (its message counts them
    /// all), so a request with many bad values gets a bounded answer. 20: grpcio refuses
    /// trailers over 8 KiB by default, and each issue travels in `grpc-status-details-bin`
    /// (base64) with its field, description and reason.
    public static let maxReportedIssues = 20

    /// `.validationFailed` with the first `maxReportedIssues` of `issues`; `paths` gives the
    /// listed ones their request paths (only those: the work is bounded too).
    static func validationFailed(_ issues: [ValidationIssue], _ what: String, paths: (inout [ValidationIssue]) -> Void) -> StorageError {
        var listed = Array(issues.prefix(maxReportedIssues))
        paths(&listed)
        let n = issues.count
        let rest = n > listed.count ? "; the first \(listed.count) are listed" : ""
        return StorageError(.validationFailed(listed), "\(what) (\(n) issue\(n == 1 ? "" : "s")\(rest))")
    }
}

/// One precise problem with a save or a model.
public struct ValidationIssue: Codable, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Codable, Sendable {
        case unknownEntity, unknownProperty, abstractEntity, wrongType, missingRequired, belowMinimum, aboveMaximum
        case tooLarge, outOfRange, relationshipTargetMissing, relationshipWrongEntity, tooFewObjects, tooManyObjects
        case deleteDenied, objectNotFound, duplicateTemporaryID, unknownTemporaryID, invalidModel, invalidName
    }
    public var code: Code
    /// Object ID (URI) or temporary ID the issue is about, if any.
    public var object: String?
    public var entity: String?
    public var property: String?
    public var message: String
    /// Where in the save request the problem is (`inserts[2].values.age`,
    /// `updates[0].relationships.owner`, `deletes[1]`), when it is about one of the request's
    /// changes; set by the save when it fails (`SaveTxn.locate`). The field names are those of
    /// `SaveRequest`, which are the Stores.Save request's.
    public var field: String?

    public init(_ code: Code, object: String? = nil, entity: String? = nil, property: String? = nil, _ message: String) {
        self.code = code; self.object = object; self.entity = entity; self.property = property; self.message = message
    }
    public var description: String {
        "[\(code.rawValue)] " + [entity, property].compactMap { $0 }.joined(separator: ".") + (object.map { " (\($0))" } ?? "") + ": " + message
    }
}

/// A conflict between a save and the store (optimistic locking or uniqueness).
public struct ConflictRecord: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case versionChanged, deletedInStore, uniquenessClash }
    public var kind: Kind
    public var objectID: ObjectID?
    /// For uniqueness clashes on insert: the temporary ID of the inserted object.
    public var temporaryID: String?
    public var entity: String
    /// What the client last read (its snapshot or the version it named), as far as known.
    public var clientSnapshot: [String: StorageValue]
    /// The client's changed values.
    public var clientChanges: [String: StorageValue]
    /// The store's current values (empty if deleted).
    public var storeValues: [String: StorageValue]
    public var clientVersion: Int64
    public var storeVersion: Int64
    /// For uniqueness clashes: the constraint's properties.
    public var constraint: [String]
}

/// Why a history position expired and what is left: the oldest position history can be read
/// after, the current generation (read a baseline at it, then follow from it), and whether the
/// tombstone index still holds every deletion after the expired position (`Store.deletions`).
public struct HistoryExpiry: Sendable, Equatable {
    public var oldestRetained: GenerationToken
    public var current: GenerationToken
    public var deletionsAvailable: Bool
}

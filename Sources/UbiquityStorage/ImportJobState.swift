import Foundation

/// What a first-sign-in import did (changes.proto `ImportCounts`). Every local object is counted
/// once: `inserted + merged + deduplicated` is the number of local objects.
public struct ImportJobCounts: Sendable, Equatable {
    /// Local objects that became new objects of the account's store.
    public var inserted: Int64 = 0
    /// Local objects merged into an object the account's store already had (a uniqueness clash).
    public var merged: Int64 = 0
    /// Local objects merged into another local object of the same import (duplicates within the
    /// local store, by the model's uniqueness constraints).
    public var deduplicated: Int64 = 0

    /// Local key-value entries moved into the account (keys it did not have set).
    public var keyValuesMoved: Int64 = 0
    /// Local key-value entries of keys the account already had set: the account's value kept.
    public var keyValuesKept: Int64 = 0

    public init(inserted: Int64 = 0, merged: Int64 = 0, deduplicated: Int64 = 0, keyValuesMoved: Int64 = 0, keyValuesKept: Int64 = 0) {
        self.inserted = inserted
        self.merged = merged
        self.deduplicated = deduplicated
        self.keyValuesMoved = keyValuesMoved
        self.keyValuesKept = keyValuesKept
    }

    /// The counts of one store's import save: its inserts that clashed on a uniqueness constraint
    /// (`resolvedConflicts`) were merged — into an object this save created (deduplicated) or
    /// into one that was there before (merged); the rest were inserted. A replayed save's stored
    /// result gives the same counts.
    public init(result: SaveResult, objects: Int) {
        let clashes = result.resolvedConflicts.filter { $0.kind == .uniquenessClash && $0.temporaryID != nil }
        let clashed = Set(clashes.compactMap(\.temporaryID))
        var created = Set<ObjectID>()
        for (temp, id) in result.permanentIDs where !clashed.contains(temp) { created.insert(id) }
        for c in clashes {
            if let target = c.objectID, created.contains(target) { deduplicated += 1 } else { merged += 1 }
        }
        inserted = Int64(objects) - merged - deduplicated
    }

    public static func + (a: Self, b: Self) -> Self {
        Self(inserted: a.inserted + b.inserted, merged: a.merged + b.merged, deduplicated: a.deduplicated + b.deduplicated,
             keyValuesMoved: a.keyValuesMoved + b.keyValuesMoved, keyValuesKept: a.keyValuesKept + b.keyValuesKept)
    }
}

/// Where a first-sign-in import job stands (`Credentials.ImportJob`). It moves forward only, and
/// each state is committed to credentials.sqlite before the work of the next begins, so a
/// process killed anywhere restarts from the last committed state and redoes only idempotent
/// work:
///
/// 1. `importing` — recorded, the device's local sessions revoked in the same transaction. Each
///    local store is copied into the account's store of the same name in one save whose client
///    transaction ID is the job's: a copy that committed before a crash is replayed (its stored
///    result), never applied twice.
/// 2. `imported(counts, stores)` — every copy committed; the object counts are final, and so is the list
///    of the account's stores the copies went to (the DID_CHANGE goes there, and the local
///    stores naming them are about to go). The local key-value entries are moved into the
///    account's (one SQLite transaction: moved entirely or not at all, so a redo finds nothing
///    left to move), then the local stores are destroyed (pools closed first) and forgotten;
///    destroying a store already gone is a no-op.
/// 3. `removed(counts, stores)` — nothing local is left; the counts now include the key-value
///    entries moved and kept (the move records them in keyvalue.sqlite, so a redo after a kill
///    between the move and this state still reports them). StoresDidChange(INITIAL_IMPORT_COMPLETED)
///    with the counts is appended to each of `stores`, each append idempotent under the job's ID
///    (`Store.appendEvent(_:once:)`): a redo after a kill between two appends writes only the
///    missing ones, so every store gets exactly one, whether the SignIn or a restart finished it.
/// 4. `done(counts)` — announced; the device's registration is gone.
public enum ImportJobState: Sendable, Equatable {
    case importing
    case imported(ImportJobCounts, stores: [UUID])
    case removed(ImportJobCounts, stores: [UUID])
    case done(ImportJobCounts)

    /// The work to run from this state (at once, or after a restart).
    public enum Step: Sendable, Equatable {
        case copyLocalStores
        case removeLocalStores
        case announce
        case none
    }

    public var step: Step {
        switch self {
        case .importing: .copyLocalStores
        case .imported: .removeLocalStores
        case .removed: .announce
        case .done: .none
        }
    }

    public var isDone: Bool { if case .done = self { true } else { false } }

    /// The final counts, once every copy committed.
    public var counts: ImportJobCounts? {
        switch self {
        case .importing: nil
        case .imported(let c, _), .removed(let c, _), .done(let c): c
        }
    }

    /// The account's stores the copies went to (where DID_CHANGE is announced); empty before the
    /// copies committed and once announced.
    public var stores: [UUID] {
        switch self {
        case .imported(_, let s), .removed(_, let s): s
        case .importing, .done: []
        }
    }

    public struct InvalidTransition: Error, Equatable {
        public let from: ImportJobState
        public let event: String
    }

    /// Every local store was copied, with these counts, into these stores of the account.
    public mutating func copied(_ counts: ImportJobCounts, into stores: [UUID]) throws {
        guard case .importing = self else { throw InvalidTransition(from: self, event: "copied") }
        self = .imported(counts, stores: stores)
    }

    /// The local key-value entries were moved (`keyValuesMoved` of them into the account,
    /// `keyValuesKept` where the account's value stayed) and the local stores removed.
    public mutating func removed(keyValuesMoved: Int64 = 0, keyValuesKept: Int64 = 0) throws {
        guard case .imported(var c, let s) = self else { throw InvalidTransition(from: self, event: "removed") }
        c.keyValuesMoved = keyValuesMoved
        c.keyValuesKept = keyValuesKept
        self = .removed(c, stores: s)
    }

    /// Every store of the account the import wrote into has its DID_CHANGE.
    public mutating func announced() throws {
        guard case .removed(let c, _) = self else { throw InvalidTransition(from: self, event: "announced") }
        self = .done(c)
    }

    /// Its `ubq_import_jobs.state` text.
    var column: String {
        switch self {
        case .importing: "importing"
        case .imported: "imported"
        case .removed: "removed"
        case .done: "done"
        }
    }

    /// Its `ubq_import_jobs.stores` text: the store IDs, space-separated.
    var storesColumn: String { stores.map(\.uuidString).joined(separator: " ") }

    /// From its columns; an unknown state text (a newer server's) restarts the copy, which is
    /// idempotent.
    init(column: String, counts: ImportJobCounts, stores: String = "") {
        let ids = stores.split(separator: " ").compactMap { UUID(uuidString: String($0)) }
        switch column {
        case "imported": self = .imported(counts, stores: ids)
        case "removed": self = .removed(counts, stores: ids)
        case "done": self = .done(counts)
        default: self = .importing
        }
    }
}

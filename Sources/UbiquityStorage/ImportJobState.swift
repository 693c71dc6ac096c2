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

    public init(inserted: Int64 = 0, merged: Int64 = 0, deduplicated: Int64 = 0) {
        self.inserted = inserted
        self.merged = merged
        self.deduplicated = deduplicated
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
        Self(inserted: a.inserted + b.inserted, merged: a.merged + b.merged, deduplicated: a.deduplicated + b.deduplicated)
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
/// 2. `imported(counts)` — every copy committed; the counts are final. The local stores are
///    destroyed (pools closed first) and forgotten; destroying a store already gone is a no-op.
/// 3. `done(counts)` — the local files and the device's registration are gone.
public enum ImportJobState: Sendable, Equatable {
    case importing
    case imported(ImportJobCounts)
    case done(ImportJobCounts)

    /// The work to run from this state (at once, or after a restart).
    public enum Step: Sendable, Equatable {
        case copyLocalStores
        case removeLocalStores
        case none
    }

    public var step: Step {
        switch self {
        case .importing: .copyLocalStores
        case .imported: .removeLocalStores
        case .done: .none
        }
    }

    public var isDone: Bool { if case .done = self { true } else { false } }

    /// The final counts, once every copy committed.
    public var counts: ImportJobCounts? {
        switch self {
        case .importing: nil
        case .imported(let c), .done(let c): c
        }
    }

    public struct InvalidTransition: Error, Equatable {
        public let from: ImportJobState
        public let event: String
    }

    /// Every local store was copied, with these counts.
    public mutating func copied(_ counts: ImportJobCounts) throws {
        guard case .importing = self else { throw InvalidTransition(from: self, event: "copied") }
        self = .imported(counts)
    }

    /// The local stores were removed.
    public mutating func removed() throws {
        guard case .imported(let c) = self else { throw InvalidTransition(from: self, event: "removed") }
        self = .done(c)
    }

    /// Its `ubq_import_jobs.state` text.
    var column: String {
        switch self {
        case .importing: "importing"
        case .imported: "imported"
        case .done: "done"
        }
    }

    /// From its column and the counts columns; an unknown text (a newer server's) restarts the
    /// copy, which is idempotent.
    init(column: String, counts: ImportJobCounts) {
        switch column {
        case "imported": self = .imported(counts)
        case "done": self = .done(counts)
        default: self = .importing
        }
    }
}

import Foundation

/// What inserts need of an entity, looked up once per entity and save. A class: each prepared
/// insert refers to it without copying its tables (immutable after init, so Sendable).
final class InsertEntity: Sendable {
    let isAbstract: Bool
    let attributes: [String: AttributeDefinition]
    /// Own and inherited uniqueness constraints, in the order they are checked.
    let constraints: [[String]]
    let root: String
    /// Each attribute has a slot: its index in `slotNames`/`slotAttributes`, which list the
    /// attributes in `attributes`' iteration order (the order defaults and missing-value issues
    /// have always been produced in).
    let slot: [String: Int]
    let slotNames: [String]
    let slotAttributes: [AttributeDefinition]
    /// For each column of the root table after the fixed ones: the slot of the attribute it stores
    /// for this entity and its type (nil: another entity's column or a relationship column, NULL
    /// on insert).
    let columns: [(slot: Int, type: AttributeType)?]
    /// Every attribute name, sorted: the changed properties of an insert that sets them all.
    let sortedNames: [String]

    init(isAbstract: Bool, attributes: [String: AttributeDefinition], constraints: [[String]], root: String, rootColumns: [String]) {
        self.isAbstract = isAbstract; self.attributes = attributes; self.constraints = constraints; self.root = root
        var slot: [String: Int] = [:]
        for (i, k) in attributes.keys.enumerated() { slot[k] = i }
        let slotAttributes = Array(attributes.values)
        self.slot = slot
        slotNames = Array(attributes.keys)
        self.slotAttributes = slotAttributes
        slotChecks = slotAttributes.map { ($0.type, $0.minimum == nil && $0.maximum == nil) }
        columns = rootColumns.map { c in
            guard c.hasPrefix("a_"), let i = slot[String(c.dropFirst(2))] else { return nil }
            return (i, slotAttributes[i].type)
        }
        sortedNames = attributes.keys.sorted()
    }

    /// Per slot: the attribute's type and whether it has no bound (`passesCheck`).
    let slotChecks: [(type: AttributeType, unbounded: Bool)]

    /// True when `checkValue` finds nothing wrong with `v` for the attribute in `slot`, decided
    /// without copying its definition: not null, the right type, within the size limit, and the
    /// attribute has no bound (checkValue stops there too). False: run `checkValue`.
    func passesCheck(_ slot: Int, _ v: StorageValue, maxValueBytes: Int) -> Bool {
        let c = slotChecks[slot]
        guard c.unbounded, !v.isNull, ResolvedModel.typeError(c.type, v) == nil else { return false }
        switch v {
        case .string(let s), .uri(let s): return s.utf8.count <= maxValueBytes
        case .binary(let d): return d.count <= maxValueBytes
        default: return true
        }
    }

    /// The slot of attribute `name`, nil if the entity has none. A small entity's names are
    /// scanned (`==` on short names costs less than hashing the name); the same String equality
    /// as the `slot` dictionary's, so the same answer (InsertPreparerTests).
    func slotIndex(_ name: String) -> Int? {
        if slotNames.count <= 8 {
            for i in slotNames.indices where slotNames[i] == name { return i }
            return nil
        }
        return slot[name]
    }
}

/// The part of an insert that depends only on the model, the configuration and the request, not
/// on the store's contents: the issues found without the store, the values with defaults, the
/// row's column values, the history's changed properties. Computed on the saving caller's thread
/// before the save is queued (`Store.save`, docs/storage.md concurrency rule 12) so the writer thread only
/// does what needs the current state; computed on the writer when the model changed meanwhile or
/// a planner built the request.
struct PreparedInsert: Sendable {
    /// Unknown or abstract entity, value and relationship-name issues, missing required values, in
    /// the order the save reports them. Non-empty: nothing else is set.
    var issues: [ValidationIssue] = []
    var info: InsertEntity?
    var full: [String: StorageValue] = [:]
    /// The insert's values for the root table's columns after the five fixed ones.
    var columnArgs: [SQLValue] = []
    var changedProperties: [String] = []
}

/// A save's prepared inserts and the model they were prepared against (used only if the writer
/// still has that model).
struct PreparedSave: Sendable {
    let model: ResolvedModel
    let inserts: [PreparedInsert]
    /// Nothing but SQLite can make this save fail once it has written a row, so the writer runs
    /// it without a savepoint (docs/storage.md, group commit): only inserts, each without issues,
    /// relationships, uniqueness constraints or checked relationship counts, distinct temporary
    /// IDs, no dry run, no client transaction ID (no replay to roll back), the model hash (if
    /// given) this model's. What fails after that is SQLite's (I/O, disk full, interrupt), and
    /// the group fails as a whole, as it does when SQLite ends the transaction itself.
    var needsNoSavepoint = false
    /// For a save that needs no savepoint: its history record with a gap for each insert's pk
    /// (insert i gets pk `firstNewPK + i`), filled in by the writer (`HistoryJSON.fill`).
    var history: PreparedHistory?
}

struct InsertPreparer {
    let model: ResolvedModel
    let config: StorageConfiguration
    let checker: ValueChecker
    var infos: [String: InsertEntity] = [:]
    var last: (String, InsertEntity)?
    /// Scratch for the insert being prepared: each known attribute's value by slot (the entity's
    /// plan), so nothing below hashes a name. Reused from insert to insert (cleared first).
    var slots: [StorageValue?] = []

    init(model: ResolvedModel, config: StorageConfiguration) {
        self.model = model; self.config = config; checker = ValueChecker(model: model, config: config)
    }

    mutating func prepare(_ ins: InsertOperation) -> PreparedInsert {
        let obj = ins.temporaryID
        var p = PreparedInsert()
        let ent: InsertEntity
        if let l = last, l.0 == ins.entity { ent = l.1 } else if let e = infos[ins.entity] { ent = e; last = (ins.entity, e) } else {
            guard let def = model.entities[ins.entity] else {
                p.issues.append(ValidationIssue(.unknownEntity, object: obj, entity: ins.entity, "no entity \(ins.entity)")); return p
            }
            let root = model.root[ins.entity] ?? ""
            let e = InsertEntity(isAbstract: def.isAbstract, attributes: model.attributes[ins.entity]!,
                                 constraints: model.chain[ins.entity]!.flatMap { model.entities[$0]!.uniquenessConstraints }, root: root,
                                 rootColumns: model.columns[root] ?? [])
            infos[ins.entity] = e; last = (ins.entity, e); ent = e
        }
        if ent.isAbstract { p.issues.append(ValidationIssue(.abstractEntity, object: obj, entity: ins.entity, "\(ins.entity) is abstract")); return p }
        let n = ent.slotNames.count
        if slots.count == n { for i in 0..<n { slots[i] = nil } } else { slots = [StorageValue?](repeating: nil, count: n) }
        checker.checkValues(ent, ins.entity, ins.values, object: obj, slots: &slots, into: &p.issues)
        if !ins.relationships.isEmpty { checker.checkRelationshipNames(ins.entity, ins.relationships, object: obj, into: &p.issues) }
        var full = ins.values
        for i in slots.indices where slots[i]?.isNull ?? true {
            if let d = ent.slotAttributes[i].defaultValue, !d.isNull { full[ent.slotNames[i]] = d; slots[i] = d }
            else if !ent.slotAttributes[i].optional, ins.values[ent.slotNames[i]] == nil {
                // (an explicit null was reported by checkValues already: one issue per attribute)
                let k = ent.slotNames[i]
                p.issues.append(ValidationIssue(.missingRequired, object: obj, entity: ins.entity, property: k, "\(k) is required"))
            }
        }
        if !p.issues.isEmpty { return p }
        p.columnArgs.reserveCapacity(ent.columns.count)
        for c in ent.columns {
            if let c, let v = slots[c.slot] { p.columnArgs.append(ResolvedModel.toSQL(v, c.type)) } else { p.columnArgs.append(.null) }
        }
        // no issues: every key of `full` is an attribute, so all of them when the counts agree
        p.changedProperties = ins.relationships.isEmpty && full.count == ent.sortedNames.count
            ? ent.sortedNames : (Array(full.keys) + Array(ins.relationships.keys)).sorted()
        p.info = ent
        p.full = full
        return p
    }

    /// All of a request's inserts, in order. With `storeID`, a save of new objects only
    /// (`needsNoSavepoint`) also gets its history record, without its pks (`PreparedHistory`).
    static func prepare(_ req: SaveRequest, model: ResolvedModel, config: StorageConfiguration, storeID: UUID? = nil) -> PreparedSave {
        var preparer = InsertPreparer(model: model, config: config)
        var p = PreparedSave(model: model, inserts: req.inserts.map { preparer.prepare($0) })
        p.needsNoSavepoint = needsNoSavepoint(req, p.inserts, model: model)
        if p.needsNoSavepoint, let storeID {
            p.history = HistoryJSON.prepareInserts(storeID: storeID, count: req.inserts.count) { (req.inserts[$0].entity, p.inserts[$0].changedProperties) }
        }
        return p
    }

    /// See `PreparedSave.needsNoSavepoint`. Runs on the saving caller's thread.
    static func needsNoSavepoint(_ req: SaveRequest, _ inserts: [PreparedInsert], model: ResolvedModel) -> Bool {
        guard !req.inserts.isEmpty, req.updates.isEmpty, req.deletes.isEmpty, !req.dryRun, req.clientTransactionID == nil,
              req.modelVersionHash.map({ $0 == model.hash }) ?? true, inserts.count == req.inserts.count else { return false }
        var ids = Set<String>()
        ids.reserveCapacity(req.inserts.count)
        var checked: InsertEntity?
        for (ins, p) in zip(req.inserts, inserts) {
            guard p.issues.isEmpty, let e = p.info, ins.relationships.isEmpty, ids.insert(ins.temporaryID).inserted else { return false }
            if e !== checked {
                guard e.constraints.isEmpty, !model.countChecked.contains(ins.entity) else { return false }
                checked = e
            }
        }
        return true
    }
}

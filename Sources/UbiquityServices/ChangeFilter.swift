import Foundation
import UbiquityProtos
import UbiquityStorage

/// A subscriber's or history reader's `ChangeFilter`, checked against the store's model once and
/// applied to each transaction: which changes pass, and in which shape they are sent.
struct ChangeSelection: Sendable {
    /// Entities (with their sub-entities) whose changes pass; nil: every entity.
    let entities: Set<String>?
    let excludedAuthors: Set<String>
    let includeValues: Bool
    let includeTombstones: Bool

    /// Whether this selection passes everything names-only (the shape every such subscriber
    /// shares, so its encoding is cached per transaction).
    var isEverythingNamesOnly: Bool { entities == nil && excludedAuthors.isEmpty && !includeValues && !includeTombstones }

    init(_ f: Ubiquity_V1_ChangeFilter, model: ModelInfo?, field: String) throws {
        if f.entities.isEmpty {
            entities = nil
        } else {
            var family: Set<String> = []
            let defs = model?.definition.entities ?? []
            for (i, name) in f.entities.enumerated() {
                guard model == nil || defs.contains(where: { $0.name == name }) else {
                    throw ServiceError.invalid("\(field).entities[\(i)]", "unknown entity \"\(name.prefix(100))\" (the store's model has no such entity)", reason: .unknownEntity)
                }
                family.insert(name)
            }
            // sub-entities: every entity whose parent chain reaches a named one
            let parent = Dictionary(defs.map { ($0.name, $0.parent) }, uniquingKeysWith: { a, _ in a })
            for d in defs {
                var p = d.parent
                var hops = 0
                while let name = p, hops < defs.count {
                    if f.entities.contains(name) { family.insert(d.name); break }
                    p = parent[name] ?? nil
                    hops += 1
                }
            }
            entities = family
        }
        excludedAuthors = Set(f.excludeAuthors)
        includeValues = f.includeValues
        includeTombstones = f.includeTombstones
    }

    /// The changes of `tx` that pass, or nil when the whole transaction is skipped.
    func changes(of tx: HistoryTransaction) -> [HistoryChange]? {
        // a store event is no transaction: Subscribe sends it as a `store_event` before asking
        if tx.event != nil { return nil }
        if let a = tx.author, excludedAuthors.contains(a) { return nil }
        guard let entities else { return tx.changes }
        let kept = tx.changes.filter { entities.contains($0.entity) }
        return kept.isEmpty ? nil : kept
    }
}

/// History transactions as `ubiquity.v1.Transaction` messages (Subscribe and FetchHistory send
/// the same record shape).
enum ChangeEncoding {
    /// The changed values of a transaction's inserts and updates, read once at the transaction's
    /// generation; nil when that version was collected (`values_unavailable`).
    typealias Values = [ObjectID: ObjectSnapshot]?

    static func transaction(_ tx: HistoryTransaction, changes: [HistoryChange], selection: ChangeSelection,
                            values: Values, model: ModelInfo?) -> Ubiquity_V1_Transaction {
        var t = header(tx)
        t.changes = changes.map { change($0, selection: selection, values: values, model: model) }
        return t
    }

    /// Everything of a transaction but its changes.
    static func header(_ tx: HistoryTransaction) -> Ubiquity_V1_Transaction {
        var t = Ubiquity_V1_Transaction()
        t.token = Data(tx.token.bytes)
        t.generation = tx.token.generation
        let ms = (tx.timestamp.timeIntervalSince1970 * 1000).rounded()
        t.commitTime.seconds = Int64((ms / 1000).rounded(.down))
        t.commitTime.nanos = Int32((ms - Double(t.commitTime.seconds) * 1000) * 1_000_000)
        t.author = tx.author ?? ""
        t.contextName = tx.contextName ?? ""
        return t
    }

    static func change(_ c: HistoryChange, selection: ChangeSelection, values: Values, model: ModelInfo?) -> Ubiquity_V1_Change {
        var p = Ubiquity_V1_Change()
        switch c.kind {
        case .insert: p.kind = .insert
        case .update: p.kind = .update
        case .delete: p.kind = .delete
        }
        p.entity = c.entity
        p.objectID = c.objectID.uri
        p.changedProperties = c.changedProperties
        if selection.includeValues && c.kind != .delete {
            if let values, let o = values[c.objectID] {
                for name in c.changedProperties {
                    if let v = o.values[name] {
                        p.values[name] = Convert.protoValue(v, type: model?.type(c.entity, name))
                    } else if let ids = o.relationships[name] {
                        var l = Ubiquity_V1_ObjectIDList()
                        l.objectIds = ids.map(\.uri)
                        p.relationships[name] = l
                    }
                }
            } else {
                p.valuesUnavailable = true
            }
        }
        if selection.includeTombstones, c.kind == .delete, let t = c.tombstone {
            for (k, v) in t { p.tombstone[k] = Convert.protoValue(v, type: model?.type(c.entity, k)) }
        }
        return p
    }

    /// The objects whose values a transaction's passing changes need, read at its generation.
    /// A collected generation (old history) gives nil: every such change says `values_unavailable`.
    static func readValues(_ tx: HistoryTransaction, changes: [HistoryChange], store: Store) async -> Values {
        let ids = changes.filter { $0.kind != .delete }.map(\.objectID)
        if ids.isEmpty { return [:] }
        guard let found = try? await store.objects(ids, at: .token(tx.token)) else { return nil }
        var out: [ObjectID: ObjectSnapshot] = [:]
        for case let o? in found { out[o.id] = o }
        return out
    }
}

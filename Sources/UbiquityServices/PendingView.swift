import Foundation
import UbiquityQuery
import UbiquityStorage

/// What a context sees of its pending changes, with both sides of every relationship kept in
/// step as Core Data keeps them inside a context: a pending change that sets or clears a to-one
/// or edits a to-many also changes the inverse side of the objects it points at (and a to-one
/// target leaves its previous holder). Objects changed only that way are read from the store and
/// reported as pending updates, so fetches and in-memory predicates (`ANY notes…`) see them.
/// The store's save does the same maintenance itself (SaveTxn.setRelationship); this is the view.
struct PendingView {
    /// One relationship of `object` going from `removed` + kept to `added` + kept.
    struct Edit { var object: ObjectID; var name: String; var removed: [ObjectID]; var added: [ObjectID] }

    let model: ModelInfo
    let deleted: Set<ObjectID>
    /// The pending state of every object involved: inserted, updated, or read for an inverse.
    var objects: [ObjectID: ObjectSnapshot] = [:]
    /// Permanent objects whose view now differs from the store (pending updates included).
    var changed: [ObjectID] = []
    var isChanged: Set<ObjectID> = []

    init(model: ModelInfo, deleted: Set<ObjectID>) { self.model = model; self.deleted = deleted }

    /// The edits a change makes: `before` is the object's stored relationships (empty for an
    /// insert), `after` its pending ones (only the relationships the change sets).
    static func edits(_ id: ObjectID, before: [String: [ObjectID]], after: [String: [ObjectID]]) -> [Edit] {
        after.sorted { $0.key < $1.key }.compactMap { name, new in
            let old = before[name] ?? []
            let e = Edit(object: id, name: name, removed: old.filter { !new.contains($0) }, added: new.filter { !old.contains($0) })
            return e.removed.isEmpty && e.added.isEmpty ? nil : e
        }
    }

    mutating func markChanged(_ id: ObjectID) {
        if !id.isTemporary && isChanged.insert(id).inserted { changed.append(id) }
    }

    /// Permanent objects the edits reach that the view does not hold yet: their targets and, for
    /// a to-one inverse, the target's current holder (known once the target is read).
    func missing(_ edits: [Edit]) -> [ObjectID] {
        var out: [ObjectID] = []
        var seen = Set<ObjectID>()
        func need(_ id: ObjectID) { if !id.isTemporary && !deleted.contains(id) && objects[id] == nil && seen.insert(id).inserted { out.append(id) } }
        for e in edits {
            guard let inv = model.inverses[e.object.entity]?[e.name] else { continue }
            for t in e.removed + e.added { need(t) }
            for t in e.added where model.relationships[t.entity]?[inv] == false { objects[t]?.relationships[inv]?.forEach(need) }
        }
        return out
    }

    mutating func apply(_ e: Edit) {
        guard let inv = model.inverses[e.object.entity]?[e.name] else { return }
        for t in e.removed { update(t) { $0.relationships[inv, default: []].removeAll { $0 == e.object } } }
        for t in e.added {
            if model.relationships[t.entity]?[inv] == false {
                // a to-one: t leaves its previous holder, whose relationship loses t
                for previous in objects[t]?.relationships[inv] ?? [] where previous != e.object {
                    update(previous) { $0.relationships[e.name, default: []].removeAll { $0 == t } }
                }
                update(t) { $0.relationships[inv] = [e.object] }
            } else {
                update(t) { if !($0.relationships[inv] ?? []).contains(e.object) { $0.relationships[inv, default: []].append(e.object) } }
            }
        }
    }

    private mutating func update(_ id: ObjectID, _ body: (inout ObjectSnapshot) -> Void) {
        guard !deleted.contains(id), var o = objects[id] else { return }
        body(&o)
        objects[id] = o
        markChanged(id)
    }
}

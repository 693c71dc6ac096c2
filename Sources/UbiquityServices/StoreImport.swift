import UbiquityStorage

/// Copying one store's objects into another as one save (SPEC §3 `ImportStore`, and the
/// first-sign-in import of local stores): each object is inserted under its source URI as a
/// temporary ID and its relationships name their targets the same way, so the save re-links
/// them to the new objects — or, for an insert merged into an existing object through a
/// uniqueness constraint, to that object.
enum StoreImport {
    static func saveRequest(_ dump: StoreDump, deduplicate: Bool, author: String?, contextName: String) -> SaveRequest {
        var s = SaveRequest()
        s.inserts = dump.objects.map { o in
            InsertOperation(temporaryID: o.id.uri, entity: o.id.entity, values: o.values,
                            relationships: o.relationships.mapValues { $0.map { .temporary($0.uri) } })
        }
        s.mergePolicy = deduplicate ? .mergeByPropertyObjectTrump : .error
        s.author = author
        s.contextName = contextName
        return s
    }
}

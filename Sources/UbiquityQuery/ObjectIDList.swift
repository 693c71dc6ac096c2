import Foundation
import UbiquityStorage

/// A list of object IDs of one store held as primary keys: 8 bytes an ID (plus 2 when the list
/// mixes entities) where `[ObjectID]` takes 40 and a string per ID.
///
/// Why: a `FetchStream` lists every result's ID up front and serves them in batches, for as long
/// as the client takes to read; 20,000 results were ~800 KB per open call, and a few hundred slow
/// readers held hundreds of MiB (issue 15, item 5).
struct ObjectIDList {
    let storeID: UUID
    private var entities: [String] = []
    private var pks: [Int64] = []
    /// Index into `entities` for each pk; empty while every ID has `entities[0]`.
    private var entityIndex: [UInt16] = []

    init(_ ids: [ObjectID], storeID: UUID) {
        self.storeID = storeID
        pks.reserveCapacity(ids.count)
        var known: [String: UInt16] = [:]
        for (i, id) in ids.enumerated() {
            precondition(id.storeID == storeID, "an ID list holds one store's IDs")
            let e: UInt16
            if let k = known[id.entity] {
                e = k
            } else {
                precondition(entities.count < Int(UInt16.max), "more entities than a model can have")
                e = UInt16(entities.count)
                known[id.entity] = e
                entities.append(id.entity)
            }
            if e != 0 && entityIndex.isEmpty {
                entityIndex = [UInt16](repeating: 0, count: i)
                entityIndex.reserveCapacity(ids.count)
            }
            if !entityIndex.isEmpty || e != 0 { entityIndex.append(e) }
            pks.append(id.pk)
        }
    }

    var count: Int { pks.count }

    /// The IDs at `range`.
    subscript(range: Range<Int>) -> [ObjectID] {
        range.map { i in
            ObjectID(storeID: storeID, entity: entities[entityIndex.isEmpty ? 0 : Int(entityIndex[i])], pk: pks[i])
        }
    }
}

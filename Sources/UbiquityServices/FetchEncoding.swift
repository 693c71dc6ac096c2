// Fetch results written straight into protobuf wire form (docs/query.md, "Fetch responses"):
// objects through `ObjectEncoding` (from snapshots) or `FetchResponseWriter` (from streamed rows),
// in one pass instead of building messages for SwiftProtobuf. `FetchEncodingTests` and
// `FetchStreamingTests` decode both and require equal messages.
import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

enum FetchEncoding {
    /// `Convert.fetchResults(r, type:model:)` serialized, written directly.
    static func fetchResults(_ r: FetchResult, type: FetchResultType, model: ModelInfo?) throws -> [UInt8] {
        if type == .dictionaries { return try Convert.fetchResults(r, type: type, model: model).serializedBytes() }
        var w = ProtoWriter(capacity: 64 + 160 * (r.objects.count + r.prefetched.count) + (type == .objectIDs ? 80 * r.objectIDs.count : 0))
        let token = r.token.bytes
        if !token.isEmpty { w.bytes(1, token) }
        switch type {
        case .objects:
            for o in r.objects { w.delimited(2) { managedObject(o, model: model, into: &$0) } }
            for o in r.objects { w.objectID(3, o.id) }
        case .objectIDs:
            for id in r.objectIDs { w.objectID(3, id) }
        case .count, .dictionaries:
            break
        }
        if r.count != 0 { w.int64(5, Int64(r.count)) }
        for o in r.prefetched { w.delimited(6) { managedObject(o, model: model, into: &$0) } }
        return w.finishBytes()
    }

    /// `ObjectEncoding.managedObject` with the types of `model`.
    @inline(__always)
    static func managedObject(_ o: ObjectSnapshot, model: ModelInfo?, into w: inout ProtoWriter) {
        let types = model?.attributeTypes[o.id.entity]
        ObjectEncoding.managedObject(o, into: &w, typeOf: { types?[$0] })
    }
}

/// A Fetch response written while the read runs: plan-cached object fetches hand their rows to
/// `objects` (no snapshot, no dictionary per object); `finish` completes the response, or
/// encodes the result the generic way when the fetch did not stream (`objectsStreamed` false).
/// One per call, used by the thread running the fetch only.
///
/// Streamed values are typed by the read's own model (each row's `AttributeSlot.type`, the
/// model's declared type: what `ModelInfo.attributeTypes` holds for the same model), so the
/// handler needs no `ModelInfo` unless the fetch did not stream.
final class FetchResponseWriter: FetchObjectSink {
    /// The response up to the objects, and the `object_ids` fields (written while the objects are).
    private var written: (ProtoWriter, ProtoWriter)?

    init() {}

    deinit { if case let (w, ids)? = written.take() { w.discard(); ids.discard() } }

    /// The wire pieces of one entity's objects, made once and kept with the plan between calls
    /// (`FetchObjectSink` state): the URI prefix of its IDs, its name field, and each attribute's
    /// map-entry key field in `attributes` order, back to back in one buffer.
    final class EntityEncoding {
        let entity: String
        let storeID: UUID
        let attributeCount: Int
        /// `x-ubiquity://<store>/<entity>/`
        let uriPrefix: [UInt8]
        /// Field 2 (`entity`) of a ManagedObject; empty for an empty name.
        let nameField: [UInt8]
        /// Attribute `i`'s key field is `keys[keyStart[i]..<keyStart[i + 1]]`.
        let keys: UnsafeMutableBufferPointer<UInt8>
        let keyStart: UnsafeMutableBufferPointer<Int>

        init(_ row: ObjectRow) {
            entity = row.id.entity
            storeID = row.id.storeID
            attributeCount = row.attributes.count
            uriPrefix = Array("x-ubiquity://\(storeID.lowercasedString)/\(entity)/".utf8)
            nameField = entity.isEmpty ? [] : FetchResponseWriter.stringField(2, entity)
            let fields = row.attributes.map { FetchResponseWriter.stringField(1, $0.name) }
            keys = .allocate(capacity: max(1, fields.reduce(0) { $0 + $1.count }))
            keyStart = .allocate(capacity: fields.count + 1)
            var at = 0
            for (i, f) in fields.enumerated() {
                keyStart[i] = at
                _ = UnsafeMutableBufferPointer(rebasing: keys[at..<(at + f.count)]).initialize(from: f)
                at += f.count
            }
            keyStart[fields.count] = at
        }

        deinit { keys.deallocate(); keyStart.deallocate() }

        /// Made for rows like `row` (same entity, store and attribute count; the attributes of a
        /// plan's rows of one entity are the same, in the same order).
        @inline(__always)
        func fits(_ row: ObjectRow) -> Bool {
            entity == row.id.entity && storeID == row.id.storeID && attributeCount == row.attributes.count
        }

        @inline(__always)
        func key(_ i: Int) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: keys[keyStart[i]..<keyStart[i + 1]])
        }
    }

    /// The `EntityEncoding`s of a plan's calls (usually one: the fetched entity).
    final class Encodings {
        var entities: [EntityEncoding] = []

        func encoding(for row: ObjectRow) -> EntityEncoding {
            if let e = entities.first(where: { $0.fits(row) }) { return e }
            let e = EntityEncoding(row)
            entities.removeAll { $0.entity == e.entity }
            entities.append(e)
            return e
        }
    }

    func objects(token: GenerationToken, rows: inout ObjectRows, state: inout AnyObject?) throws {
        let cache: Encodings
        if let c = state as? Encodings { cache = c } else { cache = Encodings(); state = cache }
        var w = ProtoWriter(capacity: 2048)
        var ids = ProtoWriter(capacity: 1024)
        do {
            let t = token.bytes
            if !t.isEmpty { w.bytes(1, t) }
            var enc: EntityEncoding?
            var uriPrefix: [UInt8] = [], nameField: [UInt8] = []
            while let row = try rows.next() {
                if enc == nil || !enc.unsafelyUnwrapped.fits(row) {
                    let e = cache.encoding(for: row)
                    enc = e
                    uriPrefix = e.uriPrefix
                    nameField = e.nameField
                }
                let e = enc.unsafelyUnwrapped
                let at = ids.count
                ids.objectID(3, prefix: uriPrefix, pk: row.id.pk)
                w.delimited(2) { w in
                    // field 1 has the same length and URI as the object_ids entry: only the tag differs
                    w.tag(1, 2)
                    w.write(ids, (at + 1)..<ids.count)
                    w.write(nameField)
                    if row.version != 0 { w.int64(3, row.version) }
                    for i in 0..<e.attributeCount {
                        w.delimited(4) { m in
                            m.write(e.key(i))
                            m.delimited(2) { FetchResponseWriter.value(row, i, into: &$0) }
                        }
                    }
                }
            }
        } catch {
            w.discard(); ids.discard()
            throw error
        }
        if case let (a, b)? = written.take() { a.discard(); b.discard() }
        written = (w, ids)
    }

    /// A string field in wire form (what `ProtoWriter.string` writes).
    private static func stringField(_ field: Int, _ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var v = UInt64(field) << 3 | 2, n = UInt64(s.utf8.count)
        out.reserveCapacity(12 + s.utf8.count)
        while v >= 0x80 { out.append(UInt8(truncatingIfNeeded: v) | 0x80); v >>= 7 }
        out.append(UInt8(v))
        while n >= 0x80 { out.append(UInt8(truncatingIfNeeded: n) | 0x80); n >>= 7 }
        out.append(UInt8(n))
        out += s.utf8
        return out
    }

    /// `ObjectEncoding.value(row.value(i), type:)` for the common stored forms read in place, with
    /// the attribute's declared type; the others (and non-ASCII text, whose String form repairs
    /// bad UTF-8) take the generic route.
    static func value(_ row: ObjectRow, _ i: Int, into w: inout ProtoWriter) {
        let stored = row.attributes[i].type
        let modelType: AttributeType? = stored
        switch (row.raw(i), stored) {
        case (.null, _): w.int32(1, 0)
        case (.text(let t), .string) where t.allSatisfy({ $0 != 0 && $0 < 0x80 }):
            w.tag(2, 2); w.varint(UInt64(t.count)); w.write(t)
        case (.int(let v), .int16), (.int(let v), .int32), (.int(let v), .int64):
            ObjectEncoding.value(.int(v), type: modelType, into: &w)
        case (.int(let v), .bool): w.bool(3, v != 0)
        case (.double(let d), .double), (.double(let d), .float):
            ObjectEncoding.value(.double(d), type: modelType, into: &w)
        case (.int(let v), .double), (.int(let v), .float):
            ObjectEncoding.value(.double(Double(v)), type: modelType, into: &w)
        case (.double(let d), .date): ObjectEncoding.value(.date(d), type: nil, into: &w)
        case (.int(let v), .date): ObjectEncoding.value(.date(Double(v)), type: nil, into: &w)
        default:
            let v = row.value(i)
            let type: AttributeType? = switch v { case .int, .double: modelType; default: nil }
            ObjectEncoding.value(v, type: type, into: &w)
        }
    }

    /// The whole response for `r`, the result of the fetch this writer was the sink of. `model`
    /// (the store's) is asked for only when the objects were not streamed.
    func finish(_ r: FetchResult, type: FetchResultType, model: () throws -> ModelInfo?) throws -> [UInt8] {
        guard r.objectsStreamed, case let (w0, ids)? = written.take() else { return try FetchEncoding.fetchResults(r, type: type, model: model()) }
        var w = w0
        w.write(ids, 0..<ids.count)
        ids.discard()
        if r.count != 0 { w.int64(5, Int64(r.count)) }
        return w.finishBytes()
    }
}

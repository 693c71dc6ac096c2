// Managed objects written straight from the engine's snapshots into protobuf wire form, for the
// GetObjects and Fetch responses (docs/protocol.md, "Hand-encoded messages"). The generic path
// (snapshot → `Ubiquity_V1_ManagedObject` with its maps of `Value` messages → SwiftProtobuf's
// size and encoding visitors) was most of a point read's service cost and ~20k instructions per
// fetched object. The bytes decode to the message `Convert.managedObject` builds:
// `ObjectEncodingTests` and `FetchEncodingTests` check that for every kind of value under every
// attribute type, nulls, relationships, prefetched objects and long fields.
import Foundation
import UbiquityStorage

enum ObjectEncoding {
    /// The fields of `Convert.managedObject(o, model:)`. `typeOf` gives an attribute's declared
    /// type (`Convert.protoValue`'s `type`); it is asked only for numbers, the only values whose
    /// form depends on it.
    @inline(__always)
    static func managedObject(_ o: ObjectSnapshot, into w: inout ProtoWriter, typeOf: (String) -> AttributeType?) {
        w.objectID(1, o.id)
        if !o.id.entity.isEmpty { w.string(2, o.id.entity) }
        if o.version != 0 { w.int64(3, o.version) }
        for (k, v) in o.values {
            let type: AttributeType? = switch v { case .int, .double: typeOf(k); default: nil }
            w.delimited(4) { e in
                e.string(1, k)
                e.delimited(2) { value(v, type: type, into: &$0) }
            }
        }
        for (k, ids) in o.relationships {
            w.delimited(5) { e in
                e.string(1, k)
                e.delimited(2) { l in for id in ids { l.objectID(1, id) } }
            }
        }
    }

    /// The fields of `Convert.protoValue(v, type:)` (a `Value` message with one `kind` set).
    static func value(_ v: StorageValue, type: AttributeType?, into w: inout ProtoWriter) {
        switch v {
        case .null: w.int32(1, 0)
        case .string(let s): w.string(2, s)
        case .bool(let b): w.bool(3, b)
        case .int(let i):
            switch type {
            case .int16: w.int32(4, Int32(clamping: i))
            case .int32: w.int32(5, Int32(clamping: i))
            case .bool: w.bool(3, i != 0)
            case .double: w.double(8, Double(i))
            case .float: w.float(7, Float(i))
            default: w.int64(6, i)
            }
        case .double(let d):
            switch type {
            case .float: w.float(7, Float(d))
            case .int16, .int32, .int64: w.int64(6, Convert.int64(saturating: d))
            default: w.double(8, d)
            }
        case .decimal(let s): w.string(9, s)
        case .date(let d):
            let (seconds, nanos) = Convert.timestamp(d)
            w.delimited(10) { t in
                if seconds != 0 { t.int64(1, seconds) }
                if nanos != 0 { t.int32(2, nanos) }
            }
        case .binary(let d): w.bytes(11, d)
        case .uuid(let u): w.string(12, u.uuidString.lowercased())
        case .uri(let s): w.string(13, s)
        }
    }

    /// GetObjects' response: the read's token, the objects found (request order), then the
    /// requested IDs that do not exist at that generation. The same message as filling a
    /// `Ubiquity_V1_GetObjectsResponse` with `Convert.managedObject` and serializing it.
    /// `attributes` gives an entity's attribute definitions (looked up once per entity run).
    static func getObjectsResponse(token: GenerationToken, ids: [ObjectID], found: [ObjectSnapshot?],
                                   attributes: (String) -> [String: AttributeDefinition]?) -> [UInt8] {
        var w = ProtoWriter(capacity: 64 + 160 * found.count)
        let t = token.bytes
        if !t.isEmpty { w.bytes(1, t) }
        var entity = ""
        var attrs: [String: AttributeDefinition]?
        for case let o? in found {
            if o.id.entity != entity || attrs == nil {
                entity = o.id.entity
                attrs = attributes(entity)
            }
            w.delimited(2) { managedObject(o, into: &$0, typeOf: { attrs?[$0]?.type }) }
        }
        for (id, o) in zip(ids, found) where o == nil { w.objectID(3, id) }
        return w.finishBytes()
    }
}

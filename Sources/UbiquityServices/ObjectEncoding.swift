import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityStorage

/// Protocol-buffer wire encoding of GetObjects' response written straight from the engine's
/// snapshots, without building `Ubiquity_V1_ManagedObject` messages and serializing them through
/// SwiftProtobuf (whose map encoding — sizes first, then entries — was most of a point read's
/// service cost). Every value still goes through `Convert.protoValue`, so which `Value.kind` a
/// value gets is decided in one place; this file only writes the wire form of what `Convert`
/// builds. The bytes decode to the message the generic path (`Convert.managedObject` and
/// `serializedBytes()`) produces; `ObjectEncodingTests` checks that for every kind of value.
struct GetObjectsWriter {
    var bytes: [UInt8] = []

    enum WireType: UInt64 { case varint = 0, fixed64 = 1, lengthDelimited = 2, fixed32 = 5 }

    @inline(__always) mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    @inline(__always) mutating func tag(_ field: UInt64, _ type: WireType) { varint(field << 3 | type.rawValue) }

    mutating func string(_ field: UInt64, _ s: String) {
        tag(field, .lengthDelimited)
        var s = s
        s.withUTF8 { b in
            varint(UInt64(b.count))
            bytes.append(contentsOf: b)
        }
    }

    mutating func bytesField(_ field: UInt64, _ b: some Collection<UInt8>) {
        tag(field, .lengthDelimited)
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    /// An int32/int64 field: negative values are sign-extended to 64 bits (ten bytes), as the
    /// protobuf encoding of int32 requires.
    mutating func int64(_ field: UInt64, _ v: Int64) {
        tag(field, .varint)
        varint(UInt64(bitPattern: v))
    }

    /// A length-delimited field whose content `body` writes (the length is patched in after).
    mutating func message(_ field: UInt64, _ body: (inout GetObjectsWriter) -> Void) {
        tag(field, .lengthDelimited)
        let at = bytes.count
        bytes.append(0)
        body(&self)
        let n = bytes.count - at - 1
        if n < 0x80 {
            bytes[at] = UInt8(n)
            return
        }
        var length = GetObjectsWriter()
        length.varint(UInt64(n))
        bytes.replaceSubrange(at..<(at + 1), with: length.bytes)
    }

    /// `Ubiquity_V1_Value` (objects.proto): exactly one field of the oneof.
    mutating func value(_ v: Ubiquity_V1_Value) {
        switch v.kind {
        case .none: break
        case .nullValue(let n): int64(1, Int64(n.rawValue))
        case .stringValue(let s): string(2, s)
        case .boolValue(let b): int64(3, b ? 1 : 0)
        case .int16Value(let i): int64(4, Int64(i))
        case .int32Value(let i): int64(5, Int64(i))
        case .int64Value(let i): int64(6, i)
        case .floatValue(let f):
            tag(7, .fixed32)
            withUnsafeBytes(of: f.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        case .doubleValue(let d):
            tag(8, .fixed64)
            withUnsafeBytes(of: d.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        case .decimalValue(let s): string(9, s)
        case .dateValue(let t):
            message(10) { w in
                if t.seconds != 0 { w.int64(1, t.seconds) }
                if t.nanos != 0 { w.int64(2, Int64(t.nanos)) }
            }
        case .binaryValue(let d): bytesField(11, d)
        case .uuidValue(let s): string(12, s)
        case .uriValue(let s): string(13, s)
        }
    }

    /// `Ubiquity_V1_ManagedObject` as `Convert.managedObject` builds it; `attributes` gives the
    /// declared types (`Convert.protoValue`'s `type`).
    mutating func managedObject(_ field: UInt64, _ o: ObjectSnapshot, attributes: [String: AttributeDefinition]?) {
        message(field) { w in
            w.message(1) { o.id.appendURI(to: &$0.bytes) }
            if !o.id.entity.isEmpty { w.string(2, o.id.entity) }
            if o.version != 0 { w.int64(3, o.version) }
            for (k, v) in o.values {
                w.message(4) { e in
                    e.string(1, k)
                    e.message(2) { $0.value(Convert.protoValue(v, type: attributes?[k]?.type)) }
                }
            }
            for (k, ids) in o.relationships {
                w.message(5) { e in
                    e.string(1, k)
                    e.message(2) { list in
                        for id in ids { list.message(1) { id.appendURI(to: &$0.bytes) } }
                    }
                }
            }
        }
    }
}

extension Convert {
    /// GetObjects' response, encoded: the read's token, the objects found (request order), then
    /// the requested IDs that do not exist at that generation. The same message as filling a
    /// `Ubiquity_V1_GetObjectsResponse` with `managedObject` and serializing it.
    static func encodedGetObjectsResponse(token: GenerationToken, ids: [ObjectID], found: [ObjectSnapshot?],
                                          attributes: (String) -> [String: AttributeDefinition]?) -> [UInt8] {
        var w = GetObjectsWriter()
        w.bytes.reserveCapacity(64 + 160 * found.count)
        w.bytesField(1, token.bytes)
        var entity = ""
        var attrs: [String: AttributeDefinition]?
        for case let o? in found {
            if o.id.entity != entity || attrs == nil {
                entity = o.id.entity
                attrs = attributes(entity)
            }
            w.managedObject(2, o, attributes: attrs)
        }
        for (id, o) in zip(ids, found) where o == nil {
            w.message(3) { id.appendURI(to: &$0.bytes) }
        }
        return w.bytes
    }
}

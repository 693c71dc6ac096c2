// Fetch results written straight into protobuf wire form (docs/query.md, "Fetch responses").
// The generic path (engine snapshot → `Ubiquity_V1_ManagedObject` with its maps of `Value`
// messages → SwiftProtobuf's size and encoding visitors) cost ~20k instructions per object; this
// writes the same fields from the snapshot in one pass. `FetchEncodingTests` decodes both and
// requires equal messages for every attribute type, nulls, relationships and prefetched objects.
import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// A response already in wire form. SwiftProtobuf's binary encoder copies unknown-field bytes
/// verbatim, so serializing this message yields exactly `bytes`: a handler can return it where
/// the router expects a message, and the client decodes the real message type.
struct EncodedMessage: SwiftProtobuf.Message {
    static let protoMessageName = "ubiquity.v1.EncodedMessage"
    var bytes = Data()
    var unknownFields = UnknownStorage()

    init() {}
    init(_ bytes: Data) { self.bytes = bytes }
    init(_ message: some SwiftProtobuf.Message) throws { bytes = try message.serializedData() }

    mutating func decodeMessage<D: SwiftProtobuf.Decoder>(decoder: inout D) throws {
        while try decoder.nextFieldNumber() != nil {}
    }
    func traverse<V: SwiftProtobuf.Visitor>(visitor: inout V) throws {
        if !bytes.isEmpty { try visitor.visitUnknown(bytes: bytes) }
    }
    func isEqualTo(message: any SwiftProtobuf.Message) -> Bool { (message as? EncodedMessage)?.bytes == bytes }
}

/// Protobuf wire-format writer (proto3: the fields a generated message would emit, in field order).
struct ProtoWriter {
    var out: [UInt8] = []
    /// `x-ubiquity://<store>/` of the last store an object ID was written for (every ID of a
    /// response has the same store in practice).
    private var uriPrefix: [UInt8] = []
    private var uriStore: UUID?

    init(capacity: Int) { out.reserveCapacity(capacity) }

    @inline(__always) mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 { out.append(UInt8(truncatingIfNeeded: v) | 0x80); v >>= 7 }
        out.append(UInt8(v))
    }
    @inline(__always) mutating func tag(_ field: Int, _ wire: UInt64) { varint(UInt64(field) << 3 | wire) }

    mutating func int64(_ field: Int, _ v: Int64) { tag(field, 0); varint(UInt64(bitPattern: v)) }
    /// int32 and enums: negative values sign-extended to ten bytes, as protobuf requires.
    mutating func int32(_ field: Int, _ v: Int32) { tag(field, 0); varint(UInt64(bitPattern: Int64(v))) }
    mutating func bool(_ field: Int, _ v: Bool) { tag(field, 0); out.append(v ? 1 : 0) }
    mutating func double(_ field: Int, _ v: Double) {
        tag(field, 1)
        let b = v.bitPattern.littleEndian
        withUnsafeBytes(of: b) { out.append(contentsOf: $0) }
    }
    mutating func float(_ field: Int, _ v: Float) {
        tag(field, 5)
        let b = v.bitPattern.littleEndian
        withUnsafeBytes(of: b) { out.append(contentsOf: $0) }
    }
    mutating func string(_ field: Int, _ s: String) {
        tag(field, 2)
        var s = s
        s.withUTF8 { u in varint(UInt64(u.count)); out.append(contentsOf: u) }
    }
    mutating func bytes(_ field: Int, _ d: Data) {
        tag(field, 2)
        varint(UInt64(d.count))
        out.append(contentsOf: d)
    }

    /// An object ID in URI form (the same text as `ObjectID.uri`).
    mutating func objectID(_ field: Int, _ id: ObjectID) {
        if uriStore != id.storeID {
            uriStore = id.storeID
            uriPrefix = Array("x-ubiquity://".utf8) + Array(id.storeID.lowercasedString.utf8) + [UInt8(ascii: "/")]
        }
        var entity = id.entity
        var magnitude = id.pk.magnitude
        var digits = 1
        var t = magnitude
        while t >= 10 { t /= 10; digits += 1 }
        tag(field, 2)
        entity.withUTF8 { e in
            varint(UInt64(uriPrefix.count + e.count + 2 + digits))
            out.append(contentsOf: uriPrefix)
            out.append(contentsOf: e)
        }
        out.append(UInt8(ascii: "/"))
        out.append(UInt8(ascii: id.pk < 0 ? "t" : "p"))
        let start = out.count
        for _ in 0..<digits { out.append(0) }
        for k in stride(from: start + digits - 1, through: start, by: -1) { out[k] = 48 + UInt8(magnitude % 10); magnitude /= 10 }
    }

    /// A length-delimited field whose content `body` writes: one length byte is reserved and the
    /// content moved up if its length needs more.
    @inline(__always) mutating func delimited(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        tag(field, 2)
        let at = out.count
        out.append(0)
        body(&self)
        let n = out.count - at - 1
        if n < 0x80 { out[at] = UInt8(n); return }
        var len: [UInt8] = []
        var v = UInt64(n)
        while v >= 0x80 { len.append(UInt8(truncatingIfNeeded: v) | 0x80); v >>= 7 }
        len.append(UInt8(v))
        out.replaceSubrange(at..<(at + 1), with: len)
    }
}

enum FetchEncoding {
    /// `Convert.fetchResults(r, type:model:)` serialized, written directly.
    static func fetchResults(_ r: FetchResult, type: FetchResultType, model: ModelInfo?) throws -> EncodedMessage {
        if type == .dictionaries { return try EncodedMessage(Convert.fetchResults(r, type: type, model: model)) }
        var w = ProtoWriter(capacity: 64 + 160 * (r.objects.count + r.prefetched.count) + (type == .objectIDs ? 80 * r.objectIDs.count : 0))
        let token = r.token.bytes
        if !token.isEmpty { w.tag(1, 2); w.varint(UInt64(token.count)); w.out.append(contentsOf: token) }
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
        return EncodedMessage(Data(w.out))
    }

    /// The fields of `Convert.managedObject(o, model:)`.
    static func managedObject(_ o: ObjectSnapshot, model: ModelInfo?, into w: inout ProtoWriter) {
        w.objectID(1, o.id)
        if !o.id.entity.isEmpty { w.string(2, o.id.entity) }
        if o.version != 0 { w.int64(3, o.version) }
        let types = model?.attributeTypes[o.id.entity]
        for (k, v) in o.values {
            // only numbers are written by the attribute's type (no lookup for the other forms)
            let type: AttributeType? = switch v { case .int, .double: types?[k]; default: nil }
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
            case .int16, .int32, .int64: w.int64(6, Int64(d))
            default: w.double(8, d)
            }
        case .decimal(let s): w.string(9, s)
        case .date(let d):
            let secs = d.rounded(.down)
            let seconds = Int64(secs)
            let nanos = Int32(min(999_999_999, max(0, ((d - secs) * 1e9).rounded())))
            w.delimited(10) { t in
                if seconds != 0 { t.int64(1, seconds) }
                if nanos != 0 { t.int32(2, nanos) }
            }
        case .binary(let d): w.bytes(11, d)
        case .uuid(let u): w.string(12, u.uuidString.lowercased())
        case .uri(let s): w.string(13, s)
        }
    }
}

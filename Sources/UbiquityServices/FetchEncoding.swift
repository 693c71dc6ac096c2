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

/// Protobuf wire-format writer (proto3: the fields a generated message would emit, in field
/// order) into a growing buffer of its own; `finish()` hands it to a `Data` without a copy.
/// Used through `inout` only (a copy would share the buffer), and `finish()` exactly once.
struct ProtoWriter {
    private var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int
    /// `x-ubiquity://<store>/` of the last store an object ID was written for (every ID of a
    /// response has the same store in practice).
    private var uriPrefix: [UInt8] = []
    private var uriStore: UUID?

    init(capacity: Int) {
        self.capacity = max(64, capacity)
        base = .allocate(capacity: self.capacity)
    }

    /// The bytes written; the writer must not be used afterwards.
    consuming func finish() -> Data {
        if count == 0 { base.deallocate(); return Data() }
        return Data(bytesNoCopy: base, count: count, deallocator: .custom { p, _ in p.assumingMemoryBound(to: UInt8.self).deallocate() })
    }

    @inline(__always) private mutating func reserve(_ n: Int) { if count + n > capacity { grow(n) } }

    private mutating func grow(_ n: Int) {
        let newCapacity = max(capacity * 2, count + n)
        let b = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        b.update(from: base, count: count)
        base.deallocate()
        base = b
        capacity = newCapacity
    }

    @inline(__always) mutating func byte(_ b: UInt8) { reserve(1); base[count] = b; count += 1 }

    @inline(__always) mutating func write(_ p: UnsafeBufferPointer<UInt8>) {
        guard let a = p.baseAddress, p.count > 0 else { return }
        reserve(p.count)
        (base + count).update(from: a, count: p.count)
        count += p.count
    }

    @inline(__always) mutating func write(_ bytes: [UInt8]) { bytes.withUnsafeBufferPointer { write($0) } }

    @inline(__always) static func varintSize(_ value: UInt64) -> Int {
        var n = 1, v = value
        while v >= 0x80 { v >>= 7; n += 1 }
        return n
    }

    @inline(__always) mutating func varint(_ value: UInt64) {
        reserve(10)
        var v = value
        while v >= 0x80 { base[count] = UInt8(truncatingIfNeeded: v) | 0x80; count += 1; v >>= 7 }
        base[count] = UInt8(v)
        count += 1
    }
    @inline(__always) mutating func tag(_ field: Int, _ wire: UInt64) { varint(UInt64(field) << 3 | wire) }

    mutating func int64(_ field: Int, _ v: Int64) { tag(field, 0); varint(UInt64(bitPattern: v)) }
    /// int32 and enums: negative values sign-extended to ten bytes, as protobuf requires.
    mutating func int32(_ field: Int, _ v: Int32) { tag(field, 0); varint(UInt64(bitPattern: Int64(v))) }
    mutating func bool(_ field: Int, _ v: Bool) { tag(field, 0); byte(v ? 1 : 0) }
    mutating func double(_ field: Int, _ v: Double) {
        tag(field, 1)
        withUnsafeBytes(of: v.bitPattern.littleEndian) { write($0.bindMemory(to: UInt8.self)) }
    }
    mutating func float(_ field: Int, _ v: Float) {
        tag(field, 5)
        withUnsafeBytes(of: v.bitPattern.littleEndian) { write($0.bindMemory(to: UInt8.self)) }
    }
    mutating func string(_ field: Int, _ s: String) {
        tag(field, 2)
        var s = s
        s.withUTF8 { u in varint(UInt64(u.count)); write(u) }
    }
    mutating func bytes(_ field: Int, _ d: Data) {
        tag(field, 2)
        varint(UInt64(d.count))
        d.withUnsafeBytes { write($0.bindMemory(to: UInt8.self)) }
    }
    mutating func bytes(_ field: Int, _ d: [UInt8]) {
        tag(field, 2)
        varint(UInt64(d.count))
        write(d)
    }

    /// An object ID in URI form (the same text as `ObjectID.uri`).
    mutating func objectID(_ field: Int, _ id: ObjectID) {
        if uriStore != id.storeID {
            uriStore = id.storeID
            uriPrefix = Array("x-ubiquity://".utf8) + Array(id.storeID.lowercasedString.utf8) + [UInt8(ascii: "/")]
        }
        var entity = id.entity
        let magnitude = id.pk.magnitude
        var digits = 1
        var t = magnitude
        while t >= 10 { t /= 10; digits += 1 }
        tag(field, 2)
        entity.withUTF8 { e in
            varint(UInt64(uriPrefix.count + e.count + 2 + digits))
            write(uriPrefix)
            write(e)
        }
        reserve(1)
        base[count] = UInt8(ascii: "/")
        count += 1
        pkSuffix(id.pk, magnitude: magnitude, digits: digits)
    }

    /// An object ID in URI form from `prefix`, the URI up to the entity's `/` (`x-ubiquity://<store>/<entity>/`).
    mutating func objectID(_ field: Int, prefix: [UInt8], pk: Int64) {
        let magnitude = pk.magnitude
        var digits = 1
        var t = magnitude
        while t >= 10 { t /= 10; digits += 1 }
        tag(field, 2)
        varint(UInt64(prefix.count + 1 + digits))
        write(prefix)
        pkSuffix(pk, magnitude: magnitude, digits: digits)
    }

    /// `p<pk>` or `t<-pk>`.
    @inline(__always) private mutating func pkSuffix(_ pk: Int64, magnitude: UInt64, digits: Int) {
        var magnitude = magnitude
        reserve(1 + digits)
        base[count] = UInt8(ascii: pk < 0 ? "t" : "p")
        count += 1
        for k in stride(from: count + digits - 1, through: count, by: -1) { base[k] = 48 + UInt8(magnitude % 10); magnitude /= 10 }
        count += digits
    }

    /// Appends `other`'s bytes in `range`.
    mutating func write(_ other: borrowing ProtoWriter, _ range: Range<Int>) {
        write(UnsafeBufferPointer(start: other.base + range.lowerBound, count: range.count))
    }

    /// Frees the buffer of a writer that will not be finished.
    consuming func discard() { base.deallocate() }

    /// A length-delimited field whose content `body` writes: one length byte is reserved and the
    /// content moved up if its length needs more.
    @inline(__always) mutating func delimited(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        tag(field, 2)
        reserve(1)
        let at = count
        count += 1
        body(&self)
        let n = count - at - 1
        if n < 0x80 { base[at] = UInt8(n); return }
        let extra = ProtoWriter.varintSize(UInt64(n)) - 1
        reserve(extra)
        memmove(base + at + 1 + extra, base + at + 1, n)
        var v = UInt64(n), i = at
        while v >= 0x80 { base[i] = UInt8(truncatingIfNeeded: v) | 0x80; i += 1; v >>= 7 }
        base[i] = UInt8(v)
        count += extra
    }
}

enum FetchEncoding {
    /// `Convert.fetchResults(r, type:model:)` serialized, written directly.
    static func fetchResults(_ r: FetchResult, type: FetchResultType, model: ModelInfo?) throws -> EncodedMessage {
        if type == .dictionaries { return try EncodedMessage(Convert.fetchResults(r, type: type, model: model)) }
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
        return EncodedMessage(w.finish())
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

/// A Fetch response written while the read runs: plan-cached object fetches hand their rows to
/// `objects` (no snapshot, no dictionary per object); `finish` completes the response, or
/// encodes the result the generic way when the fetch did not stream (`objectsStreamed` false).
/// One per call, used by the thread running the fetch only.
final class FetchResponseWriter: FetchObjectSink {
    let model: ModelInfo?
    /// The response up to the objects, and the `object_ids` fields (written while the objects are).
    private var written: (ProtoWriter, ProtoWriter)?

    init(model: ModelInfo?) { self.model = model }

    deinit { if case let (w, ids)? = written.take() { w.discard(); ids.discard() } }

    func objects(token: GenerationToken, rows: inout ObjectRows) throws {
        var w = ProtoWriter(capacity: 2048)
        var ids = ProtoWriter(capacity: 1024)
        do {
            let t = token.bytes
            if !t.isEmpty { w.bytes(1, t) }
            // per entity run: the URI prefix of its IDs, its name field, each attribute's map-entry
            // key in wire form and the model's type of each attribute (numbers are written by it)
            var entity: String?
            var uriPrefix: [UInt8] = [], nameField: [UInt8] = []
            var keys: [[UInt8]] = []
            var types: [AttributeType?] = []
            while let row = try rows.next() {
                if entity != row.id.entity || keys.count != row.attributes.count {
                    let e = row.id.entity
                    entity = e
                    uriPrefix = Array("x-ubiquity://\(row.id.storeID.lowercasedString)/\(e)/".utf8)
                    nameField = e.isEmpty ? [] : FetchResponseWriter.stringField(2, e)
                    let modelTypes = model?.attributeTypes[e]
                    keys = row.attributes.map { FetchResponseWriter.stringField(1, $0.name) }
                    types = row.attributes.map { modelTypes?[$0.name] }
                }
                let at = ids.count
                ids.objectID(3, prefix: uriPrefix, pk: row.id.pk)
                w.delimited(2) { w in
                    // field 1 has the same length and URI as the object_ids entry: only the tag differs
                    w.tag(1, 2)
                    w.write(ids, (at + 1)..<ids.count)
                    w.write(nameField)
                    if row.version != 0 { w.int64(3, row.version) }
                    for i in 0..<keys.count {
                        w.delimited(4) { e in
                            e.write(keys[i])
                            e.delimited(2) { FetchResponseWriter.value(row, i, modelType: types[i], into: &$0) }
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

    /// `FetchEncoding.value(row.value(i), type:)` for the common stored forms read in place; the
    /// others (and non-ASCII text, whose String form repairs bad UTF-8) take the generic route.
    static func value(_ row: ObjectRow, _ i: Int, modelType: AttributeType?, into w: inout ProtoWriter) {
        let stored = row.attributes[i].type
        switch (row.raw(i), stored) {
        case (.null, _): w.int32(1, 0)
        case (.text(let t), .string) where t.allSatisfy({ $0 != 0 && $0 < 0x80 }):
            w.tag(2, 2); w.varint(UInt64(t.count)); w.write(t)
        case (.int(let v), .int16), (.int(let v), .int32), (.int(let v), .int64):
            FetchEncoding.value(.int(v), type: modelType, into: &w)
        case (.int(let v), .bool): w.bool(3, v != 0)
        case (.double(let d), .double), (.double(let d), .float):
            FetchEncoding.value(.double(d), type: modelType, into: &w)
        case (.int(let v), .double), (.int(let v), .float):
            FetchEncoding.value(.double(Double(v)), type: modelType, into: &w)
        case (.double(let d), .date): FetchEncoding.value(.date(d), type: nil, into: &w)
        case (.int(let v), .date): FetchEncoding.value(.date(Double(v)), type: nil, into: &w)
        default:
            let v = row.value(i)
            let type: AttributeType? = switch v { case .int, .double: modelType; default: nil }
            FetchEncoding.value(v, type: type, into: &w)
        }
    }

    /// The whole response for `r`, the result of the fetch this writer was the sink of.
    func finish(_ r: FetchResult, type: FetchResultType) throws -> EncodedMessage {
        guard r.objectsStreamed, case let (w0, ids)? = written.take() else { return try FetchEncoding.fetchResults(r, type: type, model: model) }
        var w = w0
        w.write(ids, 0..<ids.count)
        ids.discard()
        if r.count != 0 { w.int64(5, Int64(r.count)) }
        return EncodedMessage(w.finish())
    }
}

// Protobuf wire format by hand, for the hot messages (docs/protocol.md, "Hand-encoded messages"):
// `ProtoWriter` writes the GetObjects and Fetch responses and the Save result; `WireReader` reads
// the Save request and the GetObjects request. Each hand-written path has a test that compares it
// with SwiftProtobuf's encoding or decoding of the same message.
import Foundation
import SwiftProtobuf
import UbiquityStorage

/// Protobuf wire-format writer (proto3: the fields a generated message would emit, in field
/// order) into a growing buffer of its own; `finishBytes()` hands it out as an array.
/// Used through `inout` only (a copy would share the buffer), and `finishBytes()` exactly once.
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
    /// The bytes written as an array (one copy; what the router's encoded handlers return); the
    /// writer must not be used afterwards.
    consuming func finishBytes() -> [UInt8] {
        defer { base.deallocate() }
        return Array(UnsafeBufferPointer(start: base, count: count))
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

    /// An object ID in URI form (the same text as `ObjectID.uri`). The first ID of a store is
    /// written straight into the buffer (a point read's response names one object: building the
    /// prefix array and the store's lowercase string for it cost ~850 instructions); the prefix
    /// is kept as an array from the second ID of the same store on (a Save result names each new
    /// object twice).
    mutating func objectID(_ field: Int, _ id: ObjectID) {
        let cached: Bool
        if uriStore != id.storeID {
            uriStore = id.storeID
            uriPrefix.removeAll(keepingCapacity: true)
            cached = false
        } else {
            if uriPrefix.isEmpty {
                uriPrefix.reserveCapacity(50)
                uriPrefix.append(contentsOf: repeatElement(0, count: 50))
                uriPrefix.withUnsafeMutableBufferPointer { _ = ProtoWriter.writeStorePrefix(id.storeID, into: $0.baseAddress!) }
            }
            cached = true
        }
        var entity = id.entity
        let magnitude = id.pk.magnitude
        var digits = 1
        var t = magnitude
        while t >= 10 { t /= 10; digits += 1 }
        tag(field, 2)
        entity.withUTF8 { e in
            varint(UInt64(50 + e.count + 2 + digits))
            if cached {
                write(uriPrefix)
            } else {
                reserve(50)
                count += ProtoWriter.writeStorePrefix(id.storeID, into: base + count)
            }
            write(e)
        }
        reserve(1)
        base[count] = UInt8(ascii: "/")
        count += 1
        pkSuffix(id.pk, magnitude: magnitude, digits: digits)
    }

    /// Writes the 50 bytes `x-ubiquity://<store>/` at `p`; returns 50.
    @inline(__always) private static func writeStorePrefix(_ store: UUID, into p: UnsafeMutablePointer<UInt8>) -> Int {
        let scheme: StaticString = "x-ubiquity://"
        p.update(from: scheme.utf8Start, count: 13)
        let n = 13 + store.writeLowercased(into: p + 13)
        p[n] = UInt8(ascii: "/")
        return n + 1
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

/// Thrown by `WireReader` (and the fast decoders built on it) when the fast reading does not
/// apply; the caller then decodes with SwiftProtobuf.
struct NotFast: Error {}

/// Reads protobuf wire format from a buffer the caller keeps alive. Every failure is `NotFast`.
struct WireReader {
    private var p: UnsafePointer<UInt8>
    private let end: UnsafePointer<UInt8>

    init(_ base: UnsafePointer<UInt8>, _ count: Int) { p = base; end = base + count }

    /// The next field's number and wire type; nil at the end.
    mutating func tag() throws -> (Int, Int)? {
        guard p < end else { return nil }
        let t = try varint()
        guard t <= UInt64(UInt32.max), t >> 3 != 0 else { throw NotFast() }
        return (Int(t >> 3), Int(t & 7))
    }

    mutating func varint() throws -> UInt64 {
        var v: UInt64 = 0
        var shift: UInt64 = 0
        while p < end, shift < 64 {
            let b = p.pointee
            p += 1
            v |= UInt64(b & 0x7f) << shift
            if b < 0x80 { return v }
            shift += 7
        }
        throw NotFast()
    }

    mutating func fixed32() throws -> UInt32 { try fixed(UInt32.self) }
    mutating func fixed64() throws -> UInt64 { try fixed(UInt64.self) }

    /// A little-endian fixed-width field.
    private mutating func fixed<T: FixedWidthInteger & UnsignedInteger>(_: T.Type) throws -> T {
        let n = T.bitWidth / 8
        guard end - p >= n else { throw NotFast() }
        var v: T = 0
        for i in 0..<n { v |= T(p[i]) << (8 * i) }
        p += n
        return v
    }

    /// A length-delimited field's body.
    mutating func body() throws -> UnsafeBufferPointer<UInt8> {
        let n = try varint()
        guard n <= UInt64(end - p) else { throw NotFast() }
        let b = UnsafeBufferPointer(start: p, count: Int(n))
        p += Int(n)
        return b
    }

    /// A string field; invalid UTF-8 is `NotFast` (SwiftProtobuf rejects it). `String(decoding:)`
    /// replaces invalid sequences, so the string is valid exactly when its bytes are the input's
    /// (the generic `String(validating:)` cost ~900 instructions a string).
    mutating func string() throws -> String {
        let b = try body()
        if b.isEmpty { return "" }
        let s = String(decoding: b, as: UTF8.self)
        var ascii = true
        for c in b where c >= 0x80 { ascii = false; break }
        if !ascii {
            var s = s
            guard s.withUTF8({ $0.elementsEqual(b) }) else { throw NotFast() }
        }
        return s
    }

    mutating func data() throws -> Data { Data(buffer: try body()) }

    mutating func message() throws -> WireReader {
        let b = try body()
        return WireReader(b.baseAddress ?? p, b.count)
    }

    mutating func skip(_ wire: Int) throws {
        switch wire {
        case 0: _ = try varint()
        case 1: _ = try fixed64()
        case 2: _ = try body()
        case 5: _ = try fixed32()
        default: throw NotFast()  // groups, invalid wire types
        }
    }
}


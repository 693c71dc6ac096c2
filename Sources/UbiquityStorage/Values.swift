import Foundation

/// An attribute value. Codable as a one-key object, e.g. `{"int": 5}`, `{"string": "x"}`, `{"null": true}`.
public enum StorageValue: Codable, Sendable, Hashable, CustomStringConvertible {
    case null
    case string(String)
    case bool(Bool)
    case int(Int64)
    case double(Double)
    /// Decimal as its canonical string (exact).
    case decimal(String)
    /// Seconds since 1970-01-01T00:00:00Z.
    case date(Double)
    case binary(Data)
    case uuid(UUID)
    case uri(String)

    private enum K: String, CodingKey { case null, string, bool, int, double, decimal, date, binary, uuid, uri }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: K.self)
        guard let k = c.allKeys.first, c.allKeys.count == 1 else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a value is an object with exactly one key"))
        }
        switch k {
        case .null: self = .null
        case .string: self = .string(try c.decode(String.self, forKey: k))
        case .bool: self = .bool(try c.decode(Bool.self, forKey: k))
        case .int: self = .int(try c.decode(Int64.self, forKey: k))
        case .double: self = .double(try c.decode(Double.self, forKey: k))
        case .decimal: self = .decimal(try c.decode(String.self, forKey: k))
        case .date: self = .date(try c.decode(Double.self, forKey: k))
        case .binary: self = .binary(try c.decode(Data.self, forKey: k))
        case .uuid: self = .uuid(try c.decode(UUID.self, forKey: k))
        case .uri: self = .uri(try c.decode(String.self, forKey: k))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: K.self)
        switch self {
        case .null: try c.encode(true, forKey: .null)
        case .string(let v): try c.encode(v, forKey: .string)
        case .bool(let v): try c.encode(v, forKey: .bool)
        case .int(let v): try c.encode(v, forKey: .int)
        case .double(let v): try c.encode(v, forKey: .double)
        case .decimal(let v): try c.encode(v, forKey: .decimal)
        case .date(let v): try c.encode(v, forKey: .date)
        case .binary(let v): try c.encode(v, forKey: .binary)
        case .uuid(let v): try c.encode(v, forKey: .uuid)
        case .uri(let v): try c.encode(v, forKey: .uri)
        }
    }

    public var isNull: Bool { if case .null = self { return true }; return false }

    public var description: String {
        switch self {
        case .null: "nil"
        case .string(let v): "\"\(v.count > 40 ? String(v.prefix(40)) + "…" : v)\""
        case .bool(let v): "\(v)"
        case .int(let v): "\(v)"
        case .double(let v): "\(v)"
        case .decimal(let v): v
        case .date(let v): "date(\(v))"
        case .binary(let v): "<\(v.count) bytes>"
        case .uuid(let v): v.uuidString
        case .uri(let v): v
        }
    }

    var typeName: String {
        switch self {
        case .null: "null"; case .string: "string"; case .bool: "bool"; case .int: "int"; case .double: "double"
        case .decimal: "decimal"; case .date: "date"; case .binary: "binary"; case .uuid: "uuid"; case .uri: "uri"
        }
    }
}

extension UUID {
    /// A UUID from its canonical 36-character text (hex digits in either case, dashes at 8, 13,
    /// 18 and 23); nil for anything else.
    init?(canonical b: UnsafeBufferPointer<UInt8>) {
        guard b.count == 36 else { return nil }
        var t: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &t) { out -> Bool in
            func nibble(_ c: UInt8) -> UInt8? {
                switch c {
                case 48...57: c - 48
                case 97...102: c - 87
                case 65...70: c - 55
                default: nil
                }
            }
            var o = 0, i = 0
            while i < 36 {
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    guard b[i] == UInt8(ascii: "-") else { return false }
                    i += 1; continue
                }
                guard let h = nibble(b[i]), let l = nibble(b[i + 1]) else { return false }
                out[o] = h << 4 | l
                o += 1; i += 2
            }
            return true
        }
        guard ok else { return nil }
        self.init(uuid: t)
    }

    /// A UUID in its canonical 36-character form (hex digits of either case, dashes at 8, 13,
    /// 18, 23); nil for anything else. Use this, not `UUID(uuidString:)`, for input: on Linux,
    /// Foundation reads each byte with sscanf's `%2hhx`, which also takes "0x" as a hex prefix
    /// and skips blanks, so a malformed ID such as "…0f0x" was read as another UUID ("…0f00").
    public static func parse(_ s: String) -> UUID? {
        var s = s
        return s.withUTF8 { UUID(canonical: $0) }
    }

    /// `uuidString.lowercased()` without Foundation's formatting and Unicode case mapping (every
    /// object URI carries one).
    public var lowercasedString: String {
        String(unsafeUninitializedCapacity: 36) { writeLowercased(into: $0.baseAddress!) }
    }

    /// Writes the 36 bytes of the lowercase canonical form at `p`; returns 36.
    public func writeLowercased(into p: UnsafeMutablePointer<UInt8>) -> Int {
        func hex(_ n: UInt8) -> UInt8 { n < 10 ? 48 + n : 87 + n }
        return withUnsafeBytes(of: uuid) { raw in
            var o = 0
            for j in 0..<16 {
                if j == 4 || j == 6 || j == 8 || j == 10 { p[o] = UInt8(ascii: "-"); o += 1 }
                p[o] = hex(raw[j] >> 4); p[o + 1] = hex(raw[j] & 15); o += 2
            }
            return o
        }
    }
}

/// An object ID. URI form `x-ubiquity://<store-uuid>/<Entity>/p<pk>` for permanent IDs; a
/// negative `pk` is a context's temporary ID for an unsaved object, `…/<Entity>/t<-pk>`.
public struct ObjectID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public var storeID: UUID
    public var entity: String
    public var pk: Int64

    public init(storeID: UUID, entity: String, pk: Int64) { self.storeID = storeID; self.entity = entity; self.pk = pk }

    /// Hashes the pk only: equal IDs have equal pks, so this agrees with `==` (all three fields).
    /// A save hashes every new object's ID several times (temporary-ID map, versions, history);
    /// the synthesized hash also fed the UUID's 16 bytes and the entity name each time. IDs of
    /// different stores or root entities with the same pk only share a bucket.
    public func hash(into hasher: inout Hasher) { hasher.combine(pk) }

    public var uri: String {
        let n = uriByteCount
        return String(unsafeUninitializedCapacity: n) { writeURI(into: $0.baseAddress!) }
    }

    /// Appends the URI's UTF-8 bytes (the same text as `uri`).
    public func appendURI(to out: inout [UInt8]) {
        let start = out.count, n = uriByteCount
        out.append(contentsOf: repeatElement(UInt8(0), count: n))
        out.withUnsafeMutableBufferPointer { _ = writeURI(into: $0.baseAddress! + start) }
    }

    // The URI is written byte by byte, without Foundation's UUID formatting: a save's result
    // names every object twice, and `uuidString.lowercased()` was most of that conversion's cost.

    private static func digitCount(_ v: UInt64) -> Int {
        var n = 1, t = v
        while t >= 10 { t /= 10; n += 1 }
        return n
    }

    private var uriByteCount: Int { 13 + 36 + 1 + entity.utf8.count + 2 + ObjectID.digitCount(pk.magnitude) }

    /// Writes exactly `uriByteCount` bytes at `p`; returns that count.
    private func writeURI(into p: UnsafeMutablePointer<UInt8>) -> Int {
        var i = 0
        for b in "x-ubiquity://".utf8 { p[i] = b; i += 1 }
        i += storeID.writeLowercased(into: p + i)
        p[i] = UInt8(ascii: "/"); i += 1
        if entity.utf8.withContiguousStorageIfAvailable({ (e: UnsafeBufferPointer<UInt8>) -> Void in
            if let b = e.baseAddress { (p + i).update(from: b, count: e.count) }
            i += e.count
        }) == nil {
            for b in entity.utf8 { p[i] = b; i += 1 }
        }
        p[i] = UInt8(ascii: "/"); p[i + 1] = UInt8(ascii: pk < 0 ? "t" : "p"); i += 2
        var x = pk.magnitude
        let d = ObjectID.digitCount(x)
        for k in stride(from: i + d - 1, through: i, by: -1) { p[k] = 48 + UInt8(x % 10); x /= 10 }
        return i + d
    }

    /// True for a context's temporary ID (an object not saved yet).
    public var isTemporary: Bool { pk < 0 }
    public var description: String { uri }

    /// Parses the URI form (`p<pk>`, or with `allowTemporary` also `t<n>`); nil if malformed.
    public init?(uri: String, allowTemporary: Bool = false) {
        guard let id = ObjectID.parseASCII(uri, allowTemporary: allowTemporary) ?? ObjectID.parseGeneral(uri, allowTemporary: allowTemporary) else { return nil }
        self = id
    }

    /// The general parser (any text): what `parseASCII` must agree with.
    static func parseGeneral(_ uri: String, allowTemporary: Bool) -> ObjectID? {
        let prefix = "x-ubiquity://"
        guard uri.hasPrefix(prefix) else { return nil }
        let parts = uri.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, let sid = UUID.parse(String(parts[0])), let kind = parts[2].first,
              kind == "p" || (allowTemporary && kind == "t"),
              let n = Int64(parts[2].dropFirst()), n > 0, !parts[1].isEmpty else { return nil }
        return ObjectID(storeID: sid, entity: String(parts[1]), pk: kind == "t" ? -n : n)
    }

    /// The common case of `init?(uri:)` without `split` and Foundation's UUID parser: an all-ASCII
    /// URI (where characters are bytes, so this reads it exactly as the general path does) with a
    /// canonical UUID. nil means "not this case": the general path decides.
    static func parseASCII(_ uri: String, allowTemporary: Bool) -> ObjectID? {
        var uri = uri
        return uri.withUTF8 { b -> ObjectID? in
            let prefix: StaticString = "x-ubiquity://"
            let pn = prefix.utf8CodeUnitCount
            guard b.count > pn + 36 + 3, memcmp(b.baseAddress!, prefix.utf8Start, pn) == 0, b[pn + 36] == UInt8(ascii: "/") else { return nil }
            var slash2 = -1
            for i in (pn + 37)..<b.count {
                let c = b[i]
                if c >= 128 { return nil }
                if c == UInt8(ascii: "/") { if slash2 >= 0 { return nil }; slash2 = i }
            }
            guard slash2 > pn + 37, slash2 + 2 < b.count, let sid = UUID(canonical: UnsafeBufferPointer(rebasing: b[pn..<(pn + 36)])) else { return nil }
            let kind = b[slash2 + 1]
            guard kind == UInt8(ascii: "p") || (allowTemporary && kind == UInt8(ascii: "t")) else { return nil }
            var n: Int64 = 0
            for i in (slash2 + 2)..<b.count {
                let d = b[i] &- 48
                guard d < 10, n < (Int64.max - 9) / 10 else { return nil }  // anything unusual: the general path
                n = n * 10 + Int64(d)
            }
            guard n > 0 else { return nil }
            let entity = String(decoding: UnsafeBufferPointer(rebasing: b[(pn + 37)..<slash2]), as: UTF8.self)
            return ObjectID(storeID: sid, entity: entity, pk: kind == UInt8(ascii: "t") ? -n : n)
        }
    }

    public init(from decoder: Decoder) throws {
        let s = try decoder.singleValueContainer().decode(String.self)
        guard let id = ObjectID(uri: s) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an object ID: \(s)"))
        }
        self = id
    }
    public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(uri) }
    public static func < (a: ObjectID, b: ObjectID) -> Bool { (a.entity, a.pk) < (b.entity, b.pk) }
}

/// Opaque generation token: (store UUID, epoch, generation). 33 bytes: version byte 1,
/// 16 bytes store UUID, 8 bytes epoch (big endian), 8 bytes generation (big endian).
public struct GenerationToken: Hashable, Sendable, Codable, CustomStringConvertible {
    public var storeID: UUID
    public var epoch: UInt64
    public var generation: Int64

    public init(storeID: UUID, epoch: UInt64, generation: Int64) { self.storeID = storeID; self.epoch = epoch; self.generation = generation }

    /// 33 bytes: version 1, the store's UUID, epoch and generation big-endian. Built in one
    /// allocation (appending grew the array three times: ~1k instructions per read response).
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 33) { out, n in
            let p = UnsafeMutableRawPointer(out.baseAddress!)
            p.storeBytes(of: 1, as: UInt8.self)
            p.storeBytes(of: storeID.uuid, toByteOffset: 1, as: uuid_t.self)
            p.storeBytes(of: epoch.bigEndian, toByteOffset: 17, as: UInt64.self)
            p.storeBytes(of: generation.bigEndian, toByteOffset: 25, as: Int64.self)
            n = 33
        }
    }

    /// Decodes `bytes`; throws `.invalidArgument` if malformed.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == 33, bytes[0] == 1 else { throw StorageError.invalid("malformed generation token") }
        let u = Array(bytes[1..<17])
        storeID = UUID(uuid: (u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]))
        epoch = bytes[17..<25].reduce(0) { $0 << 8 | UInt64($1) }
        let g = bytes[25..<33].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        generation = Int64(bitPattern: g)
        guard generation >= 0 else { throw StorageError.invalid("malformed generation token") }
    }

    public var description: String { "token(\(storeID.uuidString.prefix(8))…, epoch \(epoch), gen \(generation))" }
}

/// Which generation a read sees.
public enum ReadGeneration: Sendable {
    case current
    case token(GenerationToken)
}

/// One object as read at a generation.
public struct ObjectSnapshot: Codable, Sendable, Equatable {
    public var id: ObjectID
    public var version: Int64
    public var values: [String: StorageValue]
    /// Every relationship by name: to-one as zero or one ID, to-many sorted.
    public var relationships: [String: [ObjectID]]

    /// For callers that hold object state of their own (a context's pending objects).
    public init(id: ObjectID, version: Int64, values: [String: StorageValue], relationships: [String: [ObjectID]]) {
        self.id = id; self.version = version; self.values = values; self.relationships = relationships
    }
}

/// Everything in a store at a generation (tests, baselines, debugging).
public struct StoreDump: Codable, Sendable, Equatable {
    public var token: GenerationToken
    public var objects: [ObjectSnapshot]
}

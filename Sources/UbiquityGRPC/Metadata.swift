/// gRPC custom metadata: ordered key/value pairs. Keys are lower-case; keys ending in `-bin` carry
/// binary values (base64 on the wire, raw bytes here).
public struct Metadata: Sendable, Sequence {
    public enum Value: Sendable, Equatable {
        case string(String)
        case binary([UInt8])
    }

    public private(set) var entries: [(key: String, value: Value)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (k, v) in elements { add(k, v) }
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }

    public mutating func add(_ key: String, _ value: String) {
        entries.append((key.lowercased(), .string(value)))
    }

    public mutating func add(_ key: String, binary: [UInt8]) {
        entries.append((key.lowercased(), .binary(binary)))
    }

    public mutating func add(_ key: String, _ value: Value) {
        entries.append((key.lowercased(), value))
    }

    /// For names already lower-case (HTTP/2 header names are: nghttp2 rejects others).
    mutating func append(lowercased key: String, _ value: Value) {
        entries.append((key, value))
    }

    /// Empties the list but keeps its storage (a reused stream's metadata array).
    mutating func removeAllKeepingCapacity() {
        entries.removeAll(keepingCapacity: true)
    }

    /// First string value for `key`.
    public subscript(key: String) -> String? {
        for e in entries where e.key == key {
            if case .string(let s) = e.value { return s }
        }
        return nil
    }

    /// Every value for `key`, in order.
    public func values(for key: String) -> [Value] {
        entries.filter { $0.key == key }.map(\.value)
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: Value)]> {
        entries.makeIterator()
    }

    /// Encodes for the wire: binary values as unpadded base64.
    func wireHeaders() -> [(String, String)] {
        entries.map { e in
            switch e.value {
            case .string(let s): return (e.key, s)
            case .binary(let b): return (e.key, Base64.encode(b, padded: false))
            }
        }
    }
}

/// Base64 for `-bin` metadata (RFC 4648 standard alphabet; padded and unpadded both decode).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        // Also accept the URL-safe alphabet.
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        return t
    }()

    public static func encode(_ bytes: [UInt8], padded: Bool = true) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)]); out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            if padded { out.append(UInt8(ascii: "=")); out.append(UInt8(ascii: "=")) }
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            if padded { out.append(UInt8(ascii: "=")) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes padded or unpadded base64; nil when the text is not base64.
    public static func decode(_ s: String) -> [UInt8]? {
        var out = [UInt8]()
        out.reserveCapacity(s.utf8.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        var sawPadding = false
        for c in s.utf8 {
            if c == UInt8(ascii: "=") { sawPadding = true; continue }
            if sawPadding { return nil }
            let v = reverse[Int(c)]
            if v == 0xFF { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        if bits >= 6 { return nil }
        return out
    }
}

import Foundation

/// Hand-written JSON for history records: JSONEncoder took over half of a 100-insert save's CPU.
/// The output decodes with JSONDecoder as `[HistoryChange]` (tested against it).
enum HistoryJSON {
    static func encode(_ changes: [HistoryChange]) -> String {
        String(decoding: encodeBytes(changes), as: UTF8.self)
    }

    /// `encode`'s UTF-8 bytes (the writer binds them as the record's text without making a String).
    static func encodeBytes(_ changes: [HistoryChange]) -> [UInt8] {
        // Built as UTF-8 bytes: String appends were most of the cost.
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(changes.count * 140)
        // Everything from `{"changedProperties":[` up to the digits of the object's pk is the same
        // for changes of one entity, kind and property list (all of a 100-insert save's changes
        // share one list): it is written once and copied, and only the pk is written per change.
        var head = Head()
        for (i, c) in changes.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            if !head.fits(c) { head = Head(c) }
            out.append(contentsOf: head.bytes)
            if head.endsInURIPrefix {
                appendDecimal(c.objectID.pk.magnitude, into: &out)
                out.append(UInt8(ascii: "\""))
            } else {
                string(c.objectID.uri, into: &out)
            }
            if let t = c.tombstone {
                raw(",\"tombstone\":{", into: &out)
                for (j, k) in t.keys.sorted().enumerated() {
                    if j > 0 { out.append(UInt8(ascii: ",")) }
                    string(k, into: &out)
                    out.append(UInt8(ascii: ":"))
                    var v = ""
                    value(t[k]!, into: &v)
                    utf8(v, into: &out)
                }
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// A change's bytes before its pk digits, and what they depend on.
    private struct Head {
        var bytes: [UInt8] = []
        /// True: `bytes` end with the object URI's opening quote and its text up to the pk digits
        /// ("…/Entity/p"); false (an entity name JSON must escape): they end at `"objectID":`.
        var endsInURIPrefix = false
        var kind = HistoryChange.Kind.insert
        var entity = "", idEntity = ""
        var storeID: UUID?  // nil: no head yet
        var temporary = false
        var properties: [String] = []

        init() {}

        init(_ c: HistoryChange) {
            kind = c.kind; entity = c.entity; idEntity = c.objectID.entity; storeID = c.objectID.storeID
            temporary = c.objectID.pk < 0; properties = c.changedProperties
            raw("{\"changedProperties\":[", into: &bytes)
            for (j, p) in c.changedProperties.enumerated() { if j > 0 { bytes.append(UInt8(ascii: ",")) }; string(p, into: &bytes) }
            raw("],\"entity\":", into: &bytes)
            string(c.entity, into: &bytes)
            raw(",\"kind\":\"", into: &bytes)
            utf8(c.kind.rawValue, into: &bytes)
            raw("\",\"objectID\":", into: &bytes)
            endsInURIPrefix = !c.objectID.entity.utf8.contains(where: needsEscape)
            if endsInURIPrefix {
                bytes.append(UInt8(ascii: "\""))
                c.objectID.appendURI(to: &bytes)
                bytes.removeLast(decimalCount(c.objectID.pk.magnitude))
            }
        }

        /// Whether `c`'s bytes before its pk digits are `bytes` (an array compare is a pointer
        /// compare when both lists are the same array, as inserts of one entity share theirs).
        func fits(_ c: HistoryChange) -> Bool {
            c.objectID.storeID == storeID && c.kind == kind && (c.objectID.pk < 0) == temporary
                && c.entity == entity && c.objectID.entity == idEntity && c.changedProperties == properties
        }
    }

    static func decimalCount(_ v: UInt64) -> Int {
        var n = 1, t = v
        while t >= 10 { t /= 10; n += 1 }
        return n
    }

    static func appendDecimal(_ v: UInt64, into out: inout [UInt8]) {
        let n = decimalCount(v), end = out.count + n
        out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: n))
        out.withUnsafeMutableBufferPointer { b in
            var x = v, i = end
            repeat { i -= 1; b[i] = UInt8(ascii: "0") + UInt8(x % 10); x /= 10 } while x > 0
        }
    }

    @inline(__always) static func needsEscape(_ b: UInt8) -> Bool { b < 0x20 || b == 0x22 || b == 0x5c }

    // Appends go through contiguous UTF-8 buffers (a memcpy): appending a `String.UTF8View`
    // to an array takes the generic element-by-element path.

    @inline(__always) static func raw(_ s: StaticString, into out: inout [UInt8]) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    @inline(__always) static func utf8(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { out.append(contentsOf: $0) }
    }

    static func string(_ s: String, into out: inout [UInt8]) {
        var s = s
        let plain = s.withUTF8 { u -> Bool in
            if u.contains(where: needsEscape) { return false }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: u)
            out.append(UInt8(ascii: "\""))
            return true
        }
        if !plain {
            var t = ""
            string(s, into: &t)
            utf8(t, into: &out)
        }
    }

    static func value(_ v: StorageValue, into out: inout String) {
        func number(_ d: Double) -> String { d.isFinite ? "\(d)" : "null" }
        switch v {
        case .null: out += "{\"null\":true}"
        case .string(let s): out += "{\"string\":"; string(s, into: &out); out += "}"
        case .bool(let b): out += "{\"bool\":\(b)}"
        case .int(let i): out += "{\"int\":\(i)}"
        case .double(let d): out += "{\"double\":\(number(d))}"
        case .decimal(let s): out += "{\"decimal\":"; string(s, into: &out); out += "}"
        case .date(let d): out += "{\"date\":\(number(d))}"
        case .binary(let d): out += "{\"binary\":\"\(d.base64EncodedString())\"}"
        case .uuid(let u): out += "{\"uuid\":\"\(u.uuidString)\"}"
        case .uri(let s): out += "{\"uri\":"; string(s, into: &out); out += "}"
        }
    }

    static func string(_ s: String, into out: inout String) {
        out += "\""
        var plain = true
        for b in s.utf8 where b < 0x20 || b == 0x22 || b == 0x5c { plain = false; break }
        if plain { out += s } else {
            for ch in s.unicodeScalars {
                switch ch {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                default:
                    if ch.value < 0x20 { out += String(format: "\\u%04x", ch.value) } else { out.unicodeScalars.append(ch) }
                }
            }
        }
        out += "\""
    }
}

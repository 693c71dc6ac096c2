import Foundation

/// Hand-written JSON for history records: JSONEncoder took over half of a 100-insert save's CPU.
/// The output decodes with JSONDecoder as `[HistoryChange]` (tested against it).
enum HistoryJSON {
    static func encode(_ changes: [HistoryChange]) -> String {
        // Built as UTF-8 bytes (one String at the end): String appends were most of the cost.
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(changes.count * 140)
        for (i, c) in changes.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            raw("{\"changedProperties\":[", into: &out)
            for (j, p) in c.changedProperties.enumerated() { if j > 0 { out.append(UInt8(ascii: ",")) }; string(p, into: &out) }
            raw("],\"entity\":", into: &out)
            string(c.entity, into: &out)
            raw(",\"kind\":\"", into: &out)
            utf8(c.kind.rawValue, into: &out)
            raw("\",\"objectID\":", into: &out)
            if c.objectID.entity.utf8.contains(where: needsEscape) {
                string(c.objectID.uri, into: &out)
            } else {
                out.append(UInt8(ascii: "\""))
                c.objectID.appendURI(to: &out)
                out.append(UInt8(ascii: "\""))
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
        return String(decoding: out, as: UTF8.self)
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

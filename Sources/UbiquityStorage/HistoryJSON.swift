import Foundation

/// Hand-written JSON for history records: JSONEncoder took over half of a 100-insert save's CPU.
/// The output decodes with JSONDecoder as `[HistoryChange]` (tested against it).
enum HistoryJSON {
    static func encode(_ changes: [HistoryChange]) -> String {
        String(decoding: encodeBytes(changes), as: UTF8.self)
    }

    /// `encode`'s UTF-8 bytes (the writer binds them as the record's text without making a String).
    static func encodeBytes(_ changes: [HistoryChange]) -> [UInt8] {
        var cuts: [Int] = []
        return encodeBytes(changes, pkCuts: &cuts, cutting: false)
    }

    /// The history record of a save of new objects only, made on the saving caller's thread
    /// before the pks are known: `encodeBytes` of the inserts' changes with every pk's digits
    /// left out and where they go. `fill` with the save's first pk (insert i got `first + i`)
    /// gives exactly the bytes `encodeBytes` makes from the changes the writer would record.
    /// `insert(i)`: insert i's entity and changed properties. A change's bytes around its pk
    /// depend only on those (and the store): they are encoded by `encodeBytes` itself, once per
    /// run of inserts with the same entity and property list, and copied for the others.
    static func prepareInserts(storeID: UUID, count: Int, _ insert: (Int) -> (entity: String, changedProperties: [String])) -> PreparedHistory {
        var out: [UInt8] = [UInt8(ascii: "[")]
        var cuts: [Int] = []
        cuts.reserveCapacity(count)
        var entity: String?, properties: [String] = []
        var head: [UInt8] = [], tail: [UInt8] = []
        for i in 0..<count {
            let (e, p) = insert(i)
            if e != entity || p != properties {
                let change = HistoryChange(kind: .insert, objectID: ObjectID(storeID: storeID, entity: e, pk: 0), entity: e, changedProperties: p, tombstone: nil)
                var cut: [Int] = []
                let one = encodeBytes([change], pkCuts: &cut, cutting: true)  // "[" head, gap, tail "]"
                head = Array(one[1..<cut[0]]); tail = Array(one[cut[0]..<(one.count - 1)])
                entity = e; properties = p
                if i == 0 { out.reserveCapacity(count * (head.count + tail.count + 1) + 2) }
            }
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: head)
            cuts.append(out.count)
            out.append(contentsOf: tail)
        }
        out.append(UInt8(ascii: "]"))
        return PreparedHistory(storeID: storeID, bytes: out, pkCuts: cuts)
    }

    /// A prepared record with the pks `firstPK`, `firstPK + 1`, … written into its gaps: one
    /// copy of each piece and the digits, into an array of the exact size.
    static func fill(_ h: PreparedHistory, firstPK: Int64) -> [UInt8] {
        let n = h.pkCuts.count
        var digits = 0
        var pk = UInt64(firstPK)
        for _ in 0..<n { digits += decimalCount(pk); pk += 1 }
        let total = h.bytes.count + digits
        return h.bytes.withUnsafeBufferPointer { src in
            h.pkCuts.withUnsafeBufferPointer { cuts in
                [UInt8](unsafeUninitializedCapacity: total) { dst, count in
                    let s = src.baseAddress!, d = dst.baseAddress!  // never empty: at least "[]"
                    var from = 0, to = 0, pk = UInt64(firstPK)
                    for cut in cuts {
                        (d + to).initialize(from: s + from, count: cut - from)
                        to += cut - from; from = cut
                        let k = decimalCount(pk)
                        var x = pk, i = to + k
                        repeat { i -= 1; d[i] = UInt8(ascii: "0") + UInt8(x % 10); x /= 10 } while x > 0
                        to += k; pk += 1
                    }
                    (d + to).initialize(from: s + from, count: src.count - from)
                    count = total
                }
            }
        }
    }

    /// `cutting`: every change's pk digits are left out and their offsets appended to `pkCuts`.
    private static func encodeBytes(_ changes: [HistoryChange], pkCuts: inout [Int], cutting: Bool) -> [UInt8] {
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
                if cutting { pkCuts.append(out.count) } else { appendDecimal(c.objectID.pk.magnitude, into: &out) }
                out.append(UInt8(ascii: "\""))
            } else {
                string(c.objectID.uri, into: &out)
                if cutting {
                    // the escaped URI ends with the pk's digits and the closing quote
                    let digits = decimalCount(c.objectID.pk.magnitude)
                    out.removeSubrange((out.count - 1 - digits)..<(out.count - 1))
                    pkCuts.append(out.count - 1)
                }
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

    static func needsEscape(_ b: UInt8) -> Bool { b < 0x20 || b == 0x22 || b == 0x5c }

    // Appends go through contiguous UTF-8 buffers (a memcpy): appending a `String.UTF8View`
    // to an array takes the generic element-by-element path.

    static func raw(_ s: StaticString, into out: inout [UInt8]) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    static func utf8(_ s: String, into out: inout [UInt8]) {
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

/// A save's history record without its pks (`HistoryJSON.prepareInserts`), made on the saving
/// caller's thread; the writer writes the pks in (`HistoryJSON.fill`).
struct PreparedHistory: Sendable {
    /// The store the objects' URIs name (the writer uses the record only for that store).
    let storeID: UUID
    let bytes: [UInt8]
    /// Where each insert's pk digits go in `bytes`, in insert order (ascending).
    let pkCuts: [Int]
}

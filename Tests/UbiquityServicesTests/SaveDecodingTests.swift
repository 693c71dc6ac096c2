import Foundation
import SwiftProtobuf
import XCTest
import UbiquityProtos
@testable import UbiquityStorage
@testable import UbiquityServices

/// `SaveDecoding` reads Save requests straight from their bytes. Whenever it answers, the answer
/// must equal SwiftProtobuf's decode converted by `Convert` (the path it replaces); whenever that
/// path fails, it must not answer; and a request the router cannot frame fails as before.
final class SaveDecodingTests: XCTestCase {
    let store = UUID()
    let otherStore = UUID()

    // MARK: wire helpers

    static func varint(_ v: UInt64) -> [UInt8] {
        var v = v, out: [UInt8] = []
        while v >= 0x80 { out.append(UInt8(v & 0x7f) | 0x80); v >>= 7 }
        out.append(UInt8(v))
        return out
    }
    static func field(_ n: Int, _ wire: Int, _ payload: [UInt8]) -> [UInt8] {
        varint(UInt64(n << 3 | wire)) + (wire == 2 ? varint(UInt64(payload.count)) : []) + payload
    }
    static func bytes(_ m: some SwiftProtobuf.Message) -> [UInt8] { try! m.serializedBytes() }

    func value(_ k: Ubiquity_V1_Value.OneOf_Kind?) -> Ubiquity_V1_Value { var v = Ubiquity_V1_Value(); v.kind = k; return v }

    func insert(_ t: String, _ e: String = "Thing", _ values: [String: Ubiquity_V1_Value] = [:], rels: [String: [Ubiquity_V1_ObjectRef]] = [:]) -> Ubiquity_V1_Insert {
        var i = Ubiquity_V1_Insert()
        i.temporaryID = t; i.entity = e; i.values = values
        for (k, refs) in rels { var l = Ubiquity_V1_ObjectRefList(); l.refs = refs; i.relationships[k] = l }
        return i
    }
    func ref(temp t: String) -> Ubiquity_V1_ObjectRef { var r = Ubiquity_V1_ObjectRef(); r.temporaryID = t; return r }
    func ref(id: String) -> Ubiquity_V1_ObjectRef { var r = Ubiquity_V1_ObjectRef(); r.objectID = id; return r }

    /// Every value kind, extremes, multi-byte text, an empty key.
    func allValues() -> [String: Ubiquity_V1_Value] {
        var ts = Google_Protobuf_Timestamp(); ts.seconds = -62_135_596_800; ts.nanos = 999_999_999
        return [
            "n": value(.nullValue(.nullValue)), "none": value(nil), "s": value(.stringValue("héllo " + String(repeating: "ü", count: 200))),
            "empty": value(.stringValue("")), "b": value(.boolValue(true)), "bf": value(.boolValue(false)),
            "i16": value(.int16Value(-32768)), "i32": value(.int32Value(Int32.min)), "i64": value(.int64Value(Int64.min)),
            "i64max": value(.int64Value(Int64.max)), "f": value(.floatValue(-1.5e-7)), "d": value(.doubleValue(-0.0)),
            "dinf": value(.doubleValue(.infinity)), "dec": value(.decimalValue("-12.50")), "date": value(.dateValue(ts)),
            "date0": value(.dateValue(Google_Protobuf_Timestamp())), "bin": value(.binaryValue(Data([0, 1, 255]))), "bin0": value(.binaryValue(Data())),
            "u": value(.uuidValue("1b4e28ba-2fa1-11d2-883f-0016d3cca427")), "uri": value(.uriValue("https://example.com/é")), "": value(.int64Value(7)),
        ]
    }

    func rich() -> Ubiquity_V1_SaveRequest {
        var r = Ubiquity_V1_SaveRequest()
        r.storeID = store.uuidString
        r.author = "me"; r.contextName = "ctx"; r.clientTransactionID = "tx-1"; r.dryRun = true; r.mergePolicy = .mergeByPropertyObjectTrump
        r.inserts = [
            insert("t1", "Thing", allValues(), rels: ["one": [ref(temp: "t2")], "many": [ref(temp: "t1"), ref(id: "x-ubiquity://\(store.uuidString)/Thing/p5"), ref(temp: "")], "none": []]),
            insert("t2", "SubThing", ["age": value(.int64Value(3))]),
            insert("t3"),
        ]
        return r
    }

    // MARK: the oracle

    /// A deterministic rendering of an engine save (doubles by bit pattern).
    func render(_ s: SaveRequest) -> String {
        func v(_ x: StorageValue) -> String {
            switch x {
            case .null: "null"
            case .string(let s): "s:\(s.debugDescription)"
            case .bool(let b): "b:\(b)"
            case .int(let i): "i:\(i)"
            case .double(let d): "d:\(d.bitPattern)"
            case .decimal(let s): "dec:\(s)"
            case .date(let d): "date:\(d.bitPattern)"
            case .binary(let d): "bin:\(Array(d))"
            case .uuid(let u): "u:\(u)"
            case .uri(let s): "uri:\(s.debugDescription)"
            }
        }
        func r(_ x: ObjectReference) -> String {
            switch x { case .temporary(let t): "t:\(t.debugDescription)"; case .permanent(let id): "p:\(id.uri)" }
        }
        var out = "policy=\(s.mergePolicy) author=\(String(describing: s.author)) ctx=\(String(describing: s.contextName)) tx=\(String(describing: s.clientTransactionID)) dry=\(s.dryRun) u=\(s.updates.count) d=\(s.deletes.count)\n"
        for i in s.inserts {
            out += "insert \(i.temporaryID.debugDescription) \(i.entity.debugDescription)\n"
            for k in i.values.keys.sorted() { out += "  \(k.debugDescription)=\(v(i.values[k]!))\n" }
            for k in i.relationships.keys.sorted() { out += "  rel \(k.debugDescription)=\(i.relationships[k]!.map(r))\n" }
        }
        return out
    }

    enum Outcome: Equatable { case routerError(String), decodeError(String), convertError, ok(String) }

    /// What the handler did before: the router's decode, then `Convert`.
    func reference(_ bytes: [UInt8]) -> Outcome {
        let m: Ubiquity_V1_SaveRequest
        do { m = try Ubiquity_V1_SaveRequest(serializedBytes: bytes) } catch { return .decodeError("\(error)") }
        guard let s = try? StoresService.saveRequest(m, store: store) else { return .convertError }
        return .ok(render(s))
    }

    /// Checks one request's bytes; returns whether the fast path answered.
    @discardableResult
    func check(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let want = reference(bytes)
        // (the handler gets the request's bytes as sent; nothing decodes them before it)
        guard let fast = SaveDecoding.decode(bytes) else {
            // the handler decodes with SwiftProtobuf: same outcome as before by construction
            if case .decodeError(let e) = want {
                XCTAssertThrowsError(try Ubiquity_V1_SaveRequest(requestBytes: bytes), file: file, line: line) { err in
                    XCTAssertTrue("\(err)".contains("could not decode request as ubiquity.v1.SaveRequest: \(e)"), "\(err)", file: file, line: line)
                }
            }
            return false
        }
        if fast.foreignReference(store: store) {
            XCTAssertEqual(want, .convertError, "a foreign reference must fail the conversion", file: file, line: line)
            return true
        }
        var s = SaveRequest()
        s.inserts = fast.inserts; s.mergePolicy = fast.mergePolicy; s.dryRun = fast.dryRun
        s.author = fast.author.isEmpty ? nil : fast.author
        s.contextName = fast.contextName.isEmpty ? nil : fast.contextName
        s.clientTransactionID = fast.clientTransactionID.isEmpty ? nil : fast.clientTransactionID
        XCTAssertEqual(want, .ok(render(s)), "fast decode differs", file: file, line: line)
        XCTAssertEqual(fast.storeID, (try? Ubiquity_V1_SaveRequest(serializedBytes: bytes))?.storeID, file: file, line: line)
        return true
    }

    // MARK: tests

    func testValidRequestsTakeTheFastPathAndMatch() {
        XCTAssertTrue(check(Self.bytes(rich())))
        XCTAssertTrue(check([]))  // the empty request
        for p in [Ubiquity_V1_MergePolicy.unspecified, .error, .mergeByPropertyStoreTrump, .mergeByPropertyObjectTrump, .overwrite, .rollback] {
            var r = rich(); r.mergePolicy = p; r.dryRun = false
            XCTAssertTrue(check(Self.bytes(r)))
        }
        // the load generator's shape: 100 inserts of three values
        var r = Ubiquity_V1_SaveRequest()
        r.storeID = store.uuidString; r.author = "ubiquity-load"
        r.inserts = (0..<100).map { insert("t\($0)", "Item", ["name": value(.stringValue("load-\($0)")), "age": value(.int64Value(Int64($0) * 1000)), "score": value(.doubleValue(Double($0) / 10))]) }
        XCTAssertTrue(check(Self.bytes(r)))
    }

    func testWhatConversionRejectsFallsBack() {
        let bad: [Ubiquity_V1_Value] = [value(.decimalValue("abc")), value(.decimalValue("")), value(.uuidValue("not-a-uuid"))]
        for v in bad {
            var r = rich(); r.inserts[1].values["bad"] = v
            XCTAssertFalse(check(Self.bytes(r)))
        }
        var r = rich(); r.inserts[0].temporaryID = ""
        XCTAssertFalse(check(Self.bytes(r)))
        r = rich(); r.inserts[2].entity = ""
        XCTAssertFalse(check(Self.bytes(r)))
        r = rich(); r.inserts[0].relationships["x"] = { var l = Ubiquity_V1_ObjectRefList(); l.refs = [Ubiquity_V1_ObjectRef()]; return l }()
        XCTAssertFalse(check(Self.bytes(r)))
        r = rich(); r.inserts[0].relationships["x"] = { var l = Ubiquity_V1_ObjectRefList(); l.refs = [ref(id: "nope")]; return l }()
        XCTAssertFalse(check(Self.bytes(r)))
        // another store's object: decoded, then refused by the handler's store check
        r = rich(); r.inserts[0].relationships["x"] = { var l = Ubiquity_V1_ObjectRefList(); l.refs = [ref(id: "x-ubiquity://\(otherStore.uuidString)/Thing/p1")]; return l }()
        XCTAssertTrue(check(Self.bytes(r)))
        // updates and deletes are the SwiftProtobuf path's
        r = rich(); var u = Ubiquity_V1_Update(); u.objectID = "x-ubiquity://\(store.uuidString)/Thing/p1"; u.values = ["a": value(.int64Value(1))]; r.updates = [u]
        XCTAssertFalse(check(Self.bytes(r)))
        r = rich(); var d = Ubiquity_V1_Delete(); d.objectID = "x-ubiquity://\(store.uuidString)/Thing/p1"; r.deletes = [d]
        XCTAssertFalse(check(Self.bytes(r)))
        // an enum value the service does not know
        XCTAssertFalse(check(Self.bytes(rich()) + Self.field(5, 0, Self.varint(9))))
        XCTAssertFalse(check(Self.bytes(rich()) + Self.field(5, 0, Self.varint(UInt64(bitPattern: -1)))))
    }

    func testUnknownFieldsDuplicatesAndOrder() {
        let unknown = Self.field(100, 0, Self.varint(5)) + Self.field(101, 2, [1, 2, 3]) + Self.field(102, 1, Array(repeating: 9, count: 8)) + Self.field(103, 5, [1, 2, 3, 4])
        // unknown fields at every level
        let v = Self.bytes(value(.int64Value(42))) + unknown
        let entry = Self.field(1, 2, Array("k".utf8)) + unknown + Self.field(2, 2, v)
        var ts = Self.field(1, 0, Self.varint(100)) + unknown + Self.field(2, 0, Self.varint(5))
        let dateEntry = Self.field(2, 2, Self.field(10, 2, ts)) + Self.field(1, 2, Array("when".utf8))  // value before key
        let refBytes = Self.field(1, 2, Array("t1".utf8)) + unknown
        let relEntry = Self.field(1, 2, Array("r".utf8)) + Self.field(2, 2, Self.field(1, 2, refBytes) + unknown)
        let ins = unknown + Self.field(3, 2, entry) + Self.field(3, 2, dateEntry) + Self.field(4, 2, relEntry) + Self.field(2, 2, Array("Thing".utf8)) + Self.field(1, 2, Array("t1".utf8))
        let req = unknown + Self.field(2, 2, ins) + Self.field(1, 2, Array(store.uuidString.utf8)) + unknown
        XCTAssertTrue(check(req))
        // later scalar fields win; merged inserts (two serializations concatenated) keep the last map entry per key
        let a = Self.bytes(insert("a", "Thing", ["x": value(.int64Value(1)), "y": value(.stringValue("a"))]))
        let b = Self.bytes(insert("b", "Other", ["x": value(.doubleValue(2)), "": value(.nullValue(.nullValue))], rels: ["r": [ref(temp: "a")]]))
        XCTAssertTrue(check(Self.field(2, 2, a + b) + Self.field(6, 2, Array("first".utf8)) + Self.field(6, 2, Array("second".utf8)) + Self.field(9, 0, [1]) + Self.field(9, 0, [0])))
        // a map entry without key or value; an empty Value; a ref whose oneof is given twice (last wins)
        let noKey = Self.field(2, 2, Self.bytes(value(.boolValue(true))))
        let noValue = Self.field(1, 2, Array("nv".utf8))
        let twice = Self.field(1, 2, Array("t9".utf8)) + Self.field(2, 2, Array("x-ubiquity://\(store.uuidString)/Thing/p2".utf8))
        let ins2 = Self.field(1, 2, Array("t".utf8)) + Self.field(2, 2, Array("E".utf8)) + Self.field(3, 2, noKey) + Self.field(3, 2, noValue)
            + Self.field(3, 2, []) + Self.field(4, 2, Self.field(1, 2, Array("r2".utf8)) + Self.field(2, 2, Self.field(1, 2, twice)))
        XCTAssertTrue(check(Self.field(2, 2, ins2)))
        // non-minimal varints (a 10-byte one too) and a negative int32 sign-extended
        let longTag: [UInt8] = [0x92, 0x80, 0x00]  // field 2, wire 2, padded
        ts = Self.field(1, 0, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
        let ins3 = Self.bytes(insert("t", "E", ["i": value(.int32Value(-1))])) + Self.field(3, 2, Self.field(1, 2, Array("d".utf8)) + Self.field(2, 2, Self.field(10, 2, ts)))
        XCTAssertTrue(check(longTag + Self.varint(UInt64(ins3.count)) + ins3))
    }

    func testUnusualWireDataFallsBack() {
        // a value given twice in one entry (SwiftProtobuf merges), a oneof given twice, wrong wire types, groups
        let twoValues = Self.field(1, 2, Array("k".utf8)) + Self.field(2, 2, Self.bytes(value(.int64Value(1)))) + Self.field(2, 2, Self.bytes(value(.stringValue("x"))))
        let twoKinds = Self.field(1, 2, Array("k".utf8)) + Self.field(2, 2, Self.bytes(value(.int64Value(1))) + Self.bytes(value(.stringValue("x"))))
        let base = Self.field(1, 2, Array("t".utf8)) + Self.field(2, 2, Array("E".utf8))
        for extra in [Self.field(3, 2, twoValues), Self.field(3, 2, twoKinds), Self.field(3, 0, [1]), Self.field(1, 0, [1]),
                      Self.field(3, 2, Self.field(1, 2, Array("k".utf8)) + Self.field(2, 2, Self.field(6, 2, [1]))),  // int64 as bytes
                      Self.field(3, 2, Self.field(1, 2, Array("k".utf8)) + Self.field(2, 2, Self.field(7, 1, Array(repeating: 0, count: 8)))),
                      Self.field(50, 3, []) + Self.field(50, 4, []),  // an unknown group
                      Self.field(3, 2, Self.field(1, 2, [0xff, 0xfe]))]  // invalid UTF-8 key
        {
            XCTAssertFalse(check(Self.field(2, 2, base + extra)))
        }
        XCTAssertFalse(check(Self.field(1, 0, [1])))  // store_id as a varint
        XCTAssertFalse(check(Self.field(2, 0, [1])))  // an insert as a varint
        XCTAssertFalse(check(Self.field(1, 2, [0xc3])))  // a truncated UTF-8 sequence
        XCTAssertFalse(check(Self.field(2, 2, Self.field(1, 2, [0xed, 0xa0, 0x80]) + Self.field(2, 2, Array("E".utf8)))))  // a surrogate
    }

    func testEveryTruncationAndByteChangeAgrees() {
        let full = Self.bytes(rich())
        for n in 0..<full.count { check(Array(full[..<n])) }
        // deterministic single-byte changes at every position
        var rng = MutationRNG(state: 0x5eed)
        for i in 0..<full.count {
            for v in [UInt8(0), 0xff, 0x80, full[i] ^ 0x01, UInt8(truncatingIfNeeded: rng.next())] where v != full[i] {
                var m = full; m[i] = v
                check(m)
            }
        }
    }
}

/// A small deterministic generator (a 64-bit LCG's high bits) for reproducible mutations.
struct MutationRNG {
    var state: UInt64
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state >> 29
    }
}

/// `SaveEncoding` writes Save results straight into wire form; decoded, they must equal
/// `Convert.saveResult`.
final class SaveEncodingTests: XCTestCase {
    func testResultsMatchTheGenericConversion() throws {
        let store = UUID(), other = UUID()
        func id(_ pk: Int64, _ e: String = "Thing", _ s: UUID? = nil) -> ObjectID { ObjectID(storeID: s ?? store, entity: e, pk: pk) }
        let token = GenerationToken(storeID: store, epoch: 3, generation: 41)
        var results: [SaveResult] = []
        // inserts only (the common case), with multi-byte entity names and long IDs
        let inserted = (1...120).map { id(Int64($0) * 1_000_003, $0 % 3 == 0 ? "Sübject" : "Thing") }
        results.append(SaveResult(token: token, permanentIDs: Dictionary(uniqueKeysWithValues: inserted.enumerated().map { ("t\($0.offset)", $0.element) }),
                                  versions: Dictionary(uniqueKeysWithValues: inserted.map { ($0, 1) }), resolvedConflicts: [], skipped: [], dryRun: false, replayed: false))
        // updates, skips, another store's IDs, zero and negative versions, flags, an empty key, generation 0
        results.append(SaveResult(token: GenerationToken(storeID: other, epoch: 0, generation: 0), permanentIDs: ["": id(1, "E", other), "a": id(Int64.max)],
                                  versions: [id(1, "E", other): 0, id(2): -3, id(Int64.max): Int64.max], resolvedConflicts: [], skipped: [id(9), id(10, "X", other)], dryRun: true, replayed: true))
        results.append(SaveResult(token: token, permanentIDs: [:], versions: [:], resolvedConflicts: [], skipped: [], dryRun: false, replayed: false))
        for r in results {
            let fast = try Ubiquity_V1_SaveResult(serializedBytes: SaveEncoding.saveResult(r, model: nil))
            XCTAssertEqual(fast, Convert.saveResult(r, model: nil))
        }
    }
}

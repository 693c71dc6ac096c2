import Foundation
import XCTest
import UbiquityStorage
import UbiquityTestSupport
@testable import UbiquityQuery

/// The SQL compiler and the in-memory evaluator must give the same answers: random predicates
/// over random data, each run both ways.
final class AgreementTests: QueryTestCase, @unchecked Sendable {
    static let words = ["Émile", "emile", "EMILE", "e\u{301}mile", "Zoë", "zoe", "ZOË", "straße", "STRASSE", "Strasse", "ångström",
                        "Angstrom", "a*b", "a?b", "50%_off", "50x_off", "it's", "", "x[y]", "σίσυφος", "ΣΊΣΥΦΟΣ", "ﬁle", "FILE", "naïve", "NAIVE",
                        "abc", "ABC", "abd", "b", "Bob", "bob", "ann", "Ann", "äpfel", "Apfel"]

    /// Stores random objects; returns every Person-family snapshot and a resolver over all objects.
    func seed(_ s: Store, seed: UInt64, people: Int) async throws -> [ObjectSnapshot] {
        var rng = SplitMix(state: seed)
        func pick<T>(_ a: [T]) -> T { a[Int(rng.next() % UInt64(a.count))] }
        func maybe(_ v: StorageValue, _ nilOdds: UInt64 = 5) -> StorageValue { rng.next() % nilOdds == 0 ? .null : v }
        var ops: [InsertOperation] = []
        for t in 0..<6 { ops.append(ins("tag\(t)", "Tag", ["label": maybe(.string(pick(Self.words)))])) }
        for d in 0..<3 { ops.append(ins("dept\(d)", "Dept", ["title": .string(pick(Self.words)), "budget": .double(Double(d) * 1.5)])) }
        for p in 0..<people {
            let employee = rng.next() % 3 == 0
            var v: [String: StorageValue] = [
                "name": maybe(.string(pick(Self.words))), "email": maybe(.string(pick(Self.words))),
                "age": maybe(.int(Int64(rng.next() % 8) * 10)), "score": maybe(.double(Double(rng.next() % 7) / 2)),
                "flag": maybe(.bool(rng.next() % 2 == 0)), "born": maybe(.date(Double(rng.next() % 5) * 1000)),
                "salary": maybe(.decimal(pick(["10", "10.5", "9.75", "100", "-3"]))),
                "code": maybe(.uuid(pick([UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8")!, UUID(uuidString: "00000000-0000-0000-0000-000000000001")!]))),
                "photo": maybe(.binary(Data([UInt8(rng.next() % 3)]))),
                "site": maybe(.uri(pick(["https://a.example/x", "https://b.example/y"]))),
            ]
            if employee { v["title"] = maybe(.string(pick(Self.words))) }
            var rels: [String: [String]] = [:]
            if p > 0 && rng.next() % 2 == 0 { rels["mentor"] = ["p\(rng.next() % UInt64(p))"] }
            if p > 0 { rels["friends"] = (0..<Int(rng.next() % 3)).map { _ in "p\(rng.next() % UInt64(p))" } }
            rels["tags"] = (0..<Int(rng.next() % 3)).map { _ in "tag\(rng.next() % 6)" }
            if employee && rng.next() % 4 != 0 { rels["dept"] = ["dept\(rng.next() % 3)"] }
            ops.append(ins("p\(p)", employee ? "Employee" : "Person", v, rels))
            for k in 0..<Int(rng.next() % 4) {
                ops.append(ins("n\(p)-\(k)", "Note", ["text": maybe(.string(pick(Self.words))), "n": maybe(.int(Int64(rng.next() % 6)))], ["owner": ["p\(p)"]]))
            }
        }
        _ = try await insert(s, ops)
        return try await s.dump().objects
    }

    /// A random predicate over Person (key paths from the fixture model, values drawn so matches happen).
    struct Gen {
        var rng: SplitMix
        var ids: [ObjectID]
        mutating func pick<T>(_ a: [T]) -> T { a[Int(rng.next() % UInt64(a.count))] }
        mutating func str() -> String {
            let w = pick(AgreementTests.words)
            return "'" + w.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        }
        mutating func opts() -> String { pick(["", "", "[c]", "[d]", "[cd]"]) }
        mutating func stringPath() -> String { pick(["name", "email", "mentor.name", "mentor.mentor.email"]) }
        mutating func fragment(_ s: String) -> String {
            let scalars = Array(s.unicodeScalars)
            if scalars.isEmpty { return "" }
            let a = Int(rng.next() % UInt64(scalars.count)), n = Int(rng.next() % 3) + 1
            return String(String.UnicodeScalarView(scalars[a..<min(scalars.count, a + n)]))
        }
        mutating func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'" }

        mutating func comparison(inCollection: Bool = false) -> String {
            switch rng.next() % 24 {
            case 0, 1: return "\(stringPath()) \(pick(["==", "!=", "<", ">=", "<=", ">"]))\(opts()) \(str())"
            case 2: return "\(stringPath()) BEGINSWITH\(opts()) \(quoted(fragment(pick(AgreementTests.words))))"
            case 3: return "\(stringPath()) ENDSWITH\(opts()) \(quoted(fragment(pick(AgreementTests.words))))"
            case 4: return "\(stringPath()) CONTAINS\(opts()) \(quoted(fragment(pick(AgreementTests.words))))"
            case 5: return "\(stringPath()) LIKE\(opts()) \(pick(["'*e*'", "'?b*'", "'a\\\\*b'", "'a?b'", "'*'", "'50*off'", "'Z?e'", "'*ß*'", "'s*e'"]))"
            case 6: return "\(stringPath()) MATCHES\(opts()) \(pick(["'[a-z]+'", "'.*e.*'", "'(ab|bo)[cdb]?'", "'\\\\w+'", "'[^a-c]*'", "'ST.*'", "'a.b'", "'(?:e|é)mile'", "'.{3,4}'"]))"
            case 7: return "\(stringPath()) IN\(opts()) {\(str()), \(str())}"
            case 8: return "\(pick(["age", "mentor.age"])) \(pick(["==", "!=", "<", ">", "<=", ">="])) \(pick(["0", "10", "30", "45", "70", "nil"]))"
            case 9: return "age BETWEEN {\(pick(["0", "10", "20"])), \(pick(["30", "50", "5"]))}"
            case 10: return "\(pick(["age", "mentor.age"])) IN {\(pick(["0", "10", "20"])), \(pick(["30", "40"])), 70}"
            case 11: return "score \(pick(["<", ">=", "==", "!="])) \(pick(["1.5", "2", "0", "nil"]))"
            case 12: return "flag == \(pick(["YES", "NO", "nil", "1"]))"
            case 13: return "born \(pick(["<", ">", "=="])) \(pick(["2000", "1000.0", "$d"]))"
            case 14: return "salary \(pick(["<", ">", "==", "!="])) \(pick(["10", "10.5", "'9.75'", "0", "$s"]))"
            case 15: return "code \(pick(["==", "!="])) \(pick(["'6ba7b810-9dad-11d1-80b4-00c04fd430c8'", "nil", "$u"]))"
            case 16: return "\(pick(["mentor", "SELF"])) \(pick(["==", "!="])) \(quoted(pick(ids).uri))"
            case 17: return "\(pick(["mentor", "SELF"])) IN {\(quoted(pick(ids).uri)), \(quoted(pick(ids).uri))}"
            case 18: return "age \(pick(["<", "==", ">"])) mentor.age"
            case 19: return "name \(pick(["==", "!=", "<"]))\(opts()) email"
            case 20: return "photo \(pick(["==", "!="])) \(pick(["$photo", "nil"]))"
            case 21: return "site \(pick(["BEGINSWITH", "==", "ENDSWITH"])) \(pick(["'https://a'", "'https://b.example/y'", "'y'"]))"
            default:
                if inCollection { return "age > 20" }
                return collection()
            }
        }

        mutating func collection() -> String {
            let q = pick(["ANY ", "ALL ", "NONE ", ""])
            switch rng.next() % 12 {
            case 0: return "\(q)notes.n \(pick(["<", ">", "==", "!="])) \(pick(["0", "2", "3", "nil"]))"
            case 1: return "\(q)notes.text \(pick(["BEGINSWITH", "CONTAINS", "==", "LIKE"]))\(opts()) \(str())"
            case 2: return "\(q)friends.age \(pick(["<", ">", "=="])) \(pick(["age", "20", "mentor.age"]))"
            case 3: return "\(q)tags.label \(pick(["==", "!=", "ENDSWITH"]))\(opts()) \(str())"
            case 4: return "\(pick(["notes", "friends", "tags", "mentor.notes"])).@count \(pick(["==", ">", "<=", "!="])) \(pick(["0", "1", "2"]))"
            case 5: return "notes.@\(pick(["sum", "avg", "min", "max"])).n \(pick(["<", ">", "==", ">="])) \(pick(["0", "2", "3.5", "nil"]))"
            case 6: return "\(q)mentor.notes.n > \(pick(["1", "3"]))"
            case 7: return "\(q)friends.mentor.name ==\(opts()) \(str())"
            case 8: return "\(q)friends.friends.age > \(pick(["10", "40"]))"
            case 9: return "\(quoted(pick(ids).uri)) IN friends"
            case 10: return "friends CONTAINS \(quoted(pick(ids).uri))"
            default: return "\(pick(["ANY", "ALL", "NONE"])) friends.tags.label BEGINSWITH\(opts()) \(quoted(fragment(pick(AgreementTests.words))))"
            }
        }

        mutating func predicate(_ depth: Int = 0) -> String {
            if depth >= 3 { return comparison() }
            switch rng.next() % 6 {
            case 0: return "(\(predicate(depth + 1)) AND \(predicate(depth + 1)))"
            case 1: return "(\(predicate(depth + 1)) OR \(predicate(depth + 1)))"
            case 2: return "NOT \(predicate(depth + 1))"
            default: return comparison()
            }
        }
    }

    func testSQLAndMemoryAgree() async throws {
        let s = try open()
        let all = try await seed(s, seed: 42, people: 70)
        var byID: [ObjectID: ObjectSnapshot] = [:]
        for o in all { byID[o.id] = o }
        let people = all.filter { $0.id.entity == "Person" || $0.id.entity == "Employee" }
        let model = s.modelDefinition!
        let vars: [String: QueryArgument] = ["d": .scalar(.date(2000)), "s": .scalar(.decimal("10")), "u": .scalar(.uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000001")!)),
                                             "photo": .scalar(.binary(Data([1])))]
        var gen = Gen(rng: SplitMix(state: 7), ids: people.map(\.id))
        let predicates = (0..<600).map { _ in gen.predicate() }
        // Object results select and load objects in one statement: every third predicate also
        // fetches whole objects, which must be exactly the stored objects of the ID fetch, in order.
        let fetched = try await s.read { ctx in
            try predicates.enumerated().map { i, p -> ([ObjectID], [ObjectSnapshot]?) in
                var r = FetchRequest(entity: "Person")
                r.predicate = p
                r.variables = vars
                r.resultType = .objectIDs
                let ids = try ctx.fetch(r).objectIDs
                guard i % 3 == 0 else { return (ids, nil) }
                r.resultType = .objects
                return (ids, try ctx.fetch(r).objects)
            }
        }
        let sqlResults = fetched.map(\.0)
        for (p, (ids, objects)) in zip(predicates, fetched) {
            if let objects { XCTAssertEqual(objects, ids.map { byID[$0]! }, "objects of predicate: \(p)") }
        }
        var nonEmpty = 0, nonFull = 0
        for (p, sql) in zip(predicates, sqlResults) {
            let pred = try Predicate.parse(p, entity: "Person", model: model, variables: vars)
            let mem = try people.filter { try pred.evaluate($0, resolve: { byID[$0] }) }.map(\.id)
            XCTAssertEqual(Set(sql), Set(mem), "predicate: \(p)\nonly SQL: \(Set(sql).subtracting(mem).map(\.pk).sorted())\nonly memory: \(Set(mem).subtracting(sql).map(\.pk).sorted())")
            if !sql.isEmpty { nonEmpty += 1 }
            if sql.count < people.count { nonFull += 1 }
        }
        // the generator must exercise both outcomes, or the test proves little
        XCTAssertGreaterThan(nonEmpty, 150)
        XCTAssertGreaterThan(nonFull, 150)
    }

    func testFoldingExamples() throws {
        XCTAssertEqual(TextFold.fold("Straße", .caseInsensitive), "strasse")
        XCTAssertEqual(TextFold.fold("ΣΊΣΥΦΟΣ", .caseInsensitive), TextFold.fold("σίσυφος", .caseInsensitive))
        XCTAssertEqual(TextFold.fold("e\u{301}mile", [.caseInsensitive, .diacriticInsensitive]), "emile")
        XCTAssertEqual(TextFold.fold("Émile", .diacriticInsensitive), "Emile")
        XCTAssertEqual(TextFold.fold("ﬁle", .caseInsensitive), "file")
        XCTAssertEqual(TextFold.fold("e\u{301}", .caseInsensitive), "é")  // NFC
        XCTAssertTrue(WildcardPattern.like("a\\*b").matches("a*b"))
        XCTAssertFalse(WildcardPattern.like("a\\*b").matches("axb"))
        XCTAssertEqual(WildcardPattern.like("a*?[x]").glob, "a*?[[]x]")
        XCTAssertEqual(WildcardPattern.contains("50%_*").glob, "*50%_[*]*")
    }

    func testRegexEngine() throws {
        func m(_ p: String, _ t: String, _ o: FoldOptions = []) throws -> Bool {
            try RegexProgram.compile(p, options: o, maxLength: 1000, maxProgram: 5000).matches(t, maxSteps: 1_000_000)
        }
        XCTAssertTrue(try m("[a-z]+\\d{2,3}", "abc123"))
        XCTAssertFalse(try m("[a-z]+\\d{2,3}", "abc1234"))
        XCTAssertTrue(try m("(ab|cd)*e?", "abcdab"))
        XCTAssertTrue(try m("STRASSE", "straße", .caseInsensitive))
        XCTAssertTrue(try m("[A-Z]+", "émile", [.caseInsensitive, .diacriticInsensitive]))
        XCTAssertTrue(try m("^a.c$", "abc"))
        XCTAssertFalse(try m("a.c", "a\nc"))
        XCTAssertTrue(try m("\\.\\*", ".*"))
        // catastrophic for backtracking engines; linear here, and bounded
        XCTAssertFalse(try m("(a|aa)*(a|aa)*(a|aa)*b", String(repeating: "a", count: 2000)))
        XCTAssertThrowsError(try RegexProgram.compile("(a|aa)*(a|aa)*b", options: [], maxLength: 100, maxProgram: 100).matches(String(repeating: "a", count: 5000), maxSteps: 10_000)) {
            XCTAssertTrue(($0 as? RegexError)?.isLimit == true)
        }
    }
}

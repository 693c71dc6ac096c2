import Foundation
import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// Every fetch option, checked against expectations computed here from the source rows.
final class FetchTests: QueryTestCase, @unchecked Sendable {
    struct P { var t: String; var entity: String; var name: String?; var age: Int64?; var score: Double?; var title: String?; var dept: String?; var mentor: String? }
    let rows: [P] = [
        P(t: "ann", entity: "Person", name: "Ann", age: 30, score: 1.5, title: nil, dept: nil, mentor: nil),
        P(t: "bob", entity: "Employee", name: "bob", age: 25, score: 2.5, title: "eng", dept: "d1", mentor: "ann"),
        P(t: "emile", entity: "Employee", name: "Émile", age: 40, score: nil, title: "eng", dept: "d1", mentor: "ann"),
        P(t: "zoe", entity: "Person", name: "zoe", age: nil, score: 0.5, title: nil, dept: nil, mentor: nil),
        P(t: "zoe2", entity: "Employee", name: "Zoë", age: 35, score: 3, title: "mgr", dept: "d2", mentor: "emile"),
        P(t: "nobody", entity: "Person", name: nil, age: 20, score: nil, title: nil, dept: nil, mentor: "zoe"),
    ]
    var ids: [String: ObjectID] = [:]

    func load(_ s: Store) async throws {
        var ops = [ins("d1", "Dept", ["title": "Research", "budget": .double(10)]), ins("d2", "Dept", ["title": "sales", "budget": .double(5)])]
        for r in rows {
            var v: [String: StorageValue] = ["name": r.name.map { .string($0) } ?? .null, "age": r.age.map { .int($0) } ?? .null, "score": r.score.map { .double($0) } ?? .null]
            if r.entity == "Employee" { v["title"] = r.title.map { .string($0) } ?? .null }
            var rels: [String: [String]] = [:]
            if let d = r.dept { rels["dept"] = [d] }
            if let m = r.mentor { rels["mentor"] = [m] }
            ops.append(ins(r.t, r.entity, v, rels))
        }
        ops.append(ins("n1", "Note", ["text": "a", "n": 1], ["owner": ["ann"]]))
        ops.append(ins("n2", "Note", ["text": "b", "n": 2], ["owner": ["ann"]]))
        ops.append(ins("n3", "Note", ["text": "c", "n": 5], ["owner": ["emile"]]))
        ids = try await insert(s, ops)
    }

    func names(_ r: FetchResult) -> [String] { r.objectIDs.map { id in rows.first { ids[$0.t] == id }!.t } }
    func bytesLess(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) { case (nil, nil): return false; case (nil, _): return true; case (_, nil): return false
        case (let x?, let y?): return x.utf8.lexicographicallyPrecedes(y.utf8) }
    }
    /// Expected order: stable sort of `rows` (pk order = rows order) by a key.
    func expected(_ filter: (P) -> Bool = { _ in true }, by less: ((P, P) -> Bool)? = nil) -> [String] {
        let f = rows.filter(filter)
        guard let less else { return f.map(\.t) }
        return f.enumerated().sorted { a, b in less(a.element, b.element) || (!less(b.element, a.element) && a.offset < b.offset) }.map(\.element.t)
    }

    func testSortsLimitOffsetAndResultTypes() async throws {
        let s = try open()
        try await load(s)
        // binary order (UTF-8 bytes), nil first
        var r = try await fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "name")]; $0.resultType = .objectIDs }
        XCTAssertEqual(names(r), expected(by: { self.bytesLess($0.name, $1.name) }))
        // case-insensitive: folded
        r = try await fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "name", caseInsensitive: true)]; $0.resultType = .objectIDs }
        XCTAssertEqual(names(r), ["nobody", "ann", "bob", "zoe", "zoe2", "emile"])
        // descending, nil last; then limit and offset
        r = try await fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "age", ascending: false)]; $0.resultType = .objectIDs }
        let byAgeDesc = expected(by: { ($0.age ?? Int64.min) > ($1.age ?? Int64.min) })
        XCTAssertEqual(names(r), byAgeDesc)
        r = try await fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "age", ascending: false)]; $0.fetchLimit = 2; $0.fetchOffset = 1; $0.resultType = .objectIDs }
        XCTAssertEqual(names(r), Array(byAgeDesc[1...2]))
        // key path through a to-one relationship, then a second key
        r = try await fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "mentor.name", ascending: true), SortDescriptor(keyPath: "age", ascending: false)]; $0.resultType = .objectIDs }
        let mentorName: (P) -> String? = { p in p.mentor.flatMap { m in self.rows.first { $0.t == m }!.name } }
        XCTAssertEqual(names(r), expected(by: { a, b in
            let (x, y) = (mentorName(a), mentorName(b))
            if x != y { return self.bytesLess(x, y) }
            return (a.age ?? .min) > (b.age ?? .min)
        }))
        // objects
        r = try await fetch(s, "Person", "age >= 30") { $0.sortDescriptors = [SortDescriptor(keyPath: "age")] }
        XCTAssertEqual(r.objects.map { $0.values["age"] }, [.int(30), .int(35), .int(40)])
        XCTAssertEqual(r.objectIDs, r.objects.map(\.id))
        XCTAssertEqual(r.count, 3)
        XCTAssertEqual(r.objects[1].relationships["mentor"], [ids["emile"]!])
        XCTAssertEqual(r.objects[1].id.entity, "Employee")
        // count honours offset and limit
        for (limit, offset, want) in [(0, 0, 4), (2, 0, 2), (0, 3, 1), (10, 5, 0)] {
            r = try await fetch(s, "Person", "age >= 25") { $0.resultType = .count; $0.fetchLimit = limit; $0.fetchOffset = offset }
            XCTAssertEqual(r.count, want)
        }
        // propertiesToFetch for objects: only those values come back
        r = try await fetch(s, "Person", "name == 'Ann'") { $0.propertiesToFetch = ["name", "notes"] }
        XCTAssertEqual(r.objects[0].values, ["name": "Ann"])
        XCTAssertEqual(Set(r.objects[0].relationships.keys), ["notes"])
        // includesSubentities false
        r = try await fetch(s, "Person") { $0.includesSubentities = false; $0.resultType = .objectIDs }
        XCTAssertEqual(Set(names(r)), Set(rows.filter { $0.entity == "Person" }.map(\.t)))
        r = try await fetch(s, "Employee", "dept.title ==[c] 'RESEARCH'") { $0.resultType = .objectIDs }
        XCTAssertEqual(Set(names(r)), ["bob", "emile"])
    }

    func testDictionariesDistinctGroupByHaving() async throws {
        let s = try open()
        try await load(s)
        var r = try await fetch(s, "Employee") { $0.resultType = .dictionaries; $0.propertiesToFetch = ["name", "mentor.name", "dept"]; $0.sortDescriptors = [SortDescriptor(keyPath: "name")] }
        XCTAssertEqual(r.dictionaries.count, 3)
        // binary order: "Zoë" < "bob" < "Émile"
        XCTAssertEqual(r.dictionaries[0], ["name": "Zoë", "mentor.name": "Émile", "dept": .uri(ids["d2"]!.uri)])
        XCTAssertEqual(r.dictionaries[1], ["name": "bob", "mentor.name": "Ann", "dept": .uri(ids["d1"]!.uri)])
        XCTAssertEqual(r.dictionaries[2]["mentor.name"], .string("Ann"))
        // distinct
        r = try await fetch(s, "Employee") { $0.resultType = .dictionaries; $0.propertiesToFetch = ["title"]; $0.returnsDistinctResults = true; $0.sortDescriptors = [SortDescriptor(keyPath: "title")] }
        XCTAssertEqual(r.dictionaries, [["title": "eng"], ["title": "mgr"]])
        // all attributes when propertiesToFetch is empty
        r = try await fetch(s, "Person", "name == 'Ann'") { $0.resultType = .dictionaries }
        XCTAssertEqual(r.dictionaries[0]["age"], .int(30))
        XCTAssertEqual(r.dictionaries[0]["mentor"], .null)
        // group by + aggregates + having, computed here independently
        r = try await fetch(s, "Employee") {
            $0.resultType = .dictionaries
            $0.propertiesToFetch = ["dept.title", "n = count:(SELF)", "total = sum:(age)", "avg = average:(age)", "oldest = max:(age)", "first = min:(name)", "best = max:(score)"]
            $0.propertiesToGroupBy = ["dept.title"]
            $0.sortDescriptors = [SortDescriptor(keyPath: "total", ascending: false)]
        }
        var groups: [String: [P]] = [:]
        for p in rows where p.entity == "Employee" { groups[p.dept == "d1" ? "Research" : "sales", default: []].append(p) }
        let expect = groups.map { k, ps -> [String: StorageValue] in
            let ages = ps.compactMap(\.age)
            return ["dept.title": .string(k), "n": .int(Int64(ps.count)), "total": .int(ages.reduce(0, +)), "avg": .double(Double(ages.reduce(0, +)) / Double(ages.count)),
                    "oldest": .int(ages.max()!), "first": .string(ps.compactMap(\.name).min { $0.utf8.lexicographicallyPrecedes($1.utf8) }!),
                    "best": ps.compactMap(\.score).max().map { .double($0) } ?? .null]
        }.sorted { a, b in if case .int(let x) = a["total"]!, case .int(let y) = b["total"]! { return x > y }; return false }
        XCTAssertEqual(r.dictionaries, expect)
        r = try await fetch(s, "Employee") {
            $0.resultType = .dictionaries
            $0.propertiesToFetch = ["dept.title", "n = count:(SELF)"]
            $0.propertiesToGroupBy = ["dept.title"]
            $0.havingPredicate = "n > 1"
        }
        XCTAssertEqual(r.dictionaries, [["dept.title": "Research", "n": .int(2)]])
        // errors name the field
        var e = await queryError { _ = try await self.fetch(s, "Employee") { $0.resultType = .dictionaries; $0.propertiesToFetch = ["name", "n = count:(SELF)"]; $0.propertiesToGroupBy = ["title"] } }
        XCTAssertEqual(e?.field, "propertiesToFetch")
        e = await queryError { _ = try await self.fetch(s, "Employee") { $0.resultType = .dictionaries; $0.propertiesToFetch = ["n = median:(age)"] } }
        XCTAssertEqual(e?.reason, .unsupported)
        e = await queryError { _ = try await self.fetch(s, "Employee") { $0.resultType = .dictionaries; $0.propertiesToFetch = ["title", "n = count:(SELF)"]; $0.propertiesToGroupBy = ["title"]; $0.havingPredicate = "m > 1" } }
        XCTAssertEqual(e?.field, "havingPredicate")
        XCTAssertEqual(e?.reason, .unknownKeyPath)
        e = await queryError { _ = try await self.fetch(s, "Employee") { $0.resultType = .dictionaries; $0.propertiesToFetch = ["s = sum:(name)"] } }
        XCTAssertEqual(e?.reason, .typeMismatch)
    }

    func testPrefetchingIsSetBased() async throws {
        let s = try open()
        // N people, each with a mentor and two notes; statements must not grow with N
        func statements(_ n: Int) async throws -> (Int, Int, Int) {
            var ops: [InsertOperation] = [ins("m", "Person", ["name": "mentor"])]
            for i in 0..<n {
                ops.append(ins("p\(i)", "Person", ["name": .string("p\(n)-\(i)")], ["mentor": ["m"], "friends": ["m"]]))
                ops.append(ins("a\(i)", "Note", ["n": .int(1)], ["owner": ["p\(i)"]]))
                ops.append(ins("b\(i)", "Note", ["n": .int(2)], ["owner": ["p\(i)"]]))
            }
            _ = try await insert(s, ops)
            return try await s.read { ctx in
                var r = FetchRequest(entity: "Person")
                r.predicate = "name BEGINSWITH 'p\(n)-'"
                r.relationshipKeyPathsForPrefetching = ["mentor", "notes", "friends.notes"]
                let before = ctx.statementCount
                let res = try ctx.fetch(r)
                return (ctx.statementCount - before, res.objects.count, res.prefetched.count)
            }
        }
        let small = try await statements(5)
        let large = try await statements(120)
        XCTAssertEqual(small.1, 5)
        XCTAssertEqual(small.2, 1 + 10)  // the mentor and every note
        XCTAssertEqual(large.1, 120)
        XCTAssertEqual(large.2, 1 + 240)
        XCTAssertEqual(small.0, large.0, "statements grow with the number of objects: \(small.0) vs \(large.0)")
        let e = await queryError { _ = try await self.fetch(s, "Person") { $0.relationshipKeyPathsForPrefetching = ["notes.text"] } }
        XCTAssertEqual(e?.field, "relationshipKeyPathsForPrefetching")
    }

    func testBatchesStayOnOneGeneration() async throws {
        let s = try open()
        _ = try await insert(s, (0..<25).map { ins("i\($0)", "Item", ["seq": .int(Int64($0)), "cat": .int(1)]) })
        var r = FetchRequest(entity: "Item")
        r.predicate = "cat == 1"
        r.sortDescriptors = [SortDescriptor(keyPath: "seq")]
        r.fetchBatchSize = 10
        var tokens: [GenerationToken] = []
        var seqs: [StorageValue] = []
        var batches = 0
        for try await b in s.fetchBatches(r) {
            batches += 1
            XCTAssertEqual(s.pinCount, batches < 3 ? 1 : 0)  // the last batch ends the pin
            tokens.append(b.token)
            seqs += b.objects.map { $0.values["seq"]! }
            // the store moves on meanwhile: deletes and inserts are not seen by later batches
            _ = try await s.batchDelete(entity: "Item", predicate: "seq == \(batches * 3)")
            _ = try await insert(s, [ins("x", "Item", ["seq": .int(-1), "cat": .int(1)])])
            _ = try await s.collectGarbage()
        }
        XCTAssertEqual(batches, 3)
        XCTAssertEqual(Set(tokens).count, 1)
        XCTAssertEqual(seqs, (0..<25).map { .int(Int64($0)) })
        XCTAssertEqual(s.pinCount, 0)
        // a consumer that stops early ends the pin when it drops the stream
        do {
            var early = FetchRequest(entity: "Item")
            early.fetchBatchSize = 5
            for try await b in s.fetchBatches(early) { XCTAssertEqual(b.count, 5); break }
        }
        XCTAssertEqual(s.pinCount, 0)
        // IDs and dictionaries stream too
        r.resultType = .dictionaries
        r.propertiesToFetch = ["seq"]
        var dicts = 0
        for try await b in s.fetchBatches(r) { dicts += b.dictionaries.count }
        XCTAssertEqual(dicts, 25 + 3 - 3)
    }

    func testPendingChangesMerge() async throws {
        let s = try open()
        try await load(s)
        let sid = s.id
        let all = try await s.dump().objects
        let ann = all.first { $0.id == ids["ann"] }!, bob = all.first { $0.id == ids["bob"] }!, zoe = all.first { $0.id == ids["zoe"] }!
        var bobNow = bob; bobNow.values["age"] = .int(99)        // updated to match
        var annNow = ann; annNow.values["age"] = .int(1)         // updated to stop matching
        let newcomer = ObjectSnapshot(id: ObjectID(storeID: sid, entity: "Person", pk: -1), version: 0,
                                      values: ["name": "Newt", "age": .int(50), "score": .null], relationships: ["mentor": [ids["bob"]!], "notes": [], "friends": [], "tags": []])
        let outsider = ObjectSnapshot(id: ObjectID(storeID: sid, entity: "Person", pk: -2), version: 0, values: ["name": "Young", "age": .int(3)], relationships: [:])
        let pending = PendingChanges(inserted: [newcomer, outsider], updated: [bobNow, annNow], deleted: [ids["emile"]!, zoe.id])
        var r = FetchRequest(entity: "Person")
        r.predicate = "age >= 30"
        r.sortDescriptors = [SortDescriptor(keyPath: "age", ascending: false)]
        var res = try await s.fetch(r, pending: pending)
        // stored matches: ann 30 (now 1: out), emile 40 (deleted), zoe2 35; pending: bob 99, Newt 50
        XCTAssertEqual(res.objects.map { $0.values["name"] }, ["bob", "Newt", "Zoë"])
        XCTAssertEqual(res.objectIDs[1].pk, -1)
        XCTAssertEqual(res.objects[0].values["age"], .int(99))
        r.fetchLimit = 1
        r.fetchOffset = 1
        res = try await s.fetch(r, pending: pending)
        XCTAssertEqual(res.objectIDs.map(\.pk), [-1])
        r.fetchLimit = 0; r.fetchOffset = 0
        r.resultType = .count
        res = try await s.fetch(r, pending: pending)
        XCTAssertEqual(res.count, 3)
        // predicates through relationships resolve pending state: Newt's mentor is bob (now 99)
        r.resultType = .objectIDs
        r.predicate = "mentor.age > 90"
        res = try await s.fetch(r, pending: pending)
        XCTAssertEqual(res.objectIDs.map(\.pk), [-1])
        // dictionaries merge too
        r.predicate = "age >= 30"
        r.resultType = .dictionaries
        r.propertiesToFetch = ["name", "mentor.name"]
        res = try await s.fetch(r, pending: pending)
        XCTAssertEqual(res.dictionaries, [["name": "bob", "mentor.name": "Ann"], ["name": "Newt", "mentor.name": "bob"], ["name": "Zoë", "mentor.name": "Émile"]])
        // grouping with pending changes is refused, as in Core Data
        r.propertiesToFetch = ["name", "n = count:(SELF)"]
        r.propertiesToGroupBy = ["name"]
        let grouped = r
        let e = await queryError { _ = try await s.fetch(grouped, pending: pending) }
        XCTAssertEqual(e?.reason, .unsupported)
    }

    func testGenerationsPinnedAndFenced() async throws {
        // no readable window: GC collects an old generation as soon as nothing pins it
        let s = try open { $0.minimumReadableWindowSeconds = 0 }
        try await load(s)
        let before = s.currentToken
        _ = try await s.batchUpdate(entity: "Person", predicate: "name == 'Ann'", values: ["age": .int(80)])
        var r = FetchRequest(entity: "Person")
        r.predicate = "age > 70"
        r.resultType = .objectIDs
        let now = try await s.fetch(r)
        let then = try await s.fetch(r, at: .token(before))
        XCTAssertEqual(now.objectIDs, [ids["ann"]!])
        XCTAssertEqual(then.objectIDs, [])
        XCTAssertEqual(then.token, before)
        r.predicate = "age == 30"
        let old = try await s.fetch(r, at: .token(before))
        XCTAssertEqual(old.objectIDs, [ids["ann"]!])
        do { _ = try await s.fetch(r, minimumGeneration: s.currentToken.generation + 5); XCTFail() } catch let e as StorageError { XCTAssertEqual(e.reason, .generationNotReached) }
        try await s.collectAllGarbage()
        do { _ = try await s.fetch(r, at: .token(before)); XCTFail() } catch let e as StorageError { XCTAssertEqual(e.reason, .generationExpired) }
    }

    func testIndexesAreUsed() async throws {
        let s = try open()
        _ = try await insert(s, (0..<200).map { ins("i\($0)", "Item", ["seq": .int(Int64($0)), "cat": .int(Int64($0 % 10)), "label": .string("L\($0)")]) })
        func plan(_ p: String?, sort: String? = nil) async throws -> String {
            var r = FetchRequest(entity: "Item")
            r.predicate = p
            r.sortDescriptors = sort.map { [SortDescriptor(keyPath: $0)] } ?? []
            r.fetchLimit = 10
            let req = r
            return try await s.read { ctx in try ctx.explain(req).joined(separator: " | ") }
        }
        let eq = try await plan("cat == 3")
        XCTAssertTrue(eq.contains("USING INDEX ubq_ix_Item_0 (a_cat=?)"), eq)
        let range = try await plan("seq > 5 AND seq < 50")
        XCTAssertTrue(range.contains("USING INDEX ubq_ix_Item_1 (a_seq>? AND a_seq<?)"), range)
        let sorted = try await plan(nil, sort: "seq")
        XCTAssertTrue(sorted.contains("USING INDEX ubq_ix_Item_1"), sorted)
        XCTAssertFalse(sorted.contains("TEMP B-TREE"), sorted)
        let prefix = try await plan("label BEGINSWITH 'L1'")
        XCTAssertTrue(prefix.contains("USING INDEX ubq_ix_Item_2"), prefix)
        let inList = try await plan("cat IN {1, 2}")
        XCTAssertTrue(inList.contains("USING INDEX ubq_ix_Item_0 (a_cat=?)"), inList)
    }

    func testFetchErrors() async throws {
        let s = try open()
        try await load(s)
        var e = await queryError { _ = try await self.fetch(s, "Persn") }
        XCTAssertEqual(e?.reason, .unknownEntity)
        XCTAssertEqual(e?.message, "no entity named 'Persn' (did you mean 'Person'?)")
        e = await queryError { _ = try await self.fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "notes.n")] } }
        XCTAssertEqual(e?.field, "sortDescriptors")
        e = await queryError { _ = try await self.fetch(s, "Person") { $0.sortDescriptors = [SortDescriptor(keyPath: "mentor")] } }
        XCTAssertEqual(e?.reason, .typeMismatch)
        e = await queryError { _ = try await self.fetch(s, "Person") { $0.fetchLimit = -1 } }
        XCTAssertEqual(e?.field, "fetchLimit")
        e = await queryError { _ = try await self.fetch(s, "Person") { $0.propertiesToFetch = ["nope"] } }
        XCTAssertEqual(e?.field, "propertiesToFetch")
        e = await queryError { _ = try await self.fetch(s, "Person", "age > 'x'") }
        XCTAssertEqual(e?.field, "predicate")
        XCTAssertEqual(e?.column, 7)
        var limits = QueryLimits()
        limits.maxFetchResults = 3
        let three = limits
        e = await queryError { _ = try await s.fetch(FetchRequest(entity: "Person"), limits: three) }
        XCTAssertEqual(e?.reason, .limitExceeded)
        var capped = FetchRequest(entity: "Person")
        capped.fetchLimit = 3
        let ok = try await s.fetch(capped, limits: limits)
        XCTAssertEqual(ok.count, 3)
        // a MATCHES that would run too long stops with a clear error instead of hogging a reader
        _ = try await insert(s, [ins("long", "Person", ["name": .string(String(repeating: "a", count: 20_000))])])
        limits = QueryLimits()
        limits.maxRegexSteps = 50_000
        var r = FetchRequest(entity: "Person")
        r.predicate = "name MATCHES '(a|aa)*(a|aa)*c'"
        let slow = r, tight = limits
        e = await queryError { _ = try await s.fetch(slow, limits: tight) }
        XCTAssertEqual(e?.reason, .limitExceeded)
        XCTAssertEqual(e?.message, "MATCHES needed more than 50000 steps on one value")
    }
}

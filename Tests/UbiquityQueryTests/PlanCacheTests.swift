import Foundation
import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// Compiled fetch plans (Plans.swift): a cached plan must give exactly what compiling the
/// request afresh gives, for every call's variable values, and fail the same way.
final class PlanCacheTests: QueryTestCase, @unchecked Sendable {
    /// One reader connection, so every fetch meets the same plan cache.
    func openOne(model: ModelDefinition = QFixtures.model) throws -> Store { try open(model: model) { $0.readerCount = 1 } }

    func load(_ s: Store) async throws -> [String: ObjectID] {
        var ops: [InsertOperation] = []
        for i in 0..<40 {
            ops.append(ins("p\(i)", "Person", [
                "name": .string("n\(i % 7)"), "age": i % 5 == 4 ? .null : .int(Int64(i % 10)), "score": .double(Double(i) / 4),
                "flag": .bool(i % 2 == 0), "born": .date(Double(i) * 86_400), "salary": .decimal("\(i).50"),
                "code": .uuid(UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", i))!),
            ], i > 0 ? ["mentor": ["p\(i - 1)"], "friends": ["p\(i / 2)"]] : [:]))
        }
        ops.append(ins("e1", "Employee", ["name": "n1", "age": 3, "title": "eng"]))
        return try await insert(s, ops)
    }

    /// The same request run by the executor alone (no plan cache).
    func uncached(_ s: Store, _ r: FetchRequest, limits: QueryLimits = QueryLimits()) async throws -> FetchResult {
        try await s.read { ctx in try QueryErrors.mapping { try FetchExecutor(r, ctx: ctx, limits: limits, pending: nil).run() } }
    }

    func cacheState(_ s: Store) async throws -> (count: Int, hits: Int, compiles: Int) {
        try await s.read { ctx in let c = ctx.connectionCache { FetchPlanCache() }; return (c.count, c.hits, c.compiles) }
    }

    func assertSame(_ a: FetchResult, _ b: FetchResult, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.objectIDs, b.objectIDs, what, file: file, line: line)
        XCTAssertEqual(a.count, b.count, what, file: file, line: line)
        XCTAssertEqual(a.objects, b.objects, what, file: file, line: line)
        XCTAssertEqual(a.token, b.token, what, file: file, line: line)
    }

    func testCachedPlansBindEachCallsValues() async throws {
        let s = try openOne()
        _ = try await load(s)
        let cases: [(String, [[String: QueryArgument]])] = [
            ("age == $a", (0..<10).map { ["a": .scalar(.int(Int64($0)))] } + [["a": .scalar(.double(3))], ["a": .scalar(.bool(true))]]),
            ("age IN $l AND flag == YES", [["l": .list([.int(1), .int(2)])], ["l": .list([.int(7), .int(8)])], ["l": .list([.int(0), .int(2), .int(6)])]]),
            ("age BETWEEN $r OR name == $n", [["r": .list([.int(1), .int(3)]), "n": .scalar(.string("n4"))], ["r": .list([.int(5), .int(9)]), "n": .scalar(.string("n0"))]]),
            ("salary > $s", [["s": .scalar(.string("10.5"))], ["s": .scalar(.string("30"))], ["s": .scalar(.decimal("2"))]]),
            ("code == $c", [["c": .scalar(.string("00000000-0000-0000-0000-000000000003"))], ["c": .scalar(.uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000012")!))]]),
            ("born < $d AND $m < score", [["d": .scalar(.date(86_400 * 5)), "m": .scalar(.double(0.5))], ["d": .scalar(.date(86_400 * 30)), "m": .scalar(.int(6))]]),
            ("mentor.mentor.age == $a OR ANY friends.age == $a", [["a": .scalar(.int(2))], ["a": .scalar(.int(8))]]),
            // not cacheable (the value shapes the SQL or is transformed): still right every time
            ("name BEGINSWITH $p", [["p": .scalar(.string("n1"))], ["p": .scalar(.string("n6"))]]),
            ("name ==[c] $p", [["p": .scalar(.string("N2"))], ["p": .scalar(.string("n3"))]]),
            ("age IN {$a, 9}", [["a": .scalar(.int(1))], ["a": .scalar(.int(2))]]),
            ("age == $a OR age == nil", [["a": .scalar(.null)], ["a": .scalar(.int(1))]]),
        ]
        for (predicate, calls) in cases {
            for type in [FetchResultType.objects, .objectIDs, .count] {
                for (i, vars) in calls.enumerated() {
                    var r = FetchRequest(entity: "Person")
                    r.predicate = predicate
                    r.variables = vars
                    r.resultType = type
                    r.sortDescriptors = [SortDescriptor(keyPath: "score", ascending: false)]
                    if i % 2 == 1 { r.fetchLimit = 3 }
                    let cached = try await s.fetch(r)
                    let fresh = try await uncached(s, r)
                    assertSame(cached, fresh, "\(predicate) \(type) \(vars)")
                }
            }
        }
        let state = try await cacheState(s)
        XCTAssertGreaterThan(state.hits, 20, "plans were reused")
        // the cached plans found something (the comparison above is not between two empty results)
        var r = FetchRequest(entity: "Person")
        r.predicate = "age == $a"
        r.variables = ["a": .scalar(.int(3))]
        let three = try await s.fetch(r)
        XCTAssertEqual(three.count, 5)  // four Persons and the Employee
        XCTAssertTrue(three.objects.allSatisfy { $0.values["age"] == .int(3) })
        r.variables = ["a": .scalar(.int(7))]
        let seven = try await s.fetch(r)
        XCTAssertEqual(seven.count, 4)
        XCTAssertTrue(seven.objects.allSatisfy { $0.values["age"] == .int(7) })
    }

    func testErrorsAreTheSameWithACachedPlan() async throws {
        let s = try openOne()
        _ = try await load(s)
        // a good call caches the plan of each shape; the bad value then meets that plan
        let shapes: [(String, QueryArgument, QueryArgument)] = [
            ("salary > $s", .scalar(.string("1.5")), .scalar(.string("abc"))),
            ("code == $c", .scalar(.string("00000000-0000-0000-0000-000000000003")), .scalar(.string("not-a-uuid"))),
            ("salary IN $l", .list([.string("1.5"), .string("2")]), .list([.string("1.5"), .string("x")])),
            ("name == $n AND salary < $n", .scalar(.string("4")), .scalar(.string("four"))),
        ]
        for (predicate, good, bad) in shapes {
            var r = FetchRequest(entity: "Person")
            r.predicate = predicate
            r.variables = [String(predicate.split(separator: "$")[1].prefix(1)): good]
            _ = try await s.fetch(r)
            _ = try await s.fetch(r)
            r.variables = [String(predicate.split(separator: "$")[1].prefix(1)): bad]
            let req = r
            let cached = await queryError { _ = try await s.fetch(req) }
            let fresh = await queryError { _ = try await self.uncached(s, req) }
            XCTAssertNotNil(cached, predicate)
            XCTAssertEqual(cached, fresh, predicate)
        }
        // errors found while compiling: the same on every call (nothing is cached for them)
        let bad: [(String, [String: QueryArgument])] = [
            ("age ==", [:]), ("nmae == 1", [:]), ("age > 'x'", [:]), ("age == $a", [:]),
            ("age == $a", ["a": .scalar(.string("x"))]), ("age IN $a", ["a": .scalar(.int(1))]), ("age BETWEEN $a", ["a": .list([.int(1)])]),
        ]
        for (predicate, vars) in bad {
            var r = FetchRequest(entity: "Person")
            r.predicate = predicate
            r.variables = vars
            let req = r
            let first = await queryError { _ = try await s.fetch(req) }
            let second = await queryError { _ = try await s.fetch(req) }
            let fresh = await queryError { _ = try await self.uncached(s, req) }
            XCTAssertNotNil(first, predicate)
            XCTAssertEqual(first, second, predicate)
            XCTAssertEqual(first, fresh, predicate)
        }
        // too many results: the same limit error through a plan
        var limits = QueryLimits()
        limits.maxFetchResults = 3
        var r = FetchRequest(entity: "Person")
        r.predicate = "age == $a"
        r.variables = ["a": .scalar(.int(1))]
        let req = r, three = limits
        _ = await queryError { _ = try await s.fetch(req, limits: three) }
        let e = await queryError { _ = try await s.fetch(req, limits: three) }
        XCTAssertEqual(e?.reason, .limitExceeded)
        XCTAssertEqual(e?.field, "fetchLimit")
    }

    func testMigrationStartsAfresh() async throws {
        let s = try openOne()
        _ = try await load(s)
        var r = FetchRequest(entity: "Person")
        r.predicate = "age == $a"
        r.variables = ["a": .scalar(.int(2))]
        let before = try await s.fetch(r)
        _ = try await s.fetch(r)
        XCTAssertNil(before.objects.first?.values["nick"])
        let hits = try await cacheState(s).hits
        XCTAssertEqual(hits, 1)
        var m = QFixtures.model
        m.versionIdentifier = "q2"
        m.entities[0].attributes.append(AttributeDefinition(name: "nick", type: .string))
        _ = try await s.migrate(to: m, backupPath: dir + "/backup.sqlite")
        let after = try await s.fetch(r)
        XCTAssertEqual(after.objectIDs, before.objectIDs)
        XCTAssertEqual(after.objects.first?.values["nick"], .null, "the new model's columns are selected")
        let state = try await cacheState(s)
        XCTAssertEqual(state.hits, 0, "a new cache for the new model")
        XCTAssertEqual(state.compiles, 1)
    }

    func testCacheIsBounded() async throws {
        let s = try openOne()
        _ = try await load(s)
        for i in 0..<(FetchPlanCache.capacity + 36) {
            var r = FetchRequest(entity: "Person")
            r.predicate = "age == \(i % 10) AND score >= \(i)"
            r.resultType = .count
            let n = try await s.fetch(r).count
            let u = try await uncached(s, r).count
            XCTAssertEqual(n, u)
        }
        let state = try await cacheState(s)
        XCTAssertEqual(state.count, FetchPlanCache.capacity)
        XCTAssertEqual(state.compiles, FetchPlanCache.capacity + 36)
        // the most recent plans stayed
        var r = FetchRequest(entity: "Person")
        r.predicate = "age == \((FetchPlanCache.capacity + 35) % 10) AND score >= \(FetchPlanCache.capacity + 35)"
        r.resultType = .count
        _ = try await s.fetch(r)
        let hits = try await cacheState(s).hits
        XCTAssertEqual(hits, 1)
    }

    /// A call finds its plan by comparing its request with a key (`matches`) and hashing it
    /// (`hashOf`) without making a key: both must answer exactly as making the key would, for
    /// requests that differ in any field, in variable kinds, names, list lengths, or only in
    /// variable values (the same plan) and in the order variables were added.
    func testKeyMatchingAgreesWithMakingTheKey() {
        var base = FetchRequest(entity: "Person")
        base.predicate = "age == $a AND name IN $n"
        base.variables = ["a": .scalar(.int(3)), "n": .list([.string("x"), .string("y")])]
        let limits = QueryLimits()
        var variants: [FetchRequest] = [base]
        func vary(_ f: (inout FetchRequest) -> Void) { var r = base; f(&r); variants.append(r) }
        vary { $0.entity = "Employee" }
        vary { $0.predicate = nil }
        vary { $0.predicate = "age == $a AND name IN $n " }
        vary { $0.variables["a"] = .scalar(.int(99)) }                        // same kind: same key
        vary { $0.variables["a"] = .scalar(.double(3)) }
        vary { $0.variables["a"] = .scalar(.null) }
        vary { $0.variables["a"] = .list([.int(3)]) }
        vary { $0.variables["n"] = .list([.string("p"), .string("q")]) }      // same kinds
        vary { $0.variables["n"] = .list([.string("x")]) }
        vary { $0.variables["n"] = .list([.string("x"), .uri("y")]) }
        vary { $0.variables["b"] = .scalar(.int(1)) }
        vary { $0.variables = ["a": .scalar(.int(3))] }
        vary { $0.variables = ["a": .scalar(.int(3)), "m": .list([.string("x"), .string("y")])] }
        vary { r in  // the same variables added in another order
            r.variables = [:]
            r.variables["n"] = .list([.string("x"), .string("y")])
            r.variables["a"] = .scalar(.int(7))
        }
        vary { $0.sortDescriptors = [SortDescriptor(keyPath: "age")] }
        vary { $0.sortDescriptors = [SortDescriptor(keyPath: "age", ascending: false)] }
        vary { $0.fetchLimit = 5 }
        vary { $0.fetchOffset = 5 }
        vary { $0.fetchBatchSize = 5 }
        vary { $0.resultType = .count }
        vary { $0.propertiesToFetch = ["name"] }
        vary { $0.propertiesToGroupBy = ["name"] }
        vary { $0.havingPredicate = "x > 1" }
        vary { $0.returnsDistinctResults = true }
        vary { $0.relationshipKeyPathsForPrefetching = ["mentor"] }
        vary { $0.includesSubentities = false }
        var other = limits
        other.maxInListSize = 3
        for a in variants {
            let key = FetchPlanCache.Key(request: a, limits: limits)
            XCTAssertEqual(FetchPlanCache.Key.hashOf(a, limits), FetchPlanCache.Key.hashOf(key.request, key.limits))
            XCTAssertFalse(key.matches(a, other))
            for b in variants {
                let same = FetchPlanCache.Key(request: b, limits: limits) == key
                XCTAssertEqual(key.matches(b, limits), same, "\(a) vs \(b)")
                XCTAssertEqual(FetchPlanCache.Key(request: b, limits: limits) == key,
                               FetchPlanCache.Key(request: b, limits: limits).request == key.request, "\(a) vs \(b)")
                if same { XCTAssertEqual(FetchPlanCache.Key.hashOf(b, limits), FetchPlanCache.Key.hashOf(a, limits)) }
            }
        }
        // `kind` (the table) and `kindCode` agree on every case
        let samples: [StorageValue] = [.null, .string("s"), .bool(true), .int(5), .double(2.5), .decimal("1.5"), .date(3),
                                       .binary(Data([1])), .uuid(UUID()), .uri("a:b")]
        XCTAssertEqual(Set(samples.map(FetchPlanCache.Key.kindCode)).count, samples.count)
        for v in samples {
            XCTAssertEqual(FetchPlanCache.Key.kindCode(FetchPlanCache.Key.kind(v)), FetchPlanCache.Key.kindCode(v))
        }
        // only the same-kind variants (and the reordered one) share the base's key
        let shared = variants.filter { FetchPlanCache.Key(request: base, limits: limits).matches($0, limits) }.count
        XCTAssertEqual(shared, 4)
    }

    /// Requests whose keys share a hash bucket or replace `last` still find their own plans:
    /// alternating shapes each hit their plan, with each call's values.
    func testAlternatingShapesFindTheirOwnPlans() async throws {
        let s = try openOne()
        _ = try await load(s)
        var a = FetchRequest(entity: "Person")
        a.predicate = "age == $v"
        var b = a
        b.predicate = "score >= $v"
        for i in 0..<12 {
            var r = i % 2 == 0 ? a : b
            r.variables = ["v": i % 3 == 0 ? .scalar(.double(Double(i))) : .scalar(.int(Int64(i % 10)))]
            let got = try await s.fetch(r)
            let want = try await uncached(s, r)
            assertSame(got, want, "call \(i)")
        }
        let state = try await cacheState(s)
        XCTAssertEqual(state.compiles, 4)  // two shapes × two kinds of $v
        XCTAssertEqual(state.hits, 8)
    }
}

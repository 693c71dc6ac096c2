import Foundation
import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// Issue 15 item 6: every nesting within QueryLimits.maxDepth runs — as SQL and in memory — and
/// deeper nesting is LIMIT_EXCEEDED naming the limit. 22-63 nested NOTs used to reach SQLite as
/// nested `NOT COALESCE(` and fail with "parser stack overflow" (INTERNAL).
final class NestingTests: QueryTestCase, @unchecked Sendable {
    func load(_ s: Store) async throws -> [String: ObjectID] {
        try await insert(s, (0..<6).map { ins("p\($0)", "Person", ["name": .string("n\($0)"), "age": .int(Int64($0 * 10))]) })
    }

    /// The ages of the Persons matching `predicate` (run as SQL), ascending.
    func ages(_ s: Store, _ predicate: String) async throws -> [Int64] {
        let r = try await fetch(s, "Person", predicate) { $0.sortDescriptors = [SortDescriptor(keyPath: "age")] }
        return r.objects.compactMap { if case .int(let a)? = $0.values["age"] { return a }; return nil }
    }

    func testDeepNotAndParenthesesRunUpToTheDepthLimit() async throws {
        let s = try open()
        _ = try await load(s)
        for n in [1, 21, 22, 23, 40, 63, 64] {
            let odd = n % 2 == 1
            let want: [Int64] = odd ? [0, 10, 20, 40, 50] : [30]
            for p in [String(repeating: "NOT ", count: n) + "age == 30",
                      String(repeating: "!", count: n) + "age == 30"] {
                let got = try await ages(s, p)
                XCTAssertEqual(got, want, "\(n): \(p.prefix(20))…")
            }
            if n % 2 == 0 {  // NOT ( counts two levels
                let p = String(repeating: "NOT (", count: n / 2) + "age == 30" + String(repeating: ")", count: n / 2)
                let got = try await ages(s, p)
                XCTAssertEqual(got, (n / 2) % 2 == 1 ? [0, 10, 20, 40, 50] : [30], "NOT ( × \(n / 2)")
            }
        }
        for p in [String(repeating: "NOT ", count: 65) + "age == 30", String(repeating: "NOT (", count: 33) + "age == 30" + String(repeating: ")", count: 33)] {
            let e = await queryError { _ = try await self.ages(s, p) }
            XCTAssertEqual(e?.reason, .limitExceeded)
            XCTAssertEqual(e?.message.contains("64"), true, e?.message ?? "")
        }
    }

    /// Alternating AND / OR at every depth the parser allows, e.g. age == 0 OR (age == 10 AND (…)),
    /// written right-nested (the shape that used to overflow SQLite's parser at 31 levels).
    func testAlternatingAndOrUpToTheDepthLimit() async throws {
        let s = try open()
        _ = try await load(s)
        for depth in [30, 31, 40, 63, 64] {
            var p = "age >= 0"
            for i in 0..<depth { p = i % 2 == 0 ? "age != \(i + 1000) AND (\(p))" : "age == 999 OR (\(p))" }
            let got = try await ages(s, p)
            XCTAssertEqual(got, [0, 10, 20, 30, 40, 50], "depth \(depth)")
            // NOT over the whole: De Morgan all the way down
            if depth < 63 {
                let negated = try await ages(s, "NOT (\(p))")
                XCTAssertEqual(negated, [], "NOT depth \(depth)")
            } else {
                let e = await queryError { _ = try await self.ages(s, "NOT (NOT (\(p)))") }
                XCTAssertEqual(e?.reason, .limitExceeded, "depth \(depth) + 2")
            }
        }
    }

    /// The same depths through the in-memory evaluator (a pending object) as through SQL.
    func testDeepPredicatesEvaluateInMemoryToo() async throws {
        let s = try open()
        _ = try await load(s)
        let newcomer = ObjectSnapshot(id: ObjectID(storeID: s.id, entity: "Person", pk: -1), version: 0, values: ["name": "new", "age": .int(30)], relationships: [:])
        var alternating = "age >= 0"
        for i in 0..<64 { alternating = i % 2 == 0 ? "age != \(i + 1000) AND (\(alternating))" : "age == 999 OR (\(alternating))" }
        for p in [String(repeating: "NOT ", count: 64) + "age == 30", String(repeating: "!", count: 63) + "age != 30", alternating] {
            var r = FetchRequest(entity: "Person")
            r.predicate = p
            r.resultType = .objectIDs
            let res = try await s.fetch(r, pending: PendingChanges(inserted: [newcomer]))
            XCTAssertTrue(res.objectIDs.contains { $0.pk == -1 }, String(p.prefix(30)))
        }
    }
}

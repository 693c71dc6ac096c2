import Foundation
import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// On 1,000,000 objects, indexed predicates and sorts use their index (a plan check, never a
/// timing). The rows go in through the engine's test-only bulk loader (one transaction,
/// synchronous OFF) to keep the test short.
final class MillionRowTests: QueryTestCase, @unchecked Sendable {
    func testIndexedPredicatesUseTheirIndexOnAMillionObjects() async throws {
        let s = try open("million")
        let n = 1_000_000
        _ = try await s.bulkLoadForTesting(entity: "Item", count: n, values: ["seq": .index, "cat": .indexModulo(100_000), "label": .textWithIndex(prefix: "item-")])
        func plan(_ p: String?, sort: String? = nil) async throws -> String {
            var r = FetchRequest(entity: "Item")
            r.predicate = p
            r.sortDescriptors = sort.map { [SortDescriptor(keyPath: $0)] } ?? []
            r.fetchLimit = 10
            let req = r
            return try await s.read { ctx in try ctx.explain(req).joined(separator: " | ") }
        }
        let cases: [(String?, String?, String)] = [
            ("cat == 4242", nil, "SEARCH t0 USING INDEX ubq_ix_Item_0 (a_cat=?)"),
            ("cat IN {1, 2, 3}", nil, "SEARCH t0 USING INDEX ubq_ix_Item_0 (a_cat=?)"),
            ("seq >= 500000 AND seq < 500010", nil, "SEARCH t0 USING INDEX ubq_ix_Item_1 (a_seq>? AND a_seq<?)"),
            ("seq BETWEEN {10, 20}", nil, "SEARCH t0 USING INDEX ubq_ix_Item_1 (a_seq>? AND a_seq<?)"),
            ("label BEGINSWITH 'item-99999'", nil, "SEARCH t0 USING INDEX ubq_ix_Item_2 (a_label>? AND a_label<?)"),
            (nil, "seq", "SCAN t0 USING INDEX ubq_ix_Item_1"),
            ("cat == 7", "seq", "USING INDEX ubq_ix_Item_0 (a_cat=?)"),
        ]
        for (p, sort, expected) in cases {
            let got = try await plan(p, sort: sort)
            XCTAssertTrue(got.contains(expected), "\(p ?? "-") sort \(sort ?? "-"): \(got)")
            XCTAssertFalse(got.hasPrefix("SCAN t0") && p != nil, "full scan for \(p ?? "-"): \(got)")
        }
        // and the answers are right
        var r = FetchRequest(entity: "Item")
        r.predicate = "cat == 4242"
        r.sortDescriptors = [SortDescriptor(keyPath: "seq")]
        let res = try await s.fetch(r)
        XCTAssertEqual(res.objects.map { $0.values["seq"] }, (0..<10).map { .int(Int64($0 * 100_000 + 4242)) })
        r.predicate = nil
        r.resultType = .count
        let count = try await s.fetch(r)
        XCTAssertEqual(count.count, n)
    }
}

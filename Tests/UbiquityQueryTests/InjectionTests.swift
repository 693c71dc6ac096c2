import Foundation
import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// Hostile requests fail with clear errors and run nothing unintended: values are bound,
/// identifiers come only from the model, and the store is unchanged afterwards.
final class InjectionTests: QueryTestCase, @unchecked Sendable {
    func testHostileRequestsChangeNothing() async throws {
        let s = try open()
        _ = try await insert(s, [ins("a", "Person", ["name": "Ann", "age": 30]), ins("b", "Person", ["name": "x' OR 1=1 --", "age": 40])])
        let before = try await s.dump()
        let attach = dir + "/attached.sqlite"

        // values that look like SQL are data: they match only themselves
        var r = try await fetch(s, "Person", "name == \"x' OR 1=1 --\"") { $0.resultType = .objectIDs }
        XCTAssertEqual(r.objectIDs.count, 1)
        r = try await fetch(s, "Person", "name == $v") { $0.variables = ["v": .scalar(.string("'; DROP TABLE t_Person; --"))]; $0.resultType = .count }
        XCTAssertEqual(r.count, 0)
        r = try await fetch(s, "Person", "name BEGINSWITH \"' OR '1'='1\" OR name LIKE '%'") { $0.resultType = .count }
        XCTAssertEqual(r.count, 0, "% is not a wildcard and quotes are data")
        r = try await fetch(s, "Person", "name MATCHES \".*'; ATTACH DATABASE 'x' AS y; --\"") { $0.resultType = .count }
        XCTAssertEqual(r.count, 0)

        // syntax outside the language is refused before any SQL exists
        let hostile: [(String, QueryError.Reason)] = [
            ("name == 'a'; ATTACH DATABASE '\(attach)' AS evil", .syntax),
            ("name == 'a' -- comment", .syntax),
            ("name == 'a' /* c */", .syntax),
            ("name == 'a') OR (1 == 1", .syntax),
            ("t_Person.pk == 1", .unknownKeyPath),
            ("pk == 1", .unknownKeyPath),
            ("z_ent == 'Person'", .unknownKeyPath),
            ("ended_gen > 0", .unknownKeyPath),
            ("a_name == 'x'", .unknownKeyPath),
            ("sqlite_master.name == 'x'", .unknownKeyPath),
            ("ubq_meta.value == 1", .unknownKeyPath),
            ("name == sqlite_version()", .syntax),
            ("'a' == 'a'", .typeMismatch),
            ("FUNCTION(name, 'lowercase') == 'ann'", .unsupported),
            ("name == 'a' UNION SELECT * FROM ubq_meta", .syntax),
            ("mentor.\"name\" == 'x'", .syntax),
        ]
        for (p, reason) in hostile {
            let e = await queryError { _ = try await self.fetch(s, "Person", p) }
            XCTAssertEqual(e?.reason, reason, p)
            XCTAssertEqual(e?.field, "predicate", p)
        }
        // other fields that name things
        let fieldCases: [(String, (inout FetchRequest) -> Void)] = [
            ("entity", { $0.entity = "Person; DROP TABLE t_Person" }),
            ("entity", { $0.entity = "t_Person" }),
            ("sortDescriptors", { $0.sortDescriptors = [SortDescriptor(keyPath: "name; DROP TABLE t_Person")] }),
            ("sortDescriptors", { $0.sortDescriptors = [SortDescriptor(keyPath: "name DESC, (SELECT 1)")] }),
            ("propertiesToFetch", { $0.resultType = .dictionaries; $0.propertiesToFetch = ["count:(pk) FROM sqlite_master --"] }),
            ("propertiesToFetch", { $0.resultType = .dictionaries; $0.propertiesToFetch = ["x) FROM t_Person; -- = count:(SELF)"] }),
            ("propertiesToFetch", { $0.resultType = .dictionaries; $0.propertiesToFetch = ["n = sum:(age) + 1"] }),
            ("propertiesToGroupBy", { $0.resultType = .dictionaries; $0.propertiesToFetch = ["name"]; $0.propertiesToGroupBy = ["name COLLATE NOCASE"] }),
            ("havingPredicate", { $0.resultType = .dictionaries; $0.propertiesToFetch = ["name", "n = count:(SELF)"]; $0.propertiesToGroupBy = ["name"]; $0.havingPredicate = "n > 0; DELETE FROM t_Person" }),
            ("relationshipKeyPathsForPrefetching", { $0.relationshipKeyPathsForPrefetching = ["ubq_history"] }),
        ]
        for (field, configure) in fieldCases {
            let e = await queryError { _ = try await self.fetch(s, "Person", nil, configure: configure) }
            XCTAssertEqual(e?.field, field)
        }
        // oversized and deeply nested input is bounded, with the limit named
        let deep = String(repeating: "(", count: 5000) + "age == 1" + String(repeating: ")", count: 5000)
        var e = await queryError { _ = try await self.fetch(s, "Person", deep) }
        XCTAssertEqual(e?.reason, .limitExceeded)
        e = await queryError { _ = try await self.fetch(s, "Person", String(repeating: "age == 1 OR ", count: 3000) + "age == 1") }
        XCTAssertEqual(e?.reason, .limitExceeded)
        XCTAssertTrue(e?.message.contains("16384") ?? false, e?.message ?? "")
        e = await queryError { _ = try await self.fetch(s, "Person", "age IN $many") { $0.variables = ["many": .list((0..<20_000).map { .int(Int64($0)) })] } }
        XCTAssertEqual(e?.reason, .limitExceeded)
        e = await queryError { _ = try await self.fetch(s, "Person", "name MATCHES $p") { $0.variables = ["p": .scalar(.string(String(repeating: "a", count: 5000)))] } }
        XCTAssertEqual(e?.reason, .limitExceeded)
        // batch operations take the same checks
        e = await queryError { _ = try await s.batchDelete(entity: "Person", predicate: "name == 'a'; DELETE FROM t_Person") }
        XCTAssertEqual(e?.reason, .syntax)
        e = await queryError { _ = try await s.batchUpdate(entity: "Person", predicate: "1 == 1", values: ["name": "x"]) }
        XCTAssertEqual(e?.reason, .typeMismatch)

        // nothing changed, nothing attached
        let after = try await s.dump()
        XCTAssertEqual(after, before)
        XCTAssertFalse(FileManager.default.fileExists(atPath: attach))
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    /// The engine's authorizer is the second line: even raw SQL through the query layer's
    /// entry point cannot reach other databases or tables outside the store's prefixes.
    func testAuthorizerBacksTheCompiler() async throws {
        let s = try open()
        let attach = dir + "/x.sqlite"
        let results = try await s.read { ctx -> [Bool] in
            ["ATTACH DATABASE '\(attach)' AS x", "SELECT * FROM pragma_table_list", "SELECT * FROM pragma_database_list"].map { sql in
                (try? ctx.rows(sql)) == nil
            }
        }
        XCTAssertEqual(results, [true, true, true])
        XCTAssertFalse(FileManager.default.fileExists(atPath: attach))
    }
}

import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// `Catalog.store(idText:)`: the per-call store ID lookup and the texts it remembers.
final class CatalogLookupTests: StorageTestCase, @unchecked Sendable {
    func testCallsSpreadOverManyStoresEachResolveToTheirOwnRecord() throws {
        let c = try Catalog(path: dir + "/catalog.sqlite")
        defer { c.close() }
        try c.ensureAccount("a")
        let records = try (0..<20).map { try XCTUnwrap(try c.store(account: "a", name: "s\($0)", create: true)).0 }
        for round in 0..<3 {
            for r in records {
                XCTAssertEqual(c.store(idText: r.id.uuidString.lowercased()), .found(r), "round \(round)")
                XCTAssertEqual(c.store(idText: r.id.uuidString), .found(r), "the uppercase spelling names the same store")
            }
        }
        XCTAssertEqual(c.rememberedTexts, 40, "each spelling is remembered once")
        XCTAssertEqual(c.store(idText: "not-a-uuid"), .malformed)
        XCTAssertEqual(c.store(idText: UUID().uuidString), .missing)
    }

    func testARemovedStoreIsNotAnsweredFromMemory() throws {
        let c = try Catalog(path: dir + "/catalog.sqlite")
        defer { c.close() }
        try c.ensureAccount("a")
        let first = try XCTUnwrap(try c.store(account: "a", name: "first", create: true)).0
        let second = try XCTUnwrap(try c.store(account: "a", name: "second", create: true)).0
        // the first text goes to the one-entry memo, the second to the map: both must forget
        XCTAssertEqual(c.store(idText: first.id.uuidString), .found(first))
        XCTAssertEqual(c.store(idText: second.id.uuidString), .found(second))
        try c.removeStore(id: second.id)
        XCTAssertEqual(c.store(idText: second.id.uuidString), .missing)
        try c.removeStore(id: first.id)
        XCTAssertEqual(c.store(idText: first.id.uuidString), .missing)
        XCTAssertEqual(c.rememberedTexts, 0)
    }

    func testRememberedTextsAreBounded() throws {
        let c = try Catalog(path: dir + "/catalog.sqlite")
        defer { c.close() }
        try c.ensureAccount("a")
        // 30 letters among its digits: more spellings than the bound
        let r = Catalog.StoreRecord(id: try XCTUnwrap(UUID(uuidString: "abcdefab-cdef-4bcd-abcd-efabcdefabcd")), account: "a", name: "s", createdAt: 0)
        try c.restoreStore(r)
        let text = Array(r.id.uuidString.lowercased())
        let letters = text.indices.filter { text[$0].isLetter }
        // Every spelling of one UUID in upper and lower case letters: more than the bound.
        for mask in 0..<(Catalog.maxRememberedTexts + 100) {
            var t = text
            for (bit, i) in letters.prefix(13).enumerated() where mask & (1 << bit) != 0 { t[i] = Character(t[i].uppercased()) }
            XCTAssertEqual(c.store(idText: String(t)), .found(r))
            XCTAssertLessThanOrEqual(c.rememberedTexts, Catalog.maxRememberedTexts + 1)
        }
    }
}

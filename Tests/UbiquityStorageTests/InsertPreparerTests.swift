import Foundation
import XCTest
@testable import UbiquityStorage

/// The insert preparer's shortcuts: a small entity's attribute slot found by scanning its names
/// (not the `slot` dictionary), and the per-value scratch reused from insert to insert.
final class InsertPreparerTests: XCTestCase {
    static let longName = "aVeryLongAttributeNameOverFifteenBytes"

    func model() throws -> ResolvedModel {
        let small = EntityDefinition(name: "Small", attributes: [
            AttributeDefinition(name: "a", type: .int64),
            AttributeDefinition(name: "ab", type: .string),
            AttributeDefinition(name: Self.longName, type: .double, defaultValue: .double(2.5)),
        ])
        let big = EntityDefinition(name: "Big", attributes: (0..<12).map { AttributeDefinition(name: "f\($0)", type: .int64) })
        return try ResolvedModel(ModelDefinition(entities: [small, big]))
    }

    /// The scan (≤ 8 names) and the dictionary (more) answer as the `slot` dictionary does, for
    /// every name, names that share a prefix, long names, and names the entity does not have.
    func testSlotIndexAgreesWithTheSlotDictionary() throws {
        let m = try model()
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "s", entity: "Small"), InsertOperation(temporaryID: "b", entity: "Big")]
        let p = InsertPreparer.prepare(r, model: m, config: StorageConfiguration())
        for ent in p.inserts.compactMap(\.info) {
            let probes = ent.slotNames + ["", "b", "abc", "A", "f", "f12", "é", "e\u{301}", Self.longName + "x", String(Self.longName.dropLast())]
            for name in probes {
                // a long name built at run time, not the model's instance
                let copy = String(decoding: Array(name.utf8), as: UTF8.self)
                XCTAssertEqual(ent.slotIndex(copy), ent.slot[name], "\(name)")
            }
            XCTAssertEqual(ent.slotNames.compactMap { ent.slotIndex($0) }, Array(ent.slotNames.indices))
        }
    }

    /// A value set by one insert is not carried into the next insert of the same save (the scratch
    /// is cleared): each insert prepares as it does alone.
    func testEachInsertPreparesAsItDoesAlone() throws {
        let m = try model()
        let inserts = [
            InsertOperation(temporaryID: "1", entity: "Small", values: ["a": 1, "ab": "x", Self.longName: .double(7)]),
            InsertOperation(temporaryID: "2", entity: "Small", values: ["a": 2]),
            InsertOperation(temporaryID: "3", entity: "Big", values: ["f3": 3, "f11": 11]),
            InsertOperation(temporaryID: "4", entity: "Big", values: ["f0": 0]),
            InsertOperation(temporaryID: "5", entity: "Small", values: ["ab": "y", "nope": 1]),
            InsertOperation(temporaryID: "6", entity: "Small", values: [:]),
        ]
        var r = SaveRequest()
        r.inserts = inserts
        let together = InsertPreparer.prepare(r, model: m, config: StorageConfiguration()).inserts
        XCTAssertEqual(together.count, inserts.count)
        for (i, ins) in inserts.enumerated() {
            var one = SaveRequest()
            one.inserts = [ins]
            let alone = InsertPreparer.prepare(one, model: m, config: StorageConfiguration()).inserts[0]
            XCTAssertEqual(together[i].columnArgs, alone.columnArgs, "insert \(i)")
            XCTAssertEqual(together[i].issues, alone.issues, "insert \(i)")
            XCTAssertEqual(together[i].full, alone.full, "insert \(i)")
            XCTAssertEqual(together[i].changedProperties, alone.changedProperties, "insert \(i)")
        }
        // the second Small insert has only `a`; `ab` is NULL and the long name gets its default
        let cols = try XCTUnwrap(together[1].info).columns
        func column(_ name: String) throws -> SQLValue {
            let slot = try XCTUnwrap(together[1].info?.slotIndex(name))
            return together[1].columnArgs[try XCTUnwrap(cols.firstIndex { $0?.slot == slot })]
        }
        XCTAssertEqual(try column("a"), .integer(2))
        XCTAssertEqual(try column("ab"), .null)
        XCTAssertEqual(try column(Self.longName), .real(2.5))
        XCTAssertEqual(together[4].issues.map(\.code), [.unknownProperty])
        XCTAssertEqual(together[4].issues.first?.property, "nope")
    }
    /// `passesCheck` (the check without copying the definition) says "no issue" only when the
    /// full `checkValue` finds none, and does say so for plain valid values.
    func testPassesCheckAgreesWithCheckValue() throws {
        let attrs = [
            AttributeDefinition(name: "s", type: .string, optional: false), AttributeDefinition(name: "i16", type: .int16),
            AttributeDefinition(name: "b", type: .binary), AttributeDefinition(name: "n", type: .int64, minimum: 0, maximum: 10),
            AttributeDefinition(name: "d", type: .decimal), AttributeDefinition(name: "u", type: .uri),
        ]
        let m = try ResolvedModel(ModelDefinition(entities: [EntityDefinition(name: "E", attributes: attrs)]))
        var config = StorageConfiguration()
        config.maxValueBytes = 4
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "e", entity: "E", values: ["s": "a"])]
        let ent = try XCTUnwrap(InsertPreparer.prepare(r, model: m, config: config).inserts[0].info)
        let checker = ValueChecker(model: m, config: config)
        let values: [StorageValue] = [.null, "abc", "abcde", .int(5), .int(40_000), .int(-1), .int(11), .double(1.5), .double(.nan),
                                      .binary(Data([1, 2])), .binary(Data(count: 5)), .decimal("1.5"), .decimal("x"), .uri("a:b"), .bool(true)]
        var passed = 0
        for slot in ent.slotNames.indices {
            for v in values {
                var issues: [ValidationIssue] = []
                checker.checkValue("E", ent.slotNames[slot], v, ent.slotAttributes[slot], object: "e", into: &issues)
                if ent.passesCheck(slot, v, maxValueBytes: config.maxValueBytes) {
                    passed += 1
                    XCTAssertEqual(issues, [], "\(ent.slotNames[slot]) = \(v)")
                } else if issues.isEmpty && !v.isNull {
                    XCTAssertEqual(ent.slotNames[slot], "n", "only a bounded attribute takes the full check for a valid value")
                }
            }
        }
        XCTAssertGreaterThanOrEqual(passed, 6)
    }
}

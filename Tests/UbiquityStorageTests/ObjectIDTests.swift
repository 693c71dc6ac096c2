import Foundation
import XCTest
@testable import UbiquityStorage

/// The fast paths for object URIs and UUID text must read and write exactly what the general
/// (Foundation, `split`) code does.
final class ObjectIDTests: XCTestCase {
    /// The general parser (the code from before the ASCII fast path) is the reference.
    func reference(_ uri: String, allowTemporary: Bool) -> ObjectID? { ObjectID.parseGeneral(uri, allowTemporary: allowTemporary) }

    func testURIParsingAgreesWithTheGeneralParser() {
        let u = "0f8fad5b-d9cb-469f-a165-70867728950e"
        let uris = [
            "x-ubiquity://\(u)/Item/p1", "x-ubiquity://\(u.uppercased())/Item/p42", "x-ubiquity://\(u)/Item/t7",
            "x-ubiquity://\(u)/Item/p0", "x-ubiquity://\(u)/Item/p-1", "x-ubiquity://\(u)/Item/p+5", "x-ubiquity://\(u)/Item/p007",
            "x-ubiquity://\(u)/Item/p9223372036854775807", "x-ubiquity://\(u)/Item/p9223372036854775808", "x-ubiquity://\(u)/Item/p",
            "x-ubiquity://\(u)//p1", "x-ubiquity://\(u)/Item/p1/", "x-ubiquity://\(u)/Item", "x-ubiquity://\(u)/A/B/p1",
            "x-ubiquity://\(u)/Ítem/p1", "x-ubiquity://\(u)/\u{301}Item/p1", "x-ubiquity://\(u)/Item/\u{301}p1",
            "x-ubiquity://0f8fad5b-d9cb-469f-a165-70867728950/Item/p1", "x-ubiquity://0f8fad5bxd9cb-469f-a165-70867728950e/Item/p1",
            "x-ubiquity://0g8fad5b-d9cb-469f-a165-70867728950e/Item/p1", "x-ubiquity:/\(u)/Item/p1", "X-ubiquity://\(u)/Item/p1",
            "x-ubiquity://\(u)/Item/q1", "x-ubiquity://\(u)/Item/p1 ", "", "x-ubiquity://",
        ]
        for uri in uris {
            for t in [false, true] {
                XCTAssertEqual(ObjectID(uri: uri, allowTemporary: t), reference(uri, allowTemporary: t), "\(uri) allowTemporary: \(t)")
            }
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let id = ObjectID(storeID: UUID(), entity: "E\(rng.next() % 100)", pk: Int64(rng.next() % 1_000_000) + 1)
            XCTAssertEqual(id.uri, "x-ubiquity://\(id.storeID.uuidString.lowercased())/\(id.entity)/p\(id.pk)")
            XCTAssertEqual(ObjectID(uri: id.uri), id)
            XCTAssertEqual(ObjectID(uri: id.uri), reference(id.uri, allowTemporary: false))
            XCTAssertEqual(UUID.parse(id.storeID.uuidString), id.storeID)
            XCTAssertEqual(UUID.parse(id.storeID.lowercasedString), id.storeID)
        }
        XCTAssertEqual(ObjectID(storeID: UUID(uuidString: u)!, entity: "Item", pk: -3).uri, "x-ubiquity://\(u)/Item/t3")
        for s in ["", "not-a-uuid", String(u.dropLast()), u + "0", u.replacingOccurrences(of: "-", with: "_")] {
            XCTAssertEqual(UUID.parse(s), UUID(uuidString: s), s)
        }
        // Stricter than Foundation on Linux, whose sscanf("%2hhx") reads "0x" as a hex prefix and
        // skips blanks: these are not UUIDs, and must not name another store or object.
        for bad in ["0f8fad5b-d9cb-469f-a165-70867728950x", "0x8fad5b-d9cb-469f-a165-70867728950e",
                    "0f8fad5b-d9cb-469f-a165-7086772895 e", "0f8fad5b-d9cb-469f-a165- 0867728950e", "0f8fad5b-d9cb-469f-a165-+0867728950e"] {
            XCTAssertNil(UUID.parse(bad), bad)
            XCTAssertNil(ObjectID(uri: "x-ubiquity://\(bad)/Item/p1"), bad)
            XCTAssertNil(reference("x-ubiquity://\(bad)/Item/p1", allowTemporary: true), bad)
        }
        XCTAssertEqual(UUID.parse(u.uppercased()), UUID(uuidString: u))
    }
}

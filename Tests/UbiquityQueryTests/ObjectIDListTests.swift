import Foundation
import XCTest
@testable import UbiquityQuery
@testable import UbiquityStorage

/// The compact ID list a FetchStream serves its batches from gives back exactly the IDs it was
/// made of, in order, for one entity and for mixed (sub-)entities.
final class ObjectIDListTests: XCTestCase {
    func testOneEntityRoundTrips() {
        let store = UUID()
        let ids = (1...1000).map { ObjectID(storeID: store, entity: "Person", pk: Int64($0 * 7)) }
        let list = ObjectIDList(ids, storeID: store)
        XCTAssertEqual(list.count, 1000)
        XCTAssertEqual(list[0..<1000], ids)
        XCTAssertEqual(list[500..<503], Array(ids[500..<503]))
        XCTAssertEqual(list[10..<10], [])
    }

    func testMixedEntitiesRoundTripWhereverTheSecondOneStarts() {
        let store = UUID()
        for firstOther in [0, 1, 37] {
            var ids: [ObjectID] = []
            for i in 0..<100 {
                let entity = i < firstOther ? "Person" : ["Person", "Employee", "Manager"][i % 3]
                ids.append(ObjectID(storeID: store, entity: entity, pk: Int64(i)))
            }
            let list = ObjectIDList(ids, storeID: store)
            XCTAssertEqual(list[0..<100], ids, "first other entity at \(firstOther)")
        }
    }

    func testEmpty() {
        let list = ObjectIDList([], storeID: UUID())
        XCTAssertEqual(list.count, 0)
        XCTAssertEqual(list[0..<0], [])
    }
}

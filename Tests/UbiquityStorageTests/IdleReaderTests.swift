import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// Read connections unused past `readerIdleSeconds` close (`IdleReaderPolicy`), and reads open
/// them again.
final class IdleReaderTests: StorageTestCase, @unchecked Sendable {
    func testIdleReadConnectionsCloseAndReadsReopenThem() async throws {
        let s = try open { $0.readerIdleSeconds = 0.05 }
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "p", entity: "Person", values: ["name": .string("P"), "age": .int(7)])]
        let id = try await s.save(r).permanentIDs["p"]!
        // both connections open: two checked out at once
        let a = s.readConnections.checkout()!, b = s.readConnections.checkout()!
        XCTAssertEqual(s.readConnections.openCount, 2)
        s.readConnections.checkin(a)
        s.readConnections.checkin(b)
        let closed = pollUntil { s.readConnections.openCount == 0 }
        XCTAssertTrue(closed, "idle connections closed by the sweeper")
        for round in 1...3 {
            let sync = try s.objectsSync([id]) { $1 }
            XCTAssertEqual(sync.first??.values["age"], .int(7), "round \(round): a blocking read opens a connection again")
            let got = try await s.objects([id])
            XCTAssertEqual(got.first??.values["age"], .int(7), "round \(round): an async read too")
            let again = pollUntil { s.readConnections.openCount == 0 }
            XCTAssertTrue(again, "round \(round): closed again once idle")
        }
    }

    /// A store that is never read still closes the connection it opened first.
    func testAnUnreadStoreClosesItsFirstConnection() async throws {
        let s = try open { $0.readerIdleSeconds = 0.05 }
        let closed = pollUntil { s.readConnections.openCount == 0 }
        XCTAssertTrue(closed)
        s.close()
    }
}

import Foundation
import SwiftProtobuf
import XCTest
import UbiquityGRPC
import UbiquityProtos
@testable import UbiquityStorage
@testable import UbiquityServices

/// Every error the services build fits the transport's status budget, whatever it echoes, and its
/// message is never cut again by the transport (grpcio-status insists both copies are equal).
final class ErrorBoundsTests: XCTestCase {
    private func decoded(_ e: RPCError) throws -> Google_Rpc_Status {
        try Google_Rpc_Status(serializedBytes: e.details ?? [])
    }

    /// The error as the transport would send it: same message, details kept.
    private func assertSentWhole(_ e: RPCError, file: StaticString = #filePath, line: UInt = #line) throws {
        let headers = StatusTrailers.headers(for: RPCError(converting: e))
        let message = headers.first { $0.0 == "grpc-message" }.map { PercentEncoding.decode($0.1) }
        XCTAssertEqual(message, e.message, file: file, line: line)
        XCTAssertNotNil(headers.first { $0.0 == "grpc-status-details-bin" }, file: file, line: line)
        XCTAssertEqual(try decoded(e).message, e.message, file: file, line: line)
    }

    func testAHugeEchoedNameIsCutAndStillSentWhole() throws {
        for unit in ["x", "😀", "e\u{301}"] {
            let name = String(repeating: unit, count: 20_000)
            let e = ServiceErrors.build(.invalidArgument, "fetch.entity: no entity named '\(name)'", reason: .unknownEntity,
                                        violations: [("fetch.entity", "no entity named '\(name)'", "UNKNOWN_ENTITY")],
                                        metadata: ["field": name])
            XCTAssertLessThanOrEqual(e.details!.count, ErrorBounds.maxDetailsBytes)
            XCTAssertTrue(e.message.hasSuffix(StatusTrailers.truncationMarker))
            try assertSentWhole(e)
        }
    }

    func testManyViolationsAreCountedNotListed() throws {
        let violations = (0..<10_000).map { ("values.attr\($0)", "no attribute named attr\($0)", "UNKNOWN_PROPERTY") }
        let e = ServiceErrors.build(.invalidArgument, "bad", reason: .validationFailed, violations: violations)
        let status = try decoded(e)
        let br = try XCTUnwrap(status.details.compactMap { try? Google_Rpc_BadRequest(unpackingAny: $0) }.first)
        XCTAssertLessThanOrEqual(br.fieldViolations.count, ErrorBounds.maxViolations)
        XCTAssertEqual(br.fieldViolations.last?.description_p, "\(10_000 - br.fieldViolations.count + 1) more violations not listed")
        try assertSentWhole(e)
    }

    func testConflictRecordsFitTheBudgetAndSayWhenCut() throws {
        let store = UUID()
        let big = StorageValue.string(String(repeating: "v", count: 5000))
        let records = (1...50).map { i in
            ConflictRecord(kind: .versionChanged, objectID: ObjectID(storeID: store, entity: "Person", pk: Int64(i)), temporaryID: nil,
                           entity: "Person", clientSnapshot: ["name": big], clientChanges: ["age": .int(1)],
                           storeValues: ["name": big], clientVersion: 1, storeVersion: 2, constraint: [])
        }
        let e = ServiceErrors.build(.aborted, "the save conflicts", reason: .mergeConflict, conflicts: records)
        XCTAssertLessThanOrEqual(e.details!.count, ErrorBounds.maxDetailsBytes)
        let cd = try XCTUnwrap(try decoded(e).details.compactMap { try? Ubiquity_V1_ConflictDetails(unpackingAny: $0) }.first)
        XCTAssertTrue(cd.truncated)
        XCTAssertEqual(cd.totalConflicts, 50)
        XCTAssertFalse(cd.conflicts.isEmpty)
        XCTAssertTrue(cd.conflicts.allSatisfy { $0.storeVersion == 2 && !$0.objectID.isEmpty })
        XCTAssertTrue(e.message.contains("conflicts_in_response"))
        try assertSentWhole(e)
    }

    func testAConflictWithoutRecordsStaysAnError() {
        // a raw SQLITE_CONSTRAINT carries no records: as an OK response with an empty list it
        // would read as a successful save
        XCTAssertNil(StorageError(.constraintConflict([]), "constraint failed").refusedConflicts)
        let record = ConflictRecord(kind: .uniquenessClash, objectID: nil, temporaryID: "t", entity: "Person", clientSnapshot: [:],
                                    clientChanges: [:], storeValues: [:], clientVersion: 0, storeVersion: 0, constraint: ["email"])
        XCTAssertEqual(StorageError(.constraintConflict([record]), "clash").refusedConflicts, [record])
    }

    func testSmallConflictsAreSentWhole() throws {
        let record = ConflictRecord(kind: .versionChanged, objectID: ObjectID(storeID: UUID(), entity: "Person", pk: 1), temporaryID: nil,
                                    entity: "Person", clientSnapshot: ["age": .int(30)], clientChanges: ["age": .int(31)],
                                    storeValues: ["age": .int(35)], clientVersion: 1, storeVersion: 2, constraint: [])
        let e = ServiceErrors.build(.aborted, "the save conflicts", reason: .mergeConflict, conflicts: [record])
        let cd = try XCTUnwrap(try decoded(e).details.compactMap { try? Ubiquity_V1_ConflictDetails(unpackingAny: $0) }.first)
        XCTAssertFalse(cd.truncated)
        XCTAssertEqual(cd.conflicts.count, 1)
        XCTAssertEqual(cd.conflicts[0].storeValues.count, 1)
        XCTAssertEqual(e.message, "the save conflicts")
    }
}

import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// The first-sign-in import job (docs/accounts.md "Local stores"): its state machine, its counts,
/// and its records in credentials.sqlite across reopens (a restart after kill -9 reads them).
final class ImportJobTests: XCTestCase {
    private var dir: TemporaryDirectory!

    override func setUpWithError() throws { dir = try TemporaryDirectory(prefix: "import-job") }
    override func tearDown() { dir.remove() }

    // MARK: state machine

    func testTheJobMovesForwardOnlyAndEachStateSaysWhatToRun() throws {
        var s = ImportJobState.importing
        XCTAssertEqual(s.step, .copyLocalStores)
        XCTAssertNil(s.counts)
        XCTAssertThrowsError(try s.removed())  // nothing is removed before every copy committed
        XCTAssertThrowsError(try s.announced())  // nor announced
        let counts = ImportJobCounts(inserted: 3, merged: 1, deduplicated: 2)
        let stores = [UUID(), UUID()]
        try s.copied(counts, into: stores)
        XCTAssertEqual(s, .imported(counts, stores: stores))
        XCTAssertEqual(s.step, .removeLocalStores)
        XCTAssertEqual(s.stores, stores)
        XCTAssertThrowsError(try s.copied(counts, into: stores))  // never copied twice
        XCTAssertThrowsError(try s.announced())  // DID_CHANGE only once nothing local is left
        try s.removed(keyValuesMoved: 4, keyValuesKept: 1)
        let withKeyValues = ImportJobCounts(inserted: 3, merged: 1, deduplicated: 2, keyValuesMoved: 4, keyValuesKept: 1)
        XCTAssertEqual(s, .removed(withKeyValues, stores: stores), "the key-value counts join once the move is made")
        XCTAssertEqual(s.step, .announce)
        XCTAssertEqual(s.stores, stores, "where the DID_CHANGE goes outlives the local stores")
        XCTAssertFalse(s.isDone)
        XCTAssertThrowsError(try s.removed())
        try s.announced()
        XCTAssertEqual(s, .done(withKeyValues))
        XCTAssertEqual(s.step, .none)
        XCTAssertTrue(s.isDone)
        XCTAssertEqual(s.counts, withKeyValues)
        XCTAssertEqual(s.stores, [])
        XCTAssertThrowsError(try s.copied(counts, into: stores))
        XCTAssertThrowsError(try s.removed())
        XCTAssertThrowsError(try s.announced())
    }

    func testStatesRoundTripThroughTheirColumnsAndAnUnknownOneRedoesTheCopy() {
        let c = ImportJobCounts(inserted: 5, merged: 0, deduplicated: 1)
        let stores = [UUID(), UUID()]
        for s in [ImportJobState.importing, .imported(c, stores: stores), .removed(c, stores: stores), .removed(c, stores: []), .done(c)] {
            XCTAssertEqual(ImportJobState(column: s.column, counts: s.counts ?? ImportJobCounts(), stores: s.storesColumn), s)
        }
        XCTAssertEqual(ImportJobState(column: "from-a-newer-server", counts: c), .importing)
    }

    // MARK: counts

    func testCountsTellInsertedFromMergedFromDeduplicated() {
        let store = UUID()
        let new1 = ObjectID(storeID: store, entity: "Person", pk: 10)
        let new2 = ObjectID(storeID: store, entity: "Person", pk: 11)
        let existing = ObjectID(storeID: store, entity: "Person", pk: 1)
        func clash(_ temp: String, into id: ObjectID) -> ConflictRecord {
            ConflictRecord(kind: .uniquenessClash, objectID: id, temporaryID: temp, entity: "Person", clientSnapshot: [:], clientChanges: [:],
                           storeValues: [:], clientVersion: 0, storeVersion: 1, constraint: ["email"])
        }
        // a, b new; c merged into an object the store had; d merged into a (a duplicate inside the import)
        let r = SaveResult(token: GenerationToken(storeID: store, epoch: 1, generation: 2),
                           permanentIDs: ["a": new1, "b": new2, "c": existing, "d": new1], versions: [:],
                           resolvedConflicts: [clash("c", into: existing), clash("d", into: new1)], skipped: [], dryRun: false, replayed: true)
        let c = ImportJobCounts(result: r, objects: 4)
        XCTAssertEqual(c, ImportJobCounts(inserted: 2, merged: 1, deduplicated: 1))
        XCTAssertEqual(c + c, ImportJobCounts(inserted: 4, merged: 2, deduplicated: 2))
    }

    // MARK: records

    func testADeviceSecretIsNeededAndSurvivesAReopen() throws {
        var c = try Credentials(root: dir.path)
        guard case .session(let first, _, let secret?) = try c.localSession(deviceID: "phone", secret: "", lifetime: 60) else {
            return XCTFail("the first local session registers the device")
        }
        XCTAssertTrue(first.isLocal)
        XCTAssertTrue(first.account.hasPrefix("local-"))
        XCTAssertEqual(try c.localSession(deviceID: "phone", secret: "", lifetime: 60), .badSecret)
        XCTAssertEqual(try c.localSession(deviceID: "phone", secret: secret + "x", lifetime: 60), .badSecret)
        c.close()
        c = try Credentials(root: dir.path)
        defer { c.close() }
        guard case .session(let again, let token, nil) = try c.localSession(deviceID: "phone", secret: secret, lifetime: 60) else {
            return XCTFail("the registered device signs in with its secret")
        }
        XCTAssertEqual(again.account, first.account)
        XCTAssertEqual(c.resolve(token: token, now: Date().timeIntervalSince1970), .valid(again))
        // the file holds no secret, only its hash
        let bytes = try Data(contentsOf: URL(fileURLWithPath: dir.file("credentials.sqlite")))
        XCTAssertNil(bytes.range(of: Data(secret.utf8)))
    }

    func testAJobRevokesTheLocalSessionsAndIsFoundAgainAfterAReopen() throws {
        var c = try Credentials(root: dir.path)
        guard case .session(let local, let token, let secret?) = try c.localSession(deviceID: "phone", secret: "", lifetime: 60) else {
            return XCTFail("registers")
        }
        XCTAssertEqual(try c.beginImport(deviceID: "phone", secret: "wrong", account: "acct"), .badSecret)
        XCTAssertEqual(try c.beginImport(deviceID: "tablet", secret: secret, account: "acct"), .nothingToImport)
        guard case .started(let job, let ended) = try c.beginImport(deviceID: "phone", secret: secret, account: "acct") else {
            return XCTFail("starts a job")
        }
        XCTAssertEqual(ended.map(\.id), [local.id])
        XCTAssertEqual(job.localAccount, local.account)
        guard case .revoked = c.resolve(token: token, now: Date().timeIntervalSince1970) else { return XCTFail("local session revoked") }
        XCTAssertEqual(try c.localSession(deviceID: "phone", secret: secret, lifetime: 60), .importing)
        // a second SignIn meanwhile joins the same job
        XCTAssertEqual(try c.beginImport(deviceID: "phone", secret: secret, account: "acct"), .existing(job))

        let counts = ImportJobCounts(inserted: 2, merged: 1, deduplicated: 0)
        let stores = [UUID()]
        try c.advance(job, to: .imported(counts, stores: stores))
        c.close()
        c = try Credentials(root: dir.path)
        let pending = try c.pendingImports()
        XCTAssertEqual(pending.map(\.id), [job.id])
        XCTAssertEqual(pending.first?.state, .imported(counts, stores: stores))
        var removed = counts
        removed.keyValuesMoved = 3
        removed.keyValuesKept = 2
        try c.advance(job, to: .removed(removed, stores: stores))
        c.close()
        c = try Credentials(root: dir.path)
        defer { c.close() }
        XCTAssertEqual(try c.pendingImports().first?.state, .removed(removed, stores: stores),
                       "a restart announces to the stores recorded, with the key-value counts")
        XCTAssertNotNil(c.localDevice("phone"), "registered until the job is done")

        try c.advance(job, to: .done(removed))
        XCTAssertEqual(try c.pendingImports(), [])
        XCTAssertNil(c.localDevice("phone"))
        // a retried SignIn into the same account gets the done job (its counts); another account nothing
        guard case .existing(let done) = try c.beginImport(deviceID: "phone", secret: secret, account: "acct") else { return XCTFail("done job") }
        XCTAssertEqual(done.state, .done(removed))
        XCTAssertEqual(try c.beginImport(deviceID: "phone", secret: secret, account: "other"), .nothingToImport)
    }
}

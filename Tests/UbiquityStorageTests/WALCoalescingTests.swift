import CSQLite
import Foundation
import XCTest
@testable import UbiquityStorage

/// The writer's WAL write coalescing ("ubq-walbuf", docs/storage.md): a commit's frames must be
/// in the WAL file before the commit is visible to any other connection, under NORMAL (no sync
/// at commit) as under FULL, including commits larger than one flush chunk (124 KiB).
final class WALCoalescingTests: StorageTestCase, @unchecked Sendable {
    private func savesAreVisibleToFreshConnections(_ name: String, sync: SynchronousMode, coalescing: Bool) async throws {
        let s = try open(name) {
            $0.synchronous = sync
            $0.walWriteCoalescing = coalescing
            $0.checkpointThresholdBytes = 256 << 10; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0  // checkpoints (WAL reads and restarts) during the run too
        }
        var total: Int64 = 0
        for round in 0..<24 {
            let count = round % 3 == 0 ? 60 : (round % 3 == 1 ? 1 : 12)  // 60 x 3000 bytes: a commit past one chunk
            var r = SaveRequest()
            r.inserts = (0..<count).map { InsertOperation(temporaryID: "t\($0)", entity: "Note", values: ["n": .int(Int64(1000 * round + $0)), "text": .string(String(repeating: Character(UnicodeScalar(UInt8(97 + round % 26))), count: 3000))]) }
            _ = try await s.save(r)
            total += Int64(count)
            // a connection opened after the acknowledgement reads the WAL through the file (and the shm)
            let fresh = try Connection(path: dir + "/" + name + ".sqlite", readOnly: true, vfs: nil, busyTimeoutMS: 5000)
            let n = try fresh.scalar("SELECT count(*) FROM t_Note")
            let bytes = try fresh.scalar("SELECT sum(length(a_text)) FROM t_Note WHERE a_text = ?", [.text(String(repeating: Character(UnicodeScalar(UInt8(97 + round % 26))), count: 3000))])
            fresh.close()
            XCTAssertEqual(n, .integer(total), "\(name) round \(round): acknowledged rows visible to a fresh connection")
            guard case .integer(let b) = bytes else { return XCTFail("\(name) round \(round): no texts") }
            XCTAssertGreaterThanOrEqual(b, Int64(3000 * count), "\(name) round \(round): the texts read back whole")
            // and to the store's own readers
            let dump = try await s.dump()
            XCTAssertEqual(Int64(dump.objects.count), total, "\(name) round \(round)")
        }
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
        let before = try await s.dump()
        let id = s.id
        s.close()
        let s2 = try open(name, id: id, model: nil)
        let after = try await s2.dump()
        XCTAssertEqual(after, before)
    }

    func testSavesVisibleToFreshConnectionsNormal() async throws {
        try await savesAreVisibleToFreshConnections("normal", sync: .normal, coalescing: true)
    }

    func testSavesVisibleToFreshConnectionsFull() async throws {
        try await savesAreVisibleToFreshConnections("full", sync: .full, coalescing: true)
    }

    func testCoalescingOffIsSQLiteOwnWrites() async throws {
        try await savesAreVisibleToFreshConnections("off", sync: .normal, coalescing: false)
        // off: the writer opens with the configured VFS itself
        XCTAssertEqual(WALCoalescing.writerVFS(over: nil, logger: logger), "ubq-walbuf")
        XCTAssertEqual(WALCoalescing.writerVFS(over: FaultInjection.vfsName, logger: logger), "ubq-walbuf-ubq-fault", "fault injection stays under the wrapper")
        XCTAssertEqual(WALCoalescing.writerVFS(over: "unix", logger: logger), "unix", "another VFS is not wrapped")
    }

    private let logger = StorageConfiguration().logger

    /// Coalescing reads the shape of wal.c's private frame writes: it runs only on the SQLite it
    /// was validated on (Debian 12's 3.40.1, the one this suite and the crash test run on).
    func testCoalescingIsRefusedOnAnotherSQLiteVersion() {
        XCTAssertTrue(WALCoalescing.isValidated(sqliteVersion: 3_040_001))
        XCTAssertTrue(WALCoalescing.isValidated(sqliteVersion: sqlite3_libversion_number()), "this machine's SQLite is the validated one")
        for other: Int32 in [3_040_000, 3_040_002, 3_041_000, 3_045_001] {
            XCTAssertFalse(WALCoalescing.isValidated(sqliteVersion: other))
            XCTAssertNil(WALCoalescing.writerVFS(over: nil, logger: logger, sqliteVersion: other), "\(other): the plain default VFS")
            XCTAssertEqual(WALCoalescing.writerVFS(over: FaultInjection.vfsName, logger: logger, sqliteVersion: other), "ubq-fault", "\(other): the plain base VFS")
        }
    }

    /// With the fault VFS under the wrapper, a failing write of a coalesced run (or of the commit
    /// frame's flush) fails the save whole; the store keeps working and reopens the same.
    func testFaultOnCoalescedWALWriteFailsTheSaveCleanly() async throws {
        let s = try open("fault") { $0.vfsName = FaultInjection.vfsName; $0.synchronous = .normal }
        _ = try await insert(s, "Note", ["n": 0])
        var failures = 0
        for (k, nth) in [1, 2, 3, 1, 2].enumerated() {
            let before = try await s.dump()
            FaultInjection.arm(writeNth: nth, diskFull: k == 3)
            var r = SaveRequest()
            r.inserts = (0..<60).map { InsertOperation(temporaryID: "t\($0)", entity: "Note", values: ["n": .int(Int64(1000 * (k + 1) + $0)), "text": .string(String(repeating: "c", count: 3000))]) }
            do {
                _ = try await s.save(r)
                let after = try await s.dump()
                XCTAssertEqual(after.objects.count, before.objects.count + 60, "round \(k): acknowledged save complete")
            } catch let e as StorageError {
                failures += 1
                XCTAssertTrue([.io, .full].contains(e.reason), "round \(k): \(e)")
                FaultInjection.disarm()
                let after = try await s.dump()
                XCTAssertEqual(after, before, "round \(k): nothing partial")
                let fresh = try Connection(path: dir + "/fault.sqlite", readOnly: true, vfs: nil, busyTimeoutMS: 5000)
                XCTAssertEqual(try fresh.scalar("SELECT count(*) FROM t_Note"), .integer(Int64(before.objects.count)), "round \(k): nothing visible to another connection")
                fresh.close()
            }
            FaultInjection.disarm()
            _ = try await insert(s, "Note", ["n": .int(Int64(-k))])
        }
        XCTAssertGreaterThan(failures, 0)
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
        let dump = try await s.dump()
        s.close()
        let s2 = try open("fault", id: s.id, model: nil)
        let dump2 = try await s2.dump()
        XCTAssertEqual(dump2, dump)
    }
}

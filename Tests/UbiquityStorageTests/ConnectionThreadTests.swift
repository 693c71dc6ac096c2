import Foundation
import XCTest
@testable import UbiquityStorage

/// A connection is used only by the thread that owns it (docs/threading.md, storage rule 1): the
/// writer thread its connection, a reader the connection it checked out, the opener a new one
/// until it hands it over. In debug builds a use from any other thread traps.
final class ConnectionThreadTests: StorageTestCase, @unchecked Sendable {
    func testEachConnectionIsOwnedByTheThreadUsingIt() async throws {
        let s = try open()
        let onWriter = try await s.onWriter { conn, _ in conn.isOwnedByCurrentThread }
        XCTAssertTrue(onWriter, "the writer thread owns the writer connection")
        let (sync, conn) = try s.onReaderSync(isCancelled: nil, use: .fresh) { c in (c.isOwnedByCurrentThread, c) }
        XCTAssertTrue(sync, "a checked-out reader connection belongs to the thread that checked it out")
        XCTAssertFalse(conn.isOwnedByCurrentThread, "and to nobody once checked back in")
        let pooled = try await s.onReader { c in c.isOwnedByCurrentThread }
        XCTAssertTrue(pooled, "a reader pool thread owns the connection it checked out")
    }

    func testAConnectionMovesBetweenThreadsOnlyByHandOver() throws {
        let c = try Connection(path: dir + "/handover.sqlite", readOnly: false, vfs: nil, busyTimeoutMS: 1000)
        XCTAssertTrue(c.isOwnedByCurrentThread, "the opener owns a new connection")
        try c.exec("CREATE TABLE t_x(x)")
        c.releaseThread()
        XCTAssertFalse(c.isOwnedByCurrentThread)
        let other = DispatchSemaphore(value: 0)
        let box = UncheckedBox(c)
        let t = Thread {
            box.value.adoptThread()
            try? box.value.exec("INSERT INTO t_x VALUES (1)")
            box.value.releaseThread()
            other.signal()
        }
        t.start()
        other.wait()
        c.adoptThread()
        XCTAssertEqual(try c.scalar("SELECT count(*) FROM t_x"), .integer(1))
        c.close()
    }

    /// The misuse itself, in a child process (it traps): the writer connection used from the
    /// test's thread. The parent checks that the child died of the trap with the message.
    func testUseFromAnotherThreadTraps() throws {
        #if DEBUG
        if ProcessInfo.processInfo.environment[Self.childVariable] != nil {
            let s = try open()
            let conn = try waitOnWriter(s)
            _ = try? conn.exec("SELECT 1")  // traps
            XCTFail("no trap")
            return
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        p.arguments = ["UbiquityStorageTests.ConnectionThreadTests/testUseFromAnotherThreadTraps"]
        // SWIFT_BACKTRACE=enable=no: the runtime's crash backtracer would catch the trap in the
        // child first. Under ThreadSanitizer it cannot suspend the child's threads and the child
        // then exits with a status instead of dying of the signal (scripts/sanitize thread), so the
        // trap would not be seen as one. The message is printed before the backtracer runs.
        p.environment = ProcessInfo.processInfo.environment.merging(
            [Self.childVariable: "1", "SWIFT_BACKTRACE": "enable=no"]) { $1 }
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let output = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationReason, .uncaughtSignal, output)
        XCTAssertTrue([SIGILL, SIGTRAP].contains(p.terminationStatus),
                      "a Swift trap is SIGILL (x86_64 ud2) or SIGTRAP (arm64 brk), not signal \(p.terminationStatus)")
        XCTAssertTrue(output.contains("used on a thread that does not own it"), output)
        #else
        throw XCTSkip("the thread check traps in debug builds only")
        #endif
    }

    private static let childVariable = "UBQ_CONNECTION_THREAD_CHILD"

    private func waitOnWriter(_ s: Store) throws -> Connection {
        let got = DispatchSemaphore(value: 0)
        let box = UncheckedBox<Connection?>(nil)
        Task { try await s.onWriter { conn, _ in box.value = conn; got.signal() } }
        got.wait()
        return box.value!
    }
}

/// Hands a non-Sendable value to another thread in these tests (the hand-over is ordered by a semaphore).
private final class UncheckedBox<T>: @unchecked Sendable {
    var value: T
    init(_ v: T) { value = v }
}

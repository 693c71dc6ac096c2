import Foundation
import XCTest
@testable import UbiquityStorage

/// A store whose file has everything in place opens without its writer connection; the first
/// writer job opens it (docs/storage.md rule 10, "What an open costs").
final class LazyWriterTests: StorageTestCase, @unchecked Sendable {
    private func notes(_ s: Store) async throws -> [Int64] {
        try await s.dump().objects.filter { $0.id.entity == "Note" }.compactMap { o in
            if case .int(let n) = o.values["n"] { return n } else { return nil }
        }.sorted()
    }

    private func assertNotes(_ s: Store, _ expected: [Int64], file: StaticString = #filePath, line: UInt = #line) async throws {
        let read = try await notes(s)
        XCTAssertEqual(read, expected, file: file, line: line)
    }

    /// Reopened (with or without the model it already has) and only read: no writer connection
    /// opens, not even at close (which then has nothing to checkpoint).
    func testAReopenedStoreOnlyReadNeverOpensAWriter() async throws {
        let id = UUID()
        let first = try open("s", id: id) { $0.vfsName = FaultInjection.vfsName }
        XCTAssertTrue(first.writer.isConnected, "a new store opens its writer to create its tables")
        for n in 0..<3 { try await insert(first, "Note", ["n": .int(Int64(n))]) }
        let generation = first.currentToken.generation
        first.close()
        for model in [nil, Fixtures.model] {
            let opens = FaultInjection.writerOpenCount
            let s = try open("s", id: id, model: model) { $0.vfsName = FaultInjection.vfsName }
            XCTAssertEqual(s.currentToken.generation, generation, "state read by the read connection")
            XCTAssertEqual(s.modelVersionHash, first.modelVersionHash)
            let read = try await notes(s)
            XCTAssertEqual(read, [0, 1, 2])
            let problems = try await s.integrityCheck()
            XCTAssertEqual(problems, [])
            XCTAssertFalse(s.writer.isConnected)
            s.close()
            XCTAssertEqual(FaultInjection.writerOpenCount, opens, "no read-write open of the file (model \(model == nil ? "none" : "given"))")
        }
    }

    /// The first save after such an open opens the writer and commits; so does the first other
    /// writer job (a checkpoint), and the data survives a reopen.
    func testTheFirstWriteAfterAReadOnlyOpenOpensTheWriter() async throws {
        let id = UUID()
        let a = try open("s", id: id)
        try await insert(a, "Note", ["n": 1])
        a.close()
        let b = try open("s", id: id, model: nil)
        try await assertNotes(b, [1])
        XCTAssertFalse(b.writer.isConnected)
        let g = b.currentToken.generation
        try await insert(b, "Note", ["n": 2])
        XCTAssertTrue(b.writer.isConnected)
        XCTAssertEqual(b.currentToken.generation, g + 1)
        try await assertNotes(b, [1, 2])
        b.close()
        let c = try open("s", id: id, model: nil)
        _ = try await c.checkpoint()
        XCTAssertTrue(c.writer.isConnected, "an exclusive writer job opens it too")
        try await assertNotes(c, [1, 2])
    }

    /// The writer's open fails (the file cannot be opened read-write): that save fails with the
    /// error and changes nothing; the next save opens the writer and succeeds.
    func testAFailingWriterOpenFailsThatSaveAndALaterSaveSucceeds() async throws {
        let id = UUID()
        let a = try open("s", id: id)
        try await insert(a, "Note", ["n": 1])
        a.close()
        let s = try open("s", id: id, model: nil) { $0.vfsName = FaultInjection.vfsName; $0.readerCount = 1 }
        XCTAssertFalse(s.writer.isConnected)
        let g = s.currentToken.generation
        FaultInjection.armWriterOpen()
        let e = await storageError { try await self.insert(s, "Note", ["n": 2]) }
        XCTAssertEqual(FaultInjection.firedCount, 1, "the armed open failed")
        XCTAssertEqual(e?.sqliteExtendedCode.map { $0 & 0xff }, 14, "SQLITE_CANTOPEN, as the open reported it")
        XCTAssertFalse(s.writer.isConnected)
        XCTAssertEqual(s.currentToken.generation, g)
        try await assertNotes(s, [1])
        // an exclusive job in a failed batch gets the error too
        FaultInjection.armWriterOpen()
        let ce = await storageError { _ = try await s.checkpoint() }
        XCTAssertNotNil(ce?.sqliteExtendedCode)
        try await insert(s, "Note", ["n": 3])
        XCTAssertTrue(s.writer.isConnected)
        XCTAssertEqual(s.currentToken.generation, g + 1)
        try await assertNotes(s, [1, 3])
    }

    /// Files that need the writer's schema transaction still open it at once: a new store, a
    /// store without a model given one, a file missing a meta key; another store's file is refused.
    func testFilesThatNeedTheSchemaTransactionOpenTheWriterAtOnce() async throws {
        let id = UUID()
        let bare = try open("bare", id: id, model: nil)
        XCTAssertTrue(bare.writer.isConnected, "new file")
        bare.close()
        let noModel = try open("bare", id: id, model: nil)
        XCTAssertFalse(noModel.writer.isConnected, "complete file, no model to install: lazy")
        XCTAssertNil(noModel.modelDefinition)
        noModel.close()
        let installing = try open("bare", id: id, model: Fixtures.model)
        XCTAssertTrue(installing.writer.isConnected, "a model to install")
        XCTAssertNotNil(installing.modelVersionHash)
        try await insert(installing, "Note", ["n": 7])
        installing.close()
        // a table missing: the schema transaction creates it
        let raw = try Connection(path: dir + "/bare.sqlite", readOnly: false, vfs: nil, busyTimeoutMS: 1000)
        try raw.exec("DROP TABLE ubq_client_tx")
        raw.close()
        let upgraded = try open("bare", id: id, model: nil)
        XCTAssertTrue(upgraded.writer.isConnected, "a table missing")
        try await assertNotes(upgraded, [7])
        upgraded.close()
        let again = try open("bare", id: id, model: nil)
        XCTAssertFalse(again.writer.isConnected, "complete again")
        again.close()
        XCTAssertThrowsError(try open("bare", id: UUID(), model: nil)) { e in
            XCTAssertEqual((e as? StorageError)?.reason, .invalidArgument, "another store's file, refused as before")
        }
    }
}

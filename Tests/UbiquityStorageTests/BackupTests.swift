import Foundation
import XCTest
@testable import UbiquityStorage

/// Backup files (docs/operations.md "Back up and restore"): the copy's generation, the manifest
/// as the commit point, checksum refusals, and the incremental SHA-256 behind them.
final class BackupTests: StorageTestCase, @unchecked Sendable {
    /// A file longer than `BackupFiles.digest`'s 1 MiB read buffer hashes to the standard SHA-256 of
    /// its bytes (vector from Python's hashlib), so manifests written before and after any change
    /// of hashing code still verify.
    func testFileDigestSpansReadsAndMatchesTheStandardSHA256() throws {
        let bytes = (0..<(1 << 20) + 100).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let path = dir + "/blob"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (sha, size) = try BackupFiles.digest(path)
        XCTAssertEqual(sha, "d374c1936970031dbb8940eb08cb9813ca7396530459c16511dab946f7bb35c3")
        XCTAssertEqual(size, Int64(bytes.count))
    }

    func testStoreBackupIsAtTheLastCommitAndSavesGoOnAfterIt() async throws {
        let s = try open()
        for i in 0..<5 { _ = try await insert(s, "Note", ["n": .int(Int64(i))]) }
        let before = s.currentToken
        let copy = dir + "/copy.sqlite"
        let (generation, epoch) = try await s.backup(to: copy)
        XCTAssertEqual(generation, before.generation)
        XCTAssertEqual(epoch, before.epoch)
        _ = try await insert(s, "Note", ["n": .int(99)])
        XCTAssertEqual(s.currentToken.generation, generation + 1)
        let again = await reason { _ = try await s.backup(to: copy) }
        XCTAssertEqual(again, .invalidArgument, "never over an existing file")
        s.close()
        // the copy opens as the same store, at its generation, with its objects
        let restored = try Store.open(path: copy, id: s.id, configuration: { var c = StorageConfiguration(); c.readerCount = 1; return c }())
        defer { restored.close() }
        XCTAssertEqual(restored.currentToken.generation, generation)
        let n = try await restored.objectIDs(entity: "Note").count
        XCTAssertEqual(n, 5)
        let problems = try await restored.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    func testManifestIsTheCommitPointAndChecksumsAreVerified() throws {
        let b = dir + "/backup"
        try BackupFiles.prepare(b)
        try Data("one".utf8).write(to: URL(fileURLWithPath: b + "/stores/a.sqlite"))
        XCTAssertEqual(Self.error { _ = try BackupFiles.load(b) }, .incomplete(b))
        let (sha, size) = try BackupFiles.seal(b, "stores/a.sqlite")
        XCTAssertEqual(size, 3)
        let entry = BackupManifest.StoreEntry(account: "default", storeID: UUID().uuidString.lowercased(), name: "n", generation: 4, epoch: 9,
                                              file: "stores/a.sqlite", sha256: sha, sizeBytes: size)
        let manifest = BackupManifest(serverVersion: "test", stores: [entry], databases: [])
        try BackupFiles.writeManifest(manifest, to: b)
        XCTAssertEqual(try BackupFiles.load(b), manifest)
        XCTAssertFalse(FileManager.default.fileExists(atPath: b + "/.manifest.json.tmp"))
        // snake_case keys in the file, for tools other than this server
        let json = try String(contentsOfFile: b + "/manifest.json", encoding: .utf8)
        XCTAssertTrue(json.contains("\"store_id\"") && json.contains("\"format_version\" : 1"), json)

        XCTAssertEqual(Self.error { try BackupFiles.prepare(b) }, .directoryNotEmpty(b))
        try Data("two".utf8).write(to: URL(fileURLWithPath: b + "/stores/a.sqlite"))
        XCTAssertEqual(Self.error { _ = try BackupFiles.load(b) }, .checksumMismatch(file: "stores/a.sqlite"))
        try FileManager.default.removeItem(atPath: b + "/stores/a.sqlite")
        XCTAssertEqual(Self.error { _ = try BackupFiles.load(b) }, .checksumMismatch(file: "stores/a.sqlite"))

        var outside = manifest
        outside.stores[0].file = "../escape.sqlite"
        try FileManager.default.removeItem(atPath: b + "/manifest.json")
        try BackupFiles.writeManifest(outside, to: b)
        XCTAssertEqual(Self.error { _ = try BackupFiles.load(b) }, .checksumMismatch(file: "../escape.sqlite"), "a manifest names files inside its directory only")
        XCTAssertEqual(Self.error { try BackupFiles.prepare("relative/dir") }?.isBadDirectory, true)
    }

    private static func error(_ body: () throws -> Void) -> BackupError? {
        do { try body(); return nil } catch let e as BackupError { return e } catch { XCTFail("\(error)"); return nil }
    }
}

private extension BackupError {
    var isBadDirectory: Bool { if case .badDirectory = self { true } else { false } }
}

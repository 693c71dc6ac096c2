import Foundation
import Testing
@testable import Ubiquity

/// `client.admin` against a real ubiquityd: the open calls without a session, backup and restore
/// with the operator key, and refused without it.
@Suite(.timeLimit(.minutes(2))) struct AdminTests {
    @Test func pingInfoAndStatsNeedNoSession() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let anonymous = try UbiquityClient(target: f.server.target)
        defer { Task { await anonymous.close() } }
        let pong = try await anonymous.admin.ping(Data("hello".utf8))
        #expect(pong.payload == Data("hello".utf8))
        let info = try await anonymous.admin.serverInfo()
        #expect(info.name == "ubiquityd" && info.services.contains("ubiquity.v1.Stores"))
        #expect(info.limits.maxConcurrentStreams > 0)
        let stats = try await anonymous.admin.stats()
        // The fixture's sign-in, open and model calls completed OK.
        #expect(stats.openConnections >= 2 && (stats.callsByStatus[0] ?? 0) >= 3)
        // A client with a key does not sign in for them: a probe works even with a bad key.
        let probe = try UbiquityClient(
            target: f.server.target, credentials: .apiKey("ubk_0123456789abcdef.wrong", deviceID: "probe"))
        defer { Task { await probe.close() } }
        #expect(try await probe.admin.ping().payload.isEmpty)
        #expect(await probe.signIns == 0)
    }

    @Test func anOperatorBacksUpAndRestoresAStore() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        _ = try await addPeople(f.store, [["name": "Ann"]])
        let operatorClient = try UbiquityClient(target: f.server.target, credentials: .sessionToken(try f.server.operatorKey))
        defer { Task { await operatorClient.close() } }
        let directory = f.server.workDir.appendingPathComponent("backup").path
        // Not the operator: refused, nothing written.
        let refused = await #expect(throws: UbiquityError.self) { try await f.client.admin.backup(to: directory) }
        #expect(refused?.code == .unauthenticated && refused?.kind == .badCredentials)
        #expect(!FileManager.default.fileExists(atPath: directory))

        let manifest = try await operatorClient.admin.backup(to: directory, storeID: f.store.id)
        #expect(manifest.stores.map(\.storeID) == [f.store.id] && manifest.directory == directory)
        let backedUp = try #require(manifest.stores.first).generation
        _ = try await addPeople(f.store, [["name": "Bob"]])

        // A store that exists is replaced only when asked to.
        let kept = await #expect(throws: UbiquityError.self) { try await operatorClient.admin.restoreStore(from: directory) }
        #expect(kept?.code == .failedPrecondition && kept?.reason == "STORE_EXISTS")
        let restored = try await operatorClient.admin.restoreStore(from: directory, replaceExisting: true)
        #expect(restored.storeID == f.store.id && restored.generation == backedUp)
        #expect(try await f.store.fetch("Person").objects.map { $0["name"]?.string } == ["Ann"])
        #expect(try await f.store.currentToken() == restored.token)
    }
}

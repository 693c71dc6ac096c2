import Foundation
import GRPCCore
import Testing
@testable import Ubiquity

/// The operator's account calls (`client.accountAdmin`) against a real ubiquityd: accounts,
/// scoped API keys used by devices, and the lifecycle with its typed refusals.
@Suite(.timeLimit(.minutes(2))) struct AccountAdminTests {
    @Test func anOperatorCreatesAnAccountAndKeysWhoseScopesHold() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        let ops = try operatorClient(server)
        defer { Task { await ops.close() } }
        let acme = try await ops.accountAdmin.createAccount(displayName: "Acme")
        #expect(acme.state == .active && acme.displayName == "Acme" && acme.id != "default")
        #expect(try await ops.accountAdmin.account(acme.id) == acme)
        var listed: [String] = []
        for try await account in ops.accountAdmin.accounts() { listed.append(account.id) }
        #expect(Set(listed) == ["default", acme.id] && listed == listed.sorted())

        let writer = try await ops.accountAdmin.createApiKey(for: acme.id, label: "app")
        #expect(writer.key.accountID == acme.id && writer.key.scope == .readWrite && !writer.key.revoked)
        #expect(ApiKey.id(ofSecret: writer.secret) == writer.key.id)
        let reader = try await ops.accountAdmin.createApiKey(for: acme.id, scope: .readOnly, label: "dashboard")
        let oneStore = try await ops.accountAdmin.createApiKey(for: acme.id, scope: .oneStore("notes"))
        #expect(reader.key.scope == .readOnly && oneStore.key.scope == .oneStore("notes"))

        let app = try UbiquityClient(target: server.target, credentials: .apiKey(writer.secret, deviceID: "app"))
        defer { Task { await app.close() } }
        let notes = try await app.openStore("notes")
        try await notes.registerModel(personModel())
        _ = try await addPeople(notes, [["name": "Ann"]])
        #expect(await app.accountID == acme.id)

        // A read-only key reads the account's store, and its write is refused, typed, with
        // nothing applied.
        let dashboard = try UbiquityClient(target: server.target, credentials: .apiKey(reader.secret, deviceID: "dash"))
        defer { Task { await dashboard.close() } }
        let readOnly = try await dashboard.openStore("notes", mustExist: true)
        #expect(try await readOnly.fetch("Person").objects.count == 1)
        let refused = await #expect(throws: UbiquityError.self) {
            try await readOnly.save(inserts: [Insert("b", "Person", ["name": "Bob"])])
        }
        #expect(refused?.code == .permissionDenied && refused?.kind == .scopeExceeded)
        #expect(refused?.reason == "SCOPE_EXCEEDED")
        #expect(try await notes.fetch("Person").objects.count == 1)
        // A one-store key works in its store and nowhere else.
        let scoped = try UbiquityClient(target: server.target, credentials: .apiKey(oneStore.secret, deviceID: "one"))
        defer { Task { await scoped.close() } }
        _ = try await (try await scoped.openStore("notes", mustExist: true)).fetch("Person")
        let elsewhere = await #expect(throws: UbiquityError.self) { try await scoped.openStore("other") }
        #expect(elsewhere?.kind == .scopeExceeded)

        // Revoking the writer's key ends its session: refused as revoked, then not signing in.
        #expect(try await ops.accountAdmin.revokeApiKey(writer.key.id) == 1)
        let revoked = await #expect(throws: UbiquityError.self) { try await app.listStores() }
        #expect(revoked?.kind == .sessionRevoked)
        let gone = await #expect(throws: UbiquityError.self) { try await app.listStores() }
        #expect(gone?.kind == .badCredentials)

        // Only the operator key reaches these calls: a device's session is not it.
        let notOperator = await #expect(throws: UbiquityError.self) { try await dashboard.accountAdmin.createAccount() }
        #expect(notOperator?.kind == .badCredentials)
    }

    @Test func archiveRestoreAndDeleteWithTheirRefusals() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        let ops = try operatorClient(server)
        defer { Task { await ops.close() } }
        let admin = ops.accountAdmin
        let account = try await admin.createAccount(displayName: "Short-lived")
        let key = try await admin.createApiKey(for: account.id)
        let device = try UbiquityClient(target: server.target, credentials: .apiKey(key.secret, deviceID: "d"))
        defer { Task { await device.close() } }
        let store = try await device.openStore("notes")
        try await store.registerModel(personModel())
        _ = try await addPeople(store, [["name": "Ann"], ["name": "Bob"]])

        #expect(try await admin.archive(account.id).state == .archived)
        #expect(try await admin.account(account.id).state == .archived)
        let twice = await #expect(throws: UbiquityError.self) { try await admin.archive(account.id) }
        #expect(twice?.kind == .accountArchived && twice?.reason == "ACCOUNT_ARCHIVED")
        // Archived: its key does not sign in.
        let away = await #expect(throws: UbiquityError.self) { try await device.listStores() }
        #expect(away?.code == .unauthenticated)

        #expect(try await admin.restore(account.id).state == .active)
        let notArchived = await #expect(throws: UbiquityError.self) { try await admin.restore(account.id) }
        #expect(notArchived?.kind == .accountNotArchived && notArchived?.code == .alreadyExists)
        // Back as it was.
        let back = try await device.openStore("notes", mustExist: true)
        #expect(try await back.fetch("Person").objects.count == 2)

        let archiveDefault = await #expect(throws: UbiquityError.self) { try await admin.archive("default") }
        let deleteDefault = await #expect(throws: UbiquityError.self) { try await admin.delete("default") }
        #expect(archiveDefault?.kind == .defaultAccount && deleteDefault?.kind == .defaultAccount)

        let receipt = try await admin.delete(account.id)
        #expect(receipt.stores == 1 && receipt.apiKeys == 1 && receipt.sessions >= 1 && receipt.bytes > 0)
        let unknown = await #expect(throws: UbiquityError.self) { try await admin.account(account.id) }
        #expect(unknown?.kind == .notFound)
        var listed: [String] = []
        for try await a in admin.accounts() { listed.append(a.id) }
        #expect(listed == ["default"])
        let noKey = await #expect(throws: UbiquityError.self) { try await admin.revokeApiKey(key.key.id) }
        #expect(noKey?.kind == .notFound)
    }
}

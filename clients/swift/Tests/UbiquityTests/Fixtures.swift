import Foundation
@testable import Ubiquity

/// Person (name required, email unique) — the model of the scenario suite every client runs.
func personModel() -> Ubiquity_V1_Model {
    func attribute(_ name: String, _ type: Ubiquity_V1_AttributeType, required: Bool = false) -> Ubiquity_V1_Attribute {
        .with {
            $0.name = name
            $0.type = type
            $0.required = required
        }
    }
    return .with {
        $0.versionIdentifier = "v1"
        $0.entities = [
            .with {
                $0.name = "Person"
                $0.attributes = [
                    attribute("name", .string, required: true), attribute("age", .int32),
                    attribute("email", .string), attribute("score", .double),
                ]
                $0.uniquenessConstraints = [.with { $0.properties = ["email"] }]
            }
        ]
    }
}

/// A client carrying the server's operator key, for ``AccountAdmin`` calls.
func operatorClient(_ server: Server, security: ConnectionSecurity = .plaintext) throws -> UbiquityClient {
    try UbiquityClient(target: server.target, credentials: .sessionToken(try server.operatorKey), security: security)
}

/// A new API key of the default account, made with the operator key as an operator would
/// (`client.accountAdmin`, docs/accounts.md).
func makeApiKey(
    _ server: Server, scope: ApiKey.Scope = .readWrite, security: ConnectionSecurity = .plaintext
) async throws -> String {
    let ops = try operatorClient(server, security: security)
    defer { Task { await ops.close() } }
    return try await ops.accountAdmin.createApiKey(for: "default", scope: scope, label: "swift-tests").secret
}

/// Revokes the API key `secret` (`ubk_<key id>.<secret>`) with the operator key: its sessions end.
func revokeApiKey(_ server: Server, _ secret: String) async throws {
    let ops = try operatorClient(server)
    defer { Task { await ops.close() } }
    try await ops.accountAdmin.revokeApiKey(ApiKey.id(ofSecret: secret))
}

/// A running server (authentication on, as deployed), a client signed in to it with an API key,
/// and a fresh store with the Person model.
struct Fixture {
    let server: Server
    let client: UbiquityClient
    let store: Store
    let apiKey: String

    static func make(
        interop: Bool = false, serverOptions: [String] = [], interceptors: [any GRPCCore.ClientInterceptor] = []
    ) async throws -> Fixture {
        let server = try await Server(interop: interop, options: serverOptions).start()
        let apiKey = try await makeApiKey(server)
        let client = try UbiquityClient(
            target: server.target, credentials: .apiKey(apiKey, deviceID: "swift-tests"), interceptors: interceptors)
        let store = try await client.openStore("people-\(UUID().uuidString)")
        try await store.registerModel(personModel())
        return Fixture(server: server, client: client, store: store, apiKey: apiKey)
    }

    /// Kills the server first: a client's graceful close waits for its calls in flight (a feed
    /// a failed test left open), and must not keep the server alive meanwhile.
    func close() async {
        server.kill()
        await client.close()
    }
}

import GRPCCore

/// Saves people in one store-level save; returns their permanent IDs in order.
func addPeople(_ store: Store, _ people: [[String: Value]]) async throws -> [String] {
    let inserts = people.enumerated().map { Insert("p\($0.offset)", "Person", $0.element) }
    let result = try await store.save(inserts: inserts)
    return people.indices.map { result.permanentIDs["p\($0)"]! }
}

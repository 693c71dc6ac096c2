import Foundation
import Ubiquity

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

/// A running server, a client connected to it, and a fresh store with the Person model.
struct Fixture {
    let server: Server
    let client: UbiquityClient
    let store: Store

    static func make(interop: Bool = false, interceptors: [any GRPCCore.ClientInterceptor] = []) async throws -> Fixture {
        let server = try await Server(interop: interop).start()
        let client = try UbiquityClient(target: server.target, interceptors: interceptors)
        let store = try await client.openStore("people-\(UUID().uuidString)")
        try await store.registerModel(personModel())
        return Fixture(server: server, client: client, store: store)
    }

    func close() async {
        await client.close()
        server.kill()
    }
}

import GRPCCore

/// Saves people in one store-level save; returns their permanent IDs in order.
func addPeople(_ store: Store, _ people: [[String: Value]]) async throws -> [String] {
    let inserts = people.enumerated().map { Insert("p\($0.offset)", "Person", $0.element) }
    let result = try await store.save(inserts: inserts)
    return people.indices.map { result.permanentIDs["p\($0)"]! }
}

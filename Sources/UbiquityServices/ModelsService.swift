import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

/// `ubiquity.v1.Models`: RegisterModel (first model or lightweight migration) and GetModel.
public struct ModelsService: Sendable {
    let backend: Backend
    public init(backend: Backend) { self.backend = backend }

    public func register(into router: inout Router) {
        router.register(service: "ubiquity.v1.Models", backend: backend) { t in
            t.unary("RegisterModel", registerModel)
            t.unary("GetModel", getModel)
        }
    }

    func registerModel(_ req: Ubiquity_V1_RegisterModelRequest, context: ServerContext) async throws -> Ubiquity_V1_RegisterModelResponse {
        guard req.hasModel, !req.model.entities.isEmpty else {
            throw ServiceError.invalid("model", "a model needs at least one entity", reason: .missingField)
        }
        let def = try Convert.model(req.model)
        return try await backend.withStore(req.storeID, account: context.account) { store in
            let before = store.modelVersionHash
            let report = try await store.migrate(to: def, dryRun: req.dryRun)
            var res = Ubiquity_V1_RegisterModelResponse()
            res.fromVersionHash = report.fromHash ?? ""
            res.versionHash = report.toHash
            res.steps = report.steps
            res.dryRun = report.dryRun
            res.unchanged = before == report.toHash && report.steps.isEmpty
            if !req.dryRun { res.token = Data((report.token ?? store.currentToken).bytes) }
            return res
        }
    }

    func getModel(_ req: Ubiquity_V1_GetModelRequest, context: ServerContext) async throws -> Ubiquity_V1_GetModelResponse {
        try await backend.withStore(req.storeID, account: context.account) { store in
            var res = Ubiquity_V1_GetModelResponse()
            if let m = store.modelDefinition, let h = store.modelVersionHash {
                res.model = Convert.protoModel(m)
                res.versionHash = h
            }
            return res
        }
    }
}

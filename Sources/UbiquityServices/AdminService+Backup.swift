import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

// Admin.Backup and Admin.RestoreStore: request checks and messages; the work is `Backups`.
extension AdminService {
    func backup(_ request: Ubiquity_V1_BackupRequest, call: ServerCall) async throws -> Ubiquity_V1_BackupManifest {
        guard let backups else { throw ServiceError.precondition("this server has no storage", reason: .unsupported) }
        try backups.requireOperator(call)
        let directory = try Self.directory(request.directory)
        let storeID = try Self.storeID(request.storeID)
        return try await backups.backup(to: directory, storeID: storeID).message(directory: directory)
    }

    func restoreStore(_ request: Ubiquity_V1_RestoreStoreRequest, call: ServerCall) async throws -> Ubiquity_V1_RestoreStoreResponse {
        guard let backups else { throw ServiceError.precondition("this server has no storage", reason: .unsupported) }
        try backups.requireOperator(call)
        let directory = try Self.directory(request.directory)
        let (record, token) = try await backups.restoreStore(from: directory, storeID: try Self.storeID(request.storeID),
                                                             replaceExisting: request.replaceExisting)
        var res = Ubiquity_V1_RestoreStoreResponse()
        res.storeID = record.id.uuidString.lowercased()
        res.token = Data(token.bytes)
        res.generation = token.generation
        return res
    }

    private static func directory(_ text: String) throws -> String {
        guard !text.isEmpty else { throw ServiceError.invalid("directory", "the backup directory is required (an absolute path on the server)", reason: .missingField) }
        guard text.hasPrefix("/"), !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ServiceError.invalid("directory", "the backup directory must be an absolute path on the server without control characters", reason: .invalidArgument)
        }
        return text.count > 1 && text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    private static func storeID(_ text: String) throws -> UUID? {
        if text.isEmpty { return nil }
        guard let id = UUID.parse(text) else { throw ServiceError.invalid("store_id", "not a store ID (a UUID)", reason: .badStoreID) }
        return id
    }
}

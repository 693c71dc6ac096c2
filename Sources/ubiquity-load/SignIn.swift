import Foundation
import UbiquityGRPCClient
import UbiquityProtos

/// `--operator-key-file`: a session for the default account, made the way an operator would
/// (CreateApiKey with the operator key, then SignIn), so a benchmark needs only the data directory.
enum LoadSignIn {
    static func session(host: String, port: Int, operatorKeyFile: String) async throws -> String {
        guard let text = try? String(contentsOfFile: operatorKeyFile, encoding: .utf8) else {
            throw LoadError(message: "cannot read the operator key file \(operatorKeyFile)")
        }
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
        defer { channel.close() }
        var create = Ubiquity_V1_CreateApiKeyRequest()
        create.accountID = "default"
        create.scope = .readWrite
        create.label = "ubiquity-load"
        let created = try await channel.unary("/ubiquity.v1.Accounts/CreateApiKey", create, as: Ubiquity_V1_CreateApiKeyResponse.self,
                                              metadata: [("authorization", "Bearer " + key)])
        var signIn = Ubiquity_V1_SignInRequest()
        signIn.apiKey = created.secret
        signIn.deviceID = "ubiquity-load"
        return try await channel.unary("/ubiquity.v1.Accounts/SignIn", signIn, as: Ubiquity_V1_SignInResponse.self).sessionToken
    }
}

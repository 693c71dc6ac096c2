import Foundation
import UbiquityGRPC
import UbiquityProtos

// Accounts.SignOut as a store transition (SPEC §4.6, docs/lifecycle.md "Sign-out"): the device's
// subscribers get StoresWillChange(ACCOUNT_REMOVED), its contexts their chance to save, then
// StoresDidChange; then the session is revoked and its streams end with SESSION_REVOKED and the
// resume token after the DID_CHANGE. Other devices of the account see nothing.
extension AccountsService {
    func signOut(_ req: Ubiquity_V1_SignOutRequest, _ call: ServerCall) async throws -> Ubiquity_V1_SignOutResponse {
        // a missing, revoked or expired session: UNAUTHENTICATED before anything is announced
        let account = try auth.account(metadata: call.context.metadata, access: .read)
        guard let id = account.session else { return Ubiquity_V1_SignOutResponse() }  // authentication off
        let done = try await StoreTransitions(backend: backend, contexts: contexts).run(.accountRemoved, scope: .session(account)) {}
        // Revoked after the announcement, so the contexts could still save with it in the window.
        // Revoked by another call meanwhile (its key): that call ended the streams already.
        guard try auth.credentials.revokeSession(id: id) != nil else { return Ubiquity_V1_SignOutResponse() }
        backend.subscriptions.endSessions([id], .sessionRevoked, after: done.didChange)
        backend.keyValueFeed.end(sessions: [id], .sessionRevoked, graceSeconds: backend.subscriptions.limits.progressIntervalSeconds)
        // the reset contexts stay until they expire, telling the device STORE_CHANGED
        contexts.endSessions([id], keepingReset: true)
        return Ubiquity_V1_SignOutResponse()
    }
}

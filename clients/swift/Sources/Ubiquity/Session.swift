import Foundation
import GRPCCore

/// When a client signed in with an API key signs in again: a value type without I/O, so the
/// refresh rules are unit-tested alone (docs/accounts.md in the repository: sessions).
///
/// - before the first call, and once the session is within its refresh margin of the expiry the
///   server gave: a call sent just before the expiry, or in flight across it, must not fail;
/// - after a call failed with SESSION_EXPIRED / SESSION_REVOKED (a clock that disagrees with the
///   server's, a sign-out elsewhere), but only if the failed token is still the current one, so a
///   burst of failures from one old token signs in once, not once per call.
struct SessionState: Sendable {
    /// Sign in again this long before the expiry (SignInResponse.expires_at_micros), or half the
    /// session's lifetime when that is shorter, so a short session is not renewed on every call.
    static let refreshMargin: Duration = .seconds(60)

    private(set) var token: String?
    private(set) var expiresAt: Date?
    private(set) var refreshAt: Date?
    private(set) var accountID: String?
    /// How often the client signed in (for tests and diagnostics).
    private(set) var signIns = 0

    func needsSignIn(now: Date) -> Bool {
        guard token != nil, let refreshAt else { return true }
        return now >= refreshAt
    }

    mutating func signedIn(token: String, expiresAt: Date, accountID: String, now: Date) {
        self.token = token
        self.expiresAt = expiresAt
        self.accountID = accountID
        let lifetime = max(0, expiresAt.timeIntervalSince(now))
        let margin = min(Double(Self.refreshMargin.components.seconds), lifetime / 2)
        refreshAt = expiresAt.addingTimeInterval(-margin)
        signIns += 1
    }

    /// A call with `failedToken` was refused as expired or revoked. Returns whether the caller
    /// should sign in and try again (the failed token was current), false when another call has
    /// already replaced it (then the caller just retries with the new one).
    @discardableResult
    mutating func rejected(_ failedToken: String) -> Bool {
        guard failedToken == token else { return false }
        token = nil
        refreshAt = nil
        return true
    }

    /// Signed out: the next call signs in again. Returns the token to sign out, if any.
    mutating func signOut() -> String? {
        defer {
            token = nil
            refreshAt = nil
            expiresAt = nil
        }
        return token
    }
}

/// How a ``SessionKeeper`` gets a session.
enum SignInMethod: Sendable {
    /// `Accounts.SignIn`; `localDeviceSecret` is sent with the first sign-in only, which imports
    /// the device's local stores (a renewal must not ask for the import again).
    case apiKey(String, deviceID: String, localDeviceSecret: String?)
    /// `Accounts.StartLocalSession`: a device without an account, in its local stores.
    case localDevice(deviceID: String, secret: String?)
}

/// A session on the client's channel, from an API key or a local device's secret: signs in on
/// first use and before expiry, one sign-in at a time however many calls wait for it.
actor SessionKeeper {
    /// Local sessions end for good when the device's stores are imported (SESSION_REVOKED after
    /// the import's StoresWillChange): a feed must not start a new local session then.
    nonisolated let isLocal: Bool
    private var method: SignInMethod
    private let accounts: Ubiquity_V1_Accounts.Client<UbiquityClient.Transport>
    private let options: CallOptions
    private var state = SessionState()
    private var signingIn: Task<String, any Error>?
    /// A local device's secret: given, or returned by the StartLocalSession that registered it.
    private(set) var deviceSecret: String?
    /// What the first sign-in's import of local stores did.
    private(set) var localImport: ImportCounts?

    init(method: SignInMethod, accounts: Ubiquity_V1_Accounts.Client<UbiquityClient.Transport>, options: CallOptions) {
        self.method = method
        if case .localDevice(_, let secret) = method {
            isLocal = true
            deviceSecret = secret
        } else {
            isLocal = false
        }
        self.accounts = accounts
        self.options = options
    }

    var signIns: Int { state.signIns }
    var accountID: String? { state.accountID }
    var expiresAt: Date? { state.expiresAt }

    /// The current session token, signing in first when there is none or it is about to expire.
    func token() async throws -> String {
        if !state.needsSignIn(now: Date()), let token = state.token { return token }
        if let signingIn { return try await signingIn.value }
        let signIn = Task { () throws -> String in
            let (token, expiresAtMicros, accountID) = try await self.signInCall()
            self.state.signedIn(
                token: token, expiresAt: Date(unixMicros: expiresAtMicros),
                accountID: accountID, now: Date())
            return token
        }
        signingIn = signIn
        defer { signingIn = nil }
        return try await signIn.value
    }

    private func signInCall() async throws -> (token: String, expiresAtMicros: Int64, accountID: String) {
        do {
            switch method {
            case .apiKey(let key, let deviceID, let localSecret):
                let r = try await accounts.signIn(
                    .with {
                        $0.apiKey = key
                        $0.deviceID = deviceID
                        $0.localDeviceSecret = localSecret ?? ""
                    }, options: options)
                if localSecret != nil {
                    if r.hasLocalImport { localImport = ImportCounts(proto: r.localImport) }
                    method = .apiKey(key, deviceID: deviceID, localDeviceSecret: nil)
                }
                return (r.sessionToken, r.expiresAtMicros, r.accountID)
            case .localDevice(let deviceID, _):
                let r = try await accounts.startLocalSession(
                    .with {
                        $0.deviceID = deviceID
                        $0.deviceSecret = deviceSecret ?? ""
                    }, options: options)
                // Shown once, by the call that registered the device: renewals must send it.
                if !r.deviceSecret.isEmpty { deviceSecret = r.deviceSecret }
                return (r.sessionToken, r.expiresAtMicros, "")
            }
        } catch {
            throw UbiquityError.from(error)
        }
    }

    /// See `SessionState.rejected`.
    func rejected(_ token: String) {
        state.rejected(token)
    }

    /// Ends the session on the server; the next call signs in again.
    func signOut() async throws {
        guard let token = state.signOut() else { return }
        do {
            _ = try await accounts.signOut(.init(), metadata: bearer(token), options: options)
        } catch {
            throw UbiquityError.from(error)
        }
    }
}

/// `authorization: Bearer <token>`, the session metadata of SPEC §2.
func bearer(_ token: String?) -> Metadata {
    var md: Metadata = [:]
    if let token { md.addString("Bearer \(token)", forKey: "authorization") }
    return md
}

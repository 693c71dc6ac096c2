import Foundation
import UbiquityGRPC
import UbiquityLock
import UbiquityStorage

/// Whether an RPC changes anything: a read-only key's sessions may call only `.read` methods.
enum Access: Sendable {
    case read, write

    /// The methods that change nothing (by their path without the `/ubiquity.v1.` prefix).
    /// Everything else counts as a write, so a method added later is denied to read-only keys
    /// until it is listed here. Context edits before `Save` change nothing stored.
    static let readMethods: Set<String> = [
        "Stores/OpenStore", "Stores/ListStores", "Stores/CurrentGeneration", "Stores/Fetch", "Stores/GetObjects",
        "Stores/FetchStream", "Stores/ExportBaseline",
        "Changes/Subscribe", "Changes/FetchHistory", "Changes/FetchDeletions", "Changes/AcknowledgeStoreEvent",
        "Models/GetModel",
        "KeyValue/Get", "KeyValue/List",
        "Contexts/CreateContext", "Contexts/Fetch", "Contexts/Insert", "Contexts/Update", "Contexts/Delete",
        "Contexts/Rollback", "Contexts/Reset", "Contexts/Refresh", "Contexts/SetQueryGeneration", "Contexts/GetState",
        "Contexts/CloseContext",
    ]

    /// The access of a method by its full path (`/ubiquity.v1.Stores/Fetch`).
    static func of(path: String) -> Access {
        let short = path.hasPrefix("/ubiquity.v1.") ? String(path.dropFirst("/ubiquity.v1.".count)) : path
        return readMethods.contains(short) ? .read : .write
    }
}

/// Who may call what (docs/accounts.md): resolves a call's session to its account, checks the
/// operator key, and signs in with an API key under the failed-sign-in limits. Per call: the
/// connection's session memo when one still holds (`SessionMemoTable`), else one SHA-256 of the token
/// and one dictionary lookup under a lock — no SQL either way.
public final class Authenticator: Sendable {
    public let credentials: Credentials
    /// How long a session lasts from SignIn.
    public let sessionLifetime: Double
    let limiter = Lock(SignInLimiter())

    /// The metadata key of credentials.
    static let header = "authorization"

    public init(credentials: Credentials, sessionLifetime: Double) {
        self.credentials = credentials
        self.sessionLifetime = sessionLifetime
    }

    /// The account a data call acts for: its session's, if the session is live and its scope
    /// allows `access`. With the call's `connection`, an earlier session call of that connection
    /// answers for a byte-identical `authorization` while nothing changed (`SessionMemoTable`); a
    /// call resolved in full leaves its own memo there.
    func account(metadata: Metadata, access: Access, connection: ConnectionLocal? = nil) throws -> Account {
        let header = metadata[Self.header]
        let now = Date().timeIntervalSince1970
        let account: Account
        let memos = header == nil ? nil : connection.flatMap(SessionMemoTable.Box.of)
        if let header, let memos, let memoised = memos.account(for: header, epoch: credentials.epoch, now: now) {
            account = memoised
        } else {
            // read before the lookup: a change after it leaves the memo stale, never wrong
            let epoch = credentials.epoch
            account = try resolve(header, now: now)
            if let header, let memos {
                memos.store(SessionMemo(header: header, account: account, epoch: epoch))
            }
        }
        if access == .write, account.scope == .readOnly {
            throw ServiceError(code: .permissionDenied, reason: .scopeExceeded, message: "this session's API key is read-only: use a read-write key for this call")
        }
        return account
    }

    /// The live session `header` names, as the account it acts for: parse, hash, lookup.
    private func resolve(_ header: String?, now: Double) throws -> Account {
        let token: String
        switch BearerToken.parse(header) {
        case .failure(.missing):
            throw Self.unauthenticated(reason: .missingCredentials, "this call needs `authorization: Bearer <session token>`: sign in with Accounts.SignIn")
        case .success(.session(let t)): token = t
        case .success(.other), .failure(.malformed):
            throw Self.unauthenticated(reason: .badCredentials, "the authorization value is not `Bearer <session token>` (a session token starts with ubs_): sign in with Accounts.SignIn")
        }
        let session: Credentials.SessionRecord
        switch credentials.resolve(token: token, now: now) {
        case .valid(let s): session = s
        case .expired: throw Self.unauthenticated(reason: .sessionExpired, "the session expired: sign in again")
        case .revoked: throw Self.unauthenticated(reason: .sessionRevoked, "the session was signed out or its API key revoked: sign in again")
        case .unknown: throw Self.unauthenticated(reason: .badCredentials, "the session token is not valid: sign in again")
        }
        return Account(id: session.account, session: session.id, device: session.deviceID, scope: session.scope, expiresAt: session.expiresAt,
                       usingLocalStorage: session.isLocal)
    }

    /// Throws unless the call carries the operator key.
    func requireOperator(_ metadata: Metadata) throws {
        switch BearerToken.parse(metadata[Self.header]) {
        case .failure(.missing):
            throw Self.unauthenticated(reason: .missingCredentials, "this is an operator call: send `authorization: Bearer <operator key>` (the key is in <data-dir>/operator.key)")
        case .success(.other(let key)) where credentials.isOperatorKey(key):
            return
        default:
            throw Self.unauthenticated(reason: .badCredentials, "this is an operator call and the authorization value is not the operator key (<data-dir>/operator.key)")
        }
    }

    /// The key a SignIn presents if valid, or the same "not valid" answer for a wrong, unknown or
    /// revoked one (nothing tells them apart); refused while the key ID or the address is over
    /// its failed-sign-in limit.
    func verify(apiKey: String, peer: String) throws -> Credentials.KeyRecord {
        let keyID = Credentials.keyID(ofSecret: apiKey)
        let address = peerHost(peer)
        let now = Date().timeIntervalSince1970
        try checkLimits(key: keyID, address: address, now: now, what: "sign-ins for this key")
        guard let key = credentials.verifyKey(apiKey) else {
            limiter.withLock { $0.failed(key: keyID, address: address, now: now) }
            throw Self.unauthenticated(reason: .badCredentials, "the API key is not valid")
        }
        return key
    }

    /// Throws SIGN_IN_RATE_LIMITED (with `retry_after_seconds`) while `key` or `address` is over
    /// its failed-attempt limit (`SignInLimiter`).
    func checkLimits(key: String?, address: String, now: Double, what: String) throws {
        guard let wait = limiter.withLock({ $0.retryAfter(key: key, address: address, now: now) }) else { return }
        let seconds = Int(wait.rounded(.up))
        throw ServiceError(code: .resourceExhausted, reason: .signInRateLimited,
                           message: "too many failed \(what) or from this address: try again in \(seconds) s",
                           metadata: ["retry_after_seconds": "\(seconds)"])
    }

    static func unauthenticated(reason: ErrorReason, _ message: String) -> ServiceError {
        ServiceError(code: .unauthenticated, reason: reason, message: message)
    }
}

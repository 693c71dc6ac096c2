import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

/// `ubiquity.v1.Accounts`: accounts, API keys and sessions (docs/accounts.md). Its methods take
/// their credentials themselves — the operator key, an API key in SignIn's request, the session
/// in SignOut — so its table has no account resolution.
public struct AccountsService: Sendable {
    let backend: Backend
    let contexts: ContextRegistry
    /// Archive, restore and delete's file work (AccountsService+Lifecycle.swift).
    let transitions: AccountTransitions
    var auth: Authenticator { backend.authenticator }
    /// ListAccounts' default and largest page (as the key-value store's List).
    static let defaultAccountsPage = 100, maxAccountsPage = 1000
    /// `--local-stores`: devices not signed in may work in local stores (StartLocalSession).
    public var allowLocalStores = false

    public init(backend: Backend, contexts: ContextRegistry) {
        self.backend = backend
        self.contexts = contexts
        transitions = AccountTransitions(backend: backend)
    }

    /// Sessions that just ended: their streams end (SESSION_REVOKED, with resume tokens) and
    /// their contexts close. `after`: a store's event the streams on it send first (a DID_CHANGE),
    /// by generation; key-value streams then get a moment to send it too, as for sign-out.
    func ended(_ ids: Set<String>, after: [UUID: Int64] = [:]) {
        backend.subscriptions.endSessions(ids, .sessionRevoked, after: after)
        if !ids.isEmpty {
            backend.keyValueFeed.end(sessions: ids, .sessionRevoked,
                                     graceSeconds: after.isEmpty ? 0 : backend.subscriptions.limits.progressIntervalSeconds)
        }
        contexts.endSessions(ids)
    }

    public func register(into router: inout Router) {
        router.register(service: "ubiquity.v1.Accounts") { t in
            t.unary("CreateAccount") { req, call in try Self.converting { try createAccount(req, call) } }
            t.unary("GetAccount") { req, call in try Self.converting { try getAccount(req, call) } }
            t.unary("ListAccounts") { req, call in try Self.converting { try listAccounts(req, call) } }
            t.unary("CreateApiKey") { req, call in try Self.converting { try createApiKey(req, call) } }
            t.unary("RevokeApiKey") { req, call in try Self.converting { try revokeApiKey(req, call) } }
            t.unary("SignIn") { req, call in try await Self.converting { try await signIn(req, call) } }
            t.unary("StartLocalSession") { req, call in try Self.converting { try startLocalSession(req, call) } }
            t.unary("SignOut") { req, call in try await Self.converting { try await signOut(req, call) } }
            t.unary("ArchiveAccount") { req, call in try await Self.converting { try await archiveAccount(req, call) } }
            t.unary("RestoreAccount") { req, call in try await Self.converting { try await restoreAccount(req, call) } }
            t.unary("DeleteAccount") { req, call in try await Self.converting { try await deleteAccount(req, call) } }
        }
    }

    func createAccount(_ req: Ubiquity_V1_CreateAccountRequest, _ call: ServerCall) throws -> Ubiquity_V1_Account {
        try auth.requireOperator(call.context.metadata)
        try Self.checkLabel(req.displayName, field: "display_name")
        let id = UUID().uuidString.lowercased()
        try backend.catalog.ensureAccount(id)
        return Self.message(try auth.credentials.addAccount(id: id, displayName: req.displayName))
    }

    func getAccount(_ req: Ubiquity_V1_GetAccountRequest, _ call: ServerCall) throws -> Ubiquity_V1_Account {
        try auth.requireOperator(call.context.metadata)
        return accountMessage(try account(req.accountID))
    }

    func listAccounts(_ req: Ubiquity_V1_ListAccountsRequest, _ call: ServerCall) throws -> Ubiquity_V1_ListAccountsResponse {
        try auth.requireOperator(call.context.metadata)
        guard req.pageSize <= Self.maxAccountsPage else {
            throw ServiceError.invalid("page_size", "at most \(Self.maxAccountsPage)", reason: .limitExceeded)
        }
        let after = try AccountPageToken.after(req.pageToken)
        let size = req.pageSize == 0 ? Self.defaultAccountsPage : Int(req.pageSize)
        let page = auth.credentials.accounts(after: after, limit: size + 1)
        var res = Ubiquity_V1_ListAccountsResponse()
        res.accounts = page.prefix(size).map(accountMessage)
        if page.count > size, let last = page.prefix(size).last { res.nextPageToken = AccountPageToken.make(after: last.id) }
        return res
    }

    func createApiKey(_ req: Ubiquity_V1_CreateApiKeyRequest, _ call: ServerCall) throws -> Ubiquity_V1_CreateApiKeyResponse {
        try auth.requireOperator(call.context.metadata)
        let account = try account(req.accountID)
        try Self.checkLabel(req.label, field: "label")
        let scope: Credentials.Scope
        switch req.scope {
        case .readWrite: scope = .readWrite
        case .readOnly: scope = .readOnly
        case .oneStore:
            guard !req.storeName.isEmpty, req.storeName.count <= 200 else {
                throw ServiceError.invalid("store_name", "API_KEY_SCOPE_ONE_STORE needs the store's name (1–200 characters)", reason: .missingField)
            }
            scope = .store(req.storeName)
        default:
            throw ServiceError.invalid("scope", "choose API_KEY_SCOPE_READ_WRITE, API_KEY_SCOPE_READ_ONLY or API_KEY_SCOPE_ONE_STORE", reason: .badEnum)
        }
        if case .store = scope {} else if !req.storeName.isEmpty {
            throw ServiceError.invalid("store_name", "store_name is only for API_KEY_SCOPE_ONE_STORE", reason: .invalidArgument)
        }
        let (key, secret) = try auth.credentials.createKey(account: account.id, scope: scope, label: req.label)
        var res = Ubiquity_V1_CreateApiKeyResponse()
        res.key = Self.message(key)
        res.secret = secret
        return res
    }

    func revokeApiKey(_ req: Ubiquity_V1_RevokeApiKeyRequest, _ call: ServerCall) throws -> Ubiquity_V1_RevokeApiKeyResponse {
        try auth.requireOperator(call.context.metadata)
        guard let ended = try auth.credentials.revokeKey(req.keyID) else {
            throw ServiceError.notFound("no API key \(req.keyID.prefix(40))", reason: .notFound)
        }
        self.ended(Set(ended.map(\.id)))
        var res = Ubiquity_V1_RevokeApiKeyResponse()
        res.sessionsRevoked = UInt32(ended.count)
        return res
    }

    func signIn(_ req: Ubiquity_V1_SignInRequest, _ call: ServerCall) async throws -> Ubiquity_V1_SignInResponse {
        let device = req.deviceID
        try Self.checkDeviceID(device)
        guard !req.apiKey.isEmpty else { throw ServiceError.invalid("api_key", "an API key is required (Accounts.CreateApiKey returns one)", reason: .missingField) }
        let key = try auth.verify(apiKey: req.apiKey, peer: call.context.peer)
        let imported = req.localDeviceSecret.isEmpty ? nil : try await importLocalStores(deviceID: device, secret: req.localDeviceSecret, key: key)
        let session: Credentials.SessionRecord, token: String
        do {
            (session, token) = try auth.credentials.createSession(key: key, deviceID: device, lifetime: auth.sessionLifetime)
        } catch let e as StorageError where e.reason == .notFound {
            // its account was archived or deleted since verify: as for an unknown key
            throw Authenticator.unauthenticated(reason: .badCredentials, "the API key is not valid")
        }
        var res = Ubiquity_V1_SignInResponse()
        if let imported { res.localImport = Self.message(imported) }
        res.sessionToken = token
        res.expiresAtMicros = Int64(session.expiresAt * 1_000_000)
        res.accountID = session.account
        res.scope = Self.message(session.scope)
        return res
    }


    private func account(_ id: String) throws -> Credentials.AccountRecord {
        guard !id.isEmpty else { throw ServiceError.invalid("account_id", "an account_id is required", reason: .missingField) }
        guard let a = auth.credentials.account(id) else { throw ServiceError.notFound("no account \(id.prefix(40))", reason: .notFound) }
        return a
    }

    private static func checkLabel(_ s: String, field: String) throws {
        guard s.count <= 200, !s.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ServiceError.invalid(field, "at most 200 characters without control characters", reason: .badName)
        }
    }

    private static func converting<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw ServiceErrors.rpcError(error) }
    }

    static func converting<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw ServiceErrors.rpcError(error) }
    }

    /// The account's message as if active (`accountMessage` sets its state).
    static func message(_ a: Credentials.AccountRecord) -> Ubiquity_V1_Account {
        var m = Ubiquity_V1_Account()
        m.accountID = a.id
        m.displayName = a.displayName
        m.state = .active
        m.createdAtMicros = Int64(a.createdAt * 1_000_000)
        return m
    }

    static func message(_ k: Credentials.KeyRecord) -> Ubiquity_V1_ApiKey {
        var m = Ubiquity_V1_ApiKey()
        m.keyID = k.id
        m.accountID = k.account
        m.scope = message(k.scope)
        if case .store(let name) = k.scope { m.storeName = name }
        m.label = k.label
        m.createdAtMicros = Int64(k.createdAt * 1_000_000)
        m.revoked = k.revoked
        return m
    }

    static func message(_ s: Credentials.Scope) -> Ubiquity_V1_ApiKeyScope {
        switch s {
        case .readWrite: .readWrite
        case .readOnly: .readOnly
        case .store: .oneStore
        }
    }
}

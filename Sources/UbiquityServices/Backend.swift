import Foundation
import UbiquityGRPC
import UbiquityLock
import UbiquityQuery
import UbiquityStorage

/// Limits of the data services (SPEC §5), each with a documented default (docs/operations.md).
public struct ServiceLimits: Sendable {
    /// Open contexts per account (per session once sessions exist).
    public var maxContextsPerAccount = 256
    /// Pending inserts + updates + deletes per context.
    public var maxPendingChangesPerContext = 10_000
    /// Objects returned by one Fetch / GetObjects (FetchStream has no total bound).
    public var maxFetchResults = 10_000
    /// Changes in one Save / objects in one BatchInsert or Seed.
    public var maxChangesPerSave = 10_000
    /// A context unused this long is closed and its pin released.
    public var contextIdleSeconds: Double = 600
    /// A store transition's chance to save (SPEC §4.4): how long it waits for the contexts
    /// concerned to save before it resets them (docs/lifecycle.md).
    public var transitionSaveSeconds: Double = 30
    /// How long a store transition waits, after its WILL_CHANGE, for the subscribers that opted in
    /// to acknowledge it (docs/lifecycle.md "Acknowledgements"); 0: it does not wait.
    public var transitionAckSeconds: Double = 10
    /// Predicate length, depth, node count and IN-list size.
    public var query = QueryLimits()
    public init() {}
}

/// The account a call acts for, and the session it came with (docs/accounts.md). With
/// `--auth off` every call acts for the built-in default account with no session.
public struct Account: Sendable, Hashable {
    public var id: String { fields.id }
    /// The session's ID (its token's SHA-256, hex); nil with authentication off.
    public var session: String? { fields.session }
    /// The device the session was signed in from (SignIn's device_id); nil with authentication off.
    public var device: String? { fields.device }
    public var scope: Credentials.Scope { fields.scope }
    /// When the session expires (seconds since the epoch).
    public var expiresAt: Double { fields.expiresAt }
    /// A device not yet signed in, working in its local stores (docs/accounts.md "Local stores").
    public var usingLocalStorage: Bool { fields.usingLocalStorage }
    public static let defaultAccount = Account(id: "default")

    /// One reference for the whole record: every call copies its Account (out of the
    /// connection's session memo into the call's context), and as stored Strings that was a
    /// retain and a release per String (the account's ID, the session's, the device's).
    /// Measured gain (callgrind, W1): `Authenticator.account` 781 → 637 instructions per call
    /// (docs/benchmarks.md "What authentication costs").
    private let fields: Fields

    private final class Fields: Sendable {
        let id: String
        let session: String?
        let device: String?
        let scope: Credentials.Scope
        let expiresAt: Double
        let usingLocalStorage: Bool

        init(id: String, session: String?, device: String?, scope: Credentials.Scope, expiresAt: Double, usingLocalStorage: Bool) {
            self.id = id
            self.session = session
            self.device = device
            self.scope = scope
            self.expiresAt = expiresAt
            self.usingLocalStorage = usingLocalStorage
        }
    }

    public init(id: String, session: String? = nil, device: String? = nil, scope: Credentials.Scope = .readWrite,
                expiresAt: Double = .infinity, usingLocalStorage: Bool = false) {
        fields = Fields(id: id, session: session, device: device, scope: scope, expiresAt: expiresAt, usingLocalStorage: usingLocalStorage)
    }

    public static func == (a: Account, b: Account) -> Bool {
        a.fields === b.fields
            || (a.id == b.id && a.session == b.session && a.device == b.device && a.scope == b.scope
                && a.expiresAt == b.expiresAt && a.usingLocalStorage == b.usingLocalStorage)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(session)
        hasher.combine(device)
        hasher.combine(scope)
        hasher.combine(expiresAt)
        hasher.combine(usingLocalStorage)
    }

    /// Throws PERMISSION_DENIED if the session's key is scoped to another store than `name`.
    func checkStoreScope(_ name: String) throws {
        if case .store(let only) = scope, only != name {
            throw ServiceError(code: .permissionDenied, reason: .scopeExceeded,
                               message: "this session's API key is scoped to the store \"\(only.prefix(100))\" only")
        }
    }
}

/// What the data services share: the store directory, the catalog of named stores, the model
/// cache and the limits. One per server.
public final class Backend: Sendable {
    public let directory: StoreDirectory
    public let catalog: Catalog
    public let limits: ServiceLimits
    /// Every running Subscribe (the change feed's limits, endings and sweep).
    public let subscriptions: Subscriptions
    /// Every account's key-value entries (docs/keyvalue.md) and the wake-ups of their subscribers.
    public let keyValues: KeyValueStore
    let keyValueFeed = KeyValueFeed()
    private let models = Lock<[String: ModelInfo]>([:])
    /// Sessions, API keys and the operator key (docs/accounts.md).
    public let authenticator: Authenticator
    /// False with `--auth off` (benchmarks on loopback only): every call acts for the default account.
    public let authRequired: Bool

    /// Metadata key carrying the model version hash a client was built with (§4.7).
    public static let modelVersionKey = "ubiquity-model-version"

    public init(dataDirectory: String, storage: StorageConfiguration = StorageConfiguration(), maxOpenStores: Int = 256,
                limits: ServiceLimits = ServiceLimits(), feedLimits: FeedLimits = FeedLimits(),
                keyValueQuotas: KeyValueQuotas = KeyValueQuotas(),
                authRequired: Bool = true, sessionLifetimeSeconds: Double = 86_400) throws {
        directory = try StoreDirectory(root: dataDirectory, configuration: storage, maxOpenStores: maxOpenStores)
        catalog = try Catalog(path: dataDirectory + "/catalog.sqlite")
        keyValues = try KeyValueStore(path: dataDirectory + "/keyvalue.sqlite", quotas: keyValueQuotas)
        try catalog.ensureAccount(Account.defaultAccount.id)
        // Store files live in their account's folder (SPEC §4.8); a data directory from before
        // accounts has them all in <data>/stores and they move there now, once.
        let catalog = self.catalog
        directory.locateAccounts { catalog.store(id: $0)?.account }
        for r in catalog.allStores() { try directory.adoptLegacyFiles(r.id) }
        let credentials = try Credentials(root: dataDirectory)
        _ = try credentials.addAccount(id: Account.defaultAccount.id, displayName: "default")
        authenticator = Authenticator(credentials: credentials, sessionLifetime: sessionLifetimeSeconds)
        self.authRequired = authRequired
        self.limits = limits
        subscriptions = Subscriptions(limits: feedLimits)
        // an archive, restore or deletion a kill interrupted finishes before anything is served;
        // then every WILL_CHANGE a kill left open is closed as cancelled (docs/lifecycle.md)
        try Self.blocking { [self] in
            try await AccountTransitions(backend: self).resumePending()
            try await StoreTransitions.closeAbandoned(self)
        }
    }

    /// Runs async work to its end from synchronous code that owns the thread (startup only).
    private static func blocking(_ body: @escaping @Sendable () async throws -> Void) throws {
        let done = DispatchSemaphore(value: 0)
        let result = Lock<Result<Void, Error>>(.success(()))
        Task {
            do { try await body() } catch { result.withLock { $0 = .failure(error) } }
            done.signal()
        }
        done.wait()
        try result.withLock { $0 }.get()
    }

    /// Ends every store and key-value subscription (UNAVAILABLE + resume token): they never end on
    /// their own, so a drain would otherwise wait for them.
    public func endSubscriptions() {
        subscriptions.shutdown()
        keyValueFeed.shutdown()
    }

    public func shutdown() async {
        endSubscriptions()
        await directory.shutdown()
        catalog.close()
        keyValues.close()
        authenticator.credentials.close()
    }

    /// The account a call acts for, from its `authorization` metadata (docs/accounts.md).
    /// `MethodTable` resolves it once per call, before the handler runs.
    func account(metadata: Metadata, access: Access, connection: ConnectionLocal? = nil) throws -> Account {
        authRequired ? try authenticator.account(metadata: metadata, access: access, connection: connection) : Account.defaultAccount
    }

    /// The store named by `id` if it belongs to `account`; NOT_FOUND otherwise (the same answer
    /// for another account's store as for none, so IDs leak nothing).
    func record(_ id: String, account: Account, field: String = "store_id") throws -> Catalog.StoreRecord {
        guard !id.isEmpty else { throw ServiceError.invalid(field, "a store_id is required (OpenStore returns it)", reason: .missingField) }
        switch catalog.store(idText: id) {
        case .malformed:
            throw ServiceError.invalid(field, "\"\(id.prefix(100))\" is not a store ID (a UUID)", reason: .badStoreID)
        case .found(let r) where r.account == account.id:
            try account.checkStoreScope(r.name)
            return r
        case .found, .missing:
            throw ServiceError.notFound("no store \(id.lowercased()) in this account", reason: .storeNotFound)
        }
    }

    /// Runs `body` with the account's store open.
    func withStore<T: Sendable>(_ id: String, account: Account, field: String = "store_id",
                                _ body: @Sendable (Store) async throws -> T) async throws -> T {
        let r = try record(id, account: account, field: field)
        do { return try await directory.withStore(r.id, create: true, body) } catch { throw tokenError(error, store: r) }
    }

    /// `withStore` for synchronous handlers (blocking worker threads).
    func withStoreSync<T>(_ id: String, account: Account, field: String = "store_id", _ body: (Store) throws -> T) throws -> T {
        let r = try record(id, account: account, field: field)
        do { return try directory.withStoreSync(r.id, create: true, body) } catch { throw tokenError(error, store: r) }
    }

    /// A token of another store is STORE_REPLACED when that store was destroyed and `store` has
    /// taken its name in the same account (a client holding it is behind a re-creation, SPEC
    /// §4.2); any other store's token stays BAD_TOKEN. Other errors pass through.
    func tokenError(_ error: Error, store: Catalog.StoreRecord) -> Error {
        guard let e = error as? StorageError, case .tokenOfAnotherStore(let other) = e.reason else { return error }
        guard let old = catalog.destroyedStore(id: other), old.account == store.account, old.name == store.name else { return error }
        return StorageError(.storeReplaced, "the token is of store \"\(store.name.prefix(100))\" before it was destroyed and created again: read at current")
    }

    /// The store's model (NOT_FOUND-style error if none is registered yet).
    func model(of store: Store) throws -> ModelInfo {
        guard let hash = store.modelVersionHash, let def = store.modelDefinition else {
            throw ServiceError.precondition("store \(store.id.uuidString.lowercased()) has no model yet: call Models.RegisterModel first", reason: .noModel)
        }
        if let m = models.withLock({ $0[hash] }) { return m }
        let m = ModelInfo(def, hash: hash)
        models.withLock { $0[hash] = m }
        return m
    }

    /// The store's model if it has one.
    func modelIfAny(of store: Store) -> ModelInfo? { try? model(of: store) }

    /// Refuses a write from a client built with another model version (§4.7).
    func checkModelVersion(_ context: ServerContext, store: Store) throws -> String? {
        guard let sent = context.metadata[Backend.modelVersionKey], !sent.isEmpty else { return nil }
        if let current = store.modelVersionHash, current != sent {
            throw ServiceError(code: .failedPrecondition, reason: .modelVersionMismatch,
                               message: "this client was built with model version \(sent.prefix(16))…, the store is at \(current.prefix(16))…: update the client's model",
                               metadata: ["client_version_hash": sent, "store_version_hash": current])
        }
        return sent
    }
}

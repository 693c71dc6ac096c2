import Foundation
import GRPCCore

/// The operator's account calls (`Accounts`, docs/accounts.md in the repository):
/// `client.accountAdmin`, next to ``UbiquityClient/admin``. Accounts (tenants), their API keys,
/// and their lifecycle — archive, restore, delete. Every call needs the operator key (the one
/// ubiquityd writes to `<data>/operator.key`), so the client carries it as it is:
///
/// ```swift
/// let ops = try UbiquityClient(target: "127.0.0.1:50051", credentials: .sessionToken(operatorKey))
/// let acme = try await ops.accountAdmin.createAccount(displayName: "Acme")
/// let key = try await ops.accountAdmin.createApiKey(for: acme.id, scope: .readOnly, label: "dashboard")
/// let app = try UbiquityClient(target: "127.0.0.1:50051", credentials: .apiKey(key.secret, deviceID: "d1"))
/// ```
/// Without the operator key every call fails `.badCredentials` (or `.missingCredentials`).
/// Refusals are typed: `.accountArchived`, `.accountNotArchived`, `.accountBusy`,
/// `.defaultAccount`, `.notFound` for an unknown account or key (docs/errors.md).
public struct AccountAdmin: Sendable {
    let client: UbiquityClient

    /// A new account with a server-generated ID (`Accounts.CreateAccount`). `displayName` is a
    /// label for operators (at most 200 characters, no control characters), never used to look
    /// the account up.
    public func createAccount(displayName: String = "") async throws -> Account {
        Account(
            proto: try await client.unary { md, opts in
                try await client.accounts.createAccount(.with { $0.displayName = displayName }, metadata: md, options: opts)
            })
    }

    /// The account `id` (`Accounts.GetAccount`); `.notFound` if there is none (or it is being
    /// deleted).
    public func account(_ id: String) async throws -> Account {
        Account(
            proto: try await client.unary { md, opts in
                try await client.accounts.getAccount(.with { $0.accountID = id }, metadata: md, options: opts)
            })
    }

    /// Every account, ordered by ID (`Accounts.ListAccounts`), read when the iteration starts:
    /// `for try await account in ops.accountAdmin.accounts() { … }`.
    public func accounts() -> AccountList { AccountList(admin: self) }

    /// A new API key for account `accountID` (`Accounts.CreateApiKey`). Its secret is in the
    /// answer and nowhere else (the server keeps a hash): hand it to the device, which signs in
    /// with `.apiKey(secret, deviceID:)`.
    public func createApiKey(for accountID: String, scope: ApiKey.Scope = .readWrite, label: String = "") async throws
        -> NewApiKey
    {
        let r = try await client.unary { md, opts in
            try await client.accounts.createApiKey(
                .with {
                    $0.accountID = accountID
                    $0.scope = scope.proto
                    $0.storeName = scope.storeName
                    $0.label = label
                }, metadata: md, options: opts)
        }
        return NewApiKey(key: ApiKey(proto: r.key), secret: r.secret)
    }

    /// Revokes the API key `keyID` (``ApiKey/id``, or ``ApiKey/id(ofSecret:)``) and ends every
    /// session signed in with it (`Accounts.RevokeApiKey`); returns how many. Its feeds end
    /// `.sessionRevoked`, and signing in with it again is `.badCredentials`.
    @discardableResult
    public func revokeApiKey(_ keyID: String) async throws -> Int {
        Int(
            try await client.unary { md, opts in
                try await client.accounts.revokeApiKey(.with { $0.keyID = keyID }, metadata: md, options: opts)
            }.sessionsRevoked)
    }

    /// Archives the account (`Accounts.ArchiveAccount`): its devices' feeds get
    /// `.willChange(.accountRemoved)`, their contexts a chance to save, then `.didChange`; its
    /// sessions end and its stores move into its archive, kept but served to nobody. Returns it
    /// `.archived`. `.accountArchived` if it is already, `.defaultAccount` for "default".
    @discardableResult
    public func archive(_ accountID: String) async throws -> Account {
        Account(
            proto: try await client.unary { md, opts in
                try await client.accounts.archiveAccount(.with { $0.accountID = accountID }, metadata: md, options: opts)
            })
    }

    /// Brings an archived account back unchanged (`Accounts.RestoreAccount`): its keys sign in
    /// again; sessions ended by the archive stay ended. Returns it `.active`.
    /// `.accountNotArchived` for an active account.
    @discardableResult
    public func restore(_ accountID: String) async throws -> Account {
        Account(
            proto: try await client.unary { md, opts in
                try await client.accounts.restoreAccount(.with { $0.accountID = accountID }, metadata: md, options: opts)
            })
    }

    /// Removes the account and everything of it — stores (live and archived), history, key-value
    /// entries, API keys, sessions (`Accounts.DeleteAccount`). Its devices' feeds get
    /// `.willChange(.contentRemoved)` and then end `.sessionRevoked`. Returns the receipt.
    /// `.defaultAccount` for "default".
    @discardableResult
    public func delete(_ accountID: String) async throws -> DeletedAccount {
        DeletedAccount(
            proto: try await client.unary { md, opts in
                try await client.accounts.deleteAccount(.with { $0.accountID = accountID }, metadata: md, options: opts)
            })
    }

    fileprivate func list() async throws -> [Account] {
        try await client.unary { md, opts in
            try await client.accounts.listAccounts(.init(), metadata: md, options: opts)
        }.accounts.map(Account.init(proto:))
    }
}

extension UbiquityClient {
    /// The operator's account calls (see ``AccountAdmin``); the client must carry the operator key.
    public var accountAdmin: AccountAdmin { AccountAdmin(client: self) }
}

/// The accounts of ``AccountAdmin/accounts()`` as an `AsyncSequence`. `ListAccounts` answers in
/// one response today (the proto has no paging); the sequence reads it when iteration starts, so
/// a server that pages later changes nothing for callers.
public struct AccountList: AsyncSequence, Sendable {
    public typealias Element = Account
    let admin: AccountAdmin

    public func makeAsyncIterator() -> Iterator { Iterator(admin: admin) }

    public struct Iterator: AsyncIteratorProtocol {
        let admin: AccountAdmin
        private var page: [Account]?
        private var index = 0

        init(admin: AccountAdmin) { self.admin = admin }

        public mutating func next() async throws -> Account? {
            if page == nil { page = try await admin.list() }
            guard let page, index < page.count else { return nil }
            defer { index += 1 }
            return page[index]
        }
    }
}

/// One account (tenant).
public struct Account: Sendable, Hashable, Identifiable {
    /// Where an account is in its lifecycle (docs/accounts.md "Archive, restore, delete").
    public enum State: Sendable, Hashable {
        /// Serving calls.
        case active
        /// Its stores kept in its archive; no session, sign-in refused until restored.
        case archived
        /// An archive is moving its stores (or stopped half-way: retry it).
        case archiving
        /// A restore is moving its stores back (or stopped half-way: retry it).
        case restoring
        /// A state this client does not know (a newer server).
        case unknown(Int)
    }

    /// Server-generated: a lower-case UUID, or "default" for the built-in account.
    public var id: String
    public var displayName: String
    public var state: State
    public var createdAt: Date

    init(proto a: Ubiquity_V1_Account) {
        id = a.accountID
        displayName = a.displayName
        switch a.state {
        case .active: state = .active
        case .archived: state = .archived
        case .archiving: state = .archiving
        case .restoring: state = .restoring
        // DELETING is never sent (such an account is NOT_FOUND); UNSPECIFIED means a newer server.
        case .deleting, .unspecified: state = .unknown(a.state.rawValue)
        case .UNRECOGNIZED(let n): state = .unknown(n)
        }
        createdAt = Date(unixMicros: a.createdAtMicros)
    }
}

/// An API key's public description (never its secret).
public struct ApiKey: Sendable, Hashable, Identifiable {
    /// What the key's sessions may do.
    public enum Scope: Sendable, Hashable {
        /// Every data call of the account.
        case readWrite
        /// Only calls that change nothing; writes are `.scopeExceeded` (PERMISSION_DENIED).
        case readOnly
        /// Every data call, on the store with this name (`openStore`'s name) only.
        case oneStore(String)
        /// A scope this client does not know (a newer server).
        case unknown(Int)

        var proto: Ubiquity_V1_ApiKeyScope {
            switch self {
            case .readWrite: .readWrite
            case .readOnly: .readOnly
            case .oneStore: .oneStore
            case .unknown(let n): .UNRECOGNIZED(n)
            }
        }

        var storeName: String {
            if case .oneStore(let name) = self { return name }
            return ""
        }

        init(proto: Ubiquity_V1_ApiKeyScope, storeName: String) {
            switch proto {
            case .readWrite: self = .readWrite
            case .readOnly: self = .readOnly
            case .oneStore: self = .oneStore(storeName)
            case .unspecified: self = .unknown(0)
            case .UNRECOGNIZED(let n): self = .unknown(n)
            }
        }
    }

    /// The key's ID: the part of the secret before the dot, safe to log.
    public var id: String
    public var accountID: String
    public var scope: Scope
    public var label: String
    public var createdAt: Date
    /// Revoked keys do not sign in.
    public var revoked: Bool

    init(proto k: Ubiquity_V1_ApiKey) {
        id = k.keyID
        accountID = k.accountID
        scope = Scope(proto: k.scope, storeName: k.storeName)
        label = k.label
        createdAt = Date(unixMicros: k.createdAtMicros)
        revoked = k.revoked
    }

    /// The key ID of a secret (`ubk_<key id>.<secret>`), for ``AccountAdmin/revokeApiKey(_:)``
    /// when only the secret is at hand.
    public static func id(ofSecret secret: String) -> String {
        String(secret.dropFirst(secret.hasPrefix("ubk_") ? 4 : 0).prefix { $0 != "." })
    }
}

/// What ``AccountAdmin/createApiKey(for:scope:label:)`` made.
public struct NewApiKey: Sendable, Hashable {
    public var key: ApiKey
    /// `ubk_<key id>.<secret>`: shown this once; the server keeps only its hash.
    public var secret: String
}

/// The receipt of ``AccountAdmin/delete(_:)``: what was removed.
public struct DeletedAccount: Sendable, Hashable {
    /// Live stores, each with its objects and history.
    public var stores: Int
    public var archivedStores: Int
    /// Key-value entries (deleted keys' tombstones not counted).
    public var keyValueEntries: Int
    /// API keys, revoked ones included.
    public var apiKeys: Int
    /// Sessions, ended ones included.
    public var sessions: Int
    /// Bytes of store files and key-value values.
    public var bytes: UInt64

    init(proto r: Ubiquity_V1_DeleteAccountResponse) {
        stores = Int(r.storesRemoved)
        archivedStores = Int(r.archivedStoresRemoved)
        keyValueEntries = Int(r.keyValueEntriesRemoved)
        apiKeys = Int(r.apiKeysRemoved)
        sessions = Int(r.sessionsRemoved)
        bytes = r.bytesRemoved
    }
}

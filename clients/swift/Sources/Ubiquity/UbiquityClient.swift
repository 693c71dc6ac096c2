import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import Synchronization

/// How the client proves who it is (SPEC §2 Session). Every data RPC then carries
/// `authorization: Bearer <session token>`.
public enum Credentials: Sendable, Hashable {
    /// No authorization metadata (a server without accounts).
    case none
    /// A session token obtained elsewhere (e.g. `Accounts.SignIn`), sent as `Bearer <token>`.
    case sessionToken(String)
    /// An API key (`Accounts.CreateApiKey`) and this device's ID: the client signs in
    /// (`Accounts.SignIn`) before its first call, again before the session expires, and once more
    /// when a call is refused with SESSION_EXPIRED; a change feed whose session ended signs in
    /// again and resumes from its last token.
    ///
    /// `localDeviceSecret`: the secret of the device's local sessions (``localDevice(deviceID:secret:)``,
    /// ``UbiquityClient/deviceSecret``), sent with the first sign-in only: the device's local
    /// stores are imported into the account's stores of the same names, then removed
    /// (``UbiquityClient/localImport`` has the counts; docs/accounts.md "Local stores").
    case apiKey(String, deviceID: String, localDeviceSecret: String? = nil)
    /// A device not signed in to any account, working in local stores of its own
    /// (`Accounts.StartLocalSession`; the server runs with `--local-stores`). `secret`: nil the
    /// first time, when the server registers the device and returns its secret
    /// (``UbiquityClient/deviceSecret``) — keep it, for later local sessions and for the sign-in
    /// that imports the local stores. The session is renewed like an API key's, but a feed whose
    /// local session was revoked ends (`.sessionRevoked`): the device's stores were imported
    /// into an account, and the account's store of the same name is the one to follow now.
    /// Calls through this client after the import: the first fails `.sessionRevoked`; the next
    /// starts the device afresh, as the server does for a device ID it no longer knows — new,
    /// empty local stores and a new ``UbiquityClient/deviceSecret``.
    case localDevice(deviceID: String, secret: String? = nil)
}

/// How the client's connection is secured (the server side: docs/tls.md in the repository).
public enum ConnectionSecurity: Sendable, Hashable {
    /// Plaintext HTTP/2 (a server without `--tls-cert`, or one on the loopback behind a proxy).
    case plaintext
    /// TLS (ALPN `h2`), the server's certificate verified against the PEM certificates in
    /// `trustRoots` (nil: the system's trust store) and, for a host-name target, that name (an
    /// IP target sends no SNI, and swift-nio-ssl then checks the chain only).
    /// `certificate` and `key` (PEM files) are the client certificate a server run with
    /// `--tls-client-ca` asks for.
    case tls(trustRoots: String? = nil, certificate: String? = nil, key: String? = nil)

    var transport: HTTP2ClientTransport.Posix.TransportSecurity {
        switch self {
        case .plaintext:
            return .plaintext
        case .tls(let roots, let certificate, let key):
            return .tls(
                .defaults {
                    if let roots { $0.trustRoots = .certificates([.file(path: roots, format: .pem)]) }
                    if let certificate { $0.certificateChain = [.file(path: certificate, format: .pem)] }
                    if let key { $0.privateKey = .file(path: key, format: .pem) }
                })
        }
    }
}

/// A connection to a Ubiquity server: one HTTP/2 channel (grpc-swift 2 on SwiftNIO) shared by
/// every call, store, context and feed made through it.
///
/// ```swift
/// let client = try UbiquityClient(target: "127.0.0.1:50051")
/// defer { Task { await client.close() } }   // or `await client.close()` when done
/// let store = try await client.openStore("notes")
/// ```
public final class UbiquityClient: Sendable {
    typealias Transport = HTTP2ClientTransport.Posix

    let grpc: GRPCClient<Transport>
    let stores: Ubiquity_V1_Stores.Client<Transport>
    let contexts: Ubiquity_V1_Contexts.Client<Transport>
    let changes: Ubiquity_V1_Changes.Client<Transport>
    let models: Ubiquity_V1_Models.Client<Transport>
    let accounts: Ubiquity_V1_Accounts.Client<Transport>
    let keyValue: Ubiquity_V1_KeyValue.Client<Transport>
    let adminService: Ubiquity_V1_Admin.Client<Transport>
    /// The default deadline of a unary call (a feed's stream has none).
    public let timeout: Duration
    /// Attempts of a save whose outcome is unknown (see `SaveRetry`).
    public let saveAttempts: Int
    private let session: Mutex<String?>
    /// Set with `.apiKey` credentials: the session it signs in to and keeps fresh.
    let keeper: SessionKeeper?
    private let connections: Task<Void, Never>
    /// The feeds still running: `close()` ends them, since a feed never ends by itself and the
    /// graceful shutdown waits for every call in flight.
    let feeds = FeedRegistry()

    /// Connects to `target` (`"host:port"`, e.g. `"127.0.0.1:50051"`) over HTTP/2, plaintext
    /// unless `security` says TLS.
    ///
    /// - Parameters:
    ///   - security: `.plaintext` or `.tls(trustRoots:certificate:key:)` (see ``ConnectionSecurity``).
    ///   - credentials: the session token every call carries (see ``Credentials``).
    ///   - timeout: the deadline of each unary call.
    ///   - saveAttempts: how often a save whose outcome is unknown is sent (same client
    ///     transaction ID each time, so it applies at most once).
    ///   - interceptors: grpc-swift client interceptors, run on every call.
    public convenience init(
        target: String, credentials: Credentials = .none, security: ConnectionSecurity = .plaintext,
        timeout: Duration = .seconds(30), saveAttempts: Int = 3, interceptors: [any ClientInterceptor] = []
    ) throws {
        let (host, port) = try Self.split(target)
        // An IP literal is not resolved: with TLS a DNS target would send the address as the SNI
        // name, which TLS forbids (the handshake never starts). The certificate chain is still
        // verified; its name is checked when the target is a host name.
        let resolvable: any ResolvableTarget =
            if host.contains(":") { .ipv6(address: host, port: port) }
            else if host.allSatisfy({ $0.isNumber || $0 == "." }) { .ipv4(address: host, port: port) }
            else { .dns(host: host, port: port) }
        try self.init(
            resolvableTarget: resolvable, credentials: credentials, security: security,
            timeout: timeout, saveAttempts: saveAttempts, interceptors: interceptors)
    }

    /// Connects to any grpc-swift target (`.ipv4`, `.unixDomainSocket`, `.dns`, …).
    public init(
        resolvableTarget: any ResolvableTarget, credentials: Credentials = .none,
        security: ConnectionSecurity = .plaintext, timeout: Duration = .seconds(30), saveAttempts: Int = 3,
        interceptors: [any ClientInterceptor] = []
    ) throws {
        var config = HTTP2ClientTransport.Posix.Config.defaults
        // grpc-swift's default first reconnect waits 1 s and grows to 2 min; a feed resuming
        // after a server restart should find the new process within a fraction of a second.
        config.backoff = .init(
            initial: .milliseconds(100), max: .seconds(2), multiplier: 1.6, jitter: 0.2)
        let transport = try HTTP2ClientTransport.Posix(
            target: resolvableTarget, transportSecurity: security.transport, config: config)
        let grpc = GRPCClient(transport: transport, interceptors: interceptors)
        self.grpc = grpc
        stores = .init(wrapping: grpc)
        contexts = .init(wrapping: grpc)
        changes = .init(wrapping: grpc)
        models = .init(wrapping: grpc)
        keyValue = .init(wrapping: grpc)
        adminService = .init(wrapping: grpc)
        let accounts = Ubiquity_V1_Accounts.Client(wrapping: grpc)
        self.accounts = accounts
        self.timeout = timeout
        self.saveAttempts = max(1, saveAttempts)
        var signInOptions = CallOptions.defaults
        signInOptions.timeout = timeout
        signInOptions.waitForReady = true
        switch credentials {
        case .none:
            session = Mutex(nil)
            keeper = nil
        case .sessionToken(let token):
            session = Mutex(token)
            keeper = nil
        case .apiKey(let key, let deviceID, let localSecret):
            session = Mutex(nil)
            keeper = SessionKeeper(
                method: .apiKey(key, deviceID: deviceID, localDeviceSecret: localSecret), accounts: accounts,
                options: signInOptions)
        case .localDevice(let deviceID, let secret):
            session = Mutex(nil)
            keeper = SessionKeeper(
                method: .localDevice(deviceID: deviceID, secret: secret), accounts: accounts, options: signInOptions)
        }
        connections = Task {
            // Returns when close() has shut the client down; an error here can only be a
            // transport that failed to start, which every call then reports itself.
            try? await grpc.runConnections()
        }
    }

    /// Replaces the session token later calls carry (after a sign-in or a refresh); nil sends none.
    /// Ignored with `.apiKey` credentials, whose session the client keeps itself.
    public func setSessionToken(_ token: String?) {
        session.withLock { $0 = token }
    }

    /// Signs in now (with `.apiKey` credentials; otherwise nothing): a bad key fails here, as
    /// `.badCredentials`, rather than at the first call. Calls sign in by themselves anyway.
    public func signIn() async throws {
        _ = try await sessionToken()
    }

    /// Ends the session on the server (`Accounts.SignOut`): its contexts close and its feeds end.
    /// With `.apiKey` credentials a later call signs in again; with `.sessionToken` the token is
    /// dropped and later calls carry none.
    public func signOut() async throws {
        if let keeper {
            try await keeper.signOut()
        } else if let token = session.withLock({ token in defer { token = nil }; return token }) {
            do {
                _ = try await accounts.signOut(.init(), metadata: bearer(token), options: options(timeout: timeout))
            } catch {
                throw UbiquityError.from(error)
            }
        }
    }

    /// The account the API key signed in to (nil before the first sign-in, or without `.apiKey`).
    public var accountID: String? {
        get async { await keeper?.accountID }
    }

    /// How often the client has signed in with its API key (first sign-in and renewals).
    public var signIns: Int {
        get async { await keeper?.signIns ?? 0 }
    }

    /// With `.localDevice` credentials: the device's secret — the one given, or the one the
    /// server returned when the first local session registered the device (nil before that).
    /// Keep it: later local sessions and the sign-in that imports the local stores need it.
    public var deviceSecret: String? {
        get async { await keeper?.deviceSecret }
    }

    /// With `.apiKey(…, localDeviceSecret:)`: what importing the device's local stores did, once
    /// the first sign-in has happened (nil before, or when the device had no local stores).
    public var localImport: ImportCounts? {
        get async { await keeper?.localImport }
    }

    /// Stops accepting calls, ends the client's change feeds (their `next()` returns nil), lets
    /// other calls in flight finish, and closes the connection.
    public func close() async {
        feeds.cancelAll()
        grpc.beginGracefulShutdown()
        await connections.value
    }

    // MARK: Stores

    /// Opens the store named `name`, creating it unless `mustExist` (then a missing store is
    /// `.notFound`, reason STORE_NOT_FOUND).
    public func openStore(_ name: String, mustExist: Bool = false) async throws -> Store {
        let response = try await unary { md, opts in
            try await self.stores.openStore(
                .with {
                    $0.name = name
                    $0.mustExist = mustExist
                }, metadata: md, options: opts)
        }
        return Store(client: self, info: StoreInfo(proto: response.store), created: response.created)
    }

    /// The account's stores.
    public func listStores() async throws -> [StoreInfo] {
        try await unary { md, opts in
            try await self.stores.listStores(.init(), metadata: md, options: opts)
        }.stores.map(StoreInfo.init(proto:))
    }

    // MARK: Calls

    /// The session token the next call carries, signing in first when the API key's session is
    /// missing or about to expire.
    func sessionToken() async throws -> String? {
        if let keeper { return try await keeper.token() }
        return session.withLock { $0 }
    }

    /// A call with `token` was refused (SESSION_EXPIRED, SESSION_REVOKED, or BAD_CREDENTIALS: a
    /// session the server no longer knows, as after an archive, which removes the account's
    /// sessions): whether signing in again may help, having forgotten the token. Only with an
    /// API key or a local device, whose tokens the client got itself.
    func sessionEnded(_ token: String?, by error: UbiquityError) async -> Bool {
        guard let keeper, let token,
            error.kind == .sessionExpired || error.kind == .sessionRevoked || error.kind == .badCredentials
        else { return false }
        await keeper.rejected(token)
        return true
    }

    /// Every call waits for a connection, up to its deadline, instead of failing at once while the
    /// channel reconnects (a server restart, a network blip): grpc-swift's default fails a call
    /// outright whenever the channel is between connection attempts.
    func options(timeout: Duration?) -> CallOptions {
        var options = CallOptions.defaults
        options.timeout = timeout
        options.waitForReady = true
        return options
    }

    /// One unary call with the client's metadata and deadline; failures become `UbiquityError`.
    /// `modelVersion`: sent as `ubiquity-model-version` (a write from a client built with another
    /// model version is then refused, ``Store/expectedModelVersion``).
    func unary<R: Sendable>(
        timeout: Duration? = nil, modelVersion: String? = nil, _ body: @Sendable (Metadata, CallOptions) async throws -> R
    ) async throws -> R {
        let options = options(timeout: timeout ?? self.timeout)
        var renewed = false
        while true {
            let token = try await sessionToken()
            var metadata = bearer(token)
            if let modelVersion { metadata.addString(modelVersion, forKey: "ubiquity-model-version") }
            do {
                return try await body(metadata, options)
            } catch {
                let failure = UbiquityError.from(error)
                guard let e = failure as? UbiquityError, await sessionEnded(token, by: e) else { throw failure }
                // Once: a session that expired between the check and the server's (clocks that
                // disagree) is renewed and the call sent again. A revoked one is not retried,
                // since someone ended it on purpose; it is forgotten, so the next call signs in
                // again and learns whether the key itself still holds.
                if !renewed, e.kind == .sessionExpired {
                    renewed = true
                    continue
                }
                throw failure
            }
        }
    }

    /// A save, sent again with the same client transaction ID while its outcome is unknown.
    func save<R: Sendable>(
        clientTransactionID: String?, modelVersion: String? = nil,
        _ body: @escaping @Sendable (String, Metadata, CallOptions) async throws -> R
    ) async throws -> (R, String) {
        let txid = clientTransactionID ?? UUID().uuidString.lowercased()
        var retry = SaveRetry(attempts: saveAttempts)
        while true {
            do {
                return (try await unary(modelVersion: modelVersion) { md, opts in try await body(txid, md, opts) }, txid)
            } catch let error as UbiquityError {
                guard let delay = retry.next(after: error) else { throw error }
                try await Task.sleep(for: delay)
            }
        }
    }

    static func split(_ target: String) throws -> (String, Int) {
        guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]),
            (0...65535).contains(port)
        else {
            throw UbiquityError(
                RPCError(code: .invalidArgument, message: "target '\(target)' is not host:port"))
        }
        var host = String(target[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, port)
    }
}

/// When a save is sent again. Only where the first attempt may or may not have been applied, or
/// was refused before applying (UNAVAILABLE, DEADLINE_EXCEEDED): the client transaction ID makes
/// the retry return the first outcome instead of applying twice. Conflicts and bad input would
/// fail the same way again. Pauses: 50 ms, growing fourfold, at most 2 s.
struct SaveRetry: Sendable {
    private(set) var remaining: Int
    private var delay: Duration = .milliseconds(50)

    init(attempts: Int) { remaining = max(1, attempts) - 1 }

    /// The pause before the next attempt, or nil when `error` ends the save.
    mutating func next(after error: UbiquityError) -> Duration? {
        guard remaining > 0, error.code == .unavailable || error.code == .deadlineExceeded else {
            return nil
        }
        remaining -= 1
        defer { delay = min(delay * 4, .seconds(2)) }
        return delay
    }
}

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
    /// The default deadline of a unary call (a feed's stream has none).
    public let timeout: Duration
    /// Attempts of a save whose outcome is unknown (see `SaveRetry`).
    public let saveAttempts: Int
    private let session: Mutex<String?>
    private let connections: Task<Void, Never>

    /// Connects to `target` (`"host:port"`, e.g. `"127.0.0.1:50051"`) over plaintext HTTP/2.
    ///
    /// - Parameters:
    ///   - credentials: the session token every call carries (see ``Credentials``).
    ///   - timeout: the deadline of each unary call.
    ///   - saveAttempts: how often a save whose outcome is unknown is sent (same client
    ///     transaction ID each time, so it applies at most once).
    ///   - interceptors: grpc-swift client interceptors, run on every call.
    public convenience init(
        target: String, credentials: Credentials = .none, timeout: Duration = .seconds(30),
        saveAttempts: Int = 3, interceptors: [any ClientInterceptor] = []
    ) throws {
        let (host, port) = try Self.split(target)
        try self.init(
            resolvableTarget: .dns(host: host, port: port), credentials: credentials,
            timeout: timeout, saveAttempts: saveAttempts, interceptors: interceptors)
    }

    /// Connects to any grpc-swift target (`.ipv4`, `.unixDomainSocket`, `.dns`, …).
    public init(
        resolvableTarget: any ResolvableTarget, credentials: Credentials = .none,
        timeout: Duration = .seconds(30), saveAttempts: Int = 3,
        interceptors: [any ClientInterceptor] = []
    ) throws {
        var config = HTTP2ClientTransport.Posix.Config.defaults
        // grpc-swift's default first reconnect waits 1 s and grows to 2 min; a feed resuming
        // after a server restart should find the new process within a fraction of a second.
        config.backoff = .init(
            initial: .milliseconds(100), max: .seconds(2), multiplier: 1.6, jitter: 0.2)
        let transport = try HTTP2ClientTransport.Posix(
            target: resolvableTarget, transportSecurity: .plaintext, config: config)
        let grpc = GRPCClient(transport: transport, interceptors: interceptors)
        self.grpc = grpc
        stores = .init(wrapping: grpc)
        contexts = .init(wrapping: grpc)
        changes = .init(wrapping: grpc)
        models = .init(wrapping: grpc)
        self.timeout = timeout
        self.saveAttempts = max(1, saveAttempts)
        if case .sessionToken(let token) = credentials {
            session = Mutex(token)
        } else {
            session = Mutex(nil)
        }
        connections = Task {
            // Returns when close() has shut the client down; an error here can only be a
            // transport that failed to start, which every call then reports itself.
            try? await grpc.runConnections()
        }
    }

    /// Replaces the session token later calls carry (after a sign-in or a refresh); nil sends none.
    public func setSessionToken(_ token: String?) {
        session.withLock { $0 = token }
    }

    /// Stops accepting calls, lets calls in flight finish, and closes the connection.
    public func close() async {
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

    /// The metadata every call carries: the session's bearer token.
    var metadata: Metadata {
        var md: Metadata = [:]
        if let token = session.withLock({ $0 }) {
            md.addString("Bearer \(token)", forKey: "authorization")
        }
        return md
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
    func unary<R: Sendable>(
        timeout: Duration? = nil, _ body: @Sendable (Metadata, CallOptions) async throws -> R
    ) async throws -> R {
        do {
            return try await body(metadata, options(timeout: timeout ?? self.timeout))
        } catch {
            throw UbiquityError.from(error)
        }
    }

    /// A save, sent again with the same client transaction ID while its outcome is unknown.
    func save<R: Sendable>(
        clientTransactionID: String?, _ body: @escaping @Sendable (String, Metadata, CallOptions) async throws -> R
    ) async throws -> (R, String) {
        let txid = clientTransactionID ?? UUID().uuidString.lowercased()
        var retry = SaveRetry(attempts: saveAttempts)
        while true {
            do {
                return (try await unary { md, opts in try await body(txid, md, opts) }, txid)
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

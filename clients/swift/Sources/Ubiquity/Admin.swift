import Foundation
import GRPCCore

/// A server's operational calls (`Admin`, docs/operations.md in the repository): `client.admin`.
/// `ping`, `serverInfo` and `stats` are open to anyone; `backup` and `restoreStore` are the
/// operator's, so the client must carry the operator key:
///
/// ```swift
/// let ops = try UbiquityClient(target: "127.0.0.1:50051", credentials: .sessionToken(operatorKey))
/// let manifest = try await ops.admin.backup(to: "/srv/backups/2026-11-26")
/// ```
/// (The operator key is sent as it is, `authorization: Bearer <key>`, like a session token.)
public struct Admin: Sendable {
    let client: UbiquityClient

    /// What ``ping(_:)`` answered.
    public struct Pong: Sendable, Hashable {
        /// The payload sent, echoed back.
        public var payload: Data
        /// The server's clock when it answered.
        public var serverTime: Date
    }

    /// What ``restoreStore(from:storeID:replaceExisting:)`` did.
    public struct Restored: Sendable, Hashable {
        /// The restored store.
        public var storeID: String
        /// Its token: a new epoch, at the backup's generation (older tokens are refused).
        public var token: GenerationToken?
        /// The backup's generation of the store.
        public var generation: Int64
    }

    /// The cheapest round trip (`Admin.Ping`): echoes `payload`.
    public func ping(_ payload: Data = Data()) async throws -> Pong {
        let r = try await open { md, opts in
            try await client.adminService.ping(.with { $0.payload = payload }, metadata: md, options: opts)
        }
        return Pong(payload: r.payload, serverTime: Date(unixMicros: r.serverTimeMicros))
    }

    /// Static facts about the server (`Admin.GetServerInfo`): version, listen address, transport
    /// limits, the services it serves.
    public func serverInfo() async throws -> Ubiquity_V1_ServerInfo {
        try await open { md, opts in try await client.adminService.getServerInfo(.init(), metadata: md, options: opts) }
    }

    /// Live counters since the server started (`Admin.GetServerStats`): connections, open streams,
    /// completed calls by status code, resident memory.
    public func stats() async throws -> Ubiquity_V1_ServerStats {
        try await open { md, opts in try await client.adminService.getServerStats(.init(), metadata: md, options: opts) }
    }

    /// An online backup into `directory` on the server's file system (new or empty), of one store
    /// (`storeID`) or, with nil, of the whole server (`Admin.Backup`, operator). Saves go on
    /// meanwhile; every save acknowledged before it began is in it. Returns the manifest.
    @discardableResult
    public func backup(to directory: String, storeID: String? = nil) async throws -> Ubiquity_V1_BackupManifest {
        try await client.unary { md, opts in
            try await client.adminService.backup(
                .with {
                    $0.directory = directory
                    $0.storeID = storeID ?? ""
                }, metadata: md, options: opts)
        }
    }

    /// Restores one store of the backup in `directory` into the running server (`Admin.RestoreStore`,
    /// operator): the store is replaced and starts a new epoch, so its feeds end and older tokens
    /// are refused. `storeID` nil: the backup's only store. An existing store is replaced only
    /// with `replaceExisting` (otherwise FAILED_PRECONDITION, STORE_EXISTS).
    @discardableResult
    public func restoreStore(
        from directory: String, storeID: String? = nil, replaceExisting: Bool = false
    ) async throws -> Restored {
        let r = try await client.unary { md, opts in
            try await client.adminService.restoreStore(
                .with {
                    $0.directory = directory
                    $0.storeID = storeID ?? ""
                    $0.replaceExisting = replaceExisting
                }, metadata: md, options: opts)
        }
        return Restored(storeID: r.storeID, token: GenerationToken(ifPresent: r.token), generation: r.generation)
    }

    /// An open call: it needs no session, so a client with an API key does not sign in for it
    /// (a health probe must not depend on the key). Other credentials are sent as they are.
    private func open<R: Sendable>(_ body: @Sendable (Metadata, CallOptions) async throws -> R) async throws -> R {
        do {
            let token = client.keeper == nil ? try await client.sessionToken() : nil
            return try await body(bearer(token), client.options(timeout: client.timeout))
        } catch {
            throw UbiquityError.from(error)
        }
    }
}

extension UbiquityClient {
    /// The server's operational calls (see ``Admin``).
    public var admin: Admin { Admin(client: self) }
}

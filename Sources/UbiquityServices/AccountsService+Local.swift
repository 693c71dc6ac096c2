import Foundation
import UbiquityGRPC
import UbiquityLock
import UbiquityProtos
import UbiquityStorage

// Local (fallback) stores of devices not yet signed in, and their import on first sign-in
// (docs/accounts.md "Local stores").
extension AccountsService {
    var importer: LocalImporter { LocalImporter(backend: backend, contexts: contexts) }

    func startLocalSession(_ req: Ubiquity_V1_StartLocalSessionRequest, _ call: ServerCall) throws -> Ubiquity_V1_StartLocalSessionResponse {
        guard allowLocalStores, backend.authRequired else {
            throw ServiceError.precondition("this server does not keep local stores (ubiquityd --local-stores is off): sign in with Accounts.SignIn",
                                            reason: .localStoresDisabled)
        }
        try Self.checkDeviceID(req.deviceID)
        // a wrong secret counts against the sign-in limits like a wrong API key, keyed by device
        let key = "device:" + req.deviceID, address = peerHost(call.context.peer), now = Date().timeIntervalSince1970
        try auth.checkLimits(key: key, address: address, now: now, what: "attempts for this device")
        switch try auth.credentials.localSession(deviceID: req.deviceID, secret: req.deviceSecret, lifetime: auth.sessionLifetime) {
        case .badSecret:
            auth.limiter.withLock { $0.failed(key: key, address: address, now: now) }
            throw Authenticator.unauthenticated(reason: .badCredentials,
                                                "this device ID has local stores: send the device_secret its first StartLocalSession returned")
        case .importing:
            throw ServiceError(code: .unavailable, reason: .localImportPending,
                               message: "this device's local stores are being imported into an account: finish signing in with Accounts.SignIn")
        case .session(let session, let token, let newSecret):
            var res = Ubiquity_V1_StartLocalSessionResponse()
            res.sessionToken = token
            res.expiresAtMicros = Int64(session.expiresAt * 1_000_000)
            res.deviceSecret = newSecret ?? ""
            return res
        }
    }

    /// First sign-in with `local_device_secret`: imports the device's local stores into `key`'s
    /// account (or finishes an import already recorded) and returns the counts; nil when the
    /// device has no local stores. Runs before the session exists, so a refused import leaves
    /// no session behind.
    func importLocalStores(deviceID: String, secret: String, key: Credentials.KeyRecord) async throws -> ImportJobCounts? {
        let credentials = auth.credentials
        if let device = credentials.localDevice(deviceID) {
            // refusals that change nothing come before the job is recorded
            let names = backend.catalog.stores(account: device.account).map(\.name)
            let writable = key.scope == .readWrite || names.allSatisfy { key.scope == .store($0) }
            if !writable && credentials.checkLocalSecret(deviceID, secret) {
                throw ServiceError(code: .permissionDenied, reason: .scopeExceeded,
                                   message: "this API key cannot write the account's stores the local stores go to: sign in with a read-write key, or without local_device_secret")
            }
            if credentials.checkLocalSecret(deviceID, secret) {
                try await importer.checkCompatible(localAccount: device.account, account: key.account)
                try importer.checkKeyValueQuotas(localAccount: device.account, account: key.account)
            }
        }
        guard let device = credentials.localDevice(deviceID), credentials.checkLocalSecret(deviceID, secret) else {
            return try await beginImport(deviceID: deviceID, secret: secret, key: key)
        }
        // StoresWillChange(INITIAL_IMPORT_COMPLETED) and the contexts' chance to save come before
        // `beginImport`, which revokes the device's local sessions (ending their streams and
        // contexts). DID_CHANGE on the account's stores the import wrote into is the job's last
        // step (`LocalImporter.announce`: a restart that finishes the job sends it too, once), so
        // the transition appends none itself; the account's key-value streams get it live here.
        let account = key.account
        let done = try await StoreTransitions(backend: backend, contexts: contexts).run(
            .initialImportCompleted, scope: .account(device.account), usingLocalStorage: (true, false),
            importCounts: { $0.map { StoreEventRecord.ImportCounts($0) } },
            didChangeStores: { _ in (account, []) }
        ) { try await beginImport(deviceID: deviceID, secret: secret, key: key) }
        return done.value
    }

    /// Records the import job (revoking the device's local sessions) or finds the one recorded,
    /// and runs it to its end.
    private func beginImport(deviceID: String, secret: String, key: Credentials.KeyRecord) async throws -> ImportJobCounts? {
        let credentials = auth.credentials
        TestSequence.reach("import.begin")
        switch try credentials.beginImport(deviceID: deviceID, secret: secret, account: key.account) {
        case .nothingToImport:
            return nil
        case .badSecret:
            throw Authenticator.unauthenticated(reason: .badCredentials, "the local_device_secret is not this device's")
        case .existing(let job) where !job.state.isDone && job.account != key.account:
            throw ServiceError(code: .unavailable, reason: .localImportPending,
                               message: "this device's local stores are being imported into another account: retry shortly")
        case .existing(let job):
            return try await importer.runImportJob(job)
        case .started(let job, let ended):
            // The local stores' WILL_CHANGE was published before this; a stream that had not
            // sent it yet sends it before it ends (without `after:` it ended at once, and about
            // one local subscriber in ten never heard of the import).
            let sessions = Set(ended.map(\.id))
            self.ended(sessions, after: backend.subscriptions.publishedGenerations(ofSessions: sessions))
            LocalImporter.testStep()
            return try await importer.runImportJob(job)
        }
    }

    /// Finishes the import jobs a stopped process left (killed mid-import), before the server
    /// serves: a device then finds its objects in the account and no local store left. Returns
    /// how many jobs it finished.
    public func finishLocalImports() throws -> Int {
        let outcome = Lock<Result<Int, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let importer = self.importer
        Task {
            let r: Result<Int, any Error>
            do { r = .success(try await importer.resumePending()) } catch { r = .failure(error) }
            outcome.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0 ?? .success(0) }.get()
    }

    static func checkDeviceID(_ device: String) throws {
        guard !device.isEmpty, device.count <= 200, device.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
            throw ServiceError.invalid("device_id", "a device ID is 1–200 printable characters", reason: .badValue)
        }
    }

    static func message(_ c: ImportJobCounts) -> Ubiquity_V1_ImportCounts {
        var m = Ubiquity_V1_ImportCounts()
        m.inserted = c.inserted
        m.merged = c.merged
        m.deduplicated = c.deduplicated
        m.keyValuesMoved = c.keyValuesMoved
        m.keyValuesKept = c.keyValuesKept
        return m
    }
}

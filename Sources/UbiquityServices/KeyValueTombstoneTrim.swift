import Foundation
import UbiquityStorage

/// Trims the key-value store's tombstones older than `--kv-tombstone-retention-seconds`
/// (docs/keyvalue.md "Tombstones"): once at startup before the server serves, then on a timer.
/// A subscriber whose token is older than a trimmed tombstone gets HISTORY_EXPIRED and starts
/// again from a baseline (`KeyValueSubscriptionState.expired`).
///
/// On the same schedule it forgets the records of first sign-ins' key-value moves no longer
/// needed (docs/keyvalue.md "First sign-in"; `KeyValueStore.forgetMoves`).
public struct KeyValueTombstoneTrim: Sendable {
    let store: KeyValueStore
    let credentials: Credentials
    /// How long a tombstone is kept; 0: for ever.
    public let retentionSeconds: Double

    public init(backend: Backend, retentionSeconds: Double) {
        store = backend.keyValues
        credentials = backend.authenticator.credentials
        self.retentionSeconds = retentionSeconds
    }

    /// One pass; returns how many tombstones it removed.
    @discardableResult
    public func trimNow(nowMS: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> Int {
        guard retentionSeconds > 0 else { return 0 }
        return try store.trimTombstones(before: nowMS - Int64(retentionSeconds * 1000))
    }

    /// Forgets the move records whose import job has ended and that no write can still need:
    /// every one at `startup` (before the server serves: no call is in flight), else those older
    /// than `KeyValueStore.movedRecordSeconds`. Returns how many it removed.
    @discardableResult
    public func forgetMovesNow(startup: Bool, nowMS: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> Int {
        // read before the removal: a job recorded after this read moves after it, too recently
        // to be removed (and at startup none is recorded before serving)
        let pending = Set(try credentials.pendingImports().map(\.localAccount))
        let cutoff = startup ? Int64.max : nowMS - Int64(KeyValueStore.movedRecordSeconds * 1000)
        return try store.forgetMoves(before: cutoff, except: pending)
    }

    /// Trims every quarter of the retention (at most hourly: one indexed pass over what it trims;
    /// at least a second apart) until cancelled, and forgets the move records no longer needed
    /// at each pass (hourly with retention 0, which trims nothing).
    public func start() -> Task<Void, Never> {
        let interval = retentionSeconds > 0 ? min(3600, max(1, retentionSeconds / 4)) : 3600
        let trim = self
        return Task.detached(priority: .background) {
            while (try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))) != nil {
                _ = try? trim.trimNow()
                _ = try? trim.forgetMovesNow(startup: false)
            }
        }
    }
}

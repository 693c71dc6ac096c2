import Foundation
import UbiquityStorage

/// Trims the key-value store's tombstones older than `--kv-tombstone-retention-seconds`
/// (docs/keyvalue.md "Tombstones"): once at startup before the server serves, then on a timer.
/// A subscriber whose token is older than a trimmed tombstone gets HISTORY_EXPIRED and starts
/// again from a baseline (`KeyValueSubscriptionState.expired`).
public struct KeyValueTombstoneTrim: Sendable {
    let store: KeyValueStore
    /// How long a tombstone is kept; 0: for ever.
    public let retentionSeconds: Double

    public init(backend: Backend, retentionSeconds: Double) {
        store = backend.keyValues
        self.retentionSeconds = retentionSeconds
    }

    /// One pass; returns how many tombstones it removed.
    @discardableResult
    public func trimNow(nowMS: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> Int {
        guard retentionSeconds > 0 else { return 0 }
        return try store.trimTombstones(before: nowMS - Int64(retentionSeconds * 1000))
    }

    /// Trims every quarter of the retention (at most hourly: one indexed pass over what it trims;
    /// at least a second apart) until cancelled. Nothing runs with retention 0.
    public func start() -> Task<Void, Never> {
        let interval = min(3600, max(1, retentionSeconds / 4))
        let trim = self
        return Task.detached(priority: .background) {
            guard trim.retentionSeconds > 0 else { return }
            while (try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))) != nil {
                _ = try? trim.trimNow()
            }
        }
    }
}

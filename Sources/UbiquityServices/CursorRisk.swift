import Foundation
import UbiquityProtos
import UbiquityStorage

/// When a subscription's position nears the history retention floor, it gets a `CURSOR_AT_RISK`
/// event (`CursorAtRisk`) before the position expires (issue 17: every anchor fails only after
/// the fact). Checked before each read of history (from disk or the feed's window), at most once
/// per progress interval, and once per position; only a position in the older half of the
/// retained generations is looked at further (no SQL for a subscriber near the head).
///
/// At risk: the position's estimated expiry (`Store.historyExpiryEstimate`) is due, or comes
/// within a quarter of the time the current position would last — the position is in the oldest
/// quarter of the retained history, measured in time to expiry, whatever the rules and the rate.
struct CursorRiskWatch: Sendable {
    static let fraction = 0.25
    private var lastCheck: ContinuousClock.Instant?
    private var warnedFor: Int64?

    static func atRisk(positionExpiry: Date, currentExpiry: Date?, now: Date) -> Bool {
        let left = positionExpiry.timeIntervalSince(now)
        if left <= 0 { return true }
        guard let c = currentExpiry else { return false }
        return left < fraction * c.timeIntervalSince(now)
    }

    /// The `SubscribeResponse` to send (wire form, resuming at `position`) if the position is at
    /// risk and this watch has not warned for it yet; nil otherwise or between checks.
    mutating func check(position: Int64, store: Store, interval: Double) async -> [UInt8]? {
        let clock = ContinuousClock.now
        if let l = lastCheck, clock - l < .seconds(interval) { return nil }
        lastCheck = clock
        if warnedFor == position { return nil }
        let status = store.retentionStatus
        let (oldest, current) = (status.oldestRetained.generation, status.current.generation)
        guard current > oldest, position - oldest <= (current - oldest) / 2 else { return nil }
        let token = GenerationToken(storeID: status.current.storeID, epoch: status.current.epoch, generation: position)
        guard let expiry = try? await store.historyExpiryEstimate(after: token) else { return nil }
        let currentExpiry = try? await store.historyExpiryEstimate(after: status.current)
        guard Self.atRisk(positionExpiry: expiry, currentExpiry: currentExpiry, now: Date()) else { return nil }
        warnedFor = position
        var r = Ubiquity_V1_SubscribeResponse()
        r.resumeToken = Data(token.bytes)
        r.resumeGeneration = position
        r.cursorAtRisk.oldestRetainedToken = Data(status.oldestRetained.bytes)
        r.cursorAtRisk.expectedExpiry = .init(date: expiry)
        return (try? r.serializedBytes()) ?? nil
    }
}

extension SubscriptionState.Action {
    /// A read of history: where a position can sit near the retention floor.
    var reads: Bool {
        switch self {
        case .readDisk, .readFeed: true
        default: false
        }
    }
}

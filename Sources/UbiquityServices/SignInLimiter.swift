/// Failed sign-ins counted per API key ID and per peer address in fixed windows (docs/accounts.md,
/// "Rate limits"). A value type: the caller passes the time, so tests need no clock.
///
/// Only failures count: a client that signs in correctly is never slowed down, and guessing —
/// hopeless against 256-bit secrets anyway — is cut to a trickle that also keeps the hashing
/// and logging cost of a flood bounded.
struct SignInLimiter: Sendable {
    /// Failed sign-ins allowed per key ID in one window.
    var maxFailuresPerKey = 5
    /// Failed sign-ins allowed per peer address (IP, without port) in one window.
    var maxFailuresPerAddress = 20
    /// The window, in seconds.
    var windowSeconds: Double = 60
    /// Entries kept per map; past it, windows that ended are dropped (and if none has, the
    /// oldest windows) so a flood of distinct key IDs cannot grow memory.
    var maxEntries = 10_000

    private struct Window { var start: Double; var failures: Int }
    private var byKey: [String: Window] = [:]
    private var byAddress: [String: Window] = [:]

    /// Seconds to wait if a sign-in for `key` from `address` is refused now; nil if it may go on.
    func retryAfter(key: String?, address: String, now: Double) -> Double? {
        var wait: Double?
        func check(_ w: Window?, _ limit: Int) {
            guard let w, now < w.start + windowSeconds, w.failures >= limit else { return }
            wait = max(wait ?? 0, w.start + windowSeconds - now)
        }
        if let key { check(byKey[key], maxFailuresPerKey) }
        check(byAddress[address], maxFailuresPerAddress)
        return wait
    }

    /// Counts one failed sign-in.
    mutating func failed(key: String?, address: String, now: Double) {
        if let key { Self.count(&byKey, key, now: now, window: windowSeconds, maxEntries: maxEntries) }
        Self.count(&byAddress, address, now: now, window: windowSeconds, maxEntries: maxEntries)
    }

    var trackedEntries: Int { byKey.count + byAddress.count }

    private static func count(_ map: inout [String: Window], _ k: String, now: Double, window: Double, maxEntries: Int) {
        if var w = map[k], now < w.start + window {
            w.failures += 1
            map[k] = w
            return
        }
        if map[k] == nil && map.count >= maxEntries {
            map = map.filter { now < $0.value.start + window }
            if map.count >= maxEntries {
                let oldest = map.sorted { $0.value.start < $1.value.start }.prefix(map.count - maxEntries + 1)
                for (key, _) in oldest { map[key] = nil }
            }
        }
        map[k] = Window(start: now, failures: 1)
    }
}

/// The peer's address without its port ("ip:port" or "[v6]:port"): rate limits count per host.
func peerHost(_ peer: String) -> String {
    guard let colon = peer.lastIndex(of: ":") else { return peer }
    return String(peer[..<colon])
}

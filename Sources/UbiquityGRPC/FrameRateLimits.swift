/// Per-connection limits on frames that cost us work but carry no request: empty DATA frames
/// without END_STREAM, PINGs and SETTINGS, each counted in a one-second window (the "flood"
/// attacks of CVE-2019-9512/9515/9518). A value; the connection ends itself for abuse when
/// `admit` says no. Loop thread only, like its connection.
struct FrameRateLimits {
    enum Kind { case emptyData, ping, settings }

    let maxEmptyDataFrames: Int
    let maxPings: Int
    let maxSettings: Int
    private var windowStart: UInt64 = 0
    private var emptyData = 0
    private var pings = 0
    private var settings = 0

    init(maxEmptyDataFramesPerSecond: Int, maxPingsPerSecond: Int, maxSettingsPerSecond: Int) {
        maxEmptyDataFrames = maxEmptyDataFramesPerSecond
        maxPings = maxPingsPerSecond
        maxSettings = maxSettingsPerSecond
    }

    /// Counts one frame of `kind` at loop time `now` (milliseconds); false past its limit.
    mutating func admit(_ kind: Kind, now: UInt64) -> Bool {
        if now - windowStart >= 1000 {
            windowStart = now
            emptyData = 0
            pings = 0
            settings = 0
        }
        switch kind {
        case .emptyData:
            emptyData += 1
            return emptyData <= maxEmptyDataFrames
        case .ping:
            pings += 1
            return pings <= maxPings
        case .settings:
            settings += 1
            return settings <= maxSettings
        }
    }
}

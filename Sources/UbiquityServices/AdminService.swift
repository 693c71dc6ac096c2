import Foundation
import UbiquityGRPC
import UbiquityProtos

/// `ubiquity.v1.Admin`: ping, server info, live counters, backups (`AdminService+Backup.swift`).
public struct AdminService: Sendable {
    public let version: String
    public let startedAtMicros: Int64
    let info: @Sendable () -> Ubiquity_V1_ServerInfo
    let counters: ServerCounters
    /// Backup and RestoreStore are registered only with a storage backend.
    public var backups: Backups?

    /// `info` is evaluated on each GetServerInfo (it reads the bound port and router).
    public init(version: String, counters: ServerCounters, info: @escaping @Sendable () -> Ubiquity_V1_ServerInfo) {
        self.version = version
        self.startedAtMicros = Self.nowMicros()
        self.counters = counters
        self.info = info
    }

    public func register(into router: inout Router) {
        router.register(service: "ubiquity.v1.Admin") { t in
            // Inline (docs/threading.md, rule 4): decode, copy the payload, read the clock, encode —
            // bounded CPU work with no I/O or waiting, so it runs on the loop thread without a Task.
            t.inline("Ping") { request, _ in Self.ping(request) }
            t.unary("GetServerInfo", getServerInfo)
            t.unary("GetServerStats", getServerStats)
            if backups != nil {
                t.unary("Backup", backup)
                t.unary("RestoreStore", restoreStore)
            }
        }
    }

    // Inlined into its registration closure: as a call of its own (or as a `Self.ping` method
    // reference, which adds a thunk) it cost ~55 more instructions of W0's ~22,500 per Ping
    // under callgrind.
    @inline(__always)
    static func ping(_ request: Ubiquity_V1_PingRequest) -> Ubiquity_V1_PingResponse {
        var res = Ubiquity_V1_PingResponse()
        res.payload = request.payload
        res.serverTimeMicros = nowMicros()
        return res
    }

    func getServerInfo(_ request: Ubiquity_V1_GetServerInfoRequest, call: ServerCall) -> Ubiquity_V1_ServerInfo {
        info()
    }

    func getServerStats(_ request: Ubiquity_V1_GetServerStatsRequest, call: ServerCall) -> Ubiquity_V1_ServerStats {
        var s = Ubiquity_V1_ServerStats()
        s.openConnections = counters.openConnections.load(ordering: .relaxed)
        s.acceptedConnections = counters.acceptedConnections.load(ordering: .relaxed)
        s.refusedConnections = counters.refusedConnections.load(ordering: .relaxed)
        s.openStreams = counters.openStreams.load(ordering: .relaxed)
        s.protocolErrors = counters.protocolErrors.load(ordering: .relaxed)
        s.timedOutConnections = counters.timedOutConnections.load(ordering: .relaxed)
        for (code, n) in counters.callsByStatus { s.callsByStatus[UInt32(code)] = n }
        s.residentBytes = Self.residentBytes()
        return s
    }

    static func nowMicros() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1_000_000)
    }

    /// Resident set size from /proc/self/statm (second field, in pages).
    static func residentBytes() -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = UInt64(fields[1]) else { return 0 }
        return pages * UInt64(sysconf(Int32(_SC_PAGESIZE)))
    }
}

import Foundation
import UbiquityGRPC
import UbiquityProtos

/// `ubiquity.v1.Admin`: ping, server info, live counters.
public struct AdminService: Sendable {
    public let version: String
    public let startedAtMicros: Int64
    let info: @Sendable () -> Ubiquity_V1_ServerInfo
    let counters: ServerCounters

    /// `info` is evaluated on each GetServerInfo (it reads the bound port and router).
    public init(version: String, counters: ServerCounters, info: @escaping @Sendable () -> Ubiquity_V1_ServerInfo) {
        self.version = version
        self.startedAtMicros = Self.nowMicros()
        self.counters = counters
        self.info = info
    }

    public func register(into router: inout Router) {
        // Inline (docs/threading.md, rule 4): decode, copy the payload, read the clock, encode —
        // bounded CPU work with no I/O or waiting, so it runs on the loop thread without a Task.
        router.inlineUnary("/ubiquity.v1.Admin/Ping") { (req: Ubiquity_V1_PingRequest, _) in
            var res = Ubiquity_V1_PingResponse()
            res.payload = req.payload
            res.serverTimeMicros = Self.nowMicros()
            return res
        }
        let info = self.info
        router.unary("/ubiquity.v1.Admin/GetServerInfo") { (_: Ubiquity_V1_GetServerInfoRequest, _) in
            info()
        }
        let counters = self.counters
        router.unary("/ubiquity.v1.Admin/GetServerStats") { (_: Ubiquity_V1_GetServerStatsRequest, _) in
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

import ArgumentParser
import Foundation
import SwiftProtobuf
import UbiquityGRPCClient
import UbiquityProtos

/// The requests a run cycles through, built once before the clock starts.
struct WorkloadPlan {
    var requests: [PreparedRequest]
    var note: String?
}

enum Workloads {
    static func plan(_ kind: WorkloadKind, authority: String, payload: Int, timeout: Double?) throws -> WorkloadPlan {
        switch kind {
        case .ping:
            var req = Ubiquity_V1_PingRequest()
            req.payload = Data(repeating: 0x61, count: payload)
            let bytes: [UInt8] = try req.serializedBytes()
            return WorkloadPlan(requests: [PreparedRequest(path: "/ubiquity.v1.Admin/Ping", authority: authority,
                                                           message: bytes, timeout: timeout)])
        case .pointFetch, .predicateFetch, .pinnedFetch, .save100, .mixed:
            throw ValidationError("workload \(kind.rawValue): n/a — Stores service not built yet")
        }
    }
}

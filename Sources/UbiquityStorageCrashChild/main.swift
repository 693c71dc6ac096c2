// Crash-test child: saves in a loop (4 concurrent writers, so group commits happen) and prints
// "ACK <seq>" after each acknowledged save. The parent test kills it with SIGKILL at random
// points and checks that every acknowledged save survived and no save is partial.
// Usage: UbiquityStorageCrashChild <store-path> <store-uuid> <first-seq>
import Foundation
import UbiquityStorage

let args = CommandLine.arguments
guard args.count == 4, let storeID = UUID(uuidString: args[2]), let first = Int64(args[3]) else {
    FileHandle.standardError.write(Data("usage: UbiquityStorageCrashChild <path> <uuid> <first-seq>\n".utf8))
    exit(2)
}
var config = StorageConfiguration()
config.readerCount = 1
config.synchronous = .full
config.walWriteCoalescing = true  // the default, named: the crash test covers coalesced WAL writes
config.checkpointThresholdBytes = 64 << 10
config.checkpointThresholdBytesWithoutReaders = 0
config.idleCheckpointSeconds = 0
let store = try Store.open(path: args[1], id: storeID, configuration: config)
let out = FileHandle.standardOutput
let writers = 4

await withThrowingTaskGroup(of: Void.self) { group in
    for w in 0..<writers {
        group.addTask {
            var seq = first + Int64(w)
            while true {
                var req = SaveRequest()
                req.inserts = (0..<3).map { part in
                    InsertOperation(temporaryID: "t\(part)", entity: "Item",
                                    values: ["seq": .int(seq), "part": .int(Int64(part)), "payload": .binary(Data(repeating: UInt8(truncatingIfNeeded: seq), count: 1500))])
                }
                req.clientTransactionID = "seq-\(seq)"
                _ = try await store.save(req)
                out.write(Data("ACK \(seq)\n".utf8))
                seq += Int64(writers)
            }
        }
    }
    try? await group.next()
}

import Foundation
import UbiquityProtos
import UbiquityStorage

/// `SubscribeResponse` messages in wire form. A response is its resume token and one event; a
/// batch's transactions are serialized one by one (the names-only form once per transaction for
/// every subscriber that wants it, `FeedTransaction.cached`), then framed here without another
/// pass over them (docs/changes.md, "Encoding").
enum SubscribeEncoding {
    // SubscribeResponse fields
    static let resumeTokenField = 1, resumeGenerationField = 2, transactionsField = 3, caughtUpField = 4, progressField = 5
    // TransactionBatch.transactions
    static let batchTransactionsField = 1

    /// A response carrying `transactions` (each a serialized `Transaction`).
    static func batch(_ transactions: [[UInt8]], resume: GenerationToken) -> [UInt8] {
        var batchLength = 0
        for t in transactions { batchLength += 1 + ProtoWriter.varintSize(UInt64(t.count)) + t.count }
        var w = ProtoWriter(capacity: 64 + batchLength)
        header(&w, resume)
        w.tag(transactionsField, 2)
        w.varint(UInt64(batchLength))
        for t in transactions { w.bytes(batchTransactionsField, t) }
        return w.finishBytes()
    }

    /// A marker response: `CaughtUp` or `Progress` (both empty messages).
    static func marker(field: Int, resume: GenerationToken) -> [UInt8] {
        var w = ProtoWriter(capacity: 64)
        header(&w, resume)
        w.tag(field, 2)
        w.varint(0)
        return w.finishBytes()
    }

    private static func header(_ w: inout ProtoWriter, _ resume: GenerationToken) {
        w.bytes(resumeTokenField, resume.bytes)
        if resume.generation != 0 { w.int64(resumeGenerationField, resume.generation) }
    }

    /// What framing adds to a batch per transaction of `count` bytes.
    static func framedSize(_ count: Int) -> Int { 1 + ProtoWriter.varintSize(UInt64(count)) + count }
}

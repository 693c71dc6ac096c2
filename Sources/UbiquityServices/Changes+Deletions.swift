import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

// Changes.FetchDeletions: the IDs deleted after a token, from the store's tombstone index, which
// outlives the history (docs/changes.md "Retention"). A client whose token expired reads a
// baseline at the current generation and removes these IDs from its cache instead of wiping it.

extension ChangesService {
    static let defaultDeletionsPage: UInt32 = 1_000
    static let maxDeletionsPage: UInt32 = 10_000

    func fetchDeletions(_ req: Ubiquity_V1_FetchDeletionsRequest, context: ServerContext) async throws -> Ubiquity_V1_FetchDeletionsResponse {
        guard req.pageSize <= Self.maxDeletionsPage else {
            throw ServiceError.invalid("page_size", "at most \(Self.maxDeletionsPage) deletions a page", reason: .limitExceeded)
        }
        let limit = Int(req.pageSize == 0 ? Self.defaultDeletionsPage : req.pageSize)
        let cursor = try DeletionsCursor(req.afterToken, field: "after_token")
        return try await backend.withStore(req.storeID, account: context.account) { store in
            let current = store.currentToken
            guard cursor.token.generation <= current.generation || cursor.token.storeID != store.id else {
                throw ServiceError.invalid("after_token", "the token is at generation \(cursor.token.generation) but the store is at \(current.generation): pass a token this store gave you",
                                           reason: .badToken)
            }
            let page = try await store.deletions(after: cursor.token, afterPK: cursor.afterPK, entities: req.entities, limit: limit)
            var res = Ubiquity_V1_FetchDeletionsResponse()
            res.deletions = page.deletions.map { d in
                var o = Ubiquity_V1_DeletedObject()
                o.objectID = d.objectID.uri
                o.entity = d.objectID.entity
                o.generation = d.generation
                return o
            }
            res.nextToken = Data(DeletionsCursor(token: page.nextToken, afterPK: page.nextAfterPK).bytes)
            res.hasMore_p = page.hasMore
            res.currentToken = Data(page.current.bytes)
            return res
        }
    }
}

/// Where a FetchDeletions page starts: a generation token (33 bytes: after every deletion of its
/// generation), or, when a page ended inside one transaction's deletions, that token followed by
/// the last pk returned (41 bytes, big-endian). A transaction may delete more objects than a
/// page holds; the plain token cannot say where inside it the next page starts.
struct DeletionsCursor {
    var token: GenerationToken
    /// `Int64.max`: after the whole generation.
    var afterPK: Int64

    init(token: GenerationToken, afterPK: Int64) { self.token = token; self.afterPK = afterPK }

    init(_ bytes: Data, field: String) throws {
        let b = Array(bytes)
        guard b.count == 33 || b.count == 41 else {
            throw ServiceError.invalid(field, "malformed token: pass a generation token, or the next_token of an earlier FetchDeletions page", reason: .badToken)
        }
        token = try Convert.token(Data(b[0..<33]), field: field)
        afterPK = b.count == 41 ? Int64(bitPattern: b[33..<41].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) : .max
        guard afterPK >= 0 else { throw ServiceError.invalid(field, "malformed token: pass back the next_token a FetchDeletions page gave you", reason: .badToken) }
    }

    var bytes: [UInt8] {
        var out = token.bytes
        if afterPK != .max { withUnsafeBytes(of: afterPK.bigEndian) { out.append(contentsOf: $0) } }
        return out
    }
}

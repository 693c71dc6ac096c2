import Foundation
import GRPCCore

/// The store's change history read a page at a time, and its tombstone index:
/// `Changes.FetchHistory` and `Changes.FetchDeletions` (docs/changes.md). What the feed streams
/// live, these read on demand — a client catching up, or one whose history expired keeping its
/// cache (remove the deleted IDs, refresh the rest from a baseline).
extension Store {
    /// One page of committed transactions after `token` (nil: from the oldest retained), oldest
    /// first, with the feed's filters (`Changes.FetchHistory`). While ``HistoryPage/hasMore``,
    /// ask again after ``HistoryPage/nextToken``. `pageSize` 0: the server's default (100).
    /// A token older than the retained history is `.historyExpired`. Store events (sign-outs,
    /// imports) are not in it: they come only on the feed.
    public func history(
        after token: GenerationToken? = nil, entities: [String] = [], excludeAuthors: [String] = [],
        includeValues: Bool = false, pageSize: UInt32 = 0
    ) async throws -> HistoryPage {
        let proto = try await client.unary { md, opts in
            try await client.changes.fetchHistory(
                .with {
                    $0.storeID = id
                    if let token { $0.from.token = token.bytes } else { $0.from.oldest = true }
                    $0.filter.entities = entities
                    $0.filter.excludeAuthors = excludeAuthors
                    $0.filter.includeValues = includeValues
                    $0.pageSize = pageSize
                }, metadata: md, options: opts)
        }
        return HistoryPage(
            transactions: proto.transactions.map(Transaction.init(proto:)),
            nextToken: GenerationToken(ifPresent: proto.nextToken), hasMore: proto.hasMore_p,
            currentToken: GenerationToken(ifPresent: proto.currentToken))
    }

    /// One page of the objects deleted after `token`, in deletion order, from the store's
    /// tombstone index, which outlives the full history (`Changes.FetchDeletions`). While
    /// ``DeletionsPage/hasMore``, ask again after ``DeletionsPage/nextToken`` as it is (it may
    /// point inside one transaction's deletions). `pageSize` 0: the server's default (1,000).
    public func deletions(
        after token: GenerationToken, entities: [String] = [], pageSize: UInt32 = 0
    ) async throws -> DeletionsPage {
        let proto = try await client.unary { md, opts in
            try await client.changes.fetchDeletions(
                .with {
                    $0.storeID = id
                    $0.afterToken = token.bytes
                    $0.entities = entities
                    $0.pageSize = pageSize
                }, metadata: md, options: opts)
        }
        return DeletionsPage(
            deletions: proto.deletions.map { .init(objectID: $0.objectID, entity: $0.entity, generation: $0.generation) },
            nextToken: GenerationToken(ifPresent: proto.nextToken), hasMore: proto.hasMore_p,
            currentToken: GenerationToken(ifPresent: proto.currentToken))
    }
}

/// A page of ``Store/history(after:entities:excludeAuthors:includeValues:pageSize:)``.
public struct HistoryPage: Sendable {
    /// Transactions that passed the filter, oldest first.
    public var transactions: [Transaction]
    /// Where the next page starts (it moves past filtered-out transactions too).
    public var nextToken: GenerationToken?
    /// More history exists after `nextToken`.
    public var hasMore: Bool
    /// The store's current generation when the page was read.
    public var currentToken: GenerationToken?
}

/// A page of ``Store/deletions(after:entities:pageSize:)``.
public struct DeletionsPage: Sendable {
    /// One entry of the tombstone index.
    public struct Deleted: Sendable, Hashable {
        public var objectID: String
        public var entity: String
        /// The generation of the transaction that deleted it.
        public var generation: Int64
    }

    /// Deleted objects, in deletion order.
    public var deletions: [Deleted]
    /// Where the next page starts; pass it back unchanged.
    public var nextToken: GenerationToken?
    /// More deletions exist after `nextToken`.
    public var hasMore: Bool
    /// The store's current generation when the page was read.
    public var currentToken: GenerationToken?
}

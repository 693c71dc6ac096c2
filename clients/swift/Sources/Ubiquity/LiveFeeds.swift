import Foundation

// The change feed's two other shapes: a live query's result set, and the account's key-value
// store. Both are ``ChangeFeed``s — the same resume, reconnect and session rules — whose events
// carry ``FeedEvent/liveQuery`` or ``FeedEvent/keyValueChange`` (docs/changes.md "Live queries",
// docs/keyvalue.md "Change feed").

extension Store {
    /// Follows the result set of a predicate (`SubscribeRequest.live_query`): for each
    /// transaction that changes an object of `entity` (sub-entities included) in or out of the
    /// set, an event whose ``FeedEvent/liveQuery`` says which objects `entered`, `changed` inside,
    /// or `left` it. A transaction that touches no member and brings none in sends nothing but
    /// moves the resume token. A fetch with the same predicate at the start token, with every
    /// update applied, equals a fetch at the last update's token.
    ///
    /// ```swift
    /// for try await event in store.liveQuery("Person", where: "age >= $min", ["min": 18], from: .token(t)) {
    ///     guard let update = event.liveQuery else { continue }
    ///     show(update.entered, update.changed); hide(update.left)
    /// }
    /// ```
    /// `includeValues`: `entered` and `changed` carry the whole object after the transaction.
    /// A predicate that does not check fails the feed at once (`.invalidArgument`, with the
    /// query layer's reason).
    public func liveQuery(
        _ entity: String, where predicate: String = "", _ arguments: [String: Argument] = [:],
        from start: ChangeFeed.Start = .now, includeValues: Bool = false, excludeAuthors: [String] = [],
        reconnectFor: Duration = .seconds(60)
    ) -> ChangeFeed {
        var filter = Ubiquity_V1_ChangeFilter()
        filter.excludeAuthors = excludeAuthors
        filter.includeValues = includeValues
        return ChangeFeed(
            client: client, storeID: id, start: start, filter: filter, reconnectFor: reconnectFor,
            onHistoryExpired: nil, acknowledgesStoreEvents: false,
            liveQuery: .with {
                $0.entity = entity
                $0.predicate = predicate
                $0.arguments = arguments.mapValues(\.proto)
            })
    }
}

extension KeyValueStore {
    /// The account's key-value changes (`SubscribeRequest.key_values`): events whose
    /// ``FeedEvent/keyValueChange`` is one change each, then live. `.oldest` starts with an
    /// initial sync (every key set now, reason `.initialSync`), `.now` with what changes from now
    /// on, `.token(t)` with what changed after a key-value feed token (an earlier key-value
    /// feed's `token`; store tokens do not apply). `excludeAuthors`: skip changes by these
    /// devices (the token still moves). Store transitions that concern the device arrive as
    /// store events too.
    public func changes(
        from start: ChangeFeed.Start = .now, excludeAuthors: [String] = [], reconnectFor: Duration = .seconds(60)
    ) -> ChangeFeed {
        ChangeFeed(
            client: client, storeID: "", start: start, filter: .init(), reconnectFor: reconnectFor,
            onHistoryExpired: nil, acknowledgesStoreEvents: false,
            keyValues: .with { $0.excludeAuthors = excludeAuthors })
    }
}

/// One change of the account's key-value store (`KeyValueChange`,
/// NSUbiquitousKeyValueStoreDidChangeExternallyNotification's entry).
public struct KeyValueChange: Sendable, Hashable {
    /// Why the key changed (NSUbiquitousKeyValueStoreChangeReasonKey).
    public enum Reason: Sendable, Hashable {
        /// A device set or deleted it.
        case serverChange
        /// The subscription's first copy (from `.oldest`): every key set.
        case initialSync
        /// A notice, not a change: a set of `key` (empty: the account) was refused for the
        /// account's quota; `value`, `version` and `deleted` are unset.
        case quotaViolation
        /// The account changed under the device (a first sign-in moved a device's local
        /// entries in).
        case accountChange
        /// A reason this client does not know (a newer server).
        case unknown(Int)
    }

    public var reason: Reason
    public var key: String
    /// The new value; empty when `deleted`.
    public var value: Data
    /// The key's version after the change (for compare-and-set).
    public var version: Int64
    public var deleted: Bool
    /// The device that made the change; empty if none was given.
    public var author: String

    public init(
        reason: Reason, key: String, value: Data = Data(), version: Int64 = 0, deleted: Bool = false, author: String = ""
    ) {
        self.reason = reason
        self.key = key
        self.value = value
        self.version = version
        self.deleted = deleted
        self.author = author
    }

    init(proto c: Ubiquity_V1_KeyValueChange) {
        switch c.reason {
        case .serverChange: reason = .serverChange
        case .initialSync: reason = .initialSync
        case .quotaViolation: reason = .quotaViolation
        case .accountChange: reason = .accountChange
        case .unspecified: reason = .unknown(0)
        case .UNRECOGNIZED(let n): reason = .unknown(n)
        }
        key = c.key
        value = c.value
        version = c.version
        deleted = c.deleted
        author = c.author
    }
}

/// One transaction's effect on a live query's result set (`LiveQueryUpdate`).
public struct LiveQueryUpdate: Sendable {
    /// An object in an update: its ID, and with `includeValues` the object after the transaction.
    public struct Member: Sendable, Hashable {
        public var objectID: String
        public var object: ManagedObject?
    }

    /// The transaction's token (equal to the event's resume token).
    public var token: GenerationToken?
    public var generation: Int64
    /// Match after the transaction and did not before (or did not exist).
    public var entered: [Member]
    /// Matched before and after, and changed.
    public var changed: [Member]
    /// Matched before and no longer do (changed out of the set, or deleted).
    public var left: [String]

    init(proto u: Ubiquity_V1_LiveQueryUpdate) {
        func member(_ o: Ubiquity_V1_LiveQueryObject) -> Member {
            Member(objectID: o.objectID, object: o.hasObject ? ManagedObject(proto: o.object) : nil)
        }
        token = GenerationToken(ifPresent: u.token)
        generation = u.generation
        entered = u.entered.map(member)
        changed = u.changed.map(member)
        left = u.leftObjectIds
    }
}

import UbiquityLock

/// One object the services keep per connection. The transport creates it with the connection,
/// hands it to every call (`CallContext.connection`, `SyncCallContext.connection`) and drops it
/// with the connection; it never looks inside, so it learns nothing of what the services keep
/// (layering: docs/architecture.md). Calls of one connection run on several threads at once,
/// hence the lock (uncontended but for calls of the same connection that start together).
///
/// Authentication keeps its per-connection session memos here (UbiquityServices/SessionMemoTable.swift).
public final class ConnectionLocal: Sendable {
    private let slot = Lock<(AnyObject & Sendable)?>(nil)

    public init() {}

    /// What is kept here, if anything.
    public var value: (AnyObject & Sendable)? { slot.withLock { $0 } }

    /// What is kept, or `make()`'s result, kept from now on, when nothing is yet: one check and
    /// one store under the lock, so the first calls of a connection all get the same object.
    public func value(orInsert make: () -> AnyObject & Sendable) -> AnyObject & Sendable {
        slot.withLock { kept in
            if let kept { return kept }
            let made = make()
            kept = made
            return made
        }
    }
}

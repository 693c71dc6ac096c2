import UbiquityLock

/// One object the services keep per connection. The transport creates it with the connection,
/// hands it to every call (`CallContext.connection`, `SyncCallContext.connection`) and drops it
/// with the connection; it never looks inside, so it learns nothing of what the services keep
/// (layering: docs/architecture.md). Calls of one connection run on several threads at once,
/// hence the lock (uncontended but for calls of the same connection that finish together).
///
/// Authentication keeps its per-connection session memo here (UbiquityServices/SessionMemo.swift).
public final class ConnectionLocal: Sendable {
    private let slot = Lock<(AnyObject & Sendable)?>(nil)

    public init() {}

    /// What a call of this connection left here last, if anything.
    public var value: (AnyObject & Sendable)? { slot.withLock { $0 } }

    /// Replaces what is kept.
    public func set(_ value: (AnyObject & Sendable)?) { slot.withLock { $0 = value } }
}

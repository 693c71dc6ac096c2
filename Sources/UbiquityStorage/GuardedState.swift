import Foundation

/// State under an NSLock, not `Locked`, for the small databases (catalog, credentials) whose
/// state holds their `Connection`, which is not Sendable: `Lock`'s `sending` contract cannot
/// hand it to the body. Invariant: the value is only accessed inside `withLock`; the connection
/// is adopted and released there (`ConnectionOwner`), so only the thread holding the lock uses it.
final class GuardedState<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ v: Value) { value = v }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock(); defer { lock.unlock() }
        return try body(&value)
    }
}

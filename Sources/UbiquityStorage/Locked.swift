import UbiquityLock

/// A lock-protected value shared by reference (the store's state is handed to its threads):
/// UbiquityLock's `Lock` in a class, so it is `Sendable` by construction.
final class Locked<T>: Sendable {
    private let lock: Lock<T>
    init(_ v: sending T) { lock = Lock(v) }
    func withLock<R, E: Error>(_ body: (inout sending T) throws(E) -> sending R) throws(E) -> sending R {
        try lock.withLock(body)
    }
}

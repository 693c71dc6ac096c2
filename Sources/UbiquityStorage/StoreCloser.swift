import UbiquityLock

/// The one `ubq-closer` thread (docs/threading.md rule 18): closes stores evicted to make room
/// (`EvictionPolicy`), off the path of the call that opened another store. Jobs run in the order
/// they came, one at a time — a close mostly waits for its store's writer close step on the
/// shared writer threads, so a second closer would only queue there too. Started at the first
/// job; lives as long as the process, like `ubq-snapshots`.
final class StoreCloser: Sendable {
    static let shared = StoreCloser()
    private let queue = JobQueue<@Sendable () -> Void>()
    private let thread = Lock<NamedThread?>(nil)

    func submit(_ job: @escaping @Sendable () -> Void) {
        let queue = self.queue
        thread.withLock { t in
            guard t == nil else { return }
            // A close runs no query: closing read connections and waiting for the writer.
            t = NamedThread(name: "ubq-closer", stackSize: 1 << 20) {
                ThreadPriority.prepareStoreThread(nice: 0)
                while true { for job in queue.pop(max: 1) { job() } }
            }
        }
        _ = queue.push(job)
    }
}

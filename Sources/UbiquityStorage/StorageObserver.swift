/// Where the engine reports the events an operator watches. The daemon points these at its
/// metrics backend; storage itself depends on none (nil: not reported, nothing measured).
/// Each is called on the thread that did the work (a writer or reader thread): keep it cheap.
public struct StorageObserver: Sendable {
    /// A group commit committed `saves` saves (new generations) in `seconds` (BEGIN to COMMIT).
    public var groupCommitted: (@Sendable (_ saves: Int, _ seconds: Double) -> Void)?
    /// A writer checkpoint took `seconds`.
    public var checkpointed: (@Sendable (_ seconds: Double) -> Void)?
    /// A read found every shared reader thread busy and waited `seconds` for one. Reads
    /// that did not wait are not reported: no clock read, no call on the common path.
    public var readerWaited: (@Sendable (_ seconds: Double) -> Void)?
    /// A closed store was opened on demand in `seconds`: its file, the writer connection and its
    /// schema transaction, the pools — what a call that finds its store closed waits for before
    /// its own work (on that call's thread).
    public var storeOpened: (@Sendable (_ seconds: Double) -> Void)?
    /// An open store was closed in `seconds` (evicted to make room, or idle): its
    /// readers, then its writer's close step with the TRUNCATE checkpoint and its fsyncs.
    public var storeClosed: (@Sendable (_ seconds: Double) -> Void)?

    public init() {}
}

/// An open store's queue and WAL state, sampled (by the daemon's metrics, at scrape time).
public struct StoreStatistics: Sendable {
    /// Writer jobs (saves, exclusive work) waiting for the writer thread.
    public var writerQueueJobs: Int
    /// Reads of the store queued or running on the shared reader threads.
    public var readerQueueJobs: Int
    /// WAL content in bytes (frames since the WAL's last restart), as of the last commit.
    public var walBytes: Int
}

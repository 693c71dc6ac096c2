import Foundation
import GRPCCore
import Synchronization

/// The answers of a server-streaming call (`Stores.FetchStream`, `Stores.ExportBaseline`) as an
/// `AsyncSequence`: the call starts when iteration starts, in a task of its own, and ends when
/// the server finishes (the loop ends), fails (`next()` throws a ``UbiquityError``), or the
/// consumer leaves the loop or cancels (the call is cancelled on the server too).
///
/// The whole stream runs under the client's deadline (`timeout`), like a unary call. Answers the
/// consumer has not read yet wait in memory; each is one batch (the call's batch size), and the
/// server's pace is bounded by HTTP/2 flow control only as far as this buffer is read.
/// A session that expired before the first answer is renewed and the call sent once more; once
/// answers have been delivered a failure is final, so nothing is delivered twice.
public struct ResponseStream<Element: Sendable>: AsyncSequence, Sendable {
    typealias Call = @Sendable (Metadata, CallOptions, @escaping @Sendable (Element) -> Void) async throws -> Void

    let client: UbiquityClient
    let call: Call

    public func makeAsyncIterator() -> Iterator {
        let (stream, continuation) = AsyncThrowingStream<Element, any Error>.makeStream()
        let task = client.feeds.start { [client, call] in
            await Self.run(client, call, continuation)
        }
        continuation.onTermination = { _ in task.cancel() }
        return Iterator(base: stream.makeAsyncIterator(), task: task)
    }

    private static func run(
        _ client: UbiquityClient, _ call: Call, _ continuation: AsyncThrowingStream<Element, any Error>.Continuation
    ) async {
        let options = client.options(timeout: client.timeout)
        let delivered = DeliveredFlag()
        var renewed = false
        while true {
            var token: String?
            do {
                token = try await client.sessionToken()
                try await call(bearer(token), options) { element in
                    delivered.set()
                    continuation.yield(element)
                }
                continuation.finish()
                return
            } catch {
                if Task.isCancelled {
                    continuation.finish()
                    return
                }
                let failure = UbiquityError.from(error)
                if let e = failure as? UbiquityError, await client.sessionEnded(token, by: e), e.kind == .sessionExpired,
                    !renewed, !delivered.isSet
                {
                    renewed = true
                    continue
                }
                continuation.finish(throwing: failure)
                return
            }
        }
    }

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<Element, any Error>.AsyncIterator
        let task: Task<Void, Never>

        public mutating func next() async throws -> Element? {
            try await base.next()
        }

        /// Cancels the call; `next()` then returns what was already received, then nil.
        public func cancel() { task.cancel() }
    }
}

/// Whether a stream has delivered an answer, set from the call's task, read after it failed.
private final class DeliveredFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

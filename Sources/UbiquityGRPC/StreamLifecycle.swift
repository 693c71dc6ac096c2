/// A stream's life as a value: its request side and its response side, which run together (a
/// client-streaming call answers while it still receives). The connection reports events; the
/// answer says whether the event applies. No nghttp2 here: unit-tested alone
/// (`StreamLifecycleTests`). Loop thread only, like its stream.
///
/// Request: headers → receiving (admitted; a unary or server-streaming call waits for
/// END_STREAM) → handling (the handler started; client-streaming calls start at the headers), or
/// → discarding (answered without a handler, or failed) from any of them.
/// Response: notStarted → streaming ⇄ deferred (nghttp2 asked for DATA the handler did not have
/// yet) → ended (the status is submitted); or notStarted → ended (Trailers-Only).
struct StreamLifecycle: Equatable {
    enum Request: Equatable { case headers, receiving, handling, discarding }
    enum Response: Equatable { case notStarted, streaming, deferred, ended }

    private(set) var request = Request.headers
    private(set) var response = Response.notStarted

    /// Request DATA is read (otherwise it is discarded and its credit given back at once).
    var readsRequest: Bool { (request == .receiving || request == .handling) && response != .ended }
    /// Nothing started and nothing answered: a request that stops arriving now is failed.
    var awaitsRequest: Bool { (request == .headers || request == .receiving) && response == .notStarted }
    /// Request header fields are kept (after the response started they are trailers, not read).
    var keepsHeaderFields: Bool { response == .notStarted }
    var isAnswered: Bool { response == .ended }

    enum Event: Equatable {
        /// The header block passed `RequestHead.admit`.
        case admitted
        /// The handler is to start (at the headers for client streaming, else at END_STREAM).
        case handlerStarting
        /// Rejected at the headers, or failed later: nothing more is read.
        case failed
        /// Response HEADERS with a data provider were submitted.
        case responseStarted
        /// nghttp2 asked for DATA and the handler had none (NGHTTP2_ERR_DEFERRED).
        case dataDeferred
        /// The handler has output again.
        case dataReady
        /// The status went out (trailers or Trailers-Only), or the response could not be sent.
        case responseEnded
    }

    /// Applies `event`; false when it does not apply in the current state (the caller then does
    /// nothing: a second answer, a handler started twice, a resume of a stream not waiting).
    mutating func event(_ event: Event) -> Bool {
        switch (event, request, response) {
        case (.admitted, .headers, _):
            request = .receiving
        case (.handlerStarting, .receiving, _):
            request = .handling
        case (.failed, _, _):
            request = .discarding
        case (.responseStarted, _, .notStarted):
            response = .streaming
        case (.dataDeferred, _, .streaming):
            response = .deferred
        case (.dataReady, _, .deferred):
            response = .streaming
        case (.responseEnded, _, let r) where r != .ended:
            response = .ended
        default:
            return false
        }
        return true
    }
}

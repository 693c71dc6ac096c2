import UbiquityLoop

/// Cuts a request stream's DATA bytes into gRPC messages (1-byte compressed flag, 4-byte
/// big-endian length, the message). A value type with no nghttp2 and no loop in it
/// (`MessageDeframerTests`); owned by its stream, loop thread only.
///
/// Whole messages in a chunk are read in place — the common case of a unary request in one DATA
/// frame copies nothing into the buffer; only a partial tail is kept for the next chunk. The
/// buffer is manually managed memory (`ByteBuffer`): its owner calls `release()` when done.
struct MessageDeframer {
    enum Failure: Equatable {
        /// The compressed flag is set, but no `grpc-encoding` was negotiated (we accept identity only).
        case compressed
        /// A message's declared length exceeds the receive limit.
        case tooLarge(length: Int)
        /// A second message on a call whose client sends exactly one.
        case extraMessage
        /// END_STREAM inside a message.
        case truncated(bufferedBytes: Int)
        /// END_STREAM without the one message a unary or server-streaming call needs.
        case missingMessage

        func status(kind: RPCKind, maxMessageBytes: Int) -> RPCError {
            let shape = kind == .unary ? "unary" : "server-streaming"
            switch self {
            case .compressed:
                return RPCError(.internal, "compressed message received but no grpc-encoding was negotiated")
            case .tooLarge(let length):
                return RPCError(.resourceExhausted,
                    "received message of \(length) bytes exceeds the limit of \(maxMessageBytes) bytes")
            case .extraMessage:
                return RPCError(.internal, "\(shape) call received more than one request message")
            case .truncated(let n):
                return RPCError(.internal, "request ended inside a message (\(n) bytes of an incomplete frame)")
            case .missingMessage:
                return RPCError(.internal, "\(shape) call received no request message")
            }
        }
    }

    private var buffer = ByteBuffer()
    /// Messages delivered so far.
    private(set) var messages = 0

    /// Bytes of an incomplete message kept for the next chunk.
    var bufferedBytes: Int { buffer.count }

    /// Hands each complete message in `chunk` (after any kept tail) to `deliver(message,
    /// wireBytes)`, in order, and keeps a partial tail. On a failure it stops, drops what it
    /// kept, and returns the failure; later chunks of a failed stream should not be fed.
    mutating func feed(_ chunk: UnsafeRawBufferPointer, maxMessageBytes: Int, singleMessage: Bool,
                       deliver: ([UInt8], Int) -> Void) -> Failure? {
        if buffer.count == 0 {
            let (used, failure) = cut(chunk, maxMessageBytes: maxMessageBytes, singleMessage: singleMessage, deliver: deliver)
            if let failure { return fail(failure) }
            if used < chunk.count { buffer.append(UnsafeRawBufferPointer(rebasing: chunk[used...])) }
            return nil
        }
        buffer.append(chunk)
        let (used, failure) = cut(buffer.bytes, maxMessageBytes: maxMessageBytes, singleMessage: singleMessage, deliver: deliver)
        if let failure { return fail(failure) }
        if used > 0 { buffer.removeFirst(used) }
        return nil
    }

    /// The request ended (END_STREAM): a failure if it ended inside a message, or without the
    /// single message a unary or server-streaming call needs.
    func finish(singleMessage: Bool) -> Failure? {
        if buffer.count > 0 { return .truncated(bufferedBytes: buffer.count) }
        if singleMessage && messages != 1 { return .missingMessage }
        return nil
    }

    /// Drops kept bytes (the stream failed or was answered).
    mutating func discard() { buffer.removeAll() }

    /// Ready for another stream: a small buffer is kept (the next call allocates nothing), one a
    /// large message grew is given back.
    mutating func reset() {
        if buffer.capacity > 64 * 1024 { buffer.deallocate() } else { buffer.removeAll() }
        messages = 0
    }

    /// Frees the buffer's memory.
    mutating func release() { buffer.deallocate() }

    private mutating func fail(_ failure: Failure) -> Failure {
        buffer.removeAll()
        return failure
    }

    /// Delivers every complete message of `input`; returns the bytes used and a failure, if any.
    private mutating func cut(_ input: UnsafeRawBufferPointer, maxMessageBytes: Int, singleMessage: Bool,
                              deliver: ([UInt8], Int) -> Void) -> (Int, Failure?) {
        var offset = 0
        while input.count - offset >= 5 {
            let p = (input.baseAddress! + offset).assumingMemoryBound(to: UInt8.self)
            if p[0] != 0 { return (offset, .compressed) }
            let length = NGHTTP2Glue.messageLength(p)
            if length > maxMessageBytes { return (offset, .tooLarge(length: length)) }
            guard input.count - offset >= 5 + length else { break }
            offset += 5 + length
            messages += 1
            if singleMessage && messages > 1 { return (offset, .extraMessage) }
            deliver([UInt8](UnsafeBufferPointer(start: p + 5, count: length)), length + 5)
        }
        return (offset, nil)
    }
}

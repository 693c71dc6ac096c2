/// The headers that carry a call's status (`grpc-status`, `grpc-message`,
/// `grpc-status-details-bin`, then trailing metadata), bounded so that every status reaches a
/// stock client.
///
/// Why a bound: a header block nghttp2 will not send (over
/// `nghttp2_option_set_max_send_header_block_length`, 64 KiB) used to leave the call with no
/// trailers at all — it hung until the client's deadline (issue 15) — and gRPC clients refuse
/// header lists past their own limit (grpcio: 8 KiB soft, 16 KiB hard, reported as
/// RESOURCE_EXHAUSTED "received metadata size exceeds hard limit", so the client could not even
/// tell what went wrong). The budget below keeps every status under 8 KiB as HPACK counts it
/// (name + value + 32 per entry):
/// - `grpc-message` is cut at `maxMessageBytes` once percent-encoded, on a character boundary,
///   ending with `truncationMarker`;
/// - details larger than `maxDetailsBytes` (base64) are dropped, and the message says so — the
///   services layer keeps its details far below this (docs/errors.md), so this is a last resort;
/// - trailing metadata entries that no longer fit are dropped.
///
/// A pure function of the status: `StatusTrailersTests` covers it without a socket.
public enum StatusTrailers {
    /// Largest `grpc-message` value sent, in bytes after percent-encoding.
    public static let maxMessageBytes = 1024
    /// Largest `grpc-status-details-bin` value sent, in bytes of base64.
    public static let maxDetailsBytes = 6 * 1024
    /// Largest size of the status header list, counted as HPACK does.
    public static let budgetBytes = 7 * 1024 + 512
    /// Ends a cut message (ASCII, so it stays readable after percent-encoding).
    public static let truncationMarker = "... [truncated]"

    /// The status headers for `status`, within `budget` bytes (callers pass the smaller of
    /// `budgetBytes` and the peer's SETTINGS_MAX_HEADER_LIST_SIZE, less what precedes them).
    public static func headers(for status: RPCError, budget: Int = budgetBytes) -> [(String, String)] {
        var headers: [(String, String)] = [("grpc-status", String(status.code.rawValue))]
        var used = entrySize("grpc-status", headers[0].1)
        var message = status.message
        var details = status.details.map { Base64.encode($0, padded: false) }
        if let d = details, d.utf8.count > maxDetailsBytes || entrySize("grpc-status-details-bin", d) > budget - used - 128 {
            details = nil
            message += " (error details of \(d.utf8.count) bytes were too large to send)"
        }
        let encodedLength = PercentEncoding.encode(message).utf8.count
        if let d = details, !message.isEmpty, encodedLength <= maxMessageBytes,
           encodedLength > budget - used - entrySize("grpc-status-details-bin", d) - entrySize("grpc-message", "") {
            // A message within its cap that does not fit beside the details (a peer with a small
            // header-list limit): keep the message whole rather than cut it under details that
            // hold it whole — grpcio-status refuses a status whose two messages differ. (A
            // message past its cap is cut anyway; then the details stay.)
            details = nil
            message += " (error details of \(d.utf8.count) bytes were too large to send)"
        }
        if !message.isEmpty {
            // The message may use what the details leave over, up to its own cap.
            let room = budget - used - entrySize("grpc-status-details-bin", details ?? "") - entrySize("grpc-message", "")
            let value = encodedMessage(message, limit: max(64, min(maxMessageBytes, room)))
            headers.append(("grpc-message", value))
            used += entrySize("grpc-message", value)
        }
        if let details {
            headers.append(("grpc-status-details-bin", details))
            used += entrySize("grpc-status-details-bin", details)
        }
        for (name, value) in status.metadata.wireHeaders() {
            let size = entrySize(name, value)
            guard used + size <= budget else { continue }
            headers.append((name, value))
            used += size
        }
        return headers
    }

    /// HPACK's size of one header entry (RFC 7541 §4.1).
    static func entrySize(_ name: String, _ value: String) -> Int { name.utf8.count + value.utf8.count + 32 }

    /// `message` percent-encoded, cut so that it takes at most `limit` bytes.
    static func encodedMessage(_ message: String, limit: Int) -> String {
        PercentEncoding.encode(fitting(message, encodedLimit: limit))
    }

    /// `message` itself if its percent-encoded form takes at most `limit` bytes; otherwise cut on a
    /// Unicode scalar boundary and ended with `truncationMarker` so that it does. Services cut
    /// their messages with this (and a smaller limit) so the transport never has to: clients
    /// such as grpcio-status check that `grpc-message` equals the details' message.
    public static func fitting(_ message: String, encodedLimit limit: Int) -> String {
        func encodedSize(_ s: Unicode.Scalar) -> Int {
            s.value >= 0x20 && s.value <= 0x7E && s != "%" ? 1 : 3 * String(s).utf8.count
        }
        var total = 0
        for s in message.unicodeScalars { total += encodedSize(s); if total > limit { break } }
        if total <= limit { return message }
        // Scalars, not Characters: one Character can hold any number of combining marks.
        let room = limit - truncationMarker.utf8.count
        var kept = String.UnicodeScalarView()
        var used = 0
        for s in message.unicodeScalars {
            let n = encodedSize(s)
            if used + n > room { break }
            kept.append(s)
            used += n
        }
        return String(kept) + truncationMarker
    }
}

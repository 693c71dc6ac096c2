import UbiquityProtos

/// Bounds on what an error may echo back (issue 15). Errors quote the request (an unknown entity
/// name, a bad attribute, a conflicting object's values), and an unbounded echo once produced
/// trailers no client accepts: grpcio refuses header lists past 8–16 KiB and reports
/// RESOURCE_EXHAUSTED instead of the real status, and nghttp2 does not send a header block past
/// 64 KiB at all. The transport has its own last-resort bound (UbiquityGRPC's StatusTrailers);
/// these keep every detail message well inside it, so the typed details always arrive.
enum ErrorBounds {
    /// The message (grpc-message and google.rpc.Status.message), in bytes once percent-encoded:
    /// under the transport's own cap (StatusTrailers.maxMessageBytes) with room for the note a
    /// truncated ConflictDetails adds, so the two copies of the message stay equal.
    static let maxMessageBytes = 800
    /// A BadRequest field path or an ErrorInfo metadata value, in characters.
    static let maxFieldCharacters = 200
    /// A BadRequest violation's description, in characters.
    static let maxDescriptionCharacters = 300
    /// BadRequest violations listed, and the bytes they may take together; past either, a last
    /// violation counts the rest.
    static let maxViolations = 20
    static let maxViolationBytes = 2048
    /// The serialized google.rpc.Status (before base64: ~5.4 KiB on the wire).
    static let maxDetailsBytes = 4 * 1024

    /// `s`, cut to `limit` characters with a marker saying how much was left out.
    static func clip(_ s: String, _ limit: Int) -> String {
        // Unicode scalars, not Characters: one Character can hold any number of combining marks.
        guard s.utf8.count > limit, s.unicodeScalars.count > limit else { return s }
        let kept = String(String.UnicodeScalarView(s.unicodeScalars.prefix(limit)))
        return "\(kept)... [\(s.utf8.count - kept.utf8.count) more bytes]"
    }

    /// The violations, each clipped, while they fit `maxViolations` and `maxViolationBytes`; then
    /// one more that counts those left out.
    static func violations(_ all: [(String, String, String)]) -> [(String, String, String)] {
        let clipped = all.prefix(maxViolations + 1).map { f, d, r in (clip(f, maxFieldCharacters), clip(d, maxDescriptionCharacters), r) }
        func size(_ v: (String, String, String)) -> Int { v.0.utf8.count + v.1.utf8.count + v.2.utf8.count }
        if all.count <= maxViolations && clipped.reduce(0, { $0 + size($1) }) <= maxViolationBytes { return clipped }
        // Not all fit: keep a slot for the count of the rest.
        var out: [(String, String, String)] = []
        var used = 0
        for v in clipped {
            guard out.count < maxViolations - 1, used + size(v) <= maxViolationBytes else { break }
            out.append(v)
            used += size(v)
        }
        if out.count < all.count {
            out.append(("", "\(all.count - out.count) more violations not listed", all[out.count].2))
        }
        return out
    }

    /// As many whole records as fit in `room` serialized bytes, then records without their
    /// values (the IDs, versions and constraint still say which object clashed and why) while
    /// those fit. `truncated` and `totalConflicts` say when something was left out; the client
    /// can ask for every record in the response body instead (`conflicts_in_response`).
    static func conflictDetails(_ records: [Ubiquity_V1_ConflictRecord], room: Int) -> Ubiquity_V1_ConflictDetails {
        var cd = Ubiquity_V1_ConflictDetails()
        cd.totalConflicts = Int32(records.count)
        var used = 8
        for record in records {
            var r = record
            var size = (try? r.serializedBytes() as [UInt8])?.count ?? Int.max
            if used + size + 4 > room {
                r.clientSnapshot = [:]
                r.clientChanges = [:]
                r.storeValues = [:]
                r.objectID = clip(r.objectID, maxFieldCharacters)
                r.temporaryID = clip(r.temporaryID, maxFieldCharacters)
                r.entity = clip(r.entity, maxFieldCharacters)
                r.constraint = r.constraint.prefix(8).map { clip($0, maxFieldCharacters) }
                cd.truncated = true
                size = (try? r.serializedBytes() as [UInt8])?.count ?? Int.max
                if used + size + 4 > room { break }
            }
            cd.conflicts.append(r)
            used += size + 4
        }
        if cd.conflicts.count < records.count { cd.truncated = true }
        return cd
    }
}

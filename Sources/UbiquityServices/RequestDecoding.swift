import UbiquityProtos

/// Hand-written decoders for the common form of hot requests, tried before SwiftProtobuf's
/// generic decoder. Each accepts only an unambiguous form and returns nil for anything else; the
/// caller then decodes with SwiftProtobuf, so an unusual request gets exactly the message — or the
/// error — it always got. Tests compare both decoders on varied and malformed inputs
/// (`RequestDecodingTests`).
enum RequestDecoding {
    /// `GetObjectsRequest` whose bytes hold only fields 1 (`store_id`) and 2 (`object_ids`) as
    /// length-delimited fields of valid UTF-8 (read with `WireReader`): what clients send for a
    /// read at the current generation. nil for anything else (field 3 `at`, unknown fields —
    /// SwiftProtobuf would keep them —, other wire types, truncation, invalid UTF-8).
    static func getObjects(_ bytes: [UInt8]) -> Ubiquity_V1_GetObjectsRequest? {
        bytes.withUnsafeBufferPointer { buf -> Ubiquity_V1_GetObjectsRequest? in
            var req = Ubiquity_V1_GetObjectsRequest()
            guard let base = buf.baseAddress else { return req }
            var r = WireReader(base, buf.count)
            do {
                while let (field, wire) = try r.tag() {
                    switch (field, wire) {
                    case (1, 2): req.storeID = try r.string()
                    case (2, 2): req.objectIds.append(try r.string())
                    default: return nil
                    }
                }
            } catch {
                return nil
            }
            return req
        }
    }
}

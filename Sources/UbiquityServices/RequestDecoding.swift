import UbiquityProtos

/// Hand-written decoders for the common form of hot requests, tried before SwiftProtobuf's
/// generic decoder. Each accepts only a narrow, unambiguous form and returns nil for anything
/// else; the caller then decodes with SwiftProtobuf, so an unusual request gets exactly the
/// message — or the error — it always got. Tests compare both decoders on varied and malformed
/// inputs (`RequestDecodingTests`).
enum RequestDecoding {
    /// `GetObjectsRequest` whose bytes hold only fields 1 (`store_id`) and 2 (`object_ids`), each
    /// with its one-byte tag (wire type 2), a length within the message and ASCII text: what
    /// clients send for a read at the current generation. nil for anything else (field 3 `at`,
    /// unknown fields, other wire types or tag forms, truncation, non-ASCII text).
    static func getObjects(_ bytes: [UInt8]) -> Ubiquity_V1_GetObjectsRequest? {
        var req = Ubiquity_V1_GetObjectsRequest()
        let ok = bytes.withUnsafeBufferPointer { buf -> Bool in
            let n = buf.count
            var i = 0
            while i < n {
                let tag = buf[i]
                i += 1
                guard tag == 0x0A || tag == 0x12 else { return false }
                var len = 0, shift = 0
                while true {
                    guard i < n, shift <= 21 else { return false }  // at most 4 length bytes
                    let b = buf[i]
                    i += 1
                    len |= Int(b & 0x7F) << shift
                    if b < 0x80 { break }
                    shift += 7
                }
                guard len <= n - i else { return false }
                let text = UnsafeBufferPointer(rebasing: buf[i..<(i + len)])
                for b in text where b >= 0x80 { return false }
                let s = String(decoding: text, as: UTF8.self)
                i += len
                if tag == 0x0A { req.storeID = s } else { req.objectIds.append(s) }
            }
            return true
        }
        return ok ? req : nil
    }
}

import UbiquityProtos

// The request decoders the hot methods name in their table entries (`RequestDecoder`): each
// reads its request's common form by hand (FetchDecoding, RequestDecoding, SaveDecoding) and
// hands anything else to SwiftProtobuf, so an unusual request gets exactly the message — or the
// error — it always got.

/// Stores.Fetch: the common form straight into the engine's types; any other decoded by
/// SwiftProtobuf and converted (`Convert.fetchRequest`, `Convert.readGeneration`).
enum FetchRequestDecoder: RequestDecoder {
    static func decode(_ bytes: [UInt8]) throws -> DecodedFetch {
        if let fast = FetchDecoding.decode(bytes) { return fast }
        let req = try Ubiquity_V1_FetchRequest(requestBytes: bytes)
        var d = DecodedFetch(storeID: req.storeID, request: try Convert.fetchRequest(req.fetch, field: "fetch"))
        (d.at, d.minimumGeneration) = try Convert.readGeneration(req.at, field: "at")
        return d
    }
}

/// Stores.GetObjects: store and IDs only (a read at the current generation) by hand.
enum GetObjectsRequestDecoder: RequestDecoder {
    static func decode(_ bytes: [UInt8]) throws -> Ubiquity_V1_GetObjectsRequest {
        try RequestDecoding.getObjects(bytes) ?? Ubiquity_V1_GetObjectsRequest(requestBytes: bytes)
    }
}

/// Stores.Save: inserts only, every value valid, by hand into the engine's types; any other
/// request decoded by SwiftProtobuf.
enum SaveRequestDecoder: RequestDecoder {
    enum Request: Sendable {
        /// The common form, with the bytes it came from: a target in another store is reported
        /// by the general conversion, which decodes them again.
        case common(DecodedSave, bytes: [UInt8])
        case general(Ubiquity_V1_SaveRequest)
    }

    static func decode(_ bytes: [UInt8]) throws -> Request {
        if let fast = SaveDecoding.decode(bytes) { return .common(fast, bytes: bytes) }
        return .general(try Ubiquity_V1_SaveRequest(requestBytes: bytes))
    }
}

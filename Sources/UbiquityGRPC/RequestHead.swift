/// What the header callbacks collected of one request's header block, and the checks a gRPC
/// request must pass before a handler sees it. Pure: no nghttp2, no loop; unit-tested alone
/// (`RequestHeadTests`). A connection reuses one per stream object (`reset` keeps the metadata
/// array's capacity, so a call allocates nothing for it).
struct RequestHead {
    var method = ""
    var path = ""
    var contentType = ""
    var encoding: String?
    var timeout: String?
    var metadata = Metadata()
    /// RFC 9113 header-list size so far (name + value + 32 per field).
    var headerBytes = 0
    var headerOverflow = false
    /// The first malformed `-bin` metadata value, as the message to answer with.
    var badMetadata: String?

    mutating func reset() {
        method = ""
        path = ""
        contentType = ""
        encoding = nil
        timeout = nil
        metadata.removeAllKeepingCapacity()
        headerBytes = 0
        headerOverflow = false
        badMetadata = nil
    }

    /// Adds one header field. Names and well-known values are compared as bytes; Strings are made
    /// only for what a call keeps, and repeated values (paths, user-agent) come from `strings`.
    /// With `keep` false (request trailers, which a call does not read) the field only counts
    /// toward the size limit. Returns false when the list is so far past `maxHeaderListBytes` that the peer is ignoring
    /// our SETTINGS: nghttp2 then fails the whole connection.
    // @inline(__always): called once per header field from nghttp2's header callback; as a
    // separate function (the split out of HTTP2Connection) it cost ~180 instructions per call
    // more than the same code inlined there (callgrind on W0, 7 fields per request).
    @inline(__always)
    mutating func add(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>,
                      maxHeaderListBytes: Int, keep: Bool, strings: inout HeaderStrings) -> Bool {
        headerBytes += name.count + value.count + 32
        if headerBytes > maxHeaderListBytes {
            headerOverflow = true
            return headerBytes <= 4 * maxHeaderListBytes + 65536
        }
        guard keep else { return true }
        if name.first == UInt8(ascii: ":") {
            if NGHTTP2Glue.equal(name, ":method") {
                method = NGHTTP2Glue.equal(value, "POST") ? "POST" : String(decoding: value, as: UTF8.self)
            } else if NGHTTP2Glue.equal(name, ":path") {
                path = strings.paths.string(value)
            }
            return true
        }
        if NGHTTP2Glue.equal(name, "content-type") {
            contentType = NGHTTP2Glue.equal(value, "application/grpc") ? "application/grpc" : String(decoding: value, as: UTF8.self)
        } else if NGHTTP2Glue.equal(name, "grpc-encoding") {
            encoding = String(decoding: value, as: UTF8.self)
        } else if NGHTTP2Glue.equal(name, "grpc-timeout") {
            timeout = String(decoding: value, as: UTF8.self)
        } else if NGHTTP2Glue.equal(name, "authorization") {
            // On every call of an authenticating client, and never in HPACK's dynamic table
            // (RFC 7541 §7.1.3), so its bytes come fresh each call: the key is a literal (no
            // lookup of the name, no "-bin" test) and the value is matched against the
            // connection's last one only (the same bytes each call), not scanned for among
            // the recent metadata strings. Measured gain (callgrind, W1): the header callback
            // 570 → 343 instructions per call (docs/benchmarks.md "What authentication costs").
            metadata.append(lowercased: "authorization", .string(strings.authorization.string(value)))
        } else if NGHTTP2Glue.equal(name, "te") || NGHTTP2Glue.equal(name, "grpc-accept-encoding")
                    || NGHTTP2Glue.equal(name, "connection") || NGHTTP2Glue.equal(name, "host") {
            // Not metadata.
        } else {
            let key = strings.metadata.string(name)
            // The "-bin" suffix checked on the bytes (String.hasSuffix is Unicode-aware and slow).
            if name.count >= 4 && NGHTTP2Glue.equal(UnsafeBufferPointer(rebasing: name[(name.count - 4)...]), "-bin") {
                if let bytes = Base64.decode(String(decoding: value, as: UTF8.self)) {
                    metadata.append(lowercased: key, .binary(bytes))
                } else {
                    badMetadata = "metadata \(key): value is not valid base64"
                }
            } else {
                metadata.append(lowercased: key, .string(strings.metadata.string(value)))
            }
        }
        return true
    }

    /// A request the server answers at once with Trailers-Only: the status, and the HTTP status
    /// the gRPC HTTP/2 protocol document asks for (431, 405, 415; 200 otherwise).
    struct Rejection: Error {
        var status: RPCError
        var httpStatus = 200
    }

    /// What `admit` decided. Not a `Result`: the generic enum was copied through value witnesses
    /// (callgrind on W0; this and keeping `HTTP2Connection.loop` saved 196 instructions per call).
    enum Verdict {
        /// An admitted request: its method and its `grpc-timeout` in nanoseconds, if it sent one.
        case admit(MethodDescriptor, timeoutNanos: Int64?)
        case reject(Rejection)
    }

    /// Checks the request in the order the answers are documented in docs/protocol.md (the
    /// first failing check decides the status): header-list size, `:method`, `content-type`,
    /// `grpc-encoding`, `-bin` metadata, `grpc-timeout`, the route (`route`: the router's answer
    /// for `path`); a connection that is draining refuses what passes them all (UNAVAILABLE, so
    /// the client retries elsewhere).
    ///
    /// `mutating` though it changes nothing: called on a stream's head (a class's stored
    /// property) a non-mutating method gets a copy of the whole head, six retains and releases
    /// (~250 instructions per call, callgrind on W0); a mutating one works in place.
    mutating func admit(maxHeaderListBytes: Int, draining: Bool,
                        route: Result<MethodDescriptor, RPCError>) -> Verdict {
        if headerOverflow {
            return .reject(Rejection(status: RPCError(.resourceExhausted,
                "request header list exceeds \(maxHeaderListBytes) bytes"), httpStatus: 431))
        }
        if method != "POST" {
            return .reject(Rejection(status: RPCError(.unimplemented,
                "gRPC requires POST, got \(method)"), httpStatus: 405))
        }
        let ct = contentType
        if !(ct == "application/grpc" || ct.hasPrefix("application/grpc+") || ct.hasPrefix("application/grpc;")) {
            return .reject(Rejection(status: RPCError(.unknown,
                "content-type \"\(ct)\" is not application/grpc"), httpStatus: 415))
        }
        if let enc = encoding, enc != "identity" {
            return .reject(Rejection(status: RPCError(.unimplemented,
                "grpc-encoding \"\(enc)\" is not supported; this server accepts identity")))
        }
        if let bad = badMetadata {
            return .reject(Rejection(status: RPCError(.invalidArgument, bad)))
        }
        var timeoutNanos: Int64?
        if let t = timeout {
            guard let nanos = GRPCTimeout.parse(t) else {
                return .reject(Rejection(status: RPCError(.invalidArgument, "malformed grpc-timeout \"\(t)\"")))
            }
            timeoutNanos = nanos
        }
        let descriptor: MethodDescriptor
        switch route {
        case .failure(let error):
            return .reject(Rejection(status: RPCError(error.code, error.message)))
        case .success(let d):
            descriptor = d
        }
        if draining { return .reject(Rejection(status: CancelReason.shutdown.status)) }
        return .admit(descriptor, timeoutNanos: timeoutNanos)
    }
}

/// Strings a connection's requests repeat (the same `:path`, `user-agent`, metadata keys on every
/// call), made once per connection. Loop thread only, like its connection.
struct HeaderStrings {
    var paths = RecentStrings(capacity: 16)
    var metadata = RecentStrings(capacity: 16)
    /// The last `authorization` value (a connection sends one session's on every call).
    var authorization = RecentStrings(capacity: 1)
}

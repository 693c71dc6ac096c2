import CNGHTTP2

/// The server's nghttp2 session: its callbacks (each a trampoline into the connection), options
/// and our SETTINGS. The callbacks run only inside `nghttp2_session_mem_recv` / `mem_send`.
enum NGHTTP2Session {
    /// A session for `conn` with our SETTINGS queued. The connection owns it
    /// (`nghttp2_session_del` in `close`); the user data is the connection, unretained.
    static func make(_ conn: HTTP2Connection, config: ServerConfiguration) -> OpaquePointer? {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            if UInt32(frame!.pointee.hd.type) == NGHTTP2_HEADERS.rawValue {
                c.beginHeaders(frame!.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, namelen, value, valuelen, _, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            let ok = c.header(frame!.pointee.hd.stream_id,
                              name: UnsafeBufferPointer(start: name, count: namelen),
                              value: UnsafeBufferPointer(start: value, count: valuelen))
            return ok ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            return c.frameReceived(frame!)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, len, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.dataChunk(streamID, UnsafeBufferPointer(start: data, count: len))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.frameSent(frame!)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, errorCode, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.frameNotSent(frame!, errorCode: errorCode)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.streamClosed(streamID, errorCode: errorCode)
            return 0
        }
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // We acknowledge DATA ourselves (nghttp2_session_consume) once the handler can take it.
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_outbound_ack(option, 1000)
        nghttp2_option_set_max_settings(option, 32)
        nghttp2_option_set_stream_reset_rate_limit(option, config.streamResetBurst, config.streamResetRate)
        nghttp2_option_set_max_continuations(option, 8)
        nghttp2_option_set_max_send_header_block_length(option, 64 * 1024)
        var session: OpaquePointer?
        let rc = nghttp2_session_server_new2(&session, callbacks, Unmanaged.passUnretained(conn).toOpaque(), option)
        precondition(rc == 0, "nghttp2_session_server_new2 failed: \(rc)")
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(config.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(config.maxHeaderListBytes)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(config.initialWindowSize)),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(config.connectionWindowSize))
        return session
    }

    /// nghttp2's message for an error code.
    static func describe(_ code: Int32) -> String {
        String(validatingCString: nghttp2_strerror(code)) ?? "nghttp2 error \(code)"
    }
}

/// Header blocks every call sends the same way, built once for the process (never freed).
enum StaticHeaders {
    static let response = HeaderBlock([(":status", "200"), ("content-type", "application/grpc"),
                                       ("grpc-accept-encoding", "identity")])
    static let okTrailers = HeaderBlock([("grpc-status", "0")])
}

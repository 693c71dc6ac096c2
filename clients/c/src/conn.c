#define _POSIX_C_SOURCE 200809L
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "tls.h"
#include "wire.h"

/* Larger than any response the server sends (its own limit is 4 MiB by default, docs/protocol.md). */
#define MAX_MESSAGE (64u * 1024u * 1024u)
/* Stream and connection receive windows: a fetch of a few MiB arrives without waiting on
 * WINDOW_UPDATE round trips. */
#define WINDOW (8 * 1024 * 1024)

/* The state of the one call in flight; reset per call. */
typedef struct {
    int32_t stream_id;
    const uint8_t *body;          /* framed request */
    size_t body_len, body_sent;
    ubq__deframer deframer;
    int http_status;
    int grpc_status;              /* -1 until the trailers (or a trailers-only response) say */
    char *grpc_message;
    char *details_b64;
    size_t details_b64_len;
    bool closed;
    uint32_t rst_error;           /* the stream's close error code (nghttp2), 0 when clean */
    bool protocol_error;          /* a compressed or oversized message */
    bool got_message;             /* a unary call's response arrived (it may be empty) */
} call_state;

struct ubq__conn {
    char *host, *port, *authority, *authorization;
    int fd;
    ubq__tls *tls;                /* NULL: plaintext h2c */
    ubq__tls_conn *tls_conn;      /* the socket's TLS session while connected over TLS */
    nghttp2_session *session;
    bool goaway;                  /* the server will take no new streams: reconnect for the next call */
    call_state call;
    ubq__buf out;                 /* bytes nghttp2 produced that the socket has not taken yet */
    char *lose_path;              /* ubq__conn_lose_next_response */
};

ubq__conn *ubq__conn_new(const char *target, const char *authorization, ubq__tls *tls) {
    ubq__conn *c = ubq__xcalloc(1, sizeof *c);
    c->tls = ubq__tls_ref(tls);
    const char *colon = strrchr(target, ':');
    if (colon) {
        size_t n = (size_t)(colon - target);
        c->host = ubq__xmalloc(n + 1);
        memcpy(c->host, target, n);
        c->host[n] = 0;
        c->port = ubq__xstrdup(colon + 1);
    } else {
        c->host = ubq__xstrdup(target);
        c->port = ubq__xstrdup("50051");
    }
    /* "[::1]" → "::1" for getaddrinfo; the authority keeps the brackets. */
    size_t hl = strlen(c->host);
    if (hl >= 2 && c->host[0] == '[' && c->host[hl - 1] == ']') {
        memmove(c->host, c->host + 1, hl - 2);
        c->host[hl - 2] = 0;
    }
    c->authority = ubq__xstrdup(target);
    c->authorization = authorization ? ubq__xstrdup(authorization) : NULL;
    c->fd = -1;
    return c;
}

void ubq__conn_set_authorization(ubq__conn *c, const char *authorization) {
    free(c->authorization);
    c->authorization = authorization ? ubq__xstrdup(authorization) : NULL;
}

static void disconnect(ubq__conn *c) {
    if (c->session) nghttp2_session_del(c->session);
    c->session = NULL;
    ubq__tls_close(c->tls_conn);
    c->tls_conn = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->goaway = false;
    c->out.len = 0;
}

void ubq__conn_free(ubq__conn *c) {
    if (!c) return;
    disconnect(c);
    ubq__buf_free(&c->out);
    ubq__tls_unref(c->tls);
    free(c->host); free(c->port); free(c->authority); free(c->authorization); free(c->lose_path);
    free(c);
}

void ubq__conn_lose_next_response(ubq__conn *c, const char *path) {
    free(c->lose_path);
    c->lose_path = path ? ubq__xstrdup(path) : NULL;
}

void ubq__call_result_free(ubq__call_result *r) {
    free(r->message); free(r->details); free(r->response);
    *r = (ubq__call_result){0};
}

/* ---- nghttp2 callbacks: they only record into call_state; the caller acts after mem_recv ---- */

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen, uint8_t flags, void *user) {
    (void)s; (void)flags;
    ubq__conn *c = user;
    call_state *st = &c->call;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != st->stream_id) return 0;
#define IS(lit) (namelen == sizeof(lit) - 1 && memcmp(name, lit, namelen) == 0)
    if (IS(":status")) {
        st->http_status = 0;
        for (size_t i = 0; i < valuelen && value[i] >= '0' && value[i] <= '9'; i++)
            st->http_status = st->http_status * 10 + (value[i] - '0');
    } else if (IS("grpc-status")) {
        int code = 0;
        for (size_t i = 0; i < valuelen && value[i] >= '0' && value[i] <= '9' && code < 100; i++)
            code = code * 10 + (value[i] - '0');
        st->grpc_status = code;
    } else if (IS("grpc-message")) {
        free(st->grpc_message);
        st->grpc_message = ubq__percent_decode((const char *)value, valuelen);
    } else if (IS("grpc-status-details-bin")) {
        free(st->details_b64);
        st->details_b64 = ubq__xmalloc(valuelen + 1);
        memcpy(st->details_b64, value, valuelen);
        st->details_b64_len = valuelen;
    }
#undef IS
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t stream_id, const uint8_t *data,
                         size_t len, void *user) {
    (void)s; (void)flags;
    ubq__conn *c = user;
    if (stream_id != c->call.stream_id) return 0;
    if (c->call.deframer.pending.len + len > MAX_MESSAGE + 5) {
        c->call.protocol_error = true;
        return 0;
    }
    ubq__buf_append(&c->call.deframer.pending, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code, void *user) {
    (void)s;
    ubq__conn *c = user;
    if (stream_id == c->call.stream_id) {
        c->call.closed = true;
        c->call.rst_error = error_code;
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *user) {
    (void)s;
    ubq__conn *c = user;
    if (frame->hd.type == NGHTTP2_GOAWAY) c->goaway = true;
    return 0;
}

static ssize_t read_body(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *user) {
    (void)s; (void)stream_id; (void)source;
    call_state *st = &((ubq__conn *)user)->call;
    size_t n = st->body_len - st->body_sent;
    if (n > length) n = length;
    memcpy(buf, st->body + st->body_sent, n);
    st->body_sent += n;
    if (st->body_sent == st->body_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- socket ---------------------------------------------------------------------------------- */

static void fail(ubq__call_result *r, int code, const char *fmt, const char *a, const char *b) {
    char buf[512];
    snprintf(buf, sizeof buf, fmt, a, b);
    r->code = code;
    free(r->message);
    r->message = ubq__xstrdup(buf);
}

static bool wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - ubq__now_ms();
        if (left <= 0) return false;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (rc > 0) return true;
        if (rc < 0 && errno != EINTR) return false;
    }
}

static bool connect_socket(ubq__conn *c, int64_t deadline, ubq__call_result *r) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo(c->host, c->port, &hints, &res);
    if (gai != 0) {
        fail(r, 14, "cannot resolve %s: %s", c->authority, gai_strerror(gai));
        return false;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) { err = errno; continue; }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline))) {
            socklen_t len = sizeof err;
            err = 0;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == 0) {
                int one = 1;  /* small unary requests must not wait for Nagle */
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                c->fd = fd;
                break;
            }
        } else {
            err = errno == EINPROGRESS ? ETIMEDOUT : errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (c->fd < 0) {
        fail(r, 14, "cannot connect to %s: %s", c->authority, strerror(err ? err : ECONNREFUSED));
        return false;
    }
    if (c->tls) {
        char why[400];
        c->tls_conn = ubq__tls_connect(c->tls, c->fd, c->host, deadline, why, sizeof why);
        if (!c->tls_conn) {
            disconnect(c);
            fail(r, 14, "TLS to %s: %s", c->authority, why);
            return false;
        }
    }
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    int rc = nghttp2_session_client_new(&c->session, cb, c);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) { disconnect(c); fail(r, 13, "nghttp2: %s%s", nghttp2_strerror(rc), ""); return false; }
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW},
    };
    nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, WINDOW);
    return true;
}

/* The socket's bytes, through TLS when the connection has it; recv/send semantics (errno EAGAIN). */
static ssize_t io_recv(ubq__conn *c, uint8_t *buf, size_t len) {
    if (c->tls_conn) return ubq__tls_read(c->tls_conn, buf, len);
    return recv(c->fd, buf, len, 0);
}

static ssize_t io_send(ubq__conn *c, const uint8_t *buf, size_t len) {
    if (c->tls_conn) return ubq__tls_write(c->tls_conn, buf, len);
    return send(c->fd, buf, len, MSG_NOSIGNAL);
}

/* Feeds nghttp2 everything the connection has now. False when it is closed or broken (what came
 * before the close has been fed). Reading until EAGAIN, not once per poll: TLS may hold decrypted
 * bytes the socket no longer signals. */
static bool read_available(ubq__conn *c) {
    for (;;) {
        uint8_t buf[16384];
        ssize_t n = io_recv(c, buf, sizeof buf);
        if (n > 0 && nghttp2_session_mem_recv(c->session, buf, (size_t)n) >= 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
        return false;
    }
}

/* Moves what nghttp2 wants to send into c->out and as much of c->out into the socket as it takes.
 * False when the connection is broken. */
static bool flush(ubq__conn *c) {
    for (;;) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->session, &data);
        if (n < 0) return false;
        if (n == 0) break;
        ubq__buf_append(&c->out, data, (size_t)n);
    }
    while (c->out.len > 0) {
        ssize_t n = io_send(c, c->out.data, c->out.len);
        if (n > 0) { ubq__buf_consume(&c->out, (size_t)n); continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return false;
    }
    return true;
}

/* ---- a call ------------------------------------------------------------------------------------ */

static void reset_call(call_state *st) {
    ubq__buf_free(&st->deframer.pending);
    free(st->grpc_message);
    free(st->details_b64);
    *st = (call_state){.grpc_status = -1, .deframer = {.max_message = MAX_MESSAGE}};
}

/* Hands complete messages to the caller; false when the call must end (stopped or malformed). */
static bool deliver(ubq__conn *c, ubq__on_message on_message, void *user, ubq__call_result *r) {
    const uint8_t *msg;
    size_t len;
    for (;;) {
        ubq__deframe_status ds = ubq__deframer_next(&c->call.deframer, &msg, &len);
        if (ds == UBQ_DEFRAME_NEED_MORE) return true;
        if (ds != UBQ_DEFRAME_MESSAGE) {
            fail(r, 13, "%s", ds == UBQ_DEFRAME_COMPRESSED ? "the server sent a compressed message (not offered)"
                                                            : "a response message exceeds 64 MiB", "");
            return false;
        }
        if (on_message) {
            if (on_message(user, msg, len)) { r->stopped = true; ubq__deframer_pop(&c->call.deframer); return false; }
        } else if (c->call.got_message) {
            fail(r, 13, "%s", "a unary call received more than one response message", "");
            return false;
        } else {
            c->call.got_message = true;
            if (len) {
                r->response = ubq__xmalloc(len);
                memcpy(r->response, msg, len);
                r->response_len = len;
            }
        }
        ubq__deframer_pop(&c->call.deframer);
    }
}

static void finish_status(ubq__conn *c, bool unary, ubq__call_result *r) {
    call_state *st = &c->call;
    if (st->grpc_status >= 0) {
        r->code = st->grpc_status;
        free(r->message);
        r->message = st->grpc_message ? st->grpc_message : ubq__xstrdup("");
        st->grpc_message = NULL;
        if (st->details_b64) r->details = ubq__base64_decode(st->details_b64, st->details_b64_len, &r->details_len);
    } else if (st->http_status != 0 && st->http_status != 200) {
        char code[16];
        snprintf(code, sizeof code, "%d", st->http_status);
        fail(r, ubq__code_for_http_status(st->http_status), "HTTP status %s without grpc-status%s", code, "");
    } else if (st->rst_error == NGHTTP2_REFUSED_STREAM) {
        fail(r, 14, "%s", "the server refused the stream (it is going away)", "");
    } else if (st->rst_error == NGHTTP2_CANCEL) {
        fail(r, 1, "%s", "the server cancelled the stream", "");
    } else {
        fail(r, st->rst_error ? 13 : 14, "%s", st->rst_error ? "the stream was reset" : "the stream ended without a status", "");
    }
    if (unary && r->code == 0 && !st->got_message) fail(r, 13, "%s", "an OK unary response without a message", "");
}

/* Reads what arrived while no call was running: a GOAWAY (the server's idle timeout, a drain) or
 * the close after it. Without this the next call would go out on a connection the server has
 * already given up and fail UNAVAILABLE although nothing is wrong. */
static void drain_idle(ubq__conn *c) {
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) break;
        if (read_available(c)) continue;
        disconnect(c);
        return;
    }
    if (c->goaway || (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)))
        disconnect(c);
}

/* One attempt; true when the server refused the stream unprocessed (REFUSED_STREAM, or above a
 * GOAWAY's last stream ID), which makes a second attempt safe even for a save. */
static bool call_once(ubq__conn *c, const char *path, const uint8_t *request, size_t request_len,
                      int64_t deadline, ubq__on_message on_message, void *user, ubq__call_result *r) {
    *r = (ubq__call_result){.code = 2, .message = ubq__xstrdup("")};
    if (c->session) drain_idle(c);
    if (!c->session && !connect_socket(c, deadline, r)) return false;

    reset_call(&c->call);
    size_t framed_len;
    uint8_t *framed = ubq__frame(request, request_len, &framed_len);
    c->call.body = framed;
    c->call.body_len = framed_len;
    char timeout[16];  /* what is left of the caller's deadline (a second attempt has less) */
    ubq__grpc_timeout(deadline - ubq__now_ms(), timeout);
#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv nva[] = {
        NV(":method", "POST"), NV(":scheme", c->tls_conn ? "https" : "http"), NV(":path", path), NV(":authority", c->authority),
        NV("te", "trailers"), NV("content-type", "application/grpc"), NV("user-agent", "ubiquity-c/0.1"),
        NV("grpc-timeout", timeout), NV("authorization", c->authorization ? c->authorization : ""),
    };
#undef NV
    size_t nvlen = sizeof nva / sizeof nva[0] - (c->authorization ? 0 : 1);
    nghttp2_data_provider provider = {.read_callback = read_body};
    int32_t id = nghttp2_submit_request(c->session, NULL, nva, nvlen, &provider, NULL);
    if (id < 0) {
        free(framed);
        disconnect(c);
        fail(r, 14, "cannot start a stream: %s%s", nghttp2_strerror(id), "");
        return false;
    }
    c->call.stream_id = id;

    bool broken = false, ended_early = false;
    while (!c->call.closed) {
        if (!flush(c)) { broken = true; break; }
        int64_t left = deadline - ubq__now_ms();
        if (left <= 0) {
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
            flush(c);
            fail(r, 4, "deadline of %s exceeded (%s)", timeout, path);
            ended_early = true;
            break;
        }
        bool want_out = c->out.len || ubq__tls_wants_write(c->tls_conn);
        struct pollfd p = {.fd = c->fd, .events = POLLIN | (want_out ? POLLOUT : 0)};
        int rc = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (rc < 0 && errno != EINTR) { broken = true; break; }
        if (rc <= 0) continue;
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) || (c->tls_conn && (p.revents & POLLOUT))) {
            if (!read_available(c)) {
                /* A close right after the call's last frames ends the connection, not the call. */
                if (!c->call.closed) { broken = true; break; }
                c->goaway = true;
            }
        }
        if (c->call.protocol_error) {
            fail(r, 13, "%s", "a response message exceeds 64 MiB", "");
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
            flush(c);
            ended_early = true;
            break;
        }
        if (!deliver(c, on_message, user, r)) {
            if (!c->call.closed) {
                nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
                flush(c);
            }
            if (r->stopped) fail(r, 1, "%s", "stopped by the caller", "");
            ended_early = true;
            break;
        }
    }
    free(framed);
    c->call.body = NULL;
    bool refused = !broken && !ended_early && c->call.closed && c->call.rst_error == NGHTTP2_REFUSED_STREAM &&
                   c->call.http_status == 0 && c->call.grpc_status < 0;
    if (broken) {
        disconnect(c);
        fail(r, 14, "connection to %s lost (%s)", c->authority, path);
    } else if (!ended_early) {
        finish_status(c, on_message == NULL, r);
        flush(c);
        if (c->lose_path && strcmp(c->lose_path, path) == 0) {
            free(c->lose_path);
            c->lose_path = NULL;
            free(r->response); free(r->details);
            r->response = NULL; r->response_len = 0; r->details = NULL; r->details_len = 0;
            fail(r, 4, "the response of %s was lost (test hook)%s", path, "");
        }
    }
    reset_call(&c->call);
    return refused;
}

void ubq__conn_call(ubq__conn *c, const char *path, const uint8_t *request, size_t request_len,
                    int64_t timeout_ms, ubq__on_message on_message, void *user, ubq__call_result *r) {
    int64_t deadline = ubq__now_ms() + timeout_ms;
    if (!call_once(c, path, request, request_len, deadline, on_message, user, r)) return;
    ubq__call_result_free(r);
    if (c->session) disconnect(c);  /* the server is going away: the retry takes a new connection */
    call_once(c, path, request, request_len, deadline, on_message, user, r);
}

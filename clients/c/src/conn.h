/* One HTTP/2 connection carrying gRPC calls, one call at a time: an nghttp2 client session on a
 * non-blocking socket driven by poll() until the call's stream closes or its deadline passes.
 * It knows gRPC framing and status trailers, nothing of Ubiquity's messages. */
#ifndef UBQ_CONN_H
#define UBQ_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ubq__conn ubq__conn;
typedef struct ubq__tls ubq__tls;

/* target "host:port"; authorization: a full header value ("Bearer …") or NULL. Copies both.
 * tls: NULL for plaintext h2c, else the connection takes its own reference. Connects lazily on
 * the first call. */
ubq__conn *ubq__conn_new(const char *target, const char *authorization, ubq__tls *tls);
void ubq__conn_free(ubq__conn *c);
void ubq__conn_set_authorization(ubq__conn *c, const char *authorization);

/* A response message of a streaming call; return true to stop the call (the stream is cancelled). */
typedef bool (*ubq__on_message)(void *user, const uint8_t *message, size_t len);

typedef struct {
    int code;                  /* gRPC status */
    char *message;             /* malloc'd, never NULL */
    uint8_t *details;          /* grpc-status-details-bin, decoded; malloc'd or NULL */
    size_t details_len;
    uint8_t *response;         /* unary: the response message, malloc'd (NULL for an empty one) */
    size_t response_len;
    bool stopped;              /* the on_message callback stopped the call */
} ubq__call_result;
void ubq__call_result_free(ubq__call_result *r);

/* Runs one call: `path` "/pkg.Service/Method", `request` the serialized request message.
 * on_message NULL: unary (exactly one response message expected). Always fills *result. */
void ubq__conn_call(ubq__conn *c, const char *path, const uint8_t *request, size_t request_len,
                    int64_t timeout_ms, ubq__on_message on_message, void *user, ubq__call_result *result);

/* Test hook (tests only, not in ubiquity.h): the next call on `path` runs to completion on the
 * server, then reports DEADLINE_EXCEEDED as if its answer was lost on the way. */
void ubq__conn_lose_next_response(ubq__conn *c, const char *path);

#endif

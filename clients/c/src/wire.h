/* gRPC-over-HTTP/2 wire details that need no socket: message framing, grpc-timeout, the encodings
 * of grpc-message (percent) and -bin trailers (base64). Unit-tested in tests/test_wire.c. */
#ifndef UBQ_WIRE_H
#define UBQ_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer. */
typedef struct { uint8_t *data; size_t len, cap; } ubq__buf;
void ubq__buf_append(ubq__buf *b, const void *data, size_t len);
void ubq__buf_consume(ubq__buf *b, size_t len);  /* drops the first len bytes */
void ubq__buf_free(ubq__buf *b);

/* A gRPC message with its 5-byte prefix (uncompressed flag, big-endian length); malloc'd. */
uint8_t *ubq__frame(const uint8_t *message, size_t len, size_t *framed_len);

/* Splits the bytes of a response body into messages. */
typedef struct { ubq__buf pending; size_t max_message; } ubq__deframer;
typedef enum { UBQ_DEFRAME_NEED_MORE, UBQ_DEFRAME_MESSAGE, UBQ_DEFRAME_COMPRESSED, UBQ_DEFRAME_TOO_LARGE } ubq__deframe_status;
/* When a complete message is buffered: its bytes in *message / *len (valid until the next push or
 * pop) — call ubq__deframer_pop after using them. */
ubq__deframe_status ubq__deframer_next(ubq__deframer *d, const uint8_t **message, size_t *len);
void ubq__deframer_pop(ubq__deframer *d);

/* grpc-timeout for a deadline `ms` from now: at most 8 digits and a unit ("m", "S", "M", "H"). */
void ubq__grpc_timeout(int64_t ms, char out[16]);
/* Base64 (standard alphabet, padding optional, as gRPC sends -bin values); malloc'd, NULL if malformed. */
uint8_t *ubq__base64_decode(const char *in, size_t len, size_t *out_len);
/* grpc-message percent-decoding; malloc'd, NUL-terminated. A malformed escape is kept as is. */
char *ubq__percent_decode(const char *in, size_t len);
/* The gRPC code an HTTP status becomes when a response has no grpc-status (gRPC's HTTP mapping). */
int ubq__code_for_http_status(int http_status);

/* Milliseconds on the monotonic clock: deadlines and backoff. */
int64_t ubq__now_ms(void);

/* malloc/strdup that abort on out-of-memory: a client library cannot recover a half-built request. */
void *ubq__xmalloc(size_t n);
void *ubq__xcalloc(size_t n, size_t size);
void *ubq__xrealloc(void *p, size_t n);
char *ubq__xstrdup(const char *s);

#endif

/* TLS under the HTTP/2 session (OpenSSL): the client's settings, and one TLS session per socket.
 * conn.c reads and writes through it instead of the socket when the client was given
 * ubq_client_options.tls; nothing else in the library knows OpenSSL. */
#ifndef UBQ_TLS_H
#define UBQ_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ubiquity.h"

/* The settings every connection of a client (and its feeds) shares: an SSL_CTX with the trusted
 * CAs, the client certificate, TLS 1.2+ and ALPN "h2", and the name to verify. Reference-counted:
 * ubq__tls_new gives one reference, each connection takes its own. */
typedef struct ubq__tls ubq__tls;
/* NULL with a message in error[] when a file cannot be loaded or cert/key do not match. */
ubq__tls *ubq__tls_new(const ubq_tls_options *options, char *error, size_t error_len);
ubq__tls *ubq__tls_ref(ubq__tls *tls);
void ubq__tls_unref(ubq__tls *tls);

/* One TLS session over a connected non-blocking socket (the socket stays the caller's). */
typedef struct ubq__tls_conn ubq__tls_conn;
/* Handshakes with `host` (verified against the certificate unless settings name another) until
 * deadline_ms (ubq__now_ms clock); NULL with a message in error[] on failure, including a server
 * that did not agree to "h2". */
ubq__tls_conn *ubq__tls_connect(ubq__tls *tls, int fd, const char *host, int64_t deadline_ms, char *error,
                                size_t error_len);
/* Like recv/send on a non-blocking socket: > 0 bytes, 0 at the peer's close (read), -1 with errno
 * (EAGAIN when the socket must become ready first; see ubq__tls_wants_write). */
ssize_t ubq__tls_read(ubq__tls_conn *s, void *buf, size_t len);
ssize_t ubq__tls_write(ubq__tls_conn *s, const void *buf, size_t len);
/* Whether the last EAGAIN waits for the socket to take bytes rather than deliver them (TLS may
 * need to write while reading and the reverse). */
bool ubq__tls_wants_write(const ubq__tls_conn *s);
/* Sends close_notify if the socket takes it at once, then frees the session. NULL is fine. */
void ubq__tls_close(ubq__tls_conn *s);

#endif

#define _POSIX_C_SOURCE 200809L
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "wire.h"

struct ubq__tls {
    SSL_CTX *ctx;
    BIO_METHOD *socket_bio;  /* see socket_bio_method */
    char *server_name;   /* NULL: the target's host */
    int refs;            /* one thread per client and feed, but a feed may run on another thread */
};

struct ubq__tls_conn {
    SSL *ssl;
    bool wants_write;
};

/* The newest OpenSSL error as text, after `what`; clears the queue so a later call starts clean. */
static void describe(char *error, size_t error_len, const char *what, const char *detail) {
    unsigned long e = ERR_get_error();
    char reason[256] = "";
    if (e) ERR_error_string_n(e, reason, sizeof reason);
    snprintf(error, error_len, "%s%s%s%s%s", what, detail ? " " : "", detail ? detail : "", e ? ": " : "", reason);
    ERR_clear_error();
}

/* ---- a socket BIO that cannot raise SIGPIPE ---------------------------------------------------------
 * OpenSSL's own socket BIO writes with write(2): a server that closed the connection would kill
 * the calling program with SIGPIPE, which a library must not do. This one sends with MSG_NOSIGNAL,
 * as conn.c does for plaintext. The BIO's data is the fd. */

static int bio_write(BIO *b, const char *buf, int len) {
    BIO_clear_retry_flags(b);
    ssize_t n;
    do n = send((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len) {
    BIO_clear_retry_flags(b);
    ssize_t n;
    do n = recv((int)(intptr_t)BIO_get_data(b), buf, (size_t)len, 0); while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr) {
    (void)b; (void)num; (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;   /* nothing is buffered here */
}

static BIO_METHOD *socket_bio_method(void) {
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "ubq-socket");
    if (m && (BIO_meth_set_write(m, bio_write) != 1 || BIO_meth_set_read(m, bio_read) != 1 ||
              BIO_meth_set_ctrl(m, bio_ctrl) != 1)) {
        BIO_meth_free(m);
        m = NULL;
    }
    return m;
}

ubq__tls *ubq__tls_new(const ubq_tls_options *o, char *error, size_t error_len) {
    if ((o->cert_file == NULL) != (o->key_file == NULL)) {
        snprintf(error, error_len, "a client certificate needs both cert_file and key_file");
        return NULL;
    }
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) { describe(error, error_len, "SSL_CTX_new", NULL); return NULL; }
    /* As the server (docs/tls.md): TLS 1.2 and 1.3 only. */
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* conn.c hands SSL_write what is left of its output buffer, which moves as it grows. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    static const unsigned char alpn[] = {2, 'h', '2'};
    bool ok = SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn) == 0;  /* 0 is success here */
    if (!ok) describe(error, error_len, "cannot offer ALPN h2", NULL);
    if (ok && o->ca_file) {
        ok = SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) == 1;
        if (!ok) describe(error, error_len, "cannot load the CA file", o->ca_file);
    } else if (ok) {
        ok = SSL_CTX_set_default_verify_paths(ctx) == 1;
        if (!ok) describe(error, error_len, "cannot load the system's trusted CAs", NULL);
    }
    if (ok && o->cert_file) {
        ok = SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) == 1;
        if (!ok) describe(error, error_len, "cannot load the client certificate", o->cert_file);
        if (ok) {
            ok = SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) == 1;
            if (!ok) describe(error, error_len, "cannot load the client key (or it is not the certificate's)", o->key_file);
        }
        if (ok) {
            ok = SSL_CTX_check_private_key(ctx) == 1;
            if (!ok) describe(error, error_len, "the client key does not match its certificate", o->key_file);
        }
    }
    BIO_METHOD *bio = ok ? socket_bio_method() : NULL;
    if (ok && !bio) { describe(error, error_len, "cannot make a socket BIO", NULL); ok = false; }
    if (!ok) { SSL_CTX_free(ctx); return NULL; }
    ubq__tls *t = ubq__xcalloc(1, sizeof *t);
    t->ctx = ctx;
    t->socket_bio = bio;
    t->server_name = o->server_name ? ubq__xstrdup(o->server_name) : NULL;
    t->refs = 1;
    return t;
}

ubq__tls *ubq__tls_ref(ubq__tls *t) {
    if (t) __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void ubq__tls_unref(ubq__tls *t) {
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    SSL_CTX_free(t->ctx);
    BIO_meth_free(t->socket_bio);
    free(t->server_name);
    free(t);
}

static bool is_ip_address(const char *host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

ubq__tls_conn *ubq__tls_connect(ubq__tls *t, int fd, const char *host, int64_t deadline_ms, char *error,
                                size_t error_len) {
    ERR_clear_error();
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl) { describe(error, error_len, "SSL_new", NULL); return NULL; }
    const char *name = t->server_name ? t->server_name : host;
    BIO *bio = BIO_new(t->socket_bio);
    if (!bio) { describe(error, error_len, "BIO_new", NULL); SSL_free(ssl); return NULL; }
    BIO_set_data(bio, (void *)(intptr_t)fd);
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl, bio, bio);   /* the SSL owns the BIO now */
    bool ok = true;
    if (ok && is_ip_address(name)) {
        /* An address is checked against the certificate's IP SANs, and is never sent as SNI. */
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    } else if (ok) {
        ok = SSL_set1_host(ssl, name) == 1 && SSL_set_tlsext_host_name(ssl, name) == 1;
    }
    if (!ok) {
        describe(error, error_len, "cannot set the name to verify:", name);
        SSL_free(ssl);
        return NULL;
    }
    for (;;) {
        int rc = SSL_connect(ssl);
        if (rc == 1) break;
        int e = SSL_get_error(ssl, rc);
        int64_t left = deadline_ms - ubq__now_ms();
        if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) && left > 0) {
            struct pollfd p = {.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
            if (poll(&p, 1, left > 1000000 ? 1000000 : (int)left) >= 0 || errno == EINTR) continue;
        }
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            snprintf(error, error_len, "the TLS handshake did not finish before the deadline");
        } else if (SSL_get_verify_result(ssl) != X509_V_OK) {
            snprintf(error, error_len, "the server's certificate is not trusted: %s",
                     X509_verify_cert_error_string(SSL_get_verify_result(ssl)));
            ERR_clear_error();
        } else {
            describe(error, error_len, "the TLS handshake failed", NULL);
        }
        SSL_free(ssl);
        return NULL;
    }
    const unsigned char *proto = NULL;
    unsigned int proto_len = 0;
    SSL_get0_alpn_selected(ssl, &proto, &proto_len);
    if (proto_len != 2 || memcmp(proto, "h2", 2) != 0) {
        snprintf(error, error_len, "the server did not agree to HTTP/2 (ALPN h2) over TLS");
        SSL_free(ssl);
        return NULL;
    }
    ubq__tls_conn *s = ubq__xcalloc(1, sizeof *s);
    s->ssl = ssl;
    return s;
}

/* An SSL_read/SSL_write result as recv/send would give it. */
static ssize_t as_socket_result(ubq__tls_conn *s, int rc) {
    if (rc > 0) { s->wants_write = false; return rc; }
    int e = SSL_get_error(s->ssl, rc);
    ERR_clear_error();
    switch (e) {
    case SSL_ERROR_WANT_READ: s->wants_write = false; errno = EAGAIN; return -1;
    case SSL_ERROR_WANT_WRITE: s->wants_write = true; errno = EAGAIN; return -1;
    case SSL_ERROR_ZERO_RETURN: return 0;   /* close_notify */
    default: errno = ECONNRESET; return -1;
    }
}

ssize_t ubq__tls_read(ubq__tls_conn *s, void *buf, size_t len) {
    return as_socket_result(s, SSL_read(s->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len));
}

ssize_t ubq__tls_write(ubq__tls_conn *s, const void *buf, size_t len) {
    return as_socket_result(s, SSL_write(s->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len));
}

bool ubq__tls_wants_write(const ubq__tls_conn *s) {
    return s && s->wants_write;
}

void ubq__tls_close(ubq__tls_conn *s) {
    if (!s) return;
    SSL_shutdown(s->ssl);   /* non-blocking: sent if the socket takes it, never waited for */
    ERR_clear_error();
    SSL_free(s->ssl);
    free(s);
}

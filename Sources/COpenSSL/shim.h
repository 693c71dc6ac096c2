#ifndef UBIQUITY_COPENSSL_SHIM_H
#define UBIQUITY_COPENSSL_SHIM_H
// OpenSSL 3 (Debian libssl-dev) for the transport's TLS (Sources/UbiquityGRPC/TLS*.swift).
// Swift cannot call OpenSSL's function-like macros (SSL_CTX_set_min_proto_version, BIO_reset,
// BIO_get_mem_data, ...) or hand a Swift closure to a C callback that must not capture, so the
// few the transport needs are wrapped here.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

static inline int ubq_ssl_ctx_set_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

/// No TLS-level renegotiation (a client asking gets the no_renegotiation alert: RFC 7540 §9.2.1
/// forbids it under HTTP/2, and it is a CPU-exhaustion lever), no compression (CRIME).
static inline void ubq_ssl_ctx_set_server_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
}

/// Client side, tests: cap at TLS 1.2 (where renegotiation exists, to check it is refused).
static inline int ubq_ssl_ctx_set_max_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
}

static inline int ubq_ssl_ctx_set_groups(SSL_CTX *ctx, const char *groups) {
    return (int)SSL_CTX_set1_groups_list(ctx, groups);
}

static inline long ubq_bio_pending(BIO *bio) { return (long)BIO_ctrl_pending(bio); }

/// The bytes a memory BIO holds (without consuming them).
static inline long ubq_bio_mem_data(BIO *bio, const unsigned char **data) {
    char *p = NULL;
    long n = BIO_get_mem_data(bio, &p);
    *data = (const unsigned char *)p;
    return n;
}

/// Empties a read-write memory BIO (its buffer is kept for the next bytes).
static inline int ubq_bio_reset(BIO *bio) { return (int)BIO_reset(bio); }

/// A memory BIO that reports "retry" instead of EOF when empty, so SSL_read / SSL_do_handshake
/// say SSL_ERROR_WANT_READ while the peer's next record has not arrived.
static inline BIO *ubq_bio_new_mem(void) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio) BIO_set_mem_eof_return(bio, -1);
    return bio;
}

// ALPN: the only protocol served is HTTP/2 ("h2"). A client that offers ALPN without h2 gets the
// fatal no_application_protocol alert (RFC 7301 §3.2); one that offers no ALPN at all is refused
// in the ClientHello callback below, so the handshake never completes without h2.
static const unsigned char ubq_alpn_h2[] = {2, 'h', '2'};

static inline int ubq_alpn_select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                     const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl; (void)arg;
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, ubq_alpn_h2, sizeof ubq_alpn_h2, in, inlen)
            != OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

static inline int ubq_client_hello_requires_alpn(SSL *ssl, int *alert, void *arg) {
    (void)arg;
    const unsigned char *ext = NULL;
    size_t len = 0;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext, &len)) {
        *alert = SSL_AD_NO_APPLICATION_PROTOCOL;
        return SSL_CLIENT_HELLO_ERROR;
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

/// Server side: select h2 by ALPN and refuse clients that offer no ALPN.
static inline void ubq_ssl_ctx_require_alpn_h2(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, ubq_alpn_select_h2, NULL);
    SSL_CTX_set_client_hello_cb(ctx, ubq_client_hello_requires_alpn, NULL);
}

/// Client side (tests, clients): offer `protos` (ALPN wire format). Returns 0 on success.
static inline int ubq_ssl_ctx_offer_alpn(SSL_CTX *ctx, const unsigned char *protos, unsigned int len) {
    return SSL_CTX_set_alpn_protos(ctx, protos, len);
}

/// Client side: the name the server's certificate must carry (an IP literal is matched against
/// its IP addresses, anything else against its DNS names and sent as SNI). Returns 1 on success.
static inline int ubq_ssl_set_peer_name(SSL *ssl, const char *host) {
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1) return 1;
    ERR_clear_error();
    if (SSL_set_tlsext_host_name(ssl, host) != 1) return 0;
    return SSL_set1_host(ssl, host);
}

/// Whether ALPN selected h2 on this connection.
static inline int ubq_ssl_alpn_is_h2(const SSL *ssl) {
    const unsigned char *p = NULL;
    unsigned int n = 0;
    SSL_get0_alpn_selected(ssl, &p, &n);
    return n == 2 && memcmp(p, "h2", 2) == 0;
}

/// The oldest error in this thread's OpenSSL error queue, as text (empties the queue).
static inline void ubq_ssl_error_string(char *buf, size_t len) {
    unsigned long e = ERR_get_error();
    if (e == 0) { snprintf(buf, len, "no OpenSSL error queued"); }
    else { ERR_error_string_n(e, buf, len); }
    ERR_clear_error();
}

#endif

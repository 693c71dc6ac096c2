#define _POSIX_C_SOURCE 200809L
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t ubq__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void *ubq__xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fputs("ubiquity: out of memory\n", stderr); abort(); }
    return p;
}
void *ubq__xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) { fputs("ubiquity: out of memory\n", stderr); abort(); }
    return p;
}
void *ubq__xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) { fputs("ubiquity: out of memory\n", stderr); abort(); }
    return q;
}
char *ubq__xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(ubq__xmalloc(n), s, n);
}

void ubq__buf_append(ubq__buf *b, const void *data, size_t len) {
    if (len == 0) return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) cap *= 2;
        b->data = ubq__xrealloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
}
void ubq__buf_consume(ubq__buf *b, size_t len) {
    if (len >= b->len) { b->len = 0; return; }
    memmove(b->data, b->data + len, b->len - len);
    b->len -= len;
}
void ubq__buf_free(ubq__buf *b) { free(b->data); *b = (ubq__buf){0}; }

uint8_t *ubq__frame(const uint8_t *message, size_t len, size_t *framed_len) {
    uint8_t *out = ubq__xmalloc(len + 5);
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24); out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);  out[4] = (uint8_t)len;
    if (len) memcpy(out + 5, message, len);
    *framed_len = len + 5;
    return out;
}

static size_t prefix_length(const uint8_t *p) {
    return ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | (size_t)p[4];
}

ubq__deframe_status ubq__deframer_next(ubq__deframer *d, const uint8_t **message, size_t *len) {
    if (d->pending.len < 5) return UBQ_DEFRAME_NEED_MORE;
    const uint8_t *p = d->pending.data;
    if (p[0] != 0) return UBQ_DEFRAME_COMPRESSED;  /* we never offer grpc-accept-encoding */
    size_t n = prefix_length(p);
    if (d->max_message && n > d->max_message) return UBQ_DEFRAME_TOO_LARGE;
    if (d->pending.len < 5 + n) return UBQ_DEFRAME_NEED_MORE;
    *message = p + 5;
    *len = n;
    return UBQ_DEFRAME_MESSAGE;
}
void ubq__deframer_pop(ubq__deframer *d) {
    if (d->pending.len >= 5) ubq__buf_consume(&d->pending, 5 + prefix_length(d->pending.data));
}

void ubq__grpc_timeout(int64_t ms, char out[16]) {
    if (ms < 0) ms = 0;
    /* The largest unit that keeps 8 digits; rounding up so the server never sees a shorter deadline
     * than the caller asked for by more than one unit. */
    static const struct { const char *unit; int64_t ms; } units[] = {
        {"m", 1}, {"S", 1000}, {"M", 60000}, {"H", 3600000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        int64_t v = (ms + units[i].ms - 1) / units[i].ms;
        if (v <= 99999999) { snprintf(out, 16, "%d%s", (int)v, units[i].unit); return; }
    }
    snprintf(out, 16, "99999999H");
}

static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;  /* '-' '_': the URL-safe alphabet, accepted too */
    if (c == '/' || c == '_') return 63;
    return -1;
}

uint8_t *ubq__base64_decode(const char *in, size_t len, size_t *out_len) {
    while (len > 0 && in[len - 1] == '=') len--;
    if (len % 4 == 1) return NULL;
    uint8_t *out = ubq__xmalloc(len * 3 / 4 + 1);
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(in[i]);
        if (v < 0) { free(out); return NULL; }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { bits -= 8; out[o++] = (uint8_t)(acc >> bits); }
    }
    *out_len = o;
    return out;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *ubq__percent_decode(const char *in, size_t len) {
    char *out = ubq__xmalloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (in[i] == '%' && i + 2 < len &&
            (hi = hex_value(in[i + 1])) >= 0 && (lo = hex_value(in[i + 2])) >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = 0;
    return out;
}

int ubq__code_for_http_status(int http_status) {
    switch (http_status) {
    case 400: return 13;                      /* INTERNAL */
    case 401: return 16;                      /* UNAUTHENTICATED */
    case 403: return 7;                       /* PERMISSION_DENIED */
    case 404: return 12;                      /* UNIMPLEMENTED */
    case 429: case 502: case 503: case 504: return 14;  /* UNAVAILABLE */
    default: return 2;                        /* UNKNOWN */
    }
}

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "google/rpc/status.pb-c.h"
#include "internal.h"

/* ---- errors ------------------------------------------------------------------------------------- */

static const char *const code_names[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};

const char *ubq_code_name(ubq_code code) {
    return (unsigned)code < sizeof code_names / sizeof code_names[0] ? code_names[code] : "UNKNOWN";
}

/* The detail messages docs/errors.md names, by the full name in their Any type URL. */
static const struct { const char *name; const ProtobufCMessageDescriptor *d; size_t offset; } detail_kinds[] = {
    {"google.rpc.ErrorInfo", &google__rpc__error_info__descriptor, offsetof(ubq_error, info)},
    {"google.rpc.BadRequest", &google__rpc__bad_request__descriptor, offsetof(ubq_error, bad_request)},
    {"ubiquity.v1.ConflictDetails", &ubiquity__v1__conflict_details__descriptor, offsetof(ubq_error, conflicts)},
    {"ubiquity.v1.HistoryExpiredDetails", &ubiquity__v1__history_expired_details__descriptor,
     offsetof(ubq_error, history_expired)},
    {"ubiquity.v1.ResumeDetails", &ubiquity__v1__resume_details__descriptor, offsetof(ubq_error, resume)},
    {"ubiquity.v1.KeyValueConflictDetails", &ubiquity__v1__key_value_conflict_details__descriptor,
     offsetof(ubq_error, key_conflict)},
    {"ubiquity.v1.KeyValueQuotaDetails", &ubiquity__v1__key_value_quota_details__descriptor, offsetof(ubq_error, key_quota)},
};
#define N_DETAIL_KINDS (sizeof detail_kinds / sizeof detail_kinds[0])

ubq_error *ubq__error(int code, const char *message, const uint8_t *details, size_t details_len) {
    ubq_error *e = ubq__xcalloc(1, sizeof *e);
    e->code = (ubq_code)code;
    e->message = ubq__xstrdup(message ? message : "");
    if (!details || details_len == 0) return e;
    /* Undecodable details leave the error as code + message: the status itself is still true. */
    e->status = google__rpc__status__unpack(NULL, details_len, details);
    if (!e->status) return e;
    for (size_t i = 0; i < e->status->n_details; i++) {
        const Google__Protobuf__Any *any = e->status->details[i];
        const char *slash = any->type_url ? strrchr(any->type_url, '/') : NULL;
        const char *name = slash ? slash + 1 : any->type_url;
        for (size_t k = 0; name && k < N_DETAIL_KINDS; k++) {
            const void **slot = (const void **)((char *)e + detail_kinds[k].offset);
            if (*slot || strcmp(name, detail_kinds[k].name) != 0) continue;
            *slot = protobuf_c_message_unpack(detail_kinds[k].d, NULL, any->value.len, any->value.data);
        }
    }
    if (e->info && e->info->reason && e->info->reason[0]) e->reason = e->info->reason;
    return e;
}

void ubq_error_free(ubq_error *e) {
    if (!e) return;
    for (size_t k = 0; k < N_DETAIL_KINDS; k++)
        ubq_message_free(*(const void **)((char *)e + detail_kinds[k].offset));
    ubq_message_free(e->status);
    free(e->message);
    free(e);
}

bool ubq_error_is(const ubq_error *e, const char *reason) {
    return e && e->reason && strcmp(e->reason, reason) == 0;
}

/* ---- client ------------------------------------------------------------------------------------ */

ubq_error *ubq_connect(const char *target, const ubq_client_options *o, ubq_client **out) {
    ubq_client_options defaults = {0};
    if (!o) o = &defaults;
    if (!target || !*target) return ubq__error(UBQ_INVALID_ARGUMENT, "target is empty (expected host:port)", NULL, 0);
    if (o->api_key && (!o->device_id || !*o->device_id))
        return ubq__error(UBQ_INVALID_ARGUMENT, "an API key signs in with a device ID: set device_id", NULL, 0);
    ubq__tls *tls = NULL;
    if (o->tls) {
        char why[600];
        tls = ubq__tls_new(o->tls, why, sizeof why);
        if (!tls) return ubq__error(UBQ_INVALID_ARGUMENT, why, NULL, 0);
    }
    ubq_client *c = ubq__xcalloc(1, sizeof *c);
    c->tls = tls;
    c->target = ubq__xstrdup(target);
    if (o->bearer_token) {
        size_t n = strlen(o->bearer_token) + 8;
        c->authorization = ubq__xmalloc(n);
        snprintf(c->authorization, n, "Bearer %s", o->bearer_token);
    }
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->save_attempts = o->save_attempts > 0 ? o->save_attempts : 3;
    c->conn = ubq__conn_new(target, c->authorization, c->tls);
    if (o->api_key) {
        c->api_key = ubq__xstrdup(o->api_key);
        c->device_id = ubq__xstrdup(o->device_id);
        if (o->local_device_secret && *o->local_device_secret) c->local_device_secret = ubq__xstrdup(o->local_device_secret);
        ubq_error *err = ubq__sign_in(c);
        if (err) {
            ubq_client_free(c);
            return err;
        }
    }
    *out = c;
    return NULL;
}

void ubq_client_free(ubq_client *c) {
    if (!c) return;
    ubq__conn_free(c->conn);
    ubq__tls_unref(c->tls);
    free(c->target);
    free(c->authorization);
    free(c->api_key);
    free(c->device_id);
    free(c->local_device_secret);
    free(c->device_secret);
    free(c);
}

ubq_error *ubq__unary(ubq_client *c, const char *path, const ProtobufCMessage *request,
                      const ProtobufCMessageDescriptor *response, void **out) {
    int64_t before = c->signed_in_us;
    ubq_error *err = ubq__ensure_session(c);
    if (err) return err;
    err = ubq__call(c, path, request, response, out);
    /* A session renewed just now is not the problem: only an older one is worth a new sign-in. */
    if (!err || err->code != UBQ_UNAUTHENTICATED || !c->api_key || c->signed_in_us != before) return err;
    ubq_error *again = ubq__sign_in(c);
    if (again) {
        ubq_error_free(err);
        return again;
    }
    ubq_error_free(err);
    return ubq__call(c, path, request, response, out);
}

ubq_error *ubq__transition_unary(ubq_client *c, const char *path, const ProtobufCMessage *request,
                                 const ProtobufCMessageDescriptor *response, void **out) {
    /* a client is one caller's at a time (README "Threads"), so the deadline can be lent */
    int64_t timeout_ms = c->timeout_ms;
    if (c->timeout_ms < UBQ__TRANSITION_TIMEOUT_MS) c->timeout_ms = UBQ__TRANSITION_TIMEOUT_MS;
    ubq_error *err = ubq__unary(c, path, request, response, out);
    c->timeout_ms = timeout_ms;
    return err;
}

/* Packs `request` and runs the call on the client's connection; *r is the caller's to free. */
static void packed_call(ubq_client *c, const char *path, const ProtobufCMessage *request, ubq__on_message on_message,
                        void *user, ubq__call_result *r) {
    size_t len = protobuf_c_message_get_packed_size(request);
    uint8_t *buf = ubq__xmalloc(len);
    protobuf_c_message_pack(request, buf);
    ubq__conn_call(c->conn, path, buf, len, c->timeout_ms, on_message, user, r);
    free(buf);
}

ubq_error *ubq__server_stream(ubq_client *c, const char *path, const ProtobufCMessage *request,
                              ubq__on_message on_message, void *user) {
    ubq_error *err = ubq__ensure_session(c);
    if (err) return err;
    ubq__call_result r;
    packed_call(c, path, request, on_message, user, &r);
    if (!r.stopped && r.code != 0) err = ubq__error(r.code, r.message, r.details, r.details_len);
    ubq__call_result_free(&r);
    return err;
}

ubq_error *ubq__call(ubq_client *c, const char *path, const ProtobufCMessage *request,
                     const ProtobufCMessageDescriptor *response, void **out) {
    ubq__call_result r;
    packed_call(c, path, request, NULL, NULL, &r);
    ubq_error *err = NULL;
    if (r.code != 0) {
        err = ubq__error(r.code, r.message, r.details, r.details_len);
    } else {
        void *m = protobuf_c_message_unpack(response, NULL, r.response_len, r.response);
        if (!m) err = ubq__error(UBQ_INTERNAL, "the response does not decode as its message type", NULL, 0);
        else if (out) *out = m;
        else ubq_message_free(m);
    }
    ubq__call_result_free(&r);
    return err;
}

bool ubq__save_retryable(int code) {
    return code == UBQ_UNAVAILABLE || code == UBQ_DEADLINE_EXCEEDED;
}

ubq_error *ubq__with_retries(ubq_client *c, ubq__attempt_fn attempt, void *state, void **out) {
    for (int i = 1;; i++) {
        ubq_error *err = attempt(state, out);
        if (!err || i >= c->save_attempts || !ubq__save_retryable(err->code)) return err;
        ubq_error_free(err);
        /* Backoff before the next attempt (100 ms doubling, at most 2 s): a restarting server
         * needs a moment to listen again. */
        long ms = 100;
        for (int k = 1; k < i && ms < 2000; k++) ms *= 2;
        if (ms > 2000) ms = 2000;
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void ubq__uuid(char out[37]) {
    uint8_t b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n > 0) got += (size_t)n;
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

ProtobufCBinaryData ubq__token_copy(ProtobufCBinaryData t) {
    ProtobufCBinaryData c = {t.len, NULL};
    if (t.len) c.data = memcpy(ubq__xmalloc(t.len), t.data, t.len);
    return c;
}

#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "ubiquity/v1/accounts.pb-c.h"

int64_t ubq__wall_micros(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

bool ubq__session_due(int64_t signed_in_us, int64_t expires_us, int64_t now_us) {
    if (expires_us <= 0) return false;  /* the server gave no expiry */
    /* Early enough that a call never goes out on a session that expires while it travels. */
    int64_t margin = (expires_us - signed_in_us) / 10;
    if (margin > 60000000) margin = 60000000;
    if (margin < 1000000) margin = 1000000;
    return now_us >= expires_us - margin;
}

static void take_session(ubq_client *c, const char *token, int64_t signed_in_us, int64_t expires_us) {
    free(c->authorization);
    size_t n = strlen(token) + 8;
    c->authorization = ubq__xmalloc(n);
    snprintf(c->authorization, n, "Bearer %s", token);
    c->signed_in_us = signed_in_us;
    c->expires_us = expires_us;
}

/* A local session: the first call registers the device and learns its secret, later ones send it. */
static ubq_error *start_local(ubq_client *c, int64_t now) {
    Ubiquity__V1__StartLocalSessionRequest req = UBIQUITY__V1__START_LOCAL_SESSION_REQUEST__INIT;
    req.device_id = c->device_id;
    if (c->device_secret) req.device_secret = c->device_secret;
    Ubiquity__V1__StartLocalSessionResponse *resp = NULL;
    ubq_error *err = ubq__call(c, "/ubiquity.v1.Accounts/StartLocalSession", &req.base,
                               &ubiquity__v1__start_local_session_response__descriptor, (void **)&resp);
    if (err) return err;
    take_session(c, resp->session_token, now, resp->expires_at_micros);
    if (resp->device_secret && resp->device_secret[0]) {
        free(c->device_secret);
        c->device_secret = ubq__xstrdup(resp->device_secret);
    }
    ubq_message_free(resp);
    return NULL;
}

ubq_error *ubq__sign_in(ubq_client *c) {
    /* SignIn takes no session: an expired one must not be what makes it fail. */
    ubq__conn_set_authorization(c->conn, NULL);
    int64_t now = ubq__wall_micros();
    ubq_error *err;
    if (c->local) {
        err = start_local(c, now);
    } else {
        Ubiquity__V1__SignInRequest req = UBIQUITY__V1__SIGN_IN_REQUEST__INIT;
        req.api_key = c->api_key;
        req.device_id = c->device_id;
        if (c->local_device_secret) req.local_device_secret = c->local_device_secret;
        Ubiquity__V1__SignInResponse *resp = NULL;
        err = ubq__call(c, "/ubiquity.v1.Accounts/SignIn", &req.base, &ubiquity__v1__sign_in_response__descriptor,
                        (void **)&resp);
        if (!err) {
            take_session(c, resp->session_token, now, resp->expires_at_micros);
            if (resp->local_import) {
                c->has_import = true;
                c->import = (ubq_import_counts){resp->local_import->inserted, resp->local_import->merged,
                                                resp->local_import->deduplicated,
                                                resp->local_import->key_values_moved,
                                                resp->local_import->key_values_kept};
            }
            /* Imported once: a renewal must not import local work begun after this sign-in. */
            free(c->local_device_secret);
            c->local_device_secret = NULL;
            ubq_message_free(resp);
        }
    }
    ubq__conn_set_authorization(c->conn, c->authorization);
    return err;
}

ubq_error *ubq__ensure_session(ubq_client *c) {
    if ((!c->api_key && !c->local) || !ubq__session_due(c->signed_in_us, c->expires_us, ubq__wall_micros())) return NULL;
    return ubq__sign_in(c);
}

ubq_error *ubq_sign_out(ubq_client *c) {
    Ubiquity__V1__SignOutRequest req = UBIQUITY__V1__SIGN_OUT_REQUEST__INIT;
    int64_t timeout_ms = c->timeout_ms;  /* see UBQ__TRANSITION_TIMEOUT_MS */
    if (c->timeout_ms < UBQ__TRANSITION_TIMEOUT_MS) c->timeout_ms = UBQ__TRANSITION_TIMEOUT_MS;
    ubq_error *err = ubq__call(c, "/ubiquity.v1.Accounts/SignOut", &req.base,
                               &ubiquity__v1__sign_out_response__descriptor, NULL);
    c->timeout_ms = timeout_ms;
    if (!err) {
        free(c->authorization);
        c->authorization = NULL;
        c->expires_us = 0;
        ubq__conn_set_authorization(c->conn, NULL);
    }
    return err;
}

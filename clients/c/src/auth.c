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

ubq_error *ubq__sign_in(ubq_client *c) {
    Ubiquity__V1__SignInRequest req = UBIQUITY__V1__SIGN_IN_REQUEST__INIT;
    req.api_key = c->api_key;
    req.device_id = c->device_id;
    /* SignIn takes no session: an expired one must not be what makes it fail. */
    ubq__conn_set_authorization(c->conn, NULL);
    Ubiquity__V1__SignInResponse *resp = NULL;
    int64_t now = ubq__wall_micros();
    ubq_error *err = ubq__call(c, "/ubiquity.v1.Accounts/SignIn", &req.base,
                               &ubiquity__v1__sign_in_response__descriptor, (void **)&resp);
    if (!err) {
        free(c->authorization);
        size_t n = strlen(resp->session_token) + 8;
        c->authorization = ubq__xmalloc(n);
        snprintf(c->authorization, n, "Bearer %s", resp->session_token);
        c->signed_in_us = now;
        c->expires_us = resp->expires_at_micros;
        ubq_message_free(resp);
    }
    ubq__conn_set_authorization(c->conn, c->authorization);
    return err;
}

ubq_error *ubq__ensure_session(ubq_client *c) {
    if (!c->api_key || !ubq__session_due(c->signed_in_us, c->expires_us, ubq__wall_micros())) return NULL;
    return ubq__sign_in(c);
}

ubq_error *ubq_sign_out(ubq_client *c) {
    Ubiquity__V1__SignOutRequest req = UBIQUITY__V1__SIGN_OUT_REQUEST__INIT;
    ubq_error *err = ubq__call(c, "/ubiquity.v1.Accounts/SignOut", &req.base,
                               &ubiquity__v1__sign_out_response__descriptor, NULL);
    if (!err) {
        free(c->authorization);
        c->authorization = NULL;
        c->expires_us = 0;
        ubq__conn_set_authorization(c->conn, NULL);
    }
    return err;
}

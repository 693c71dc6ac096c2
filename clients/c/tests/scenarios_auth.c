/* Sign-in and sessions (docs/accounts.md): typed refusals, renewal before and at expiry, sign-out,
 * the feed signing in again and resuming without a gap, and a server with --auth off. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

#include "fixtures.h"

/* Waiting for the server's clock to pass a session's expiry is waiting for an event: polled, and
 * bounded so that a session that never expires is a failure rather than a hang. */
#define WAIT_LIMIT_MS 30000
#define POLL_MS 50

static int64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_poll(void) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
}

/* A server of its own with a short session lifetime (2 s) and a quick subscription sweep, so a
 * stream learns of its session's expiry soon after it. */
static int start_short_session_server(test_server *t, const char *name) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", workdir, name);
    const char *flags[] = {"--session-lifetime-seconds", "2", "--feed-progress-interval-ms", "100", NULL};
    return test_server_start_with(t, dir, 0, flags);
}

/* Without a session a data RPC is UNAUTHENTICATED; a wrong API key fails ubq_connect with a typed
 * error; after SignOut the client signs in again by itself on its next call. */
static void test_sign_in_is_required_and_renewed_after_sign_out(ubq_client *unused) {
    (void)unused;
    ubq_client *c = NULL, *anonymous = NULL, *wrong = NULL, *old = NULL;
    ubq_store *s = NULL;
    Ubiquity__V1__ListStoresResponse *list = NULL;
    char *before = NULL;
    OK(ubq_connect(shared_server->address, SIGNED_IN(shared_server), &c));
    OK(ubq_connect(shared_server->address, NULL, &anonymous));
    ubq_error *err = ubq_list_stores(anonymous, &list);
    CHECK(err && err->code == UBQ_UNAUTHENTICATED && ubq_error_is(err, "MISSING_CREDENTIALS"));
    ubq_error_free(err);
    err = ubq_connect(shared_server->address, &(ubq_client_options){.api_key = "not-a-key", .device_id = "c-tests"},
                      &wrong);
    CHECK(err && err->code == UBQ_UNAUTHENTICATED && ubq_error_is(err, "BAD_CREDENTIALS") && wrong == NULL);
    CHECK(err && err->message && strstr(err->message, "API key"));
    ubq_error_free(err);
    err = ubq_connect(shared_server->address, &(ubq_client_options){.api_key = shared_server->api_key}, &wrong);
    CHECK(err && err->code == UBQ_INVALID_ARGUMENT && wrong == NULL);  /* an API key needs a device ID */
    ubq_error_free(err);
    before = ubq__xstrdup(c->authorization);
    OK(ubq_sign_out(c));
    /* The signed-out session is refused, typed, to whoever still holds it. */
    OK(ubq_connect(shared_server->address, &(ubq_client_options){.bearer_token = before + strlen("Bearer ")}, &old));
    err = ubq_list_stores(old, &list);
    CHECK(err && err->code == UBQ_UNAUTHENTICATED && ubq_error_is(err, "SESSION_REVOKED"));
    ubq_error_free(err);
    OK(new_store(c, "after-sign-out", &s));  /* UNAUTHENTICATED, sign in, call again: one call for the caller */
    CHECK(c->authorization && strcmp(c->authorization, before) != 0);
done:
    free(before);
    ubq_message_free(list);
    ubq_store_free(s);
    ubq_client_free(c);
    ubq_client_free(anonymous);
    ubq_client_free(wrong);
    ubq_client_free(old);
}

/* A 2-second session: calls keep succeeding while the client replaces the session before it ends. */
static void test_a_short_session_is_renewed_before_it_expires(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *c = NULL;
    Ubiquity__V1__ListStoresResponse *list = NULL;
    char *first = NULL;
    if (start_short_session_server(&t, "short-session") != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, SIGNED_IN(&t), &c));
    first = ubq__xstrdup(c->authorization);
    int calls = 0;
    for (int64_t until = monotonic_ms() + WAIT_LIMIT_MS; strcmp(c->authorization, first) == 0;) {
        if (monotonic_ms() > until) break;
        OK(ubq_list_stores(c, &list));
        ubq_message_free(list);
        list = NULL;
        calls++;
        pause_poll();
    }
    CHECK(strcmp(c->authorization, first) != 0);
    OK(ubq_list_stores(c, &list));  /* and the new session works */
    CHECK(calls >= 1);
done:
    free(first);
    ubq_message_free(list);
    ubq_client_free(c);
    if (t.pid) test_server_stop(&t);
}

/* A session that did expire (the client missed its renewal, as after a suspended process): the
 * call answered SESSION_EXPIRED is made again, once, on a new session. */
static void test_a_call_on_an_expired_session_signs_in_again_once(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *c = NULL, *holder = NULL;
    Ubiquity__V1__ListStoresResponse *list = NULL;
    char *first = NULL;
    if (start_short_session_server(&t, "expired-session") != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, SIGNED_IN(&t), &c));
    c->expires_us = 0;  /* no renewal ahead of time: the server has to say it expired */
    first = ubq__xstrdup(c->authorization);
    OK(ubq_connect(t.address, &(ubq_client_options){.bearer_token = first + strlen("Bearer ")}, &holder));
    ubq_error *err = NULL;
    for (int64_t until = monotonic_ms() + WAIT_LIMIT_MS; monotonic_ms() < until; pause_poll()) {
        err = ubq_list_stores(holder, &list);
        ubq_message_free(list);
        list = NULL;
        if (err) break;
    }
    CHECK(err && err->code == UBQ_UNAUTHENTICATED && ubq_error_is(err, "SESSION_EXPIRED"));
    ubq_error_free(err);
    OK(ubq_list_stores(c, &list));
    CHECK(strcmp(c->authorization, first) != 0);
done:
    free(first);
    ubq_message_free(list);
    ubq_client_free(c);
    ubq_client_free(holder);
    if (t.pid) test_server_stop(&t);
}

typedef struct {
    ubq_store *store;
    int seen, caught_up_after_end, events;
    int64_t generations[4];
    /* a sign-out's StoresWillChange / StoresDidChange (docs/lifecycle.md): each takes a generation */
    int64_t event_generations[4];
    bool saved_second, saved_third, sign_out;
    ubq_client *client;  /* sign_out: whose session (the feed's too) to end */
    ubq_error *err;
} session_watch;

static void save_person(session_watch *w, const char *name) {
    ubq_error *e = add_person(w->store, name, -1, NULL, -1, NULL);
    if (e && !w->err) w->err = e; else ubq_error_free(e);
}

/* Ann is saved after the feed caught up, before this run. On Ann: save Bob (and, for the revocation case, sign the
 * session out first). Once the feed's stream ended and it signed in and caught up again after Bob: save Carl. */
static ubq_feed_action across_a_session_end(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    session_watch *w = user;
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_TRANSACTIONS) {
        for (size_t i = 0; i < ev->transactions->n_transactions && w->seen < 4; i++)
            w->generations[w->seen++] = ev->transactions->transactions[i]->generation;
    }
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_STORE_EVENT && w->events < 4)
        w->event_generations[w->events++] = ev->resume_generation;
    if (w->seen >= 1 && !w->saved_second) {
        w->saved_second = true;
        if (w->sign_out) {
            ubq_error *e = ubq_sign_out(w->client);
            if (e && !w->err) w->err = e; else ubq_error_free(e);
        }
        save_person(w, "Bob");
    }
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP && ubq_feed_sign_ins(f) >= 1 &&
        w->seen >= 2 && !w->saved_third) {
        w->saved_third = true;
        save_person(w, "Carl");
    }
    return w->seen >= 3 || w->err ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static ubq_feed_action until_caught_up(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f; (void)user;
    return ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

/* Store events received with a generation after `from`, up to `to` (exclusive). */
static int events_between(const session_watch *w, int64_t from, int64_t to) {
    int n = 0;
    for (int i = 0; i < w->events; i++) n += w->event_generations[i] > from && w->event_generations[i] < to;
    return n;
}

/* The feed's stream ends with SESSION_EXPIRED or SESSION_REVOKED; the feed signs in again and goes
 * on from its last token: Ann, Bob, Carl, one generation after another (a sign-out's two store
 * events between Ann and Bob), none twice. */
static void feed_across_a_session_end(const test_server *t, bool sign_out) {
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    session_watch w = {.sign_out = sign_out};
    OK(ubq_connect(t->address, SIGNED_IN(t), &c));
    OK(new_store(c, "session-feed", &s));
    w.store = s;
    w.client = c;
    OK(ubq_feed_new(s, &(ubq_feed_options){.reconnect_for_ms = 60000}, &feed));
    OK(ubq_feed_run(feed, until_caught_up, NULL));  /* subscribed before Ann is saved */
    OK(add_person(s, "Ann", -1, NULL, -1, NULL));
    OK(ubq_feed_run(feed, across_a_session_end, &w));
    CHECK(w.err == NULL);
    CHECK(w.saved_third && w.seen == 3);
    CHECK(w.events == (sign_out ? 2 : 0));
    CHECK(w.generations[1] == w.generations[0] + 1 + events_between(&w, w.generations[0], w.generations[1]) &&
          w.generations[2] == w.generations[1] + 1 + events_between(&w, w.generations[1], w.generations[2]));
    CHECK(ubq_feed_sign_ins(feed) >= 1 && ubq_feed_reconnects(feed) >= 1);
done:
    ubq_error_free(w.err);
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(c);
}

static void test_a_feed_survives_its_session_expiring_without_a_gap(ubq_client *unused) {
    (void)unused;
    test_server t;
    if (start_short_session_server(&t, "feed-expiry") != 0) { failed_checks++; return; }
    feed_across_a_session_end(&t, false);
    test_server_stop(&t);
}

static void test_a_feed_survives_its_session_being_signed_out_without_a_gap(ubq_client *unused) {
    (void)unused;
    feed_across_a_session_end(shared_server, true);
}

/* A server run with --auth off (loopback only) serves a client that has no credentials at all. */
static void test_a_server_without_auth_serves_a_client_without_credentials(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/no-auth", workdir);
    const char *flags[] = {"--auth", "off", NULL};
    if (test_server_start_with(&t, dir, 0, flags) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, NULL, &c));
    OK(new_store(c, "no-auth", &s));
    OK(add_person(s, "Ann", -1, NULL, -1, NULL));
done:
    ubq_store_free(s);
    ubq_client_free(c);
    if (t.pid) test_server_stop(&t);
}

const scenario auth_scenarios[] = {
#define T(f) {#f, f}
    T(test_sign_in_is_required_and_renewed_after_sign_out),
    T(test_a_short_session_is_renewed_before_it_expires),
    T(test_a_call_on_an_expired_session_signs_in_again_once),
    T(test_a_feed_survives_its_session_expiring_without_a_gap),
    T(test_a_feed_survives_its_session_being_signed_out_without_a_gap),
    T(test_a_server_without_auth_serves_a_client_without_credentials),
#undef T
    {NULL, NULL}};

/* Acknowledged store transitions (docs/lifecycle.md "Acknowledgements"): a feed that opts in gets
 * each WILL_CHANGE with an acknowledgement, and the sign-out waits for it. The sign-out runs on
 * its own thread (the server does not answer it until the feed acknowledges), the feed on the
 * test's; the acknowledgement comes from inside the hook or from a third thread. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

typedef struct {
    ubq_client *client;
    bool from_thread;                 /* acknowledge from the acknowledger thread, not the hook */
    pthread_t signer, acknowledger;
    bool signing_out, acknowledging;
    ubq_error *sign_out_err, *ack_err, *bad_token_err;
    bool awaited, awaited_again;
    ubq_store_event will, did;
    int n_events;
    ProtobufCBinaryData ack_token;    /* a copy, for the acknowledger thread */
    int64_t before_sign_out_us;
    pthread_mutex_t lock;
    pthread_cond_t token_ready;
    bool run_over;                    /* the feed returned: the acknowledger stops waiting */
} ack_watch;

static void *sign_out(void *user) {
    ack_watch *w = user;
    w->sign_out_err = ubq_sign_out(w->client);  /* returns once the transition is over */
    return NULL;
}

/* A call made on another thread succeeded; else says why and takes the error. */
static bool succeeded(ubq_error **e, const char *what) {
    if (!*e) return true;
    fprintf(stderr, "  %s failed: %s %s (%s)\n", what, ubq_code_name((*e)->code), (*e)->reason ? (*e)->reason : "-",
            (*e)->message);
    ubq_error_free(*e);
    *e = NULL;
    return false;
}

typedef struct { ack_watch *w; ubq_feed *feed; } ack_job;

/* The acknowledger thread: waits for the hook's token (or the run's end), then acknowledges twice. */
static void *acknowledge(void *user) {
    ack_job *j = user;
    ack_watch *w = j->w;
    pthread_mutex_lock(&w->lock);
    while (!w->ack_token.len && !w->run_over) pthread_cond_wait(&w->token_ready, &w->lock);
    pthread_mutex_unlock(&w->lock);
    if (!w->ack_token.len) return NULL;
    w->ack_err = ubq_acknowledge_store_event(j->feed, w->ack_token, &w->awaited);
    if (!w->ack_err) w->ack_err = ubq_acknowledge_store_event(j->feed, w->ack_token, &w->awaited_again);
    return NULL;
}

static ubq_feed_action on_transition(ubq_feed *f, const ubq_store_event *e, void *user) {
    ack_watch *w = user;
    ubq_store_event copy = *e;
    copy.token = copy.acknowledgement.event_token = (ProtobufCBinaryData){0, NULL};  /* borrowed: not kept */
    if (e->phase == UBQ_PHASE_WILL_CHANGE) {
        w->will = copy;
        if (!e->acknowledgement.requested) return UBQ_FEED_CONTINUE;
        if (w->from_thread) {  /* hand the token over; the feed goes on reading meanwhile */
            pthread_mutex_lock(&w->lock);
            w->ack_token = ubq__token_copy(e->acknowledgement.event_token);
            pthread_cond_signal(&w->token_ready);
            pthread_mutex_unlock(&w->lock);
        } else {
            w->ack_err = ubq_acknowledge_store_event(f, e->acknowledgement.event_token, &w->awaited);
            if (!w->ack_err) w->ack_err = ubq_acknowledge_store_event(f, e->acknowledgement.event_token, &w->awaited_again);
        }
    } else {
        w->did = copy;
    }
    return ++w->n_events == 2 ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static ubq_feed_action on_event(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    ack_watch *w = user;
    if (ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP || w->signing_out) return UBQ_FEED_CONTINUE;
    /* The stream is open: a token that is no event's is refused, typed, before anything waits. */
    w->bad_token_err = ubq_acknowledge_store_event(f, (ProtobufCBinaryData){3, (uint8_t *)"xyz"}, NULL);
    w->before_sign_out_us = ubq__wall_micros();
    w->signing_out = pthread_create(&w->signer, NULL, sign_out, w) == 0;
    return w->signing_out ? UBQ_FEED_CONTINUE : UBQ_FEED_STOP;
}

static void acknowledged_sign_out(bool from_thread) {
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    ack_watch w = {.from_thread = from_thread};
    ack_job job = {&w, NULL};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.token_ready, NULL);
    OK(ubq_connect(shared_server->address,
                   &(ubq_client_options){.api_key = shared_server->api_key, .device_id = "c-ack"}, &c));
    OK(new_store(c, "acknowledge", &s));
    w.client = c;
    OK(ubq_feed_new(s, &(ubq_feed_options){.acknowledges_store_events = true, .on_store_event = on_transition},
                    &feed));
    job.feed = feed;
    if (from_thread) w.acknowledging = pthread_create(&w.acknowledger, NULL, acknowledge, &job) == 0;
    ubq_error *run = ubq_feed_run(feed, on_event, &w);
    pthread_mutex_lock(&w.lock);
    w.run_over = true;
    pthread_cond_signal(&w.token_ready);
    pthread_mutex_unlock(&w.lock);
    if (w.signing_out) pthread_join(w.signer, NULL);
    if (w.acknowledging) pthread_join(w.acknowledger, NULL);
    OK(run);
    CHECK(succeeded(&w.sign_out_err, "the sign-out"));
    CHECK(succeeded(&w.ack_err, "the acknowledgement"));
    CHECK(w.bad_token_err && w.bad_token_err->code == UBQ_INVALID_ARGUMENT && ubq_error_is(w.bad_token_err, "BAD_TOKEN"));
    CHECK(w.n_events == 2);
    CHECK(w.will.phase == UBQ_PHASE_WILL_CHANGE && w.will.transition == UBQ_TRANSITION_ACCOUNT_REMOVED);
    CHECK(w.will.acknowledgement.requested && w.will.acknowledgement.deadline_micros > w.before_sign_out_us);
    CHECK(w.awaited);          /* the sign-out was waiting for this very acknowledgement */
    CHECK(!w.awaited_again);   /* a repeat is a no-op, not an error */
    CHECK(w.did.phase == UBQ_PHASE_DID_CHANGE && w.did.transition == UBQ_TRANSITION_ACCOUNT_REMOVED);
    CHECK(!w.did.cancelled && !w.did.acknowledgement.requested);
    CHECK(w.did.generation == w.will.generation + 1);
done:
    ubq_error_free(w.sign_out_err);
    ubq_error_free(w.ack_err);
    ubq_error_free(w.bad_token_err);
    free(w.ack_token.data);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.token_ready);
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(c);
}

/* The hook flushes and acknowledges in place (on its own connection, while the client is blocked
 * in the sign-out on another thread): the sign-out completes, the acknowledgement was awaited. */
static void test_a_sign_out_waits_for_the_acknowledgement_from_the_hook(ubq_client *unused) {
    (void)unused;
    acknowledged_sign_out(false);
}

/* The same with the acknowledgement sent from a third thread while the feed goes on reading. */
static void test_a_sign_out_waits_for_the_acknowledgement_from_another_thread(ubq_client *unused) {
    (void)unused;
    acknowledged_sign_out(true);
}

/* A sign-out killed while it waits for the acknowledgement: the server's next start closes the
 * WILL_CHANGE, and the feed — reconnected from the WILL_CHANGE's token, signed in again — gets
 * the DID_CHANGE with `cancelled`. Its hook kills the server (kill -9: no drain, the transition
 * never finishes) and starts it again on the same data and port, never acknowledging. */
typedef struct {
    test_server *server;
    ubq_client *client;
    pthread_t signer;
    bool kill_on_will;                /* kill and restart the server at the WILL_CHANGE */
    bool signing_out, restarted;
    ubq_error *sign_out_err;
    ubq_store_event will, did;
} crash_watch;

/* The sign-out waits this long for the acknowledgement that never comes: the kill surely lands
 * inside the wait, however slow the machine. */
static const char *const long_ack_wait[] = {"--transition-ack-seconds", "600", NULL};

static void *crash_sign_out(void *user) {
    crash_watch *w = user;
    w->sign_out_err = ubq_sign_out(w->client);
    return NULL;
}

static ubq_feed_action kill_mid_transition(ubq_feed *f, const ubq_store_event *e, void *user) {
    (void)f;
    crash_watch *w = user;
    ubq_store_event copy = *e;
    copy.token = copy.acknowledgement.event_token = (ProtobufCBinaryData){0, NULL};
    if (e->phase == UBQ_PHASE_WILL_CHANGE) {
        w->will = copy;
        if (!w->kill_on_will || w->restarted) return UBQ_FEED_CONTINUE;  /* never acknowledges */
        int port = w->server->port;
        char dir[512];
        snprintf(dir, sizeof dir, "%s", w->server->data_dir);
        test_server_kill(w->server);
        if (test_server_start_with(w->server, dir, port, long_ack_wait) != 0) return UBQ_FEED_STOP;
        w->restarted = true;
        return UBQ_FEED_CONTINUE;
    }
    w->did = copy;
    return UBQ_FEED_STOP;
}

static ubq_feed_action sign_out_once_caught_up(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    crash_watch *w = user;
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP && !w->signing_out)
        w->signing_out = pthread_create(&w->signer, NULL, crash_sign_out, w) == 0;
    return UBQ_FEED_CONTINUE;
}

static void test_a_sign_out_killed_mid_transition_reaches_the_feed_cancelled(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    crash_watch w = {.server = &t, .kill_on_will = true};
    char dir[600], uuid[37];
    ubq__uuid(uuid);
    snprintf(dir, sizeof dir, "%s/cancelled-%s", workdir, uuid);
    if (test_server_start_with(&t, dir, 0, long_ack_wait) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, &(ubq_client_options){.api_key = t.api_key, .device_id = "c-crash"}, &c));
    OK(new_store(c, "cancelled", &s));
    w.client = c;
    OK(ubq_feed_new(s, &(ubq_feed_options){.acknowledges_store_events = true, .on_store_event = kill_mid_transition},
                    &feed));
    ubq_error *run = ubq_feed_run(feed, sign_out_once_caught_up, &w);
    if (w.signing_out) pthread_join(w.signer, NULL);
    OK(run);
    CHECK(w.restarted);
    CHECK(w.sign_out_err != NULL);   /* the server died under it: the sign-out never completed */
    CHECK(w.will.phase == UBQ_PHASE_WILL_CHANGE && w.will.transition == UBQ_TRANSITION_ACCOUNT_REMOVED);
    CHECK(w.did.phase == UBQ_PHASE_DID_CHANGE && w.did.transition == UBQ_TRANSITION_ACCOUNT_REMOVED);
    CHECK(w.did.cancelled);
    CHECK(w.did.generation > w.will.generation);
    CHECK(ubq_feed_reconnects(feed) + ubq_feed_sign_ins(feed) >= 1);
done:
    ubq_error_free(w.sign_out_err);
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(c);
    if (t.pid) test_server_stop(&t);
}

/* A sign-out the server holds past the client's own deadline: a silent opted-in feed of the same
 * device makes the server wait for its 2 s acknowledgement deadline, and the signing-out client's
 * timeout_ms is 500. ubq_sign_out's deadline is at least UBQ__TRANSITION_TIMEOUT_MS, so it
 * returns once the transition is over instead of failing DEADLINE_EXCEEDED. */
static const char *const short_ack_wait[] = {"--transition-ack-seconds", "2", NULL};

static void test_a_sign_out_held_past_the_client_timeout_still_returns(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *c = NULL, *listener = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    crash_watch w = {.server = &t};
    char dir[600], uuid[37];
    ubq__uuid(uuid);
    snprintf(dir, sizeof dir, "%s/held-%s", workdir, uuid);
    if (test_server_start_with(&t, dir, 0, short_ack_wait) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, &(ubq_client_options){.api_key = t.api_key, .device_id = "c-slow-link", .timeout_ms = 500},
                   &c));
    OK(ubq_connect(t.address, &(ubq_client_options){.api_key = t.api_key, .device_id = "c-slow-link"}, &listener));
    OK(new_store(listener, "held", &s));
    w.client = c;
    OK(ubq_feed_new(s, &(ubq_feed_options){.acknowledges_store_events = true, .on_store_event = kill_mid_transition}, &feed));
    ubq_error *run = ubq_feed_run(feed, sign_out_once_caught_up, &w);
    if (w.signing_out) pthread_join(w.signer, NULL);
    int64_t returned_us = ubq__wall_micros();
    OK(run);
    CHECK(succeeded(&w.sign_out_err, "the sign-out"));
    CHECK(w.will.phase == UBQ_PHASE_WILL_CHANGE && w.will.acknowledgement.requested);
    CHECK(returned_us >= w.will.acknowledgement.deadline_micros);  /* it did wait for the deadline */
    CHECK(w.did.phase == UBQ_PHASE_DID_CHANGE && !w.did.cancelled);
done:
    ubq_error_free(w.sign_out_err);
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(listener);
    ubq_client_free(c);
    if (t.pid) test_server_stop(&t);
}

/* A key-value feed is never waited for: asking it to acknowledge is refused at once. */
static void test_a_key_value_feed_refuses_acknowledgements(ubq_client *c) {
    ubq_feed *feed = NULL;
    ubq_error *e = ubq_kv_feed_new(c, &(ubq_feed_options){.acknowledges_store_events = true}, &feed);
    CHECK(e && e->code == UBQ_INVALID_ARGUMENT && feed == NULL);
    ubq_error_free(e);
}

const scenario acknowledge_scenarios[] = {
#define T(f) {#f, f}
    T(test_a_sign_out_waits_for_the_acknowledgement_from_the_hook),
    T(test_a_sign_out_waits_for_the_acknowledgement_from_another_thread),
    T(test_a_sign_out_killed_mid_transition_reaches_the_feed_cancelled),
    T(test_a_sign_out_held_past_the_client_timeout_still_returns),
    T(test_a_key_value_feed_refuses_acknowledgements),
#undef T
    {NULL, NULL}};

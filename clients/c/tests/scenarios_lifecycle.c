/* Store transitions on the feed, typed (docs/lifecycle.md); local sessions and the first-sign-in
 * import (docs/accounts.md "Local stores"); the Admin calls (admin.proto). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures.h"

typedef struct {
    ubq_store_event events[4];
    int n_events, raw_store_events;
    int64_t transaction_generation;
    int stop_after_events;   /* stop once this many store events came; 0: at the first transaction */
} transitions;

static ubq_feed_action on_transition(ubq_feed *f, const ubq_store_event *e, void *user) {
    (void)f;
    transitions *t = user;
    if (t->n_events < 4) {
        t->events[t->n_events] = *e;
        t->events[t->n_events].token = (ProtobufCBinaryData){0, NULL};  /* borrowed: not kept */
        t->n_events++;
    }
    return t->stop_after_events && t->n_events >= t->stop_after_events ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static ubq_feed_action watch(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    transitions *t = user;
    ubq_store_event e;
    t->raw_store_events += ubq_store_event_of(ev, &e);
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_TRANSACTIONS && ev->transactions->n_transactions) {
        t->transaction_generation = ev->transactions->transactions[0]->generation;
        if (!t->stop_after_events) return UBQ_FEED_STOP;
    }
    return UBQ_FEED_CONTINUE;
}

/* The sign-out scenario's on_event. The stream must be open when the session signs out (the
 * events go to the session's subscriptions), so the callback does it: on the first caught_up it
 * signs the client out; once the feed signed in again and caught up, it saves; it stops at that
 * save's transaction. */
typedef struct {
    transitions t;
    ubq_client *client;
    ubq_store *store;
    bool signed_out, saved;
    ubq_error *err;
} sign_out_watch;

static ubq_feed_action sign_out_hook(ubq_feed *f, const ubq_store_event *e, void *user) {
    return on_transition(f, e, &((sign_out_watch *)user)->t);
}

static ubq_feed_action sign_out_then_save(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    sign_out_watch *w = user;
    watch(f, ev, &w->t);
    bool caught_up = ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP;
    if (caught_up && !w->signed_out) {
        w->signed_out = true;
        w->err = ubq_sign_out(w->client);  /* returns once both events are written */
    } else if (caught_up && ubq_feed_sign_ins(f) >= 1 && !w->saved) {
        w->saved = true;
        w->err = add_person(w->store, "Ann", -1, NULL, -1, NULL);  /* the client signs in again by itself */
    }
    return w->err || w->t.transaction_generation ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

/* A real sign-out: the feed's on_store_event gets WILL_CHANGE then DID_CHANGE (ACCOUNT_REMOVED),
 * typed, one generation apart, and on_event the same messages; then the stream ends
 * SESSION_REVOKED, the feed signs in again from the DID_CHANGE's token, and the next save is the
 * next transaction it delivers. */
static void test_a_sign_out_reaches_on_store_event_as_will_then_did(ubq_client *unused) {
    (void)unused;
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    sign_out_watch w = {.t = {.stop_after_events = 0}};
    OK(ubq_connect(shared_server->address, SIGNED_IN(shared_server), &c));
    OK(new_store(c, "transitions", &s));
    w.client = c;
    w.store = s;
    OK(ubq_feed_new(s, &(ubq_feed_options){.on_store_event = sign_out_hook}, &feed));
    OK(ubq_feed_run(feed, sign_out_then_save, &w));
    OK(w.err);
    CHECK(w.t.n_events == 2);
    CHECK(w.t.events[0].phase == UBQ_PHASE_WILL_CHANGE && w.t.events[0].transition == UBQ_TRANSITION_ACCOUNT_REMOVED);
    CHECK(w.t.events[1].phase == UBQ_PHASE_DID_CHANGE && w.t.events[1].transition == UBQ_TRANSITION_ACCOUNT_REMOVED);
    CHECK(!w.t.events[0].using_local_storage && !w.t.events[1].has_import_counts);
    CHECK(w.t.events[1].generation == w.t.events[0].generation + 1);
    CHECK(w.t.raw_store_events == 2);  /* on_event got them too, after the hook */
    CHECK(w.saved && w.t.transaction_generation == w.t.events[1].generation + 1);
    CHECK(ubq_feed_sign_ins(feed) >= 1);
done:
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(c);
}

/* The local feed's side of the first sign-in. On its first event ("you work locally") the
 * subscription is open: a thread signs in with the device secret (SignIn waits while the device's
 * context has unsaved work). On WILL_CHANGE the hook saves that context, so the import goes on
 * and takes the draft with it. */
typedef struct {
    transitions t;
    const test_server *srv;
    const char *secret;
    ubq_context *draft;
    pthread_t signer;
    bool signing_in;
    ubq_client *account;
    ubq_error *err, *save_err;
} local_watch;

static void *sign_in_with_the_secret(void *user) {
    local_watch *w = user;
    w->err = ubq_connect(w->srv->address, &(ubq_client_options){.api_key = w->srv->api_key, .device_id = "phone-c",
                                                               .local_device_secret = w->secret}, &w->account);
    return NULL;
}

static ubq_feed_action save_before_the_import(ubq_feed *f, const ubq_store_event *e, void *user) {
    local_watch *w = user;
    on_transition(f, e, &w->t);
    if (!w->signing_in) w->signing_in = pthread_create(&w->signer, NULL, sign_in_with_the_secret, w) == 0;
    if (e->phase == UBQ_PHASE_WILL_CHANGE && !w->save_err) w->save_err = ubq_context_save(w->draft, NULL, NULL);
    return UBQ_FEED_CONTINUE;
}

static ubq_feed_action local_events(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f; (void)ev; (void)user;
    return UBQ_FEED_CONTINUE;
}

/* A device works locally, then signs in with its device secret: its local subscriber hears
 * WILL_CHANGE(INITIAL_IMPORT_COMPLETED), saves its draft, and then its stream ends; its objects
 * (the draft too) are in the account's store of the same name, the sign-in reports the counts,
 * and that store's feed replays the import's DID_CHANGE with the same counts. */
static void test_local_work_is_imported_at_first_sign_in(ubq_client *unused) {
    (void)unused;
    test_server srv = {0};
    ubq_client *phone = NULL, *again = NULL, *fresh = NULL;
    ubq_store *local = NULL, *notes = NULL;
    ubq_feed *local_feed = NULL, *feed = NULL;
    ubq_context *draft = NULL;
    Ubiquity__V1__FetchResults *people = NULL;
    char *secret = NULL;
    local_watch lw = {0};
    transitions at = {.stop_after_events = 1};
    ubq_import_counts counts = {0};
    ubq_values *eve = ubq_values_string(ubq_values_string(ubq_values_new(), "name", "Eve"), "email", "eve@x");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/local-stores", workdir);
    const char *flags[] = {"--local-stores", NULL};
    if (test_server_start_with(&srv, dir, 0, flags) != 0) { failed_checks++; ubq_values_free(eve); return; }
    OK(ubq_start_local_session(srv.address, NULL, "phone-c", NULL, &phone));
    CHECK(ubq_device_secret(phone) && strncmp(ubq_device_secret(phone), "ubd_", 4) == 0);
    secret = ubq__xstrdup(ubq_device_secret(phone));
    OK(ubq_kv_set(phone, "theme", "dark", 4, NULL, NULL));  /* moves too, counted apart */
    OK(ubq_open_store(phone, "notes", false, &local));
    OK(register_person_model(local));
    OK(add_person(local, "Ann", 30, "ann@x", -1, NULL));
    OK(add_person(local, "Bob", 40, "bob@x", -1, NULL));
    OK(ubq_context_create(local, &(ubq_context_options){.name = "draft"}, &draft));
    OK(ubq_context_insert(draft, "Person", eve, NULL));  /* unsaved: the import waits for it */
    /* the same device's next local session, with its secret */
    OK(ubq_start_local_session(srv.address, NULL, "phone-c", secret, &again));
    CHECK(ubq_device_secret(again) && strcmp(ubq_device_secret(again), secret) == 0);
    CHECK(!ubq_local_import(again, NULL));

    lw.srv = &srv;
    lw.secret = secret;
    lw.draft = draft;
    OK(ubq_feed_new(local, &(ubq_feed_options){.on_store_event = save_before_the_import}, &local_feed));
    ubq_error *ended = ubq_feed_run(local_feed, local_events, &lw);
    CHECK(ended && ended->code == UBQ_UNAUTHENTICATED);  /* the local store was imported and removed */
    ubq_error_free(ended);
    if (lw.signing_in) pthread_join(lw.signer, NULL);
    OK(lw.save_err);
    OK(lw.err);
    CHECK(lw.t.n_events == 2);
    CHECK(lw.t.events[0].using_local_storage && lw.t.events[0].transition == UBQ_TRANSITION_NONE);
    CHECK(lw.t.events[1].phase == UBQ_PHASE_WILL_CHANGE &&
          lw.t.events[1].transition == UBQ_TRANSITION_INITIAL_IMPORT_COMPLETED && lw.t.events[1].using_local_storage);

    CHECK(lw.account && ubq_local_import(lw.account, &counts));
    CHECK(counts.inserted == 3 && counts.merged == 0 && counts.deduplicated == 0);  /* Eve too */
    CHECK(counts.key_values_moved == 1 && counts.key_values_kept == 0);
    CHECK(lw.account && ubq_device_secret(lw.account) == NULL);
    if (!lw.account) goto done;
    OK(ubq_open_store(lw.account, "notes", true, &notes));
    OK(ubq_fetch(notes, "Person", NULL, &people));
    CHECK(people->n_objects == 3);
    OK(ubq_feed_new(notes, &(ubq_feed_options){.start_oldest = true, .on_store_event = on_transition}, &feed));
    OK(ubq_feed_run(feed, watch, &at));
    CHECK(at.n_events == 1 && at.events[0].phase == UBQ_PHASE_DID_CHANGE &&
          at.events[0].transition == UBQ_TRANSITION_INITIAL_IMPORT_COMPLETED && !at.events[0].using_local_storage);
    CHECK(at.events[0].has_import_counts && at.events[0].import_counts.inserted == 3);
    CHECK(at.transaction_generation > 0 && at.transaction_generation < at.events[0].generation);
    CHECK(at.raw_store_events == 0);  /* the hook stopped the run at the DID_CHANGE: on_event never got it */

    /* the local client's stores are gone; the device can start afresh, with a new secret */
    Ubiquity__V1__ListStoresResponse *listed = NULL;
    ubq_error *revoked = ubq_list_stores(phone, &listed);
    CHECK(revoked && revoked->code == UBQ_UNAUTHENTICATED && ubq_error_is(revoked, "SESSION_REVOKED"));
    ubq_error_free(revoked);
    ubq_message_free(listed);
    OK(ubq_start_local_session(srv.address, NULL, "phone-c", NULL, &fresh));
    CHECK(ubq_device_secret(fresh) && strcmp(ubq_device_secret(fresh), secret) != 0);
done:
    ubq_message_free(people);
    ubq_feed_free(feed);
    ubq_feed_free(local_feed);
    ubq_context_close(draft);
    ubq_store_free(notes);
    ubq_store_free(local);
    ubq_client_free(lw.account);
    ubq_client_free(fresh);
    ubq_client_free(again);
    ubq_client_free(phone);
    ubq_values_free(eve);
    free(secret);
    if (srv.pid) test_server_stop(&srv);
}

/* A server without --local-stores refuses a local session, typed, at ubq_start_local_session. */
static void test_local_sessions_refused_when_the_server_has_none(ubq_client *unused) {
    (void)unused;
    ubq_client *phone = NULL;
    ubq_error *e = ubq_start_local_session(shared_server->address, NULL, "phone-d", NULL, &phone);
    CHECK(e && e->code == UBQ_FAILED_PRECONDITION && ubq_error_is(e, "LOCAL_STORES_DISABLED"));
    CHECK(phone == NULL);
    ubq_error_free(e);
}

/* Ping, info and stats; a store backed up and restored by the operator (the later save undone);
 * a session's backup refused with nothing written. */
static void test_admin_backs_up_and_restores_a_store(ubq_client *c) {
    ubq_client *op = NULL;
    ubq_store *s = NULL;
    Ubiquity__V1__PingResponse *pong = NULL;
    Ubiquity__V1__ServerInfo *info = NULL;
    Ubiquity__V1__ServerStats *stats = NULL;
    Ubiquity__V1__BackupManifest *manifest = NULL;
    Ubiquity__V1__RestoreStoreResponse *restored = NULL;
    Ubiquity__V1__FetchResults *people = NULL;
    char dir[700], refused_dir[700], uuid[37];
    ubq__uuid(uuid);
    snprintf(dir, sizeof dir, "%s/backup-%s", workdir, uuid);
    snprintf(refused_dir, sizeof refused_dir, "%s/refused-%s", workdir, uuid);
    char key[256];
    CHECK(test_server_operator_key(shared_server, key, sizeof key) == 0);
    OK(ubq_connect(shared_server->address, &(ubq_client_options){.bearer_token = key}, &op));
    OK(ubq_admin_ping(op, "hi", 2, &pong));
    CHECK(pong->payload.len == 2 && memcmp(pong->payload.data, "hi", 2) == 0 && pong->server_time_micros > 0);
    OK(ubq_admin_server_info(op, &info));
    CHECK(strcmp(info->name, "ubiquityd") == 0 && info->limits && info->limits->max_receive_message_bytes > 0);
    OK(ubq_admin_server_stats(op, &stats));
    CHECK(stats->open_connections >= 1 && stats->accepted_connections >= 1);

    OK(new_store(c, "backup", &s));
    OK(add_person(s, "Ann", 30, NULL, -1, NULL));
    OK(ubq_admin_backup(op, dir, ubq_store_id(s), &manifest));
    CHECK(manifest->n_stores == 1 && strcmp(manifest->stores[0]->store_id, ubq_store_id(s)) == 0);
    CHECK(manifest->n_databases == 0 && strcmp(manifest->directory, dir) == 0);
    OK(add_person(s, "Bob", 40, NULL, -1, NULL));
    ubq_error *e = ubq_admin_restore_store(op, dir, ubq_store_id(s), false, NULL);
    CHECK(e && e->code == UBQ_FAILED_PRECONDITION && ubq_error_is(e, "STORE_EXISTS"));
    ubq_error_free(e);
    OK(ubq_admin_restore_store(op, dir, ubq_store_id(s), true, &restored));
    CHECK(manifest->n_stores == 1 && restored->generation == manifest->stores[0]->generation);
    OK(ubq_fetch(s, "Person", NULL, &people));
    CHECK(people->n_objects == 1);

    /* an account's session is not the operator */
    e = ubq_admin_backup(c, refused_dir, NULL, NULL);
    CHECK(e && e->code == UBQ_UNAUTHENTICATED);
    ubq_error_free(e);
    struct stat st;
    CHECK(stat(refused_dir, &st) != 0);
done:
    ubq_message_free(people);
    ubq_message_free(restored);
    ubq_message_free(manifest);
    ubq_message_free(stats);
    ubq_message_free(info);
    ubq_message_free(pong);
    ubq_store_free(s);
    ubq_client_free(op);
}

const scenario lifecycle_scenarios[] = {
#define T(f) {#f, f}
    T(test_a_sign_out_reaches_on_store_event_as_will_then_did),
    T(test_local_work_is_imported_at_first_sign_in),
    T(test_local_sessions_refused_when_the_server_has_none),
    T(test_admin_backs_up_and_restores_a_store),
#undef T
    {NULL, NULL}};

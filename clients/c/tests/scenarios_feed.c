/* The change feed: order, author filter, live queries, resume after a restart, HISTORY_EXPIRED. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "server.h"

#include "fixtures.h"

/* Collects transactions; stops after `want` of them. */
typedef struct {
    int want, seen, caught_up;
    int64_t generations[8];
    char *object_ids[8];
    int64_t ages[8];
    /* restart test */
    test_server *server;
    ubq_store *store;
    int restarted;
    int64_t saved_generation;
    char *saved_id;
    void *extra;  /* the HISTORY_EXPIRED test's state */
} collector;

static void collect(collector *k, const Ubiquity__V1__SubscribeResponse *ev) {
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP) k->caught_up++;
    if (ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_TRANSACTIONS) return;
    for (size_t i = 0; i < ev->transactions->n_transactions && k->seen < 8; i++) {
        const Ubiquity__V1__Transaction *t = ev->transactions->transactions[i];
        k->generations[k->seen] = t->generation;
        k->object_ids[k->seen] = t->n_changes ? ubq__xstrdup(t->changes[0]->object_id) : NULL;
        int64_t age = -1;
        if (t->n_changes) ubq_value_int(UBQ_GET(t->changes[0], values, "age"), &age);
        k->ages[k->seen] = age;
        k->seen++;
    }
}

static void collector_free(collector *k) {
    for (int i = 0; i < k->seen; i++) free(k->object_ids[i]);
    free(k->saved_id);
}

static ubq_feed_action until_enough(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    collector *k = user;
    collect(k, ev);
    if (k->want == 0) return k->caught_up ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;  /* subscribed: stop there */
    return k->seen >= k->want ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static void test_feed_delivers_saves_in_order_with_values(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    char *ann = NULL;
    collector k = {.want = 2};
    OK(new_store(c, "feed", &s));
    OK(ubq_feed_new(s, &(ubq_feed_options){.include_values = true}, &feed));
    /* Start from now, then write: the first run stops at caught-up, so the writes come after. */
    collector first = {.want = 0};
    OK(ubq_feed_run(feed, until_enough, &first));
    OK(add_person(s, "Ann", 30, NULL, -1, &ann));
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 31)));
    OK(ubq_feed_run(feed, until_enough, &k));
    CHECK(k.seen == 2 && k.generations[1] == k.generations[0] + 1);
    CHECK(k.object_ids[0] && strcmp(k.object_ids[0], ann) == 0);
    CHECK(k.ages[1] == 31);
    CHECK(ubq_feed_token(feed).len > 0);
done:
    collector_free(&k);
    free(ann);
    ubq_feed_free(feed);
    ubq_store_free(s);
}

/* A device does not play back its own saves: transactions by an excluded author are skipped. */
static void test_feed_skips_excluded_authors(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    ubq_changes *mine = ubq_changes_new(), *theirs = ubq_changes_new();
    ubq_values *v = ubq_values_string(ubq_values_new(), "name", "Ann");
    Ubiquity__V1__SaveResult *r = NULL;
    collector k = {.want = 1};
    ubq_changes_insert(mine, "a", "Person", v);
    ubq_changes_insert(theirs, "b", "Person", v);
    OK(new_store(c, "authors", &s));
    const char *me[] = {"device-1", NULL};
    OK(ubq_feed_new(s, &(ubq_feed_options){.exclude_authors = me}, &feed));
    collector first = {.want = 0};
    OK(ubq_feed_run(feed, until_enough, &first));
    OK(ubq_save(s, mine, &(ubq_save_options){.author = "device-1"}, NULL));
    OK(ubq_save(s, theirs, &(ubq_save_options){.author = "device-2"}, &r));
    OK(ubq_feed_run(feed, until_enough, &k));
    CHECK(k.seen == 1 && k.generations[0] == r->generation);  /* device-1's save, one earlier, is not there */
done:
    collector_free(&k);
    ubq_message_free(r);
    ubq_values_free(v);
    ubq_changes_free(mine);
    ubq_changes_free(theirs);
    ubq_feed_free(feed);
    ubq_store_free(s);
}

typedef struct { int updates; int entered, changed, left; } live_counts;

static ubq_feed_action count_live(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    live_counts *k = user;
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP && k->updates == 0) return UBQ_FEED_STOP;
    if (ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_LIVE_QUERY) return UBQ_FEED_CONTINUE;
    k->updates++;
    k->entered += (int)ev->live_query->n_entered;
    k->changed += (int)ev->live_query->n_changed;
    k->left += (int)ev->live_query->n_left_object_ids;
    return UBQ_FEED_STOP;  /* one update per run */
}

/* A live query: Ann enters `age > $min` at 40, changes inside it at 41, leaves it at 20. */
static void test_feed_follows_a_live_query(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    char *ann = NULL;
    ubq_values *args = ubq_values_int32(ubq_values_new(), "min", 30);
    live_counts subscribed = {0}, entered = {0}, changed = {0}, left = {0};
    OK(new_store(c, "live", &s));
    OK(ubq_feed_new(s, &(ubq_feed_options){.live_query = {.entity = "Person", .predicate = "age > $min",
                                                          .arguments = args}}, &feed));
    OK(ubq_feed_run(feed, count_live, &subscribed));
    OK(add_person(s, "Ann", 40, NULL, -1, &ann));
    OK(ubq_feed_run(feed, count_live, &entered));
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 41)));
    OK(ubq_feed_run(feed, count_live, &changed));
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 20)));
    OK(ubq_feed_run(feed, count_live, &left));
    CHECK(entered.updates == 1 && entered.entered == 1 && entered.changed == 0 && entered.left == 0);
    CHECK(changed.updates == 1 && changed.changed == 1 && changed.entered == 0);
    CHECK(left.updates == 1 && left.left == 1 && left.entered == 0);
done:
    free(ann);
    ubq_values_free(args);
    ubq_feed_free(feed);
    ubq_store_free(s);
}

/* The on_live_query hook gets each update typed, with the objects' values (include_values): Ann
 * enters at 40 with her values, then leaves at 20 by her ID. */
typedef struct { int updates; int64_t generation; size_t entered, changed, left; int64_t age; char id[256]; } typed_live;

static ubq_feed_action on_live(ubq_feed *f, const ubq_live_query_update *u, void *user) {
    (void)f;
    typed_live *k = user;
    k->updates++;
    k->generation = u->generation;
    k->entered = u->n_entered;
    k->changed = u->n_changed;
    k->left = u->n_left;
    if (u->n_entered) {
        snprintf(k->id, sizeof k->id, "%s", u->entered[0]->object_id);
        k->age = int_of(u->entered[0]->object, "age");
    }
    if (u->n_left) snprintf(k->id, sizeof k->id, "%s", u->left[0]);
    return UBQ_FEED_STOP;
}

static ubq_feed_action caught_up_once(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    typed_live *k = user;
    return ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP && k->updates == 0 ? UBQ_FEED_STOP
                                                                                                 : UBQ_FEED_CONTINUE;
}

static void test_live_query_updates_reach_the_hook_typed(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    char *ann = NULL;
    typed_live subscribed = {0}, entered = {0}, left = {0};
    OK(new_store(c, "live-typed", &s));
    OK(ubq_feed_new(s, &(ubq_feed_options){.include_values = true, .on_live_query = on_live,
                                           .live_query = {.entity = "Person", .predicate = "age > 30"}}, &feed));
    OK(ubq_feed_run(feed, caught_up_once, &subscribed));
    OK(add_person(s, "Ann", 40, NULL, -1, &ann));
    OK(ubq_feed_run(feed, caught_up_once, &entered));
    CHECK(entered.updates == 1 && entered.entered == 1 && entered.changed == 0 && entered.left == 0);
    CHECK(strcmp(entered.id, ann) == 0 && entered.age == 40);
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 20)));
    OK(ubq_feed_run(feed, caught_up_once, &left));
    CHECK(left.updates == 1 && left.left == 1 && left.entered == 0 && strcmp(left.id, ann) == 0);
    CHECK(left.generation == entered.generation + 1);
done:
    free(ann);
    ubq_feed_free(feed);
    ubq_store_free(s);
}

/* History pages from the oldest and from a token; the deletions after a token. */
static void test_history_and_deletions_page_by_page(ubq_client *c) {
    ubq_store *s = NULL;
    char *ann = NULL, *bob = NULL;
    ProtobufCBinaryData before = {0, NULL};
    Ubiquity__V1__FetchHistoryResponse *first = NULL, *rest = NULL;
    Ubiquity__V1__FetchDeletionsResponse *gone = NULL;
    ubq_changes *del = ubq_changes_new();
    OK(new_store(c, "history", &s));
    OK(add_person(s, "Ann", -1, NULL, -1, &ann));
    OK(ubq_current_token(s, &before));
    OK(add_person(s, "Bob", -1, NULL, -1, &bob));
    ubq_changes_delete(del, ann, -1);
    OK(ubq_save(s, del, NULL, NULL));
    OK(ubq_fetch_history(s, (ProtobufCBinaryData){0, NULL}, 2, &first));
    CHECK(first->n_transactions == 2 && first->has_more);
    CHECK(first->n_transactions == 2 && first->transactions[0]->n_changes == 1 &&
          strcmp(first->transactions[0]->changes[0]->object_id, ann) == 0);
    OK(ubq_fetch_history(s, first->next_token, 2, &rest));
    CHECK(rest->n_transactions == 1 && !rest->has_more);
    CHECK(rest->n_transactions == 1 && rest->transactions[0]->changes[0]->kind == UBIQUITY__V1__CHANGE__KIND__KIND_DELETE);
    OK(ubq_fetch_deletions(s, before, 0, &gone));
    CHECK(gone->n_deletions == 1 && strcmp(gone->deletions[0]->object_id, ann) == 0 && !gone->has_more);
done:
    free(ann);
    free(bob);
    free(before.data);
    ubq_changes_free(del);
    ubq_message_free(first);
    ubq_message_free(rest);
    ubq_message_free(gone);
    ubq_store_free(s);
}

/* Inside the feed's callback: after the first transaction, restart the server (same data, same
 * port) and save again; the feed must deliver exactly the next transaction. */
static ubq_feed_action restart_after_first(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    collector *k = user;
    collect(k, ev);
    if (k->seen == 1 && !k->restarted) {
        k->restarted = 1;
        int port = k->server->port;
        char dir[512];
        snprintf(dir, sizeof dir, "%s", k->server->data_dir);
        if (test_server_stop(k->server) != 0 || test_server_start(k->server, dir, port) != 0) return UBQ_FEED_STOP;
        k->restarted = 2;
        ubq_values *v = ubq_values_string(ubq_values_new(), "name", "Bob");
        ubq_changes *ch = ubq_changes_new();
        ubq_changes_insert(ch, "b", "Person", v);
        Ubiquity__V1__SaveResult *r = NULL;
        ubq_error *err = ubq_save(k->store, ch, NULL, &r);  /* the client reconnects by itself */
        if (!err) {
            k->saved_generation = r->generation;
            k->saved_id = ubq__xstrdup(ubq_permanent_id(r, "b"));
        }
        ubq_error_free(err);
        ubq_message_free(r);
        ubq_changes_free(ch);
        ubq_values_free(v);
    }
    return k->seen >= k->want ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static void test_feed_resumes_from_its_last_token_after_a_server_restart(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    collector k = {.want = 2, .server = &t};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/restart", workdir);
    if (test_server_start(&t, dir, 0) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, SIGNED_IN(&t), &c));
    OK(new_store(c, "feed", &s));
    k.store = s;
    OK(ubq_feed_new(s, &(ubq_feed_options){.reconnect_for_ms = 60000}, &feed));
    collector first = {.want = 0};
    OK(ubq_feed_run(feed, until_enough, &first));  /* subscribed (caught up) before the write */
    OK(add_person(s, "Ann", -1, NULL, -1, NULL));
    OK(ubq_feed_run(feed, restart_after_first, &k));
    CHECK(k.restarted == 2 && k.saved_id);
    /* Exactly the next transaction: nothing lost, nothing delivered twice. */
    CHECK(k.seen == 2 && k.generations[1] == k.generations[0] + 1 && k.generations[1] == k.saved_generation);
    CHECK(k.saved_id && k.object_ids[1] && strcmp(k.object_ids[1], k.saved_id) == 0);
    CHECK(ubq_feed_reconnects(feed) >= 1);
done:
    collector_free(&k);
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(c);
    if (t.pid) test_server_stop(&t);
}

typedef struct {
    ubq_store *store;
    int calls;
    bool deletions_available_set;
    int64_t baseline_count;
    ProtobufCBinaryData current;
} rebaseline;

static bool on_history_expired(ubq_feed *f, const ubq_error *err, ProtobufCBinaryData *from, void *user) {
    (void)f;
    collector *k = user;
    rebaseline *rb = k->extra;
    rb->calls++;
    if (!ubq_error_is(err, "HISTORY_EXPIRED") || !err->history_expired) return false;
    /* A real cache would read everything at current_token here, then continue from it. */
    Ubiquity__V1__FetchResults *r = NULL;
    ubq_error *e = ubq_fetch(rb->store, "Person", &(ubq_fetch_options){.at = err->history_expired->current_token}, &r);
    if (e) { ubq_error_free(e); return false; }
    rb->baseline_count = (int64_t)r->n_objects;
    ubq_message_free(r);
    rb->deletions_available_set = err->history_expired->oldest_retained_token.len > 0;
    free(rb->current.data);
    rb->current = ubq__token_copy(err->history_expired->current_token);
    *from = rb->current;
    return true;
}

static ubq_feed_action caught_up_then_one(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    collector *k = user;
    collect(k, ev);
    if (k->caught_up == 1 && ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP) {
        rebaseline *rb = k->extra;
        ubq_error_free(add_person(rb->store, "Cid", -1, NULL, -1, NULL));
    }
    return k->seen >= k->want ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static void test_history_expired_calls_the_hook_which_rebaselines(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_feed *feed = NULL, *bare = NULL;
    ProtobufCBinaryData old = {0, NULL};
    Ubiquity__V1__SaveResult *trim = NULL;
    rebaseline rb = {0};
    collector k = {.want = 1};
    OK(new_store(c, "expired", &s));
    rb.store = s;
    OK(ubq_current_token(s, &old));
    OK(add_person(s, "Ann", -1, NULL, -1, NULL));
    ubq_values *v = ubq_values_string(ubq_values_new(), "name", "Bob");
    ubq_changes *ch = ubq_changes_new();
    ubq_changes_insert(ch, "b", "Person", v);
    ubq_error *err = ubq_save(s, ch, NULL, &trim);
    ubq_changes_free(ch);
    ubq_values_free(v);
    OK(err);
    OK(ubq_delete_history(s, trim->token));

    /* Without a hook the run ends with the typed error. */
    OK(ubq_feed_new(s, &(ubq_feed_options){.start_token = old}, &bare));
    err = ubq_feed_run(bare, until_enough, &(collector){.want = 1});
    CHECK(err && err->code == UBQ_FAILED_PRECONDITION && ubq_error_is(err, "HISTORY_EXPIRED"));
    CHECK(err && err->history_expired && err->history_expired->current_token.len == trim->token.len &&
          memcmp(err->history_expired->current_token.data, trim->token.data, trim->token.len) == 0);
    ubq_error_free(err);

    /* With one: it re-baselines, and the feed goes on from the baseline's token. */
    k.extra = &rb;
    OK(ubq_feed_new(s, &(ubq_feed_options){.start_token = old, .on_history_expired = on_history_expired}, &feed));
    OK(ubq_feed_run(feed, caught_up_then_one, &k));
    CHECK(rb.calls == 1 && rb.baseline_count == 2 && rb.deletions_available_set);
    CHECK(k.seen == 1 && k.generations[0] == trim->generation + 1);
done:
    collector_free(&k);
    free(rb.current.data);
    free(old.data);
    ubq_message_free(trim);
    ubq_feed_free(feed);
    ubq_feed_free(bare);
    ubq_store_free(s);
}

const scenario feed_scenarios[] = {
#define T(f) {#f, f}
    T(test_feed_delivers_saves_in_order_with_values),
    T(test_feed_skips_excluded_authors),
    T(test_feed_follows_a_live_query),
    T(test_live_query_updates_reach_the_hook_typed),
    T(test_feed_resumes_from_its_last_token_after_a_server_restart),
    T(test_history_and_deletions_page_by_page),
    T(test_history_expired_calls_the_hook_which_rebaselines),
#undef T
    {NULL, NULL},
};

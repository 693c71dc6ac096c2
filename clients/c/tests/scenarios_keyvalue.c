/* The account's key-value store: set, get, list, compare-and-set conflicts, delete, and its feed. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

typedef struct { int changes; char key[128]; bool deleted; } kv_seen;

static ubq_feed_action first_kv_change(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    kv_seen *k = user;
    if (ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP && k->changes == 0 && k->key[0] == 0)
        return UBQ_FEED_STOP;  /* subscribed */
    if (ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_KEY_VALUE_CHANGE) return UBQ_FEED_CONTINUE;
    k->changes++;
    snprintf(k->key, sizeof k->key, "%s", ev->key_value_change->key);
    k->deleted = ev->key_value_change->deleted;
    return UBQ_FEED_STOP;
}

static void test_key_values_set_get_list_compare_and_set_delete_and_feed(ubq_client *c) {
    Ubiquity__V1__KeyValueWriteResponse *w = NULL;
    Ubiquity__V1__KeyValueEntry *e = NULL;
    Ubiquity__V1__KeyValueListResponse *list = NULL;
    ubq_feed *feed = NULL;
    kv_seen subscribed = {0}, seen = {.key = "-"};
    char key[64], other[64], id[37];
    ubq__uuid(id);
    snprintf(key, sizeof key, "c-tests.%s.theme", id);
    snprintf(other, sizeof other, "c-tests.%s.zoom", id);
    OK(ubq_kv_feed_new(c, NULL, &feed));
    OK(ubq_feed_run(feed, first_kv_change, &subscribed));
    OK(ubq_kv_set(c, key, "dark", 4, &(ubq_kv_options){.must_not_exist = true, .author = "c-tests"}, &w));
    int64_t v1 = w->version;
    ubq_message_free(w);
    w = NULL;
    OK(ubq_kv_set(c, other, "2", 1, NULL, NULL));
    OK(ubq_kv_get(c, key, &e));
    CHECK(e->value.len == 4 && memcmp(e->value.data, "dark", 4) == 0 && e->version == v1);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "c-tests.%s.", id);
    OK(ubq_kv_list(c, prefix, 0, (ProtobufCBinaryData){0, NULL}, &list));
    CHECK(list->n_entries == 2 && strcmp(list->entries[0]->key, key) == 0);
    /* compare-and-set: a stale version is refused, typed, and changes nothing */
    ubq_error *err = ubq_kv_set(c, key, "light", 5, &(ubq_kv_options){.expected_version = v1 + 7}, NULL);
    CHECK(err && err->code == UBQ_ABORTED && ubq_error_is(err, "KEY_VERSION_CONFLICT"));
    CHECK(err && err->key_conflict && err->key_conflict->exists && err->key_conflict->current_version == v1);
    ubq_error_free(err);
    OK(ubq_kv_delete(c, other, &(ubq_kv_options){.expected_version = 1}, NULL));
    err = ubq_kv_get(c, other, &e);
    CHECK(err && err->code == UBQ_NOT_FOUND && ubq_error_is(err, "KEY_NOT_FOUND"));
    ubq_error_free(err);
    /* the feed: the first change after subscribing is the first set */
    OK(ubq_feed_run(feed, first_kv_change, &seen));
    CHECK(seen.changes == 1 && strcmp(seen.key, key) == 0 && !seen.deleted);
done:
    ubq_message_free(w);
    ubq_message_free(e);
    ubq_message_free(list);
    ubq_feed_free(feed);
}

/* The feed's on_kv_change hook gets each change typed: a set (SERVER_CHANGE, its value, version,
 * author), the same key among every key set when a feed starts from the oldest (INITIAL_SYNC),
 * and its delete (deleted, a newer version). */
typedef struct {
    const char *key;                  /* the test's key: the account has others */
    bool stop_at_caught_up;
    int changes;
    ubq_kv_change last;               /* borrowed parts cleared */
    char value[16];
    char author[32];
} typed_kv;

static ubq_feed_action on_kv(ubq_feed *f, const ubq_kv_change *change, void *user) {
    (void)f;
    typed_kv *k = user;
    if (strcmp(change->key, k->key) != 0) return UBQ_FEED_CONTINUE;
    k->changes++;
    k->last = *change;
    snprintf(k->value, sizeof k->value, "%.*s", (int)change->value.len, (const char *)change->value.data);
    snprintf(k->author, sizeof k->author, "%s", change->author);
    k->last.key = k->last.author = NULL;
    k->last.value = k->last.token = (ProtobufCBinaryData){0, NULL};
    return k->stop_at_caught_up ? UBQ_FEED_CONTINUE : UBQ_FEED_STOP;
}

static ubq_feed_action until_caught_up(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f; (void)user;
    return ev->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static ubq_feed_action keep_going(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f; (void)ev; (void)user;
    return UBQ_FEED_CONTINUE;
}

static void test_key_value_changes_reach_the_hook_typed(ubq_client *c) {
    ubq_feed *live = NULL, *from_oldest = NULL;
    Ubiquity__V1__KeyValueWriteResponse *set = NULL, *deleted = NULL;
    char key[64], id[37];
    ubq__uuid(id);
    snprintf(key, sizeof key, "c-tests.%s.typed", id);
    typed_kv seen_set = {.key = key}, seen_sync = {.key = key, .stop_at_caught_up = true}, seen_delete = {.key = key};
    OK(ubq_kv_feed_new(c, &(ubq_feed_options){.on_kv_change = on_kv}, &live));
    OK(ubq_feed_run(live, until_caught_up, &seen_set));   /* subscribed before the write */
    OK(ubq_kv_set(c, key, "blue", 4, &(ubq_kv_options){.author = "c-typed"}, &set));
    OK(ubq_feed_run(live, keep_going, &seen_set));
    CHECK(seen_set.changes == 1 && seen_set.last.reason == UBQ_KV_REASON_SERVER_CHANGE);
    CHECK(strcmp(seen_set.value, "blue") == 0 && seen_set.last.version == set->version && !seen_set.last.deleted);
    CHECK(strcmp(seen_set.author, "c-typed") == 0);

    OK(ubq_kv_feed_new(c, &(ubq_feed_options){.start_oldest = true, .on_kv_change = on_kv}, &from_oldest));
    OK(ubq_feed_run(from_oldest, until_caught_up, &seen_sync));
    CHECK(seen_sync.changes == 1 && seen_sync.last.reason == UBQ_KV_REASON_INITIAL_SYNC);
    CHECK(strcmp(seen_sync.value, "blue") == 0 && seen_sync.last.version == set->version);

    OK(ubq_kv_delete(c, key, NULL, &deleted));
    OK(ubq_feed_run(live, keep_going, &seen_delete));
    CHECK(seen_delete.changes == 1 && seen_delete.last.deleted && seen_delete.value[0] == 0);
    CHECK(seen_delete.last.reason == UBQ_KV_REASON_SERVER_CHANGE && seen_delete.last.version > set->version);
done:
    ubq_message_free(deleted);
    ubq_message_free(set);
    ubq_feed_free(from_oldest);
    ubq_feed_free(live);
}

const scenario keyvalue_scenarios[] = {
#define T(f) {#f, f}
    T(test_key_values_set_get_list_compare_and_set_delete_and_feed),
    T(test_key_value_changes_reach_the_hook_typed),
#undef T
    {NULL, NULL},
};

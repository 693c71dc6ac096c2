/* Whole-store calls: Deduplicate, Seed, ExportBaseline, ImportStore, ReplaceStore. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

static ubq_error *insert_people(ubq_store *s, const char *const *names, size_t n) {
    ubq_values **rows = ubq__xcalloc(n, sizeof *rows);
    for (size_t i = 0; i < n; i++) rows[i] = ubq_values_string(ubq_values_new(), "name", names[i]);
    ubq_error *err = ubq_batch_insert(s, "Person", (const ubq_values *const *)rows, n, NULL, NULL);
    for (size_t i = 0; i < n; i++) ubq_values_free(rows[i]);
    free(rows);
    return err;
}

static int64_t count_people(ubq_store *s, const ProtobufCBinaryData *at) {
    Ubiquity__V1__FetchResults *r = NULL;
    ubq_error *err = ubq_fetch(s, "Person", &(ubq_fetch_options){
        .result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_COUNT, .at = at ? *at : (ProtobufCBinaryData){0}}, &r);
    int64_t n = err ? -1 : r->count;
    ubq_error_free(err);
    ubq_message_free(r);
    return n;
}

static void test_deduplicate_keeps_one_object_per_key(ubq_client *c) {
    ubq_store *s = NULL;
    Ubiquity__V1__DeduplicateResponse *r = NULL;
    OK(new_store(c, "dedup", &s));
    const char *names[] = {"Ann", "Ann", "Ann", "Bob"};
    OK(insert_people(s, names, 4));
    const char *key[] = {"name", NULL};
    OK(ubq_deduplicate(s, "Person", key, &(ubq_deduplicate_options){.author = "c-tests"}, &r));
    CHECK(r->groups == 1 && r->removed == 2 && r->token.len > 0);
    CHECK(r->n_details == 1 && r->details[0]->n_removed_object_ids == 2 && r->details[0]->winner_object_id[0]);
    CHECK(count_people(s, NULL) == 2);
done:
    ubq_message_free(r);
    ubq_store_free(s);
}

static void test_seed_applies_once_per_seed_id(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_changes *seed = ubq_changes_new();
    ubq_values *ann = ubq_values_string(ubq_values_new(), "name", "Ann");
    Ubiquity__V1__SeedResponse *first = NULL, *again = NULL;
    OK(new_store(c, "seed", &s));
    ubq_changes_insert(seed, "ann", "Person", ann);
    OK(ubq_seed(s, "initial-v1", seed, "c-tests", &first));
    OK(ubq_seed(s, "initial-v1", seed, NULL, &again));
    CHECK(first->applied && !again->applied);
    CHECK(first->n_permanent_ids == 1 && again->n_permanent_ids == 1 &&
          strcmp(first->permanent_ids[0]->value, again->permanent_ids[0]->value) == 0);
    CHECK(count_people(s, NULL) == 1);
done:
    ubq_message_free(first);
    ubq_message_free(again);
    ubq_values_free(ann);
    ubq_changes_free(seed);
    ubq_store_free(s);
}

typedef struct {
    int chunks, objects, stop_after;
    bool last_seen, same_token;
    int64_t total;
    ProtobufCBinaryData token;   /* the first chunk's, copied */
} baseline_seen;

static bool on_chunk(const Ubiquity__V1__BaselineChunk *chunk, void *user) {
    baseline_seen *b = user;
    if (b->chunks++ == 0) b->token = ubq__token_copy(chunk->token);
    else b->same_token &= chunk->token.len == b->token.len && memcmp(chunk->token.data, b->token.data, b->token.len) == 0;
    b->objects += (int)chunk->n_objects;
    if (chunk->last) { b->last_seen = true; b->total = chunk->total; }
    return b->chunks != b->stop_after;
}

static void test_export_baseline_in_chunks_at_one_generation(ubq_client *c) {
    ubq_store *s = NULL;
    baseline_seen all = {.same_token = true}, first = {.same_token = true, .stop_after = 1};
    OK(new_store(c, "baseline", &s));
    const char *names[] = {"a", "b", "c", "d", "e", "f", "g"};
    OK(insert_people(s, names, 7));
    ProtobufCBinaryData now = {0};
    OK(ubq_current_token(s, &now));
    OK(ubq_export_baseline(s, NULL, 3, on_chunk, &all));
    CHECK(all.chunks == 3 && all.objects == 7 && all.last_seen && all.total == 7 && all.same_token);
    CHECK(all.token.len == now.len && memcmp(all.token.data, now.data, now.len) == 0);
    OK(ubq_export_baseline(s, &now, 3, on_chunk, &first));  /* stopping early is not an error */
    CHECK(first.chunks == 1 && first.objects == 3 && !first.last_seen);
    free(now.data);
done:
    free(all.token.data);
    free(first.token.data);
    ubq_store_free(s);
}

static void test_import_then_replace_store(ubq_client *c) {
    ubq_store *src = NULL, *copy = NULL, *other = NULL;
    Ubiquity__V1__ImportStoreResponse *imported = NULL;
    Ubiquity__V1__ReplaceStoreResponse *replaced = NULL;
    ProtobufCBinaryData before = {0};
    OK(new_store(c, "import-src", &src));
    OK(new_store(c, "import-copy", &copy));
    OK(new_store(c, "replace-src", &other));
    const char *names[] = {"Ann", "Bob", "Cid"};
    OK(insert_people(src, names, 3));
    OK(ubq_import_store(copy, ubq_store_id(src), &(ubq_import_options){.author = "c-tests"}, &imported));
    CHECK(imported->imported == 3 && imported->n_object_id_map == 3);
    CHECK(count_people(copy, NULL) == 3 && count_people(src, NULL) == 3);

    OK(insert_people(other, names, 1));
    OK(ubq_current_token(copy, &before));
    OK(ubq_replace_store(copy, ubq_store_id(other), &replaced));
    CHECK(count_people(copy, &replaced->token) == 1);
    Ubiquity__V1__FetchResults *old = NULL;
    ubq_error *err = ubq_fetch(copy, "Person", &(ubq_fetch_options){.at = before}, &old);
    CHECK(err && err->code == UBQ_FAILED_PRECONDITION &&
          (ubq_error_is(err, "GENERATION_EXPIRED") || ubq_error_is(err, "STORE_REPLACED")));
    ubq_error_free(err);
    ubq_message_free(old);
    char missing[37];
    ubq__uuid(missing);
    err = ubq_import_store(copy, missing, NULL, NULL);
    CHECK(err && err->code == UBQ_NOT_FOUND && ubq_error_is(err, "STORE_NOT_FOUND"));
    ubq_error_free(err);
done:
    free(before.data);
    ubq_message_free(imported);
    ubq_message_free(replaced);
    ubq_store_free(src);
    ubq_store_free(copy);
    ubq_store_free(other);
}

const scenario maintenance_scenarios[] = {
#define T(f) {#f, f}
    T(test_deduplicate_keeps_one_object_per_key),
    T(test_seed_applies_once_per_seed_id),
    T(test_export_baseline_in_chunks_at_one_generation),
    T(test_import_then_replace_store),
#undef T
    {NULL, NULL},
};

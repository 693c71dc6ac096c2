/* Stores, fetches and saves: predicate fetches, batches, reads at a token, client transaction IDs. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

static void test_open_list_and_reopen_stores(ubq_client *c) {
    ubq_store *a = NULL, *b = NULL, *missing = NULL;
    Ubiquity__V1__ListStoresResponse *list = NULL;
    char name[64], id[37];
    ubq__uuid(id);
    snprintf(name, sizeof name, "s-%s", id);
    OK(ubq_open_store(c, name, false, &a));
    CHECK(ubq_store_created(a));
    OK(ubq_open_store(c, name, true, &b));
    CHECK(!ubq_store_created(b) && strcmp(ubq_store_id(a), ubq_store_id(b)) == 0);
    OK(ubq_list_stores(c, &list));
    bool listed = false;
    for (size_t i = 0; i < list->n_stores; i++) listed |= strcmp(list->stores[i]->name, name) == 0;
    CHECK(listed);
    ubq_error *err = ubq_open_store(c, "missing-store-never-created", true, &missing);
    CHECK(err && err->code == UBQ_NOT_FOUND && ubq_error_is(err, "STORE_NOT_FOUND"));
    CHECK(missing == NULL);
    ubq_error_free(err);
done:
    ubq_message_free(list);
    ubq_store_free(a);
    ubq_store_free(b);
}

static void test_save_then_fetch_with_predicate_arguments_sort_limit_offset(ubq_client *c) {
    ubq_store *s = NULL;
    char *ids[4] = {0};
    Ubiquity__V1__FetchResults *r = NULL, *page = NULL, *in = NULL, *count = NULL, *only_ids = NULL;
    Ubiquity__V1__GetObjectsResponse *got = NULL;
    ubq_values *args = NULL;
    OK(new_store(c, "fetch", &s));
    OK(add_person(s, "Ann", 30, NULL, -1, &ids[0]));
    OK(add_person(s, "Bob", 40, NULL, -1, &ids[1]));
    OK(add_person(s, "Cid", 50, NULL, -1, &ids[2]));
    OK(add_person(s, "Dee", 20, NULL, -1, &ids[3]));

    args = ubq_values_int32(ubq_values_new(), "min", 30);
    const char *by_age_desc[] = {"-age", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.predicate = "age >= $min", .arguments = args, .sort = by_age_desc}, &r));
    CHECK(r->n_objects == 3 && strcmp(string_of(r->objects[0], "name"), "Cid") == 0 &&
          strcmp(string_of(r->objects[2], "name"), "Ann") == 0);
    CHECK(r->token.len > 0);

    const char *by_age[] = {"age", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.sort = by_age, .limit = 2, .offset = 1}, &page));
    CHECK(page->n_objects == 2 && strcmp(string_of(page->objects[0], "name"), "Ann") == 0 &&
          strcmp(string_of(page->objects[1], "name"), "Bob") == 0);

    const char *names[] = {"Dee", "Bob"};
    ubq_values_string_list(args, "names", names, 2);
    const char *by_name[] = {"name", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.predicate = "name IN $names", .arguments = args, .sort = by_name}, &in));
    CHECK(in->n_objects == 2 && strcmp(in->objects[0]->object_id, ids[1]) == 0 &&
          strcmp(in->objects[1]->object_id, ids[3]) == 0);

    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.predicate = "age < 45",
                                                     .result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_COUNT}, &count));
    CHECK(count->count == 3);
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.predicate = "name == 'Ann'",
                                                     .result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_OBJECT_IDS}, &only_ids));
    CHECK(only_ids->n_object_ids == 1 && strcmp(only_ids->object_ids[0], ids[0]) == 0 && only_ids->n_objects == 0);

    const char *want[] = {ids[0], ids[2]};
    OK(ubq_get_objects(s, want, 2, NULL, &got));
    CHECK(got->n_objects == 2);
    CHECK(strcmp(string_of(ubq_find_object(got, ids[2]), "name"), "Cid") == 0);
    CHECK(ubq_find_object(got, ids[0]) && ubq_find_object(got, ids[0])->version == 1);
done:
    for (int i = 0; i < 4; i++) free(ids[i]);
    ubq_values_free(args);
    ubq_message_free(r); ubq_message_free(page); ubq_message_free(in); ubq_message_free(count);
    ubq_message_free(only_ids);
    ubq_message_free(got);
    ubq_store_free(s);
}

typedef struct { int batches, objects, stop_after; } batch_count;

static bool count_batches(const Ubiquity__V1__FetchResults *batch, void *user) {
    batch_count *b = user;
    b->batches++;
    b->objects += (int)batch->n_objects;
    return b->batches != b->stop_after;
}

static void test_fetch_stream_delivers_batches_and_stops_when_asked(ubq_client *c) {
    ubq_store *s = NULL;
    Ubiquity__V1__GetModelResponse *model = NULL;
    OK(new_store(c, "stream", &s));
    for (int i = 0; i < 5; i++) OK(add_person(s, "P", i, NULL, -1, NULL));
    const char *by_age[] = {"age", NULL};
    batch_count all = {0}, first = {.stop_after = 1};
    OK(ubq_fetch_stream(s, "Person", &(ubq_fetch_options){.sort = by_age, .batch_size = 2}, count_batches, &all));
    CHECK(all.batches == 3 && all.objects == 5);
    OK(ubq_fetch_stream(s, "Person", &(ubq_fetch_options){.sort = by_age, .batch_size = 2}, count_batches, &first));
    CHECK(first.batches == 1 && first.objects == 2);
    ubq_error *err = ubq_fetch_stream(s, "Nobody", NULL, count_batches, &all);
    CHECK(err && ubq_error_is(err, "UNKNOWN_ENTITY"));
    ubq_error_free(err);
    OK(ubq_get_model(s, &model));
    CHECK(model->model && model->model->n_entities == 1 && strcmp(model->model->entities[0]->name, "Person") == 0);
    CHECK(model->version_hash && model->version_hash[0]);
done:
    ubq_message_free(model);
    ubq_store_free(s);
}

static void test_batch_insert_update_delete_and_destroy(ubq_client *c) {
    ubq_store *s = NULL;
    Ubiquity__V1__BatchResponse *ins = NULL, *upd = NULL, *del = NULL, *by_id = NULL;
    Ubiquity__V1__FetchResults *r = NULL;
    ubq_values *rows[3], *args = ubq_values_int32(ubq_values_new(), "min", 25), *set = ubq_values_int32(ubq_values_new(), "age", 99);
    for (int i = 0; i < 3; i++) rows[i] = ubq_values_int32(ubq_values_string(ubq_values_new(), "name", "P"), "age", 10 * (i + 1));
    OK(new_store(c, "batch", &s));
    OK(ubq_batch_insert(s, "Person", (const ubq_values *const *)rows, 3, &(ubq_batch_options){.return_object_ids = true}, &ins));
    CHECK(ins->count == 3 && ins->n_object_ids == 3);
    OK(ubq_batch_update(s, "Person", "age > $min", args, set, NULL, &upd));
    CHECK(upd->count == 1);  /* only the 30-year-old */
    OK(ubq_batch_delete(s, "Person", "age < $min", args, NULL, &del));
    CHECK(del->count == 2);
    const char *by_age[] = {"age", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.sort = by_age}, &r));
    CHECK(r->n_objects == 1 && int_of(r->objects[0], "age") == 99);
    const char *last[] = {ins->object_ids[2], NULL};
    OK(ubq_batch_delete(s, "Person", NULL, NULL, &(ubq_batch_options){.object_ids = last}, &by_id));
    CHECK(by_id->count == 1 && age_at(s, ins->object_ids[2], NULL) == -1);
    OK(ubq_destroy_store(s));
    ubq_error *err = ubq_batch_delete(s, "Person", NULL, NULL, NULL, NULL);
    CHECK(err && err->code == UBQ_NOT_FOUND && ubq_error_is(err, "STORE_NOT_FOUND"));
    ubq_error_free(err);
done:
    for (int i = 0; i < 3; i++) ubq_values_free(rows[i]);
    ubq_values_free(args);
    ubq_values_free(set);
    ubq_message_free(ins); ubq_message_free(upd); ubq_message_free(del); ubq_message_free(by_id); ubq_message_free(r);
    ubq_store_free(s);
}

/* A response of about 1.3 MB is one gRPC message over some 80 DATA frames: it must arrive whole. */
static void test_a_large_fetch_arrives_whole(ubq_client *c) {
    enum { N = 2000 };
    ubq_store *s = NULL;
    Ubiquity__V1__FetchResults *r = NULL;
    ubq_values **rows = ubq__xcalloc(N, sizeof *rows);
    char name[600];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = 0;
    for (int i = 0; i < N; i++) rows[i] = ubq_values_int32(ubq_values_string(ubq_values_new(), "name", name), "age", i);
    OK(new_store(c, "large", &s));
    OK(ubq_batch_insert(s, "Person", (const ubq_values *const *)rows, N, NULL, NULL));
    const char *by_age[] = {"age", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.sort = by_age}, &r));
    CHECK(r->n_objects == N);
    CHECK(r->n_objects == N && int_of(r->objects[N - 1], "age") == N - 1 &&
          strlen(string_of(r->objects[N - 1], "name")) == sizeof name - 1);
done:
    for (int i = 0; i < N; i++) ubq_values_free(rows[i]);
    free(rows);
    ubq_message_free(r);
    ubq_store_free(s);
}

static void test_fetch_at_a_token_sees_the_store_as_it_was(ubq_client *c) {
    ubq_store *s = NULL;
    char *ann = NULL;
    ProtobufCBinaryData before = {0, NULL};
    Ubiquity__V1__FetchResults *then = NULL, *now = NULL;
    OK(new_store(c, "pinned", &s));
    OK(add_person(s, "Ann", 30, NULL, -1, &ann));
    OK(ubq_current_token(s, &before));
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 31)));
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.at = before}, &then));
    CHECK(then->n_objects == 1 && int_of(then->objects[0], "age") == 30);
    CHECK(age_at(s, ann, &before) == 30);
    OK(ubq_fetch(s, "Person", NULL, &now));
    CHECK(now->n_objects == 1 && int_of(now->objects[0], "age") == 31);
done:
    free(before.data);
    free(ann);
    ubq_message_free(then);
    ubq_message_free(now);
    ubq_store_free(s);
}

static void test_the_same_client_transaction_id_applies_once(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_values *v = ubq_values_string(ubq_values_new(), "name", "Ann");
    ubq_changes *ch = ubq_changes_new();
    Ubiquity__V1__SaveResult *first = NULL, *again = NULL;
    Ubiquity__V1__FetchResults *count = NULL;
    ubq_changes_insert(ch, "a", "Person", v);
    OK(new_store(c, "txid", &s));
    ubq_save_options o = {.client_transaction_id = "tx-1"};
    OK(ubq_save(s, ch, &o, &first));
    OK(ubq_save(s, ch, &o, &again));
    CHECK(!first->replayed && again->replayed);
    CHECK(strcmp(ubq_permanent_id(first, "a"), ubq_permanent_id(again, "a")) == 0);
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_COUNT}, &count));
    CHECK(count->count == 1);
done:
    ubq_message_free(first); ubq_message_free(again); ubq_message_free(count);
    ubq_changes_free(ch);
    ubq_values_free(v);
    ubq_store_free(s);
}

/* The case client transaction IDs exist for: the save applied, its answer never came back. */
static void test_a_save_whose_response_was_lost_is_retried_and_applied_once(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *ctx = NULL;
    ubq_values *v = ubq_values_string(ubq_values_new(), "name", "Ann");
    ubq_changes *ch = ubq_changes_new();
    Ubiquity__V1__SaveResult *r = NULL;
    Ubiquity__V1__ContextSaveResponse *cr = NULL;
    Ubiquity__V1__FetchResults *count = NULL;
    ubq_changes_insert(ch, "a", "Person", v);
    OK(new_store(c, "retry", &s));
    ubq__conn_lose_next_response(c->conn, "/ubiquity.v1.Stores/Save");
    OK(ubq_save(s, ch, NULL, &r));
    CHECK(r->replayed);
    OK(ubq_context_create(s, NULL, &ctx));
    OK(ubq_context_insert(ctx, "Person", v, NULL));
    ubq__conn_lose_next_response(c->conn, "/ubiquity.v1.Contexts/Save");
    OK(ubq_context_save(ctx, NULL, &cr));
    CHECK(cr->result && cr->result->replayed);
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_COUNT}, &count));
    CHECK(count->count == 2);  /* one per save, not two */
done:
    ubq__conn_lose_next_response(c->conn, NULL);
    ubq_message_free(r); ubq_message_free(cr); ubq_message_free(count);
    ubq_context_close(ctx);
    ubq_changes_free(ch);
    ubq_values_free(v);
    ubq_store_free(s);
}

/* Dictionary fetches: rows of chosen properties grouped with aggregates and a HAVING over the
 * groups, distinct rows; a prefetch path that is no relationship refused, typed. */
static void test_dictionaries_grouped_aggregated_and_distinct(ubq_client *c) {
    ubq_store *s = NULL;
    Ubiquity__V1__FetchResults *groups = NULL, *names = NULL, *all = NULL;
    OK(new_store(c, "dictionaries", &s));
    OK(add_person(s, "Ann", 30, NULL, -1, NULL));
    OK(add_person(s, "Ann", 40, NULL, -1, NULL));
    OK(add_person(s, "Bob", 20, NULL, -1, NULL));
    const char *aggregates[] = {"name", "n = count:(SELF)", "total = sum:(age)", NULL};
    const char *by_name[] = {"name", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_DICTIONARIES,
                                                   .properties = aggregates, .group_by = by_name, .having = "n > 1"},
                 &groups));
    CHECK(groups->n_rows == 1);
    if (groups->n_rows == 1) {
        int64_t n = 0, total = 0;
        CHECK(strcmp(ubq_value_string(UBQ_GET(groups->rows[0], values, "name")), "Ann") == 0);
        CHECK(ubq_value_int(UBQ_GET(groups->rows[0], values, "n"), &n) && n == 2);
        CHECK(ubq_value_int(UBQ_GET(groups->rows[0], values, "total"), &total) && total == 70);
    }
    const char *name_only[] = {"name", NULL}, *sort[] = {"name", NULL};
    ubq_fetch_options rows = {.result_type = UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_DICTIONARIES,
                              .properties = name_only, .sort = sort};
    OK(ubq_fetch(s, "Person", &rows, &all));
    rows.distinct = true;
    OK(ubq_fetch(s, "Person", &rows, &names));
    CHECK(all->n_rows == 3 && names->n_rows == 2);
    CHECK(names->n_rows == 2 && strcmp(ubq_value_string(UBQ_GET(names->rows[1], values, "name")), "Bob") == 0);
    const char *prefetch[] = {"friends", NULL};
    ubq_error *e = ubq_fetch(s, "Person", &(ubq_fetch_options){.prefetch = prefetch}, NULL);
    CHECK(e && e->code == UBQ_INVALID_ARGUMENT);
    ubq_error_free(e);
done:
    ubq_message_free(all);
    ubq_message_free(names);
    ubq_message_free(groups);
    ubq_store_free(s);
}

/* Sorting that ignores case puts "alice" before "Bob" (byte order puts it after); a fence at the
 * generation a save reached reads, one past it is refused UNAVAILABLE GENERATION_NOT_REACHED. */
static void test_fetch_sorts_ignoring_case_and_fences_a_generation(ubq_client *c) {
    ubq_store *s = NULL;
    Ubiquity__V1__FetchResults *bytes = NULL, *folded = NULL, *fenced = NULL;
    Ubiquity__V1__SaveResult *saved = NULL;
    OK(new_store(c, "case", &s));
    OK(add_person(s, "alice", -1, NULL, -1, NULL));
    ubq_changes *ch = ubq_changes_new();
    ubq_values *bob = ubq_values_string(ubq_values_new(), "name", "Bob");
    ubq_changes_insert(ch, "b", "Person", bob);
    ubq_error *e = ubq_save(s, ch, NULL, &saved);
    ubq_changes_free(ch);
    ubq_values_free(bob);
    OK(e);
    const char *by_name[] = {"name", NULL};
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.sort = by_name}, &bytes));
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.sort = by_name, .sort_case_insensitive = true}, &folded));
    CHECK(bytes->n_objects == 2 && strcmp(string_of(bytes->objects[0], "name"), "Bob") == 0);
    CHECK(folded->n_objects == 2 && strcmp(string_of(folded->objects[0], "name"), "alice") == 0);
    OK(ubq_fetch(s, "Person", &(ubq_fetch_options){.minimum_generation = saved->generation}, &fenced));
    CHECK(fenced->n_objects == 2);
    e = ubq_fetch(s, "Person", &(ubq_fetch_options){.minimum_generation = saved->generation + 1000}, NULL);
    CHECK(e && e->code == UBQ_UNAVAILABLE && ubq_error_is(e, "GENERATION_NOT_REACHED"));
    ubq_error_free(e);
done:
    ubq_message_free(fenced);
    ubq_message_free(folded);
    ubq_message_free(bytes);
    ubq_message_free(saved);
    ubq_store_free(s);
}

const scenario store_scenarios[] = {
#define T(f) {#f, f}
    T(test_open_list_and_reopen_stores),
    T(test_save_then_fetch_with_predicate_arguments_sort_limit_offset),
    T(test_fetch_stream_delivers_batches_and_stops_when_asked),
    T(test_batch_insert_update_delete_and_destroy),
    T(test_a_large_fetch_arrives_whole),
    T(test_fetch_at_a_token_sees_the_store_as_it_was),
    T(test_the_same_client_transaction_id_applies_once),
    T(test_a_save_whose_response_was_lost_is_retried_and_applied_once),
    T(test_dictionaries_grouped_aggregated_and_distinct),
    T(test_fetch_sorts_ignoring_case_and_fences_a_generation),
#undef T
    {NULL, NULL},
};

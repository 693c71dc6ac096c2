/*
 * The client scenario suite (issue 20) against a real ubiquityd on 127.0.0.1: stores, fetches,
 * a save, a conflict under each merge policy, pinned fetches, a lost save answer retried once,
 * typed errors, and the change feed (order, resume after a server restart, HISTORY_EXPIRED hook).
 *
 *   UBIQUITYD=.build/debug/ubiquityd build/test_scenarios WORKDIR [TEST-NAME…]
 *   UBIQUITYD=… build/test_scenarios WORKDIR --serve PROGRAM [ARGS…]   (runs PROGRAM … ADDRESS)
 *
 * One server serves the tests (each on its own store); the restart test starts its own.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "internal.h"
#include "server.h"
#include "ubiquity/v1/admin.pb-c.h"
#include "ubiquity.h"

static int failed_checks;
static const char *workdir;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) { fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); failed_checks++; } \
    } while (0)
/* A call that must succeed; on failure the test stops (its later checks would only cascade). */
#define OK(call)                                                                                 \
    do {                                                                                         \
        ubq_error *e_ = (call);                                                                  \
        if (e_) {                                                                                \
            fprintf(stderr, "  %s:%d: %s failed: %s %s (%s)\n", __FILE__, __LINE__, #call,       \
                    ubq_code_name(e_->code), e_->reason ? e_->reason : "-", e_->message);         \
            ubq_error_free(e_);                                                                  \
            failed_checks++;                                                                     \
            goto done;                                                                           \
        }                                                                                        \
    } while (0)

/* ---- fixtures ------------------------------------------------------------------------------------ */

/* Person: name (required), age int32, email (unique), score double — the Python suite's model. */
static ubq_error *register_person_model(ubq_store *s) {
    Ubiquity__V1__Attribute name = UBIQUITY__V1__ATTRIBUTE__INIT, age = UBIQUITY__V1__ATTRIBUTE__INIT,
                            email = UBIQUITY__V1__ATTRIBUTE__INIT, score = UBIQUITY__V1__ATTRIBUTE__INIT;
    name.name = "name"; name.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING; name.required = true;
    age.name = "age"; age.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_INT32;
    email.name = "email"; email.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING;
    score.name = "score"; score.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_DOUBLE;
    Ubiquity__V1__Attribute *attrs[] = {&name, &age, &email, &score};
    char *unique_props[] = {"email"};
    Ubiquity__V1__PropertyList unique = UBIQUITY__V1__PROPERTY_LIST__INIT;
    unique.properties = unique_props;
    unique.n_properties = 1;
    Ubiquity__V1__PropertyList *uniques[] = {&unique};
    Ubiquity__V1__Entity person = UBIQUITY__V1__ENTITY__INIT;
    person.name = "Person";
    person.attributes = attrs;
    person.n_attributes = 4;
    person.uniqueness_constraints = uniques;
    person.n_uniqueness_constraints = 1;
    Ubiquity__V1__Entity *entities[] = {&person};
    Ubiquity__V1__Model model = UBIQUITY__V1__MODEL__INIT;
    model.version_identifier = "v1";
    model.entities = entities;
    model.n_entities = 1;
    return ubq_register_model(s, &model, NULL);
}

static ubq_error *new_store(ubq_client *c, const char *prefix, ubq_store **out) {
    char name[128], id[37];
    ubq__uuid(id);
    snprintf(name, sizeof name, "%s-%s", prefix, id);
    ubq_error *err = ubq_open_store(c, name, false, out);
    if (err) return err;
    err = register_person_model(*out);
    if (err) { ubq_store_free(*out); *out = NULL; }
    return err;
}

/* Inserts one Person and returns its permanent ID (malloc'd). */
static ubq_error *add_person(ubq_store *s, const char *name, int age, const char *email, double score, char **id) {
    ubq_values *v = ubq_values_new();
    ubq_values_string(v, "name", name);
    if (age >= 0) ubq_values_int32(v, "age", age);
    if (email) ubq_values_string(v, "email", email);
    if (score >= 0) ubq_values_double(v, "score", score);
    ubq_changes *ch = ubq_changes_new();
    ubq_changes_insert(ch, "p", "Person", v);
    Ubiquity__V1__SaveResult *r = NULL;
    ubq_error *err = ubq_save(s, ch, NULL, &r);
    ubq_changes_free(ch);
    ubq_values_free(v);
    if (err) return err;
    if (id) *id = ubq__xstrdup(ubq_permanent_id(r, "p"));
    ubq_message_free(r);
    return NULL;
}

static ubq_error *update_person(ubq_store *s, const char *id, ubq_values *v) {
    ubq_changes *ch = ubq_changes_new();
    ubq_changes_update(ch, id, v, -1);
    ubq_error *err = ubq_save(s, ch, NULL, NULL);
    ubq_changes_free(ch);
    ubq_values_free(v);
    return err;
}

static int64_t int_of(const Ubiquity__V1__ManagedObject *o, const char *key) {
    int64_t x = -1;
    if (!o || !ubq_value_int(UBQ_GET(o, values, key), &x)) return -1;
    return x;
}

static const char *string_of(const Ubiquity__V1__ManagedObject *o, const char *key) {
    const char *s = o ? ubq_value_string(UBQ_GET(o, values, key)) : NULL;
    return s ? s : "";
}

/* The age of `id` read through GetObjects at `at` (NULL: current); -1 if missing. */
static int64_t age_at(ubq_store *s, const char *id, const ProtobufCBinaryData *at) {
    Ubiquity__V1__GetObjectsResponse *r = NULL;
    ubq_error *err = ubq_get_objects(s, &id, 1, at, &r);
    if (err) { ubq_error_free(err); return -1; }
    int64_t age = int_of(ubq_find_object(r, id), "age");
    ubq_message_free(r);
    return age;
}

/* ---- stores, fetches, saves ------------------------------------------------------------------------ */

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
    Ubiquity__V1__FetchResults *r = NULL, *page = NULL, *in = NULL, *count = NULL;
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

    const char *want[] = {ids[0], ids[2]};
    OK(ubq_get_objects(s, want, 2, NULL, &got));
    CHECK(got->n_objects == 2);
    CHECK(strcmp(string_of(ubq_find_object(got, ids[2]), "name"), "Cid") == 0);
    CHECK(ubq_find_object(got, ids[0]) && ubq_find_object(got, ids[0])->version == 1);
done:
    for (int i = 0; i < 4; i++) free(ids[i]);
    ubq_values_free(args);
    ubq_message_free(r); ubq_message_free(page); ubq_message_free(in); ubq_message_free(count);
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
    Ubiquity__V1__BatchResponse *ins = NULL, *upd = NULL, *del = NULL;
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
    OK(ubq_destroy_store(s));
    ubq_error *err = ubq_batch_delete(s, "Person", NULL, NULL, NULL, NULL);
    CHECK(err && err->code == UBQ_NOT_FOUND && ubq_error_is(err, "STORE_NOT_FOUND"));
    ubq_error_free(err);
done:
    for (int i = 0; i < 3; i++) ubq_values_free(rows[i]);
    ubq_values_free(args);
    ubq_values_free(set);
    ubq_message_free(ins); ubq_message_free(upd); ubq_message_free(del); ubq_message_free(r);
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

/* ---- contexts ---------------------------------------------------------------------------------------- */

static void test_context_unit_of_work_pending_state_save_rollback_reset(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *ctx = NULL;
    char *tmp = NULL;
    Ubiquity__V1__ContextState *st = NULL;
    Ubiquity__V1__FetchResults *with = NULL, *without = NULL, *store_view = NULL, *after = NULL;
    Ubiquity__V1__ContextSaveResponse *saved = NULL;
    ubq_values *ann = ubq_values_int32(ubq_values_string(ubq_values_new(), "name", "Ann"), "age", 30);
    ubq_values *bob = ubq_values_string(ubq_values_new(), "name", "Bob");
    ubq_values *older = ubq_values_int32(ubq_values_new(), "age", 31);
    OK(new_store(c, "ctx", &s));
    OK(ubq_context_create(s, &(ubq_context_options){.name = "ui"}, &ctx));
    OK(ubq_context_insert(ctx, "Person", ann, &tmp));
    OK(ubq_context_state(ctx, &st));
    CHECK(st->has_changes && st->inserted_count == 1);
    ubq_message_free(st); st = NULL;
    OK(ubq_context_fetch(ctx, "Person", NULL, false, &with));
    CHECK(with->n_objects == 1 && strcmp(string_of(with->objects[0], "name"), "Ann") == 0);
    OK(ubq_context_fetch(ctx, "Person", NULL, true, &without));
    CHECK(without->n_objects == 0);
    OK(ubq_fetch(s, "Person", NULL, &store_view));
    CHECK(store_view->n_objects == 0);  /* nothing in the store before the save */

    OK(ubq_context_save(ctx, NULL, &saved));
    const char *id = saved->result ? ubq_permanent_id(saved->result, tmp) : NULL;
    CHECK(id != NULL && saved->state && !saved->state->has_changes);
    if (!id) goto done;
    CHECK(age_at(s, id, NULL) == 30);

    OK(ubq_context_refresh(ctx, false));
    OK(ubq_context_update(ctx, id, older));
    OK(ubq_context_delete(ctx, id));
    OK(ubq_context_state(ctx, &st));
    CHECK(st->deleted_count == 1);
    ubq_message_free(st); st = NULL;
    OK(ubq_context_rollback(ctx));
    OK(ubq_context_state(ctx, &st));
    CHECK(!st->has_changes);
    ubq_message_free(st); st = NULL;
    OK(ubq_context_insert(ctx, "Person", bob, NULL));
    OK(ubq_context_reset(ctx));
    OK(ubq_context_state(ctx, &st));
    CHECK(!st->has_changes);
    OK(ubq_fetch(s, "Person", NULL, &after));
    CHECK(after->n_objects == 1 && int_of(after->objects[0], "age") == 30);

    /* A closed context is gone on the server: the typed reason says so. */
    char *ctx_id = ubq__xstrdup(ubq_context_id(ctx));
    ubq_context_close(ctx);
    ctx = NULL;
    Ubiquity__V1__ContextRequest req = UBIQUITY__V1__CONTEXT_REQUEST__INIT;
    req.context_id = ctx_id;
    ubq_error *err = ubq__unary(c, "/ubiquity.v1.Contexts/GetState", &req.base,
                                &ubiquity__v1__context_state__descriptor, NULL);
    CHECK(err && err->code == UBQ_NOT_FOUND && ubq_error_is(err, "CONTEXT_NOT_FOUND"));
    ubq_error_free(err);
    free(ctx_id);
done:
    ubq_message_free(st); ubq_message_free(with); ubq_message_free(without);
    ubq_message_free(store_view); ubq_message_free(after); ubq_message_free(saved);
    free(tmp);
    ubq_values_free(ann); ubq_values_free(bob); ubq_values_free(older);
    ubq_context_close(ctx);
    ubq_store_free(s);
}

/* A nested context saves into its parent; only the parent's save reaches the store. */
static void test_a_nested_context_saves_into_its_parent(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *parent = NULL, *child = NULL;
    Ubiquity__V1__ContextSaveResponse *into_parent = NULL;
    Ubiquity__V1__ContextState *st = NULL;
    Ubiquity__V1__FetchResults *r = NULL;
    ubq_values *ann = ubq_values_string(ubq_values_new(), "name", "Ann");
    OK(new_store(c, "nested", &s));
    OK(ubq_context_create(s, NULL, &parent));
    OK(ubq_context_create(s, &(ubq_context_options){.parent = parent}, &child));
    OK(ubq_context_insert(child, "Person", ann, NULL));
    OK(ubq_context_save(child, NULL, &into_parent));
    CHECK(into_parent->saved_to_parent);
    OK(ubq_context_state(parent, &st));
    CHECK(st->has_changes && st->inserted_count == 1);
    OK(ubq_fetch(s, "Person", NULL, &r));
    CHECK(r->n_objects == 0);
    ubq_message_free(r);
    r = NULL;
    OK(ubq_context_save(parent, NULL, NULL));
    OK(ubq_fetch(s, "Person", NULL, &r));
    CHECK(r->n_objects == 1);
done:
    ubq_message_free(into_parent);
    ubq_message_free(st);
    ubq_message_free(r);
    ubq_values_free(ann);
    ubq_context_close(child);
    ubq_context_close(parent);
    ubq_store_free(s);
}

/* A context that read Ann at age 30 (score 1, email old@x), then the store moved her to 35 and
 * email new@x, then the context set age 33 and score 9. */
static ubq_error *conflicting_context(ubq_store *s, Ubiquity__V1__MergePolicy policy, ubq_context **ctx, char **ann) {
    ubq_error *err = add_person(s, "Ann", 30, "old@x", 1.0, ann);
    if (err) return err;
    if ((err = ubq_context_create(s, &(ubq_context_options){.name = "ui", .merge_policy = policy}, ctx))) return err;
    Ubiquity__V1__FetchResults *r = NULL;
    if ((err = ubq_context_fetch(*ctx, "Person", NULL, false, &r))) return err;  /* pins its generation */
    ubq_message_free(r);
    if ((err = update_person(s, *ann, ubq_values_string(ubq_values_int32(ubq_values_new(), "age", 35), "email", "new@x"))))
        return err;
    ubq_values *mine = ubq_values_double(ubq_values_int32(ubq_values_new(), "age", 33), "score", 9.0);
    err = ubq_context_update(*ctx, *ann, mine);
    ubq_values_free(mine);
    return err;
}

static void test_conflict_under_error_policy_is_typed_with_decoded_records(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *ctx = NULL;
    char *ann = NULL;
    Ubiquity__V1__ContextState *st = NULL;
    Ubiquity__V1__GetObjectsResponse *got = NULL;
    OK(new_store(c, "conflict", &s));
    OK(conflicting_context(s, UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_ERROR, &ctx, &ann));
    ubq_error *err = ubq_context_save(ctx, NULL, NULL);
    CHECK(err && err->code == UBQ_ABORTED && ubq_error_is(err, "MERGE_CONFLICT"));
    CHECK(err && err->conflicts && err->conflicts->n_conflicts == 1);
    if (err && err->conflicts && err->conflicts->n_conflicts == 1) {
        const Ubiquity__V1__ConflictRecord *r = err->conflicts->conflicts[0];
        int64_t age = 0;
        double score = 0;
        CHECK(r->kind == UBIQUITY__V1__CONFLICT_RECORD__KIND__KIND_VERSION_CHANGED);
        CHECK(strcmp(r->object_id, ann) == 0);
        CHECK(r->client_version == 1 && r->store_version == 2);
        CHECK(ubq_value_int(UBQ_GET(r, store_values, "age"), &age) && age == 35);
        CHECK(ubq_value_double(UBQ_GET(r, client_changes, "score"), &score) && score == 9.0);
    }
    ubq_error_free(err);
    OK(ubq_context_state(ctx, &st));
    CHECK(st->has_changes);  /* pending changes are kept for a retry */
    const char *ids[] = {ann};
    OK(ubq_get_objects(s, ids, 1, NULL, &got));
    double score = 0;
    CHECK(ubq_value_double(UBQ_GET(ubq_find_object(got, ann), values, "score"), &score) && score == 1.0);
done:
    ubq_message_free(st);
    ubq_message_free(got);
    free(ann);
    ubq_context_close(ctx);
    ubq_store_free(s);
}

static void test_conflict_under_each_trump_policy(ubq_client *c) {
    /* both sides changed age; only the context changed score; only the store changed email */
    static const struct { Ubiquity__V1__MergePolicy policy; int age; double score; const char *email; } cases[] = {
        {UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_MERGE_BY_PROPERTY_STORE_TRUMP, 35, 9.0, "new@x"},
        {UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_MERGE_BY_PROPERTY_OBJECT_TRUMP, 33, 9.0, "new@x"},
        {UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_OVERWRITE, 33, 9.0, "old@x"},
        {UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_ROLLBACK, 35, 1.0, "new@x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ubq_store *s = NULL;
        ubq_context *ctx = NULL;
        char *ann = NULL;
        Ubiquity__V1__ContextSaveResponse *saved = NULL;
        Ubiquity__V1__GetObjectsResponse *got = NULL;
        OK(new_store(c, "policy", &s));
        OK(conflicting_context(s, cases[i].policy, &ctx, &ann));
        OK(ubq_context_save(ctx, NULL, &saved));
        const char *ids[] = {ann};
        OK(ubq_get_objects(s, ids, 1, NULL, &got));
        const Ubiquity__V1__ManagedObject *o = ubq_find_object(got, ann);
        double score = -1;
        ubq_value_double(UBQ_GET(o, values, "score"), &score);
        CHECK(int_of(o, "age") == cases[i].age);
        CHECK(score == cases[i].score);
        CHECK(strcmp(string_of(o, "email"), cases[i].email) == 0);
        const Ubiquity__V1__SaveResult *r = saved->result;
        if (cases[i].policy == UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_ROLLBACK)
            CHECK(r && r->n_skipped_object_ids == 1 && strcmp(r->skipped_object_ids[0], ann) == 0);
        else
            CHECK(r && r->n_resolved_conflicts == 1 && strcmp(r->resolved_conflicts[0]->object_id, ann) == 0);
    done:
        if (failed_checks) fprintf(stderr, "  (policy %d)\n", cases[i].policy);
        ubq_message_free(saved);
        ubq_message_free(got);
        free(ann);
        ubq_context_close(ctx);
        ubq_store_free(s);
    }
}

static void test_pinned_context_reads_its_generation_until_refreshed(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *pinned = NULL, *first = NULL;
    char *ann = NULL;
    ProtobufCBinaryData at = {0, NULL};
    Ubiquity__V1__FetchResults *r = NULL;
    Ubiquity__V1__ContextState *st = NULL;
    OK(new_store(c, "pin", &s));
    OK(add_person(s, "Ann", 30, NULL, -1, &ann));
    OK(ubq_current_token(s, &at));
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 31)));
    OK(ubq_context_create(s, &(ubq_context_options){.pin = UBQ_PIN_AT_TOKEN, .token = at}, &pinned));
#define CTX_AGE(ctx, want)                                                          \
    do {                                                                            \
        OK(ubq_context_fetch((ctx), "Person", NULL, false, &r));                    \
        CHECK(r->n_objects == 1 && int_of(r->objects[0], "age") == (want));         \
        ubq_message_free(r);                                                        \
        r = NULL;                                                                   \
    } while (0)
    CTX_AGE(pinned, 30);
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 32)));
    CTX_AGE(pinned, 30);
    OK(ubq_context_state(pinned, &st));
    CHECK(st->generation_mode == UBIQUITY__V1__GENERATION_MODE__GENERATION_MODE_PINNED_AT_TOKEN);
    OK(ubq_context_pin(pinned, UBQ_UNPINNED, (ProtobufCBinaryData){0, NULL}));
    CTX_AGE(pinned, 32);
    OK(ubq_context_create(s, NULL, &first));  /* pinned at its first read */
    CTX_AGE(first, 32);
    OK(update_person(s, ann, ubq_values_int32(ubq_values_new(), "age", 33)));
    CTX_AGE(first, 32);
    OK(ubq_context_refresh(first, false));
    CTX_AGE(first, 33);
#undef CTX_AGE
done:
    ubq_message_free(r);
    ubq_message_free(st);
    free(at.data);
    free(ann);
    ubq_context_close(pinned);
    ubq_context_close(first);
    ubq_store_free(s);
}

/* ---- typed errors ------------------------------------------------------------------------------------ */

static void test_constraint_clash_is_typed(ubq_client *c) {
    ubq_store *s = NULL;
    OK(new_store(c, "unique", &s));
    OK(add_person(s, "Ann", -1, "ann@x", -1, NULL));
    ubq_error *err = add_person(s, "Ann2", -1, "ann@x", -1, NULL);
    CHECK(err && err->code == UBQ_ABORTED && ubq_error_is(err, "CONSTRAINT_CONFLICT"));
    CHECK(err && err->conflicts && err->conflicts->n_conflicts >= 1);
    if (err && err->conflicts && err->conflicts->n_conflicts >= 1) {
        const Ubiquity__V1__ConflictRecord *r = err->conflicts->conflicts[0];
        CHECK(r->kind == UBIQUITY__V1__CONFLICT_RECORD__KIND__KIND_UNIQUENESS_CLASH);
        CHECK(r->n_constraint == 1 && strcmp(r->constraint[0], "email") == 0);
    }
    ubq_error_free(err);
done:
    ubq_store_free(s);
}

static void test_bad_input_gives_typed_errors_with_reason_and_fields(ubq_client *c) {
    ubq_store *s = NULL, *other = NULL;
    Ubiquity__V1__FetchResults *r = NULL;
    OK(new_store(c, "bad", &s));
    ubq_error *err = ubq_fetch(s, "Person", &(ubq_fetch_options){.predicate = "age >"}, &r);
    CHECK(err && err->code == UBQ_INVALID_ARGUMENT && ubq_error_is(err, "PREDICATE_SYNTAX"));
    CHECK(err && err->bad_request && err->bad_request->n_field_violations >= 1 &&
          strcmp(err->bad_request->field_violations[0]->field, "fetch.predicate") == 0);
    ubq_error_free(err);
    err = ubq_fetch(s, "Nobody", NULL, &r);
    CHECK(err && ubq_error_is(err, "UNKNOWN_ENTITY"));
    ubq_error_free(err);

    ubq_values *no_name = ubq_values_int32(ubq_values_new(), "age", 3);  /* name is required */
    ubq_changes *ch = ubq_changes_new();
    ubq_changes_insert(ch, "a", "Person", no_name);
    err = ubq_save(s, ch, NULL, NULL);
    CHECK(err && err->code == UBQ_INVALID_ARGUMENT && ubq_error_is(err, "VALIDATION_FAILED"));
    bool named = false;
    for (size_t i = 0; err && err->bad_request && i < err->bad_request->n_field_violations; i++)
        named |= strncmp(err->bad_request->field_violations[i]->field, "inserts[0].values.name", 22) == 0;
    CHECK(named);
    ubq_error_free(err);
    ubq_changes_free(ch);
    ubq_values_free(no_name);

    err = ubq_fetch(s, "Person", &(ubq_fetch_options){.at = {11, (uint8_t *)"not a token"}}, &r);
    CHECK(err && ubq_error_is(err, "BAD_TOKEN"));
    ubq_error_free(err);
    OK(ubq_open_store(c, "no-model-yet", false, &other));
    err = ubq_fetch(other, "Person", NULL, &r);
    CHECK(err && err->code == UBQ_FAILED_PRECONDITION && ubq_error_is(err, "NO_MODEL"));
    ubq_error_free(err);

    OK(ubq_fetch(s, "Person", NULL, &r));
    CHECK(r->n_objects == 0);  /* nothing applied */
done:
    ubq_message_free(r);
    ubq_store_free(s);
    ubq_store_free(other);
}

static void test_a_stopped_server_is_unavailable_and_api_key_sign_in_is_refused(ubq_client *c) {
    (void)c;
    ubq_client *gone = NULL, *signed_in = NULL;
    ubq_store *s = NULL;
    char dir[600];
    test_server t;
    snprintf(dir, sizeof dir, "%s/gone", workdir);
    if (test_server_start(&t, dir, 0) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, &(ubq_client_options){.timeout_ms = 10000}, &gone));
    OK(ubq_open_store(gone, "x", false, &s));
    ubq_store_free(s);
    s = NULL;
    CHECK(test_server_stop(&t) == 0);
    ubq_error *err = ubq_open_store(gone, "x", false, &s);
    CHECK(err && err->code == UBQ_UNAVAILABLE);
    ubq_error_free(err);
    /* API-key sign-in waits for the Accounts service; it says so instead of failing later. */
    err = ubq_connect(t.address, &(ubq_client_options){.api_key = "k", .device_id = "d"}, &signed_in);
    CHECK(err && err->code == UBQ_UNIMPLEMENTED && signed_in == NULL);
    ubq_error_free(err);
done:
    if (t.pid) test_server_stop(&t);
    ubq_store_free(s);
    ubq_client_free(gone);
}

static bool keep_reading(void *user, const uint8_t *message, size_t len) {
    (void)message; (void)len;
    ++*(int *)user;
    return false;
}

/* A stream that never ends on its own (a subscription to a quiet store) ends at the call's
 * deadline with DEADLINE_EXCEEDED, and the connection carries the next call. */
static void test_a_call_past_its_deadline_is_deadline_exceeded(ubq_client *c) {
    ubq_store *s = NULL;
    Ubiquity__V1__ListStoresResponse *list = NULL;
    OK(new_store(c, "deadline", &s));
    Ubiquity__V1__SubscribeRequest req = UBIQUITY__V1__SUBSCRIBE_REQUEST__INIT;
    Ubiquity__V1__StartPoint now = UBIQUITY__V1__START_POINT__INIT;
    now.start_case = UBIQUITY__V1__START_POINT__START_NOW;
    now.now = true;
    req.store_id = (char *)ubq_store_id(s);
    req.from = &now;
    uint8_t buf[256];
    size_t len = ubiquity__v1__subscribe_request__pack(&req, buf);
    int events = 0;
    ubq__call_result r;
    ubq__conn_call(c->conn, "/ubiquity.v1.Changes/Subscribe", buf, len, 300, keep_reading, &events, &r);
    CHECK(r.code == UBQ_DEADLINE_EXCEEDED);  /* whether or not it caught up first: no time threshold */
    ubq__call_result_free(&r);
    OK(ubq_list_stores(c, &list));
done:
    ubq_message_free(list);
    ubq_store_free(s);
}

/* The server closes a connection idle past --idle-timeout-ms (GOAWAY, then close); the next call
 * must go out on a new connection instead of failing on the old one. */
static void test_a_connection_the_server_closed_while_idle_is_replaced(ubq_client *unused) {
    (void)unused;
    test_server t;
    ubq_client *idle = NULL, *watcher = NULL;
    Ubiquity__V1__ListStoresResponse *list = NULL;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/idle", workdir);
    const char *flags[] = {"--idle-timeout-ms", "300", NULL};
    if (test_server_start_with(&t, dir, 0, flags) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, NULL, &idle));
    OK(ubq_connect(t.address, NULL, &watcher));
    OK(ubq_list_stores(idle, &list));
    ubq_message_free(list);
    list = NULL;
    /* Bounded polling of the server's counter: the idle close has no event a client could wait
     * on. The watcher never idles that long, so the timed-out connection is the idle client's. */
    uint64_t timed_out = 0;
    for (int i = 0; i < 3000 && timed_out == 0; i++) {
        Ubiquity__V1__GetServerStatsRequest req = UBIQUITY__V1__GET_SERVER_STATS_REQUEST__INIT;
        Ubiquity__V1__ServerStats *stats = NULL;
        OK(ubq__unary(watcher, "/ubiquity.v1.Admin/GetServerStats", &req.base, &ubiquity__v1__server_stats__descriptor,
                      (void **)&stats));
        timed_out = stats->timed_out_connections;
        ubq_message_free(stats);
        if (!timed_out) nanosleep(&(struct timespec){.tv_nsec = 10000000L}, NULL);
    }
    CHECK(timed_out >= 1);
    OK(ubq_list_stores(idle, &list));
done:
    ubq_message_free(list);
    ubq_client_free(idle);
    ubq_client_free(watcher);
    if (t.pid) test_server_stop(&t);
}

/* ---- the change feed ---------------------------------------------------------------------------------- */

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
    OK(ubq_connect(t.address, NULL, &c));
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

/* ---- runner ------------------------------------------------------------------------------------------ */

static const struct { const char *name; void (*fn)(ubq_client *); } tests[] = {
#define T(f) {#f, f}
    T(test_open_list_and_reopen_stores),
    T(test_save_then_fetch_with_predicate_arguments_sort_limit_offset),
    T(test_fetch_stream_delivers_batches_and_stops_when_asked),
    T(test_batch_insert_update_delete_and_destroy),
    T(test_fetch_at_a_token_sees_the_store_as_it_was),
    T(test_the_same_client_transaction_id_applies_once),
    T(test_a_save_whose_response_was_lost_is_retried_and_applied_once),
    T(test_context_unit_of_work_pending_state_save_rollback_reset),
    T(test_a_nested_context_saves_into_its_parent),
    T(test_conflict_under_error_policy_is_typed_with_decoded_records),
    T(test_conflict_under_each_trump_policy),
    T(test_pinned_context_reads_its_generation_until_refreshed),
    T(test_constraint_clash_is_typed),
    T(test_bad_input_gives_typed_errors_with_reason_and_fields),
    T(test_a_stopped_server_is_unavailable_and_api_key_sign_in_is_refused),
    T(test_a_call_past_its_deadline_is_deadline_exceeded),
    T(test_a_connection_the_server_closed_while_idle_is_replaced),
    T(test_feed_delivers_saves_in_order_with_values),
    T(test_feed_skips_excluded_authors),
    T(test_feed_follows_a_live_query),
    T(test_feed_resumes_from_its_last_token_after_a_server_restart),
    T(test_history_expired_calls_the_hook_which_rebaselines),
#undef T
};

/* --serve: run a program (the walkthrough) against a fresh server; its exit status is ours. */
static int serve(char **argv) {
    test_server t;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/serve", workdir);
    if (test_server_start(&t, dir, 0) != 0) return 1;
    int n = 0;
    while (argv[n]) n++;
    char **args = ubq__xcalloc((size_t)n + 2, sizeof *args);
    for (int i = 0; i < n; i++) args[i] = argv[i];
    args[n] = t.address;
    pid_t pid = fork();
    if (pid == 0) { execv(args[0], args); _exit(127); }
    int status = 1;
    waitpid(pid, &status, 0);
    free(args);
    int stopped = test_server_stop(&t);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && stopped == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s WORKDIR [TEST…] | WORKDIR --serve PROGRAM [ARGS…]\n", argv[0]); return 2; }
    workdir = argv[1];
    if (argc >= 4 && strcmp(argv[2], "--serve") == 0) return serve(argv + 3);
    test_server t;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/shared", workdir);
    if (test_server_start(&t, dir, 0) != 0) return 1;
    ubq_client *c = NULL;
    ubq_error *err = ubq_connect(t.address, &(ubq_client_options){.timeout_ms = 30000}, &c);
    if (err) { fprintf(stderr, "connect: %s\n", err->message); ubq_error_free(err); return 1; }
    int run = 0, failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        bool selected = argc == 2;
        for (int a = 2; a < argc; a++) selected |= strcmp(argv[a], tests[i].name) == 0;
        if (!selected) continue;
        int before = failed_checks;
        tests[i].fn(c);
        run++;
        bool ok = failed_checks == before;
        failed += !ok;
        printf("%s %s\n", ok ? "PASS" : "FAIL", tests[i].name);
        fflush(stdout);
    }
    ubq_client_free(c);
    int stopped = test_server_stop(&t);
    if (stopped != 0) { fprintf(stderr, "the shared server exited %d (see %s)\n", stopped, t.log_path); failed++; }
    printf("test_scenarios: %d run, %d failed\n", run, failed);
    return failed ? 1 : 0;
}

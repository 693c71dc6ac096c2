/* Contexts: the unit of work, nesting, a conflict under each merge policy, pinned generations. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

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

/* A dry run applies nothing; conflicts_in_response turns the ABORTED error into an OK answer
 * listing the conflicts, with nothing applied and the pending changes kept. */
static void test_context_save_dry_run_and_conflicts_in_response(ubq_client *c) {
    ubq_store *s = NULL;
    ubq_context *ctx = NULL;
    char *ann = NULL;
    Ubiquity__V1__ContextSaveResponse *dry = NULL, *listed = NULL;
    OK(new_store(c, "save-options", &s));
    OK(conflicting_context(s, UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_ERROR, &ctx, &ann));
    OK(ubq_context_save(ctx, &(ubq_context_save_options){.conflicts_in_response = true}, &listed));
    CHECK(listed->result && listed->result->n_unresolved_conflicts == 1 &&
          strcmp(listed->result->unresolved_conflicts[0]->object_id, ann) == 0);
    CHECK(listed->state && listed->state->has_changes);
    CHECK(age_at(s, ann, NULL) == 35);  /* nothing applied */
    OK(ubq_context_refresh(ctx, true));  /* now on top of the store's values: no conflict left */
    OK(ubq_context_save(ctx, &(ubq_context_save_options){.dry_run = true}, &dry));
    CHECK(dry->result && dry->result->dry_run);
    CHECK(age_at(s, ann, NULL) == 35);  /* a dry run applies nothing either */
done:
    ubq_message_free(dry);
    ubq_message_free(listed);
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

const scenario context_scenarios[] = {
#define T(f) {#f, f}
    T(test_context_unit_of_work_pending_state_save_rollback_reset),
    T(test_a_nested_context_saves_into_its_parent),
    T(test_conflict_under_error_policy_is_typed_with_decoded_records),
    T(test_context_save_dry_run_and_conflicts_in_response),
    T(test_conflict_under_each_trump_policy),
    T(test_pinned_context_reads_its_generation_until_refreshed),
#undef T
    {NULL, NULL},
};

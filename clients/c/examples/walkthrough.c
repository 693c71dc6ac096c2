/*
 * A one-minute tour of the Ubiquity C client against a running ubiquityd.
 *
 *     ubiquityd --port 50051 --data-dir /tmp/ubiq &
 *     build/walkthrough 127.0.0.1:50051 API-KEY
 *     UBIQUITY_TLS_CA=ca.crt build/walkthrough 127.0.0.1:50051 API-KEY    (a server with --tls-cert)
 *
 * The API key is one of the account's (docs/accounts.md: `ubiq` creates one with the operator key
 * the server wrote into its data directory); the client signs in with it.
 *
 * CI runs it against the server it builds (scripts/test). It exits non-zero if anything is off.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ubiquity.h"

/* Stops the tour with the error's code, reason and message. */
static void must(ubq_error *err, const char *what) {
    if (!err) return;
    fprintf(stderr, "%s: %s %s: %s\n", what, ubq_code_name(err->code), err->reason ? err->reason : "", err->message);
    ubq_error_free(err);
    exit(1);
}

static ubq_error *register_model(ubq_store *store) {
    Ubiquity__V1__Attribute name = UBIQUITY__V1__ATTRIBUTE__INIT, age = UBIQUITY__V1__ATTRIBUTE__INIT;
    name.name = "name";
    name.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_STRING;
    name.required = true;
    age.name = "age";
    age.type = UBIQUITY__V1__ATTRIBUTE_TYPE__ATTRIBUTE_TYPE_INT32;
    Ubiquity__V1__Attribute *attributes[] = {&name, &age};
    Ubiquity__V1__Entity person = UBIQUITY__V1__ENTITY__INIT;
    person.name = "Person";
    person.attributes = attributes;
    person.n_attributes = 2;
    Ubiquity__V1__Entity *entities[] = {&person};
    Ubiquity__V1__Model model = UBIQUITY__V1__MODEL__INIT;
    model.version_identifier = "v1";
    model.entities = entities;
    model.n_entities = 1;
    return ubq_register_model(store, &model, NULL);
}

/* Prints transactions from the feed; stops after two. */
static ubq_feed_action print_transactions(ubq_feed *feed, const Ubiquity__V1__SubscribeResponse *event, void *user) {
    (void)feed;
    int *seen = user;
    if (event->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_TRANSACTIONS) return UBQ_FEED_CONTINUE;
    for (size_t i = 0; i < event->transactions->n_transactions; i++) {
        const Ubiquity__V1__Transaction *t = event->transactions->transactions[i];
        printf("feed: generation %lld, %zu change(s), first %s\n", (long long)t->generation, t->n_changes,
               t->n_changes ? t->changes[0]->entity : "-");
        (*seen)++;
    }
    return *seen >= 2 ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

static ubq_feed_action until_caught_up(ubq_feed *feed, const Ubiquity__V1__SubscribeResponse *event, void *user) {
    (void)feed; (void)user;
    return event->event_case == UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_CAUGHT_UP ? UBQ_FEED_STOP : UBQ_FEED_CONTINUE;
}

int main(int argc, char **argv) {
    const char *target = argc > 1 ? argv[1] : "127.0.0.1:50051";
    const char *api_key = argc > 2 ? argv[2] : getenv("UBIQUITY_API_KEY");
    /* Over TLS when UBIQUITY_TLS_CA names the CA that signed the server's certificate. */
    ubq_tls_options tls = {.ca_file = getenv("UBIQUITY_TLS_CA")};
    ubq_client *client;
    must(ubq_connect(target, &(ubq_client_options){.api_key = api_key, .device_id = "walkthrough",
                                                   .tls = tls.ca_file ? &tls : NULL}, &client),
         "connect");

    /* 1. A store and its model. */
    ubq_store *store;
    char name[64];
    snprintf(name, sizeof name, "walkthrough-%ld", (long)getpid());
    must(ubq_open_store(client, name, false, &store), "open store");
    must(register_model(store), "register model");

    /* 2. Subscribe before writing: the feed starts at the current generation. */
    ubq_feed *feed;
    must(ubq_feed_new(store, &(ubq_feed_options){.include_values = true}, &feed), "feed");
    must(ubq_feed_run(feed, until_caught_up, NULL), "subscribe");

    /* 3. A unit of work: pending until saved. */
    ubq_context *ctx;
    must(ubq_context_create(store, &(ubq_context_options){.name = "walkthrough"}, &ctx), "context");
    ubq_values *ann_values = ubq_values_int32(ubq_values_string(ubq_values_new(), "name", "Ann"), "age", 30);
    ubq_values *bob_values = ubq_values_int32(ubq_values_string(ubq_values_new(), "name", "Bob"), "age", 41);
    char *ann_tmp;
    must(ubq_context_insert(ctx, "Person", ann_values, &ann_tmp), "insert");
    must(ubq_context_insert(ctx, "Person", bob_values, NULL), "insert");
    Ubiquity__V1__ContextState *state;
    must(ubq_context_state(ctx, &state), "state");
    printf("pending: %d inserts\n", state->inserted_count);
    ubq_message_free(state);
    Ubiquity__V1__ContextSaveResponse *saved;
    must(ubq_context_save(ctx, NULL, &saved), "save");
    char *ann = strdup(ubq_permanent_id(saved->result, ann_tmp));
    printf("saved at generation %lld; Ann is %s\n", (long long)saved->result->generation, ann);
    ubq_message_free(saved);
    free(ann_tmp);
    ubq_context_close(ctx);

    /* 4. Fetch with an NSPredicate-format string, arguments and a sort. */
    ubq_values *args = ubq_values_int32(ubq_values_new(), "min", 35);
    const char *oldest_first[] = {"-age", NULL};
    Ubiquity__V1__FetchResults *older;
    must(ubq_fetch(store, "Person", &(ubq_fetch_options){.predicate = "age > $min", .arguments = args,
                                                         .sort = oldest_first}, &older), "fetch");
    for (size_t i = 0; i < older->n_objects; i++)
        printf("older than 35: %s\n", ubq_value_string(UBQ_GET(older->objects[i], values, "name")));
    /* A read generation: fetch "as of" it later. The token is the result's; keep the result. */
    ProtobufCBinaryData before = older->token;

    /* 5. A conflict: a context read Ann, then someone else changed her. */
    must(ubq_context_create(store, &(ubq_context_options){.merge_policy = UBIQUITY__V1__MERGE_POLICY__MERGE_POLICY_ERROR},
                            &ctx), "context");
    Ubiquity__V1__FetchResults *read;
    must(ubq_context_fetch(ctx, "Person", NULL, false, &read), "context fetch");
    ubq_message_free(read);
    ubq_changes *theirs = ubq_changes_new();
    ubq_values *age31 = ubq_values_int32(ubq_values_new(), "age", 31);
    ubq_changes_update(theirs, ann, age31, -1);
    must(ubq_save(store, theirs, NULL, NULL), "their save");
    ubq_values *age32 = ubq_values_int32(ubq_values_new(), "age", 32);
    must(ubq_context_update(ctx, ann, age32), "update");
    ubq_error *err = ubq_context_save(ctx, NULL, NULL);
    if (!err || !err->conflicts || err->conflicts->n_conflicts == 0) {
        fprintf(stderr, "expected a conflict\n");
        return 1;
    }
    const Ubiquity__V1__ConflictRecord *c = err->conflicts->conflicts[0];
    int64_t store_age = 0, our_age = 0;
    ubq_value_int(UBQ_GET(c, store_values, "age"), &store_age);
    ubq_value_int(UBQ_GET(c, client_changes, "age"), &our_age);
    printf("conflict (%s): store has age=%lld, we wanted %lld\n", err->reason, (long long)store_age, (long long)our_age);
    ubq_error_free(err);
    ubq_context_close(ctx);  /* (with MERGE_BY_PROPERTY_OBJECT_TRUMP the save would have kept age=32) */

    /* 6. Time travel: the earlier token still reads Ann at 30. */
    Ubiquity__V1__GetObjectsResponse *then, *now;
    const char *ids[] = {ann};
    must(ubq_get_objects(store, ids, 1, &before, &then), "get then");
    must(ubq_get_objects(store, ids, 1, NULL, &now), "get now");
    int64_t age_then = 0, age_now = 0;
    ubq_value_int(UBQ_GET(ubq_find_object(then, ann), values, "age"), &age_then);
    ubq_value_int(UBQ_GET(ubq_find_object(now, ann), values, "age"), &age_now);
    printf("Ann then: %lld, now: %lld\n", (long long)age_then, (long long)age_now);
    if (age_then != 30 || age_now != 31) return 1;

    /* 7. The change feed: every save above, in order. */
    int seen = 0;
    must(ubq_feed_run(feed, print_transactions, &seen), "feed");

    /* 8. Errors are typed, with the server's stable reason. */
    Ubiquity__V1__FetchResults *none = NULL;
    err = ubq_fetch(store, "Person", &(ubq_fetch_options){.predicate = "age >"}, &none);
    if (!err || !err->bad_request || err->bad_request->n_field_violations == 0) return 1;
    printf("bad predicate: %s %s\n", err->reason, err->bad_request->field_violations[0]->field);
    ubq_error_free(err);

    /* 9. Initial data, applied once per seed ID however often the program runs (or retries). */
    ubq_changes *seed = ubq_changes_new();
    ubq_values *cid = ubq_values_string(ubq_values_new(), "name", "Cid");
    ubq_changes_insert(seed, "cid", "Person", cid);
    Ubiquity__V1__SeedResponse *first, *again;
    must(ubq_seed(store, "walkthrough-seed", seed, NULL, &first), "seed");
    must(ubq_seed(store, "walkthrough-seed", seed, NULL, &again), "seed again");
    printf("seeded: %s, then %s\n", first->applied ? "applied" : "skipped", again->applied ? "applied" : "skipped");
    if (!first->applied || again->applied) return 1;
    ubq_message_free(first); ubq_message_free(again);
    ubq_values_free(cid); ubq_changes_free(seed);

    ubq_message_free(then);
    ubq_message_free(now);
    ubq_message_free(older);
    ubq_values_free(args); ubq_values_free(age31); ubq_values_free(age32);
    ubq_values_free(ann_values); ubq_values_free(bob_values);
    ubq_changes_free(theirs);
    free(ann);
    ubq_feed_free(feed);
    ubq_store_free(store);
    ubq_client_free(client);
    return 0;
}

/* The scenario suite's shared pieces: checks, fixtures, and each file's list of scenarios. */
#ifndef UBQ_TEST_FIXTURES_H
#define UBQ_TEST_FIXTURES_H

#include <stdio.h>

#include "internal.h"
#include "server.h"
#include "ubiquity.h"

extern int failed_checks;      /* checks failed so far in this run */
extern const char *workdir;    /* where tests put the data directories of servers they start */
extern test_server *shared_server;  /* the server most tests run against (their client's) */

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

/* Person: name (required), age int32, email (unique), score double — the Python suite's model. */
ubq_error *register_person_model(ubq_store *s);
/* A store with a fresh name (`prefix`-UUID) and the Person model. */
ubq_error *new_store(ubq_client *c, const char *prefix, ubq_store **out);
/* Inserts one Person (age < 0, email NULL, score < 0: unset); *id (malloc'd) its permanent ID. */
ubq_error *add_person(ubq_store *s, const char *name, int age, const char *email, double score, char **id);
/* Saves `v` onto object `id`, then frees `v`. */
ubq_error *update_person(ubq_store *s, const char *id, ubq_values *v);
int64_t int_of(const Ubiquity__V1__ManagedObject *o, const char *key);   /* -1 when absent */
const char *string_of(const Ubiquity__V1__ManagedObject *o, const char *key);  /* "" when absent */
/* The age of `id` read through GetObjects at `at` (NULL: current); -1 if missing. */
int64_t age_at(ubq_store *s, const char *id, const ProtobufCBinaryData *at);

/* Client options that sign in to `server` (its default account's API key, this suite's device). */
#define SIGNED_IN(server) (&(ubq_client_options){.api_key = (server)->api_key, .device_id = "c-tests"})

typedef struct { const char *name; void (*fn)(ubq_client *); } scenario;
/* Each NULL-terminated, in the order they run. */
extern const scenario store_scenarios[], context_scenarios[], call_scenarios[], feed_scenarios[],
    keyvalue_scenarios[], auth_scenarios[], maintenance_scenarios[], tls_scenarios[], lifecycle_scenarios[],
    acknowledge_scenarios[], account_scenarios[], relationship_scenarios[];

#endif

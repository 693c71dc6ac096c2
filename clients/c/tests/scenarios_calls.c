/* Typed errors and call behaviour: bad input, a stopped server, deadlines, idle-closed connections. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"
#include "ubiquity/v1/admin.pb-c.h"

#include "fixtures.h"

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

static void test_a_stopped_server_is_unavailable(ubq_client *c) {
    (void)c;
    ubq_client *gone = NULL;
    ubq_store *s = NULL;
    char dir[600];
    test_server t;
    snprintf(dir, sizeof dir, "%s/gone", workdir);
    if (test_server_start(&t, dir, 0) != 0) { failed_checks++; return; }
    OK(ubq_connect(t.address, SIGNED_IN(&t), &gone));
    OK(ubq_open_store(gone, "x", false, &s));
    ubq_store_free(s);
    s = NULL;
    CHECK(test_server_stop(&t) == 0);
    ubq_error *err = ubq_open_store(gone, "x", false, &s);
    CHECK(err && err->code == UBQ_UNAVAILABLE);
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
    OK(ubq_connect(t.address, SIGNED_IN(&t), &idle));
    OK(ubq_connect(t.address, SIGNED_IN(&t), &watcher));
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

const scenario call_scenarios[] = {
#define T(f) {#f, f}
    T(test_constraint_clash_is_typed),
    T(test_bad_input_gives_typed_errors_with_reason_and_fields),
    T(test_a_stopped_server_is_unavailable),
    T(test_a_call_past_its_deadline_is_deadline_exceeded),
    T(test_a_connection_the_server_closed_while_idle_is_replaced),
#undef T
    {NULL, NULL},
};

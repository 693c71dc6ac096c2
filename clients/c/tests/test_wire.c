/* Unit tests without a server: gRPC framing, grpc-timeout, -bin and grpc-message decoding, the
 * decoding of error details into ubq_error, values, and the feed's resume policy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_policy.h"
#include "internal.h"

static int failures;
#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) { fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); failures++; } \
    } while (0)

static void test_frame_and_deframe_across_chunks(void) {
    const uint8_t a[] = {1, 2, 3};
    size_t la, lb;
    uint8_t *fa = ubq__frame(a, 3, &la), *fb = ubq__frame(NULL, 0, &lb);
    CHECK(la == 8 && fa[0] == 0 && fa[4] == 3 && fa[5] == 1);
    CHECK(lb == 5);
    ubq__deframer d = {.max_message = 16};
    const uint8_t *m;
    size_t n;
    /* the first message arrives in two pieces, the second (empty) with the rest */
    ubq__buf_append(&d.pending, fa, 4);
    CHECK(ubq__deframer_next(&d, &m, &n) == UBQ_DEFRAME_NEED_MORE);
    ubq__buf_append(&d.pending, fa + 4, 4);
    ubq__buf_append(&d.pending, fb, 5);
    CHECK(ubq__deframer_next(&d, &m, &n) == UBQ_DEFRAME_MESSAGE && n == 3 && m[2] == 3);
    ubq__deframer_pop(&d);
    CHECK(ubq__deframer_next(&d, &m, &n) == UBQ_DEFRAME_MESSAGE && n == 0);
    ubq__deframer_pop(&d);
    CHECK(ubq__deframer_next(&d, &m, &n) == UBQ_DEFRAME_NEED_MORE && d.pending.len == 0);
    /* compressed flag, then a length over the limit */
    const uint8_t compressed[] = {1, 0, 0, 0, 0};
    ubq__buf_append(&d.pending, compressed, 5);
    CHECK(ubq__deframer_next(&d, &m, &n) == UBQ_DEFRAME_COMPRESSED);
    d.pending.len = 0;
    const uint8_t big[] = {0, 0, 0, 0, 17};
    ubq__buf_append(&d.pending, big, 5);
    CHECK(ubq__deframer_next(&d, &m, &n) == UBQ_DEFRAME_TOO_LARGE);
    ubq__buf_free(&d.pending);
    free(fa);
    free(fb);
}

static void test_grpc_timeout_keeps_eight_digits_and_never_shortens(void) {
    char t[16];
    ubq__grpc_timeout(30000, t);
    CHECK(strcmp(t, "30000m") == 0);
    ubq__grpc_timeout(99999999, t);
    CHECK(strcmp(t, "99999999m") == 0);
    ubq__grpc_timeout(100000001, t);  /* rounds up to whole seconds */
    CHECK(strcmp(t, "100001S") == 0);
    ubq__grpc_timeout(24LL * 3600 * 1000 * 5000, t);
    CHECK(strlen(t) <= 9);
    ubq__grpc_timeout(-5, t);
    CHECK(strcmp(t, "0m") == 0);
}

static void test_base64_with_and_without_padding(void) {
    size_t n;
    uint8_t *b = ubq__base64_decode("aGVsbG8", 7, &n);  /* gRPC sends -bin values unpadded */
    CHECK(b && n == 5 && memcmp(b, "hello", 5) == 0);
    free(b);
    b = ubq__base64_decode("aGVsbG8=", 8, &n);
    CHECK(b && n == 5 && memcmp(b, "hello", 5) == 0);
    free(b);
    CHECK(ubq__base64_decode("a$==", 4, &n) == NULL);
    CHECK(ubq__base64_decode("a", 1, &n) == NULL);
}

static void test_percent_decoding_of_grpc_message(void) {
    char *s = ubq__percent_decode("age %3E at column 5%", 20);
    CHECK(strcmp(s, "age > at column 5%") == 0);
    free(s);
    s = ubq__percent_decode("caf%C3%A9 %zz", 13);
    CHECK(strcmp(s, "caf\xc3\xa9 %zz") == 0);
    free(s);
}

static void test_http_status_without_grpc_status(void) {
    CHECK(ubq__code_for_http_status(404) == UBQ_UNIMPLEMENTED);
    CHECK(ubq__code_for_http_status(503) == UBQ_UNAVAILABLE);
    CHECK(ubq__code_for_http_status(401) == UBQ_UNAUTHENTICATED);
    CHECK(ubq__code_for_http_status(500) == UBQ_UNKNOWN);
}

/* A google.rpc.Status as the server sends it: ErrorInfo + ConflictDetails in Any. */
static uint8_t *conflict_status(size_t *len) {
    Google__Rpc__ErrorInfo info = GOOGLE__RPC__ERROR_INFO__INIT;
    info.reason = "MERGE_CONFLICT";
    info.domain = "ubiquity.dev";
    Ubiquity__V1__ConflictRecord rec = UBIQUITY__V1__CONFLICT_RECORD__INIT;
    rec.kind = UBIQUITY__V1__CONFLICT_RECORD__KIND__KIND_VERSION_CHANGED;
    rec.object_id = "x-ubiquity://s/Person/p1";
    rec.store_version = 2;
    Ubiquity__V1__ConflictRecord *recs[] = {&rec};
    Ubiquity__V1__ConflictDetails cd = UBIQUITY__V1__CONFLICT_DETAILS__INIT;
    cd.conflicts = recs;
    cd.n_conflicts = 1;
    cd.total_conflicts = 1;
    Google__Protobuf__Any a1 = GOOGLE__PROTOBUF__ANY__INIT, a2 = GOOGLE__PROTOBUF__ANY__INIT;
    a1.type_url = "type.googleapis.com/google.rpc.ErrorInfo";
    a1.value.len = google__rpc__error_info__get_packed_size(&info);
    a1.value.data = malloc(a1.value.len);
    google__rpc__error_info__pack(&info, a1.value.data);
    a2.type_url = "type.googleapis.com/ubiquity.v1.ConflictDetails";
    a2.value.len = ubiquity__v1__conflict_details__get_packed_size(&cd);
    a2.value.data = malloc(a2.value.len);
    ubiquity__v1__conflict_details__pack(&cd, a2.value.data);
    Google__Protobuf__Any *anys[] = {&a1, &a2};
    Google__Rpc__Status st = GOOGLE__RPC__STATUS__INIT;
    st.code = UBQ_ABORTED;
    st.message = "conflict";
    st.details = anys;
    st.n_details = 2;
    *len = google__rpc__status__get_packed_size(&st);
    uint8_t *out = malloc(*len);
    google__rpc__status__pack(&st, out);
    free(a1.value.data);
    free(a2.value.data);
    return out;
}

static void test_error_details_decode_into_typed_fields(void) {
    size_t len;
    uint8_t *bytes = conflict_status(&len);
    ubq_error *e = ubq__error(UBQ_ABORTED, "conflict", bytes, len);
    CHECK(e->code == UBQ_ABORTED && strcmp(e->message, "conflict") == 0);
    CHECK(ubq_error_is(e, "MERGE_CONFLICT") && !ubq_error_is(e, "CONSTRAINT_CONFLICT"));
    CHECK(e->conflicts && e->conflicts->n_conflicts == 1 && e->conflicts->conflicts[0]->store_version == 2);
    CHECK(e->bad_request == NULL && e->history_expired == NULL && e->resume == NULL);
    ubq_error_free(e);
    /* undecodable details keep code and message */
    e = ubq__error(UBQ_UNAVAILABLE, "x", (const uint8_t *)"\xff\xff", 2);
    CHECK(e->code == UBQ_UNAVAILABLE && e->reason == NULL && e->status == NULL);
    ubq_error_free(e);
    free(bytes);
    CHECK(strcmp(ubq_code_name(UBQ_FAILED_PRECONDITION), "FAILED_PRECONDITION") == 0);
}

static void test_values_build_entries_and_read_back(void) {
    ubq_values *v = ubq_values_new();
    ubq_values_int32(ubq_values_string(v, "name", "Ann"), "age", 30);
    ubq_values_int32(v, "age", 31);  /* replaces */
    const char *names[] = {"a", "b"};
    ubq_values_string_list(v, "names", names, 2);
    size_t n;
    void **e = ubq__value_entries(v, &ubiquity__v1__insert__values_entry__descriptor, &n);
    CHECK(n == 2);  /* the list is an argument only */
    int64_t age = 0;
    CHECK(ubq_value_int(ubq_map_get((const void *const *)e, n, "age"), &age) && age == 31);
    CHECK(strcmp(ubq_value_string(ubq_map_get((const void *const *)e, n, "name")), "Ann") == 0);
    CHECK(ubq_map_get((const void *const *)e, n, "missing") == NULL);
    ubq__entries_free(e, n);
    e = ubq__argument_entries(v, &ubiquity__v1__fetch_spec__variables_entry__descriptor, &n);
    CHECK(n == 3);
    const Ubiquity__V1__Argument *list = ((ubq__entry *)e[2])->value;
    CHECK(list->kind_case == UBIQUITY__V1__ARGUMENT__KIND_LIST && list->list->n_values == 2);
    ubq__entries_free(e, n);
    ubq_values_free(v);
}

static void test_feed_policy_resubscribes_only_where_resuming_can_help(void) {
    CHECK(ubq__feed_after_end(UBQ_UNAVAILABLE, "SHUTTING_DOWN", false) == UBQ__FEED_RESUBSCRIBE);
    CHECK(ubq__feed_after_end(UBQ_UNAVAILABLE, NULL, false) == UBQ__FEED_RESUBSCRIBE);
    CHECK(ubq__feed_after_end(UBQ_RESOURCE_EXHAUSTED, "SUBSCRIBER_TOO_SLOW", false) == UBQ__FEED_RESUBSCRIBE);
    CHECK(ubq__feed_after_end(UBQ_RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED", false) == UBQ__FEED_GIVE_UP);
    CHECK(ubq__feed_after_end(UBQ_FAILED_PRECONDITION, "HISTORY_EXPIRED", false) == UBQ__FEED_ASK_HOOK);
    CHECK(ubq__feed_after_end(UBQ_FAILED_PRECONDITION, "STORE_REPLACED", false) == UBQ__FEED_GIVE_UP);
    CHECK(ubq__feed_after_end(UBQ_NOT_FOUND, "STORE_NOT_FOUND", false) == UBQ__FEED_GIVE_UP);
    CHECK(ubq__feed_after_end(UBQ_UNAUTHENTICATED, "SESSION_EXPIRED", false) == UBQ__FEED_GIVE_UP);
    CHECK(ubq__feed_after_end(UBQ_UNAUTHENTICATED, "SESSION_EXPIRED", true) == UBQ__FEED_SIGN_IN);
    CHECK(ubq__feed_after_end(UBQ_UNAUTHENTICATED, "SESSION_REVOKED", true) == UBQ__FEED_SIGN_IN);
}

static void test_a_session_is_renewed_with_a_tenth_of_its_lifetime_left(void) {
    const int64_t s = 1000000;  /* one second in microseconds */
    CHECK(!ubq__session_due(0, 86400 * s, 3600 * s));          /* a day-long session, an hour in */
    CHECK(!ubq__session_due(0, 86400 * s, 86340 * s - 1));     /* the margin is at most a minute */
    CHECK(ubq__session_due(0, 86400 * s, 86340 * s));
    CHECK(!ubq__session_due(0, 100 * s, 89 * s));              /* a tenth of a 100 s session */
    CHECK(ubq__session_due(0, 100 * s, 90 * s));
    CHECK(ubq__session_due(0, 2 * s, 1 * s));                  /* at least a second */
    CHECK(!ubq__session_due(0, 0, 5 * s));                     /* no expiry given */
}

static void test_backoff_doubles_to_a_cap_within_a_budget(void) {
    ubq__backoff b;
    ubq__backoff_reset(&b);
    CHECK(ubq__backoff_next(&b, 1000, 5000) == 50);
    CHECK(ubq__backoff_next(&b, 1050, 5000) == 100);
    CHECK(ubq__backoff_next(&b, 1150, 5000) == 200);
    for (int i = 0; i < 10; i++) ubq__backoff_next(&b, 2000, 5000);
    CHECK(ubq__backoff_next(&b, 3000, 5000) == 1000);
    CHECK(ubq__backoff_next(&b, 6001, 5000) == -1);  /* failing for longer than the budget */
    ubq__backoff_reset(&b);                          /* an event arrived: a fresh budget */
    CHECK(ubq__backoff_next(&b, 9000, 5000) == 50);
    CHECK(ubq__save_retryable(UBQ_UNAVAILABLE) && ubq__save_retryable(UBQ_DEADLINE_EXCEEDED));
    CHECK(!ubq__save_retryable(UBQ_ABORTED) && !ubq__save_retryable(UBQ_INVALID_ARGUMENT));
}

/* Events as they arrive on the wire (packed, then unpacked as the feed does), read as the typed
 * structs: a cancelled DID_CHANGE (which no scenario provokes cheaply: it takes a server killed
 * mid-transition), a WILL_CHANGE asking for an acknowledgement, a key-value change and a live
 * query update; and each reader refuses the other kinds. */
static Ubiquity__V1__SubscribeResponse *round_trip(const Ubiquity__V1__SubscribeResponse *ev) {
    size_t len = ubiquity__v1__subscribe_response__get_packed_size(ev);
    uint8_t *buf = ubq__xmalloc(len);
    ubiquity__v1__subscribe_response__pack(ev, buf);
    Ubiquity__V1__SubscribeResponse *back = ubiquity__v1__subscribe_response__unpack(NULL, len, buf);
    free(buf);
    return back;
}

static void test_typed_events_from_the_wire(void) {
    uint8_t tok[] = {7, 7, 7};
    Ubiquity__V1__StoreEvent did = UBIQUITY__V1__STORE_EVENT__INIT;
    did.phase = UBIQUITY__V1__STORE_EVENT__PHASE__PHASE_DID_CHANGE;
    did.transition = UBIQUITY__V1__STORE_EVENT__TRANSITION__TRANSITION_ACCOUNT_REMOVED;
    did.cancelled = true;
    Ubiquity__V1__SubscribeResponse ev = UBIQUITY__V1__SUBSCRIBE_RESPONSE__INIT;
    ev.event_case = UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_STORE_EVENT;
    ev.store_event = &did;
    ev.resume_token = (ProtobufCBinaryData){3, tok};
    ev.resume_generation = 42;
    Ubiquity__V1__SubscribeResponse *back = round_trip(&ev);
    ubq_store_event se;
    ubq_kv_change kv;
    ubq_live_query_update lq;
    CHECK(back && ubq_store_event_of(back, &se));
    CHECK(se.phase == UBQ_PHASE_DID_CHANGE && se.transition == UBQ_TRANSITION_ACCOUNT_REMOVED && se.cancelled);
    CHECK(se.generation == 42 && se.token.len == 3 && !se.acknowledgement.requested);
    CHECK(!ubq_kv_change_of(back, &kv) && !ubq_live_query_update_of(back, &lq));
    ubq_message_free(back);

    Ubiquity__V1__StoreEvent will = UBIQUITY__V1__STORE_EVENT__INIT;
    will.phase = UBIQUITY__V1__STORE_EVENT__PHASE__PHASE_WILL_CHANGE;
    will.transition = UBIQUITY__V1__STORE_EVENT__TRANSITION__TRANSITION_ACCOUNT_REMOVED;
    Google__Protobuf__Timestamp deadline = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    deadline.seconds = 1700000000;
    deadline.nanos = 250000000;
    Ubiquity__V1__StoreEventAcknowledgement ack = UBIQUITY__V1__STORE_EVENT_ACKNOWLEDGEMENT__INIT;
    ack.event_token = (ProtobufCBinaryData){3, tok};
    ack.deadline = &deadline;
    will.acknowledgement = &ack;
    ev.store_event = &will;
    back = round_trip(&ev);
    CHECK(back && ubq_store_event_of(back, &se));
    CHECK(se.phase == UBQ_PHASE_WILL_CHANGE && !se.cancelled && se.acknowledgement.requested);
    CHECK(se.acknowledgement.event_token.len == 3 && se.acknowledgement.event_token.data[2] == 7);
    CHECK(se.acknowledgement.deadline_micros == 1700000000250000LL);
    ubq_message_free(back);

    Ubiquity__V1__KeyValueChange change = UBIQUITY__V1__KEY_VALUE_CHANGE__INIT;
    change.reason = UBIQUITY__V1__KEY_VALUE_CHANGE__REASON__REASON_INITIAL_SYNC;
    change.key = "theme";
    change.value = (ProtobufCBinaryData){3, tok};
    change.version = 5;
    change.author = "phone";
    Ubiquity__V1__SubscribeResponse kev = UBIQUITY__V1__SUBSCRIBE_RESPONSE__INIT;
    kev.event_case = UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_KEY_VALUE_CHANGE;
    kev.key_value_change = &change;
    back = round_trip(&kev);
    CHECK(back && ubq_kv_change_of(back, &kv) && !ubq_store_event_of(back, &se));
    CHECK(kv.reason == UBQ_KV_REASON_INITIAL_SYNC && strcmp(kv.key, "theme") == 0 && kv.value.len == 3);
    CHECK(kv.version == 5 && !kv.deleted && strcmp(kv.author, "phone") == 0);
    ubq_message_free(back);

    Ubiquity__V1__LiveQueryObject in = UBIQUITY__V1__LIVE_QUERY_OBJECT__INIT;
    in.object_id = "ubq://p/1";
    Ubiquity__V1__LiveQueryObject *entered[] = {&in};
    char *left[] = {"ubq://p/2", "ubq://p/3"};
    Ubiquity__V1__LiveQueryUpdate update = UBIQUITY__V1__LIVE_QUERY_UPDATE__INIT;
    update.generation = 9;
    update.entered = entered;
    update.n_entered = 1;
    update.left_object_ids = left;
    update.n_left_object_ids = 2;
    Ubiquity__V1__SubscribeResponse lev = UBIQUITY__V1__SUBSCRIBE_RESPONSE__INIT;
    lev.event_case = UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_LIVE_QUERY;
    lev.live_query = &update;
    back = round_trip(&lev);
    CHECK(back && ubq_live_query_update_of(back, &lq) && !ubq_kv_change_of(back, &kv));
    CHECK(lq.generation == 9 && lq.n_entered == 1 && strcmp(lq.entered[0]->object_id, "ubq://p/1") == 0);
    CHECK(lq.n_changed == 0 && lq.n_left == 2 && strcmp(lq.left[1], "ubq://p/3") == 0);
    ubq_message_free(back);
}

/* ubq_changes_relate: targets naming an insert of the changes are temporary-ID refs, others object
 * IDs; a second call replaces the first; an object not in the changes gets an update of its own. */
static void test_relationships_in_changes(void) {
    ubq_changes *c = ubq_changes_new();
    ubq_changes_insert(c, "a", "Note", NULL);
    const char *first[] = {"a", "x-ubiquity://s/Person/p1", NULL}, *second[] = {"x-ubiquity://s/Person/p2", NULL};
    ubq_changes_relate(c, "a", "owner", first);
    const Ubiquity__V1__Insert *a = c->inserts[0];
    CHECK(a->n_relationships == 1 && a->relationships[0]->value->n_refs == 2);
    CHECK(a->relationships[0]->value->refs[0]->ref_case == UBIQUITY__V1__OBJECT_REF__REF_TEMPORARY_ID);
    CHECK(a->relationships[0]->value->refs[1]->ref_case == UBIQUITY__V1__OBJECT_REF__REF_OBJECT_ID);
    ubq_changes_relate(c, "a", "owner", second);
    a = c->inserts[0];
    CHECK(a->n_relationships == 1 && a->relationships[0]->value->n_refs == 1);
    CHECK(strcmp(a->relationships[0]->value->refs[0]->object_id, "x-ubiquity://s/Person/p2") == 0);
    const char *to_a[] = {"a", NULL};
    ubq_changes_relate(c, "x-ubiquity://s/Person/p9", "notes", to_a);
    ubq_changes_relate(c, "x-ubiquity://s/Person/p9", "tags", NULL);
    CHECK(c->n_updates == 1 && strcmp(c->updates[0]->object_id, "x-ubiquity://s/Person/p9") == 0);
    CHECK(c->updates[0]->n_values == 0 && c->updates[0]->_expected_version_case != UBIQUITY__V1__UPDATE___EXPECTED_VERSION_EXPECTED_VERSION);
    CHECK(c->updates[0]->n_relationships == 2 && strcmp(c->updates[0]->relationships[0]->value->refs[0]->temporary_id, "a") == 0);
    CHECK(c->updates[0]->relationships[1]->value->n_refs == 0);   /* emptied */
    ubq_changes_free(c);
}

int main(void) {
    test_frame_and_deframe_across_chunks();
    test_grpc_timeout_keeps_eight_digits_and_never_shortens();
    test_base64_with_and_without_padding();
    test_percent_decoding_of_grpc_message();
    test_http_status_without_grpc_status();
    test_error_details_decode_into_typed_fields();
    test_values_build_entries_and_read_back();
    test_feed_policy_resubscribes_only_where_resuming_can_help();
    test_a_session_is_renewed_with_a_tenth_of_its_lifetime_left();
    test_backoff_doubles_to_a_cap_within_a_budget();
    test_typed_events_from_the_wire();
    test_relationships_in_changes();
    if (failures) { fprintf(stderr, "test_wire: %d check(s) failed\n", failures); return 1; }
    printf("test_wire: 12 tests passed\n");
    return 0;
}

#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "feed_policy.h"
#include "internal.h"

/* A subscription has no natural end; the deadline only bounds a stream the server forgot. The
 * feed subscribes again from its token when it passes. */
#define STREAM_TIMEOUT_MS (24LL * 3600 * 1000)

struct ubq_feed {
    ubq_client *client;              /* the feed's own connection */
    char *store_id;
    char **entities, **exclude_authors;
    size_t n_entities, n_exclude_authors;
    bool include_values, include_tombstones, start_oldest;
    uint32_t coalesce_window_ms;
    Ubiquity__V1__LiveQuery *live_query;  /* an owned copy, or NULL */
    int64_t reconnect_for_ms;
    ubq_history_expired_fn on_history_expired;
    ubq_store_event_fn on_store_event;
    ubq_kv_change_fn on_kv_change;
    ubq_live_query_fn on_live_query;
    bool acknowledges_store_events;
    /* Acknowledgements go on a connection of their own: the stream's is busy inside the callback
     * that acknowledges, and the caller's client may be blocked in the very SignOut that waits for
     * them. ack_lock guards ack (made on first use) and ack_authorization, the session the feed
     * last subscribed with — which may be called from any thread while the feed runs. */
    pthread_mutex_t ack_lock;
    ubq_client *ack;
    char *ack_authorization;
    int64_t ack_timeout_ms;
    ProtobufCBinaryData token;       /* the last resume token, or the start token; len 0: none yet */
    int reconnects;
    int sign_ins;                    /* new sessions after the feed's ended (expired, revoked) */
    /* during a run */
    ubq_feed_event_fn on_event;
    void *user;
    ubq_error *decode_error;
    bool got_event;
};

static void set_token(ubq_feed *f, ProtobufCBinaryData t) {
    ProtobufCBinaryData copy = ubq__token_copy(t);  /* before the free: a hook may hand back ubq_feed_token */
    free(f->token.data);
    f->token = copy;
}

/* A copy of a NULL-terminated list (NULL: empty). */
static char **copy_strings(const char *const *list, size_t *n) {
    *n = 0;
    while (list && list[*n]) (*n)++;
    char **copy = ubq__xcalloc(*n, sizeof *copy);
    for (size_t i = 0; i < *n; i++) copy[i] = ubq__xstrdup(list[i]);
    return copy;
}

static void free_strings(char **list, size_t n) {
    for (size_t i = 0; i < n; i++) free(list[i]);
    free(list);
}

/* A client of its own connection to `like`'s server (same TLS settings), with no session handling. */
static ubq_client *connection_to(const ubq_client *like, const char *authorization, int64_t timeout_ms) {
    ubq_client *c = ubq__xcalloc(1, sizeof *c);
    c->target = ubq__xstrdup(like->target);
    c->authorization = authorization ? ubq__xstrdup(authorization) : NULL;
    c->timeout_ms = timeout_ms;
    c->save_attempts = 1;
    c->tls = ubq__tls_ref(like->tls);
    c->conn = ubq__conn_new(c->target, c->authorization, c->tls);
    return c;
}

/* store_id NULL: the account's key-value feed. */
static ubq_feed *feed_new(ubq_client *client, const char *store_id, const ubq_feed_options *o) {
    static const ubq_feed_options none = {0};
    if (!o) o = &none;
    ubq_feed *f = ubq__xcalloc(1, sizeof *f);
    f->client = connection_to(client, client->authorization, STREAM_TIMEOUT_MS);
    /* The feed renews its own copy of the session (same key, same device). */
    if (client->api_key) {
        f->client->api_key = ubq__xstrdup(client->api_key);
        f->client->device_id = ubq__xstrdup(client->device_id);
        f->client->signed_in_us = client->signed_in_us;
        f->client->expires_us = client->expires_us;
    }
    if (client->local) {  /* a local session: renewed with the device's secret (its end ends the feed) */
        f->client->local = true;
        f->client->device_id = ubq__xstrdup(client->device_id);
        f->client->device_secret = client->device_secret ? ubq__xstrdup(client->device_secret) : NULL;
        f->client->signed_in_us = client->signed_in_us;
        f->client->expires_us = client->expires_us;
    }
    f->store_id = store_id ? ubq__xstrdup(store_id) : NULL;
    f->entities = copy_strings(o->entities, &f->n_entities);
    f->exclude_authors = copy_strings(o->exclude_authors, &f->n_exclude_authors);
    f->include_values = o->include_values;
    f->include_tombstones = o->include_tombstones;
    f->coalesce_window_ms = o->coalesce_window_ms;
    if (o->live_query.entity) {
        Ubiquity__V1__LiveQuery q = UBIQUITY__V1__LIVE_QUERY__INIT;
        q.entity = (char *)o->live_query.entity;
        if (o->live_query.predicate) q.predicate = (char *)o->live_query.predicate;
        q.arguments = (Ubiquity__V1__LiveQuery__ArgumentsEntry **)ubq__argument_entries(
            o->live_query.arguments, &ubiquity__v1__live_query__arguments_entry__descriptor, &q.n_arguments);
        f->live_query = ubq__copy_message(&q.base);
        ubq__entries_free((void **)q.arguments, q.n_arguments);
    }
    f->start_oldest = o->start_oldest;
    f->reconnect_for_ms = o->reconnect_for_ms > 0 ? o->reconnect_for_ms : 60000;
    f->on_history_expired = o->on_history_expired;
    f->on_store_event = o->on_store_event;
    f->on_kv_change = o->on_kv_change;
    f->on_live_query = o->on_live_query;
    f->acknowledges_store_events = o->acknowledges_store_events;
    pthread_mutex_init(&f->ack_lock, NULL);
    f->ack_timeout_ms = client->timeout_ms;
    if (o->start_token.len) set_token(f, o->start_token);
    return f;
}

ubq_error *ubq_feed_new(ubq_store *store, const ubq_feed_options *o, ubq_feed **out) {
    *out = feed_new(store->client, store->id, o);
    return NULL;
}

ubq_error *ubq_kv_feed_new(ubq_client *client, const ubq_feed_options *o, ubq_feed **out) {
    if (o && o->acknowledges_store_events)
        return ubq__error(UBQ_INVALID_ARGUMENT,
                          "acknowledges_store_events is for store feeds: a key-value feed is never waited for", NULL, 0);
    *out = feed_new(client, NULL, o);
    return NULL;
}

void ubq_feed_free(ubq_feed *f) {
    if (!f) return;
    ubq_client_free(f->client);
    free(f->store_id);
    free_strings(f->entities, f->n_entities);
    free_strings(f->exclude_authors, f->n_exclude_authors);
    ubq_message_free(f->live_query);
    free(f->token.data);
    ubq_client_free(f->ack);
    free(f->ack_authorization);
    pthread_mutex_destroy(&f->ack_lock);
    free(f);
}

ubq_error *ubq_acknowledge_store_event(ubq_feed *f, ProtobufCBinaryData event_token, bool *awaited) {
    Ubiquity__V1__AcknowledgeStoreEventRequest req = UBIQUITY__V1__ACKNOWLEDGE_STORE_EVENT_REQUEST__INIT;
    req.event_token = event_token;
    Ubiquity__V1__AcknowledgeStoreEventResponse *resp = NULL;
    pthread_mutex_lock(&f->ack_lock);
    if (!f->ack) f->ack = connection_to(f->client, NULL, f->ack_timeout_ms);
    /* No session handling of its own: the acknowledgement must come from the subscribing session. */
    ubq__conn_set_authorization(f->ack->conn, f->ack_authorization);
    ubq_error *err = ubq__call(f->ack, "/ubiquity.v1.Changes/AcknowledgeStoreEvent", &req.base,
                               &ubiquity__v1__acknowledge_store_event_response__descriptor, (void **)&resp);
    pthread_mutex_unlock(&f->ack_lock);
    if (!err && awaited) *awaited = resp->awaited;
    ubq_message_free(resp);
    return err;
}

ProtobufCBinaryData ubq_feed_token(const ubq_feed *f) { return f->token; }
int ubq_feed_reconnects(const ubq_feed *f) { return f->reconnects; }
int ubq_feed_sign_ins(const ubq_feed *f) { return f->sign_ins; }

static bool on_message(void *user, const uint8_t *message, size_t len) {
    ubq_feed *f = user;
    Ubiquity__V1__SubscribeResponse *ev = ubiquity__v1__subscribe_response__unpack(NULL, len, message);
    if (!ev) {
        f->decode_error = ubq__error(UBQ_INTERNAL, "a Subscribe event does not decode", NULL, 0);
        return true;
    }
    f->got_event = true;
    if (ev->resume_token.len) set_token(f, ev->resume_token);
    ubq_store_event se;
    ubq_kv_change kv;
    ubq_live_query_update lq;
    bool stop = (f->on_store_event && ubq_store_event_of(ev, &se) && f->on_store_event(f, &se, f->user) == UBQ_FEED_STOP) ||
                (f->on_kv_change && ubq_kv_change_of(ev, &kv) && f->on_kv_change(f, &kv, f->user) == UBQ_FEED_STOP) ||
                (f->on_live_query && ubq_live_query_update_of(ev, &lq) && f->on_live_query(f, &lq, f->user) == UBQ_FEED_STOP);
    if (!stop) stop = f->on_event(f, ev, f->user) == UBQ_FEED_STOP;
    ubq_message_free(ev);
    return stop;
}

/* One Subscribe stream from the feed's position; the status it ended with. */
static ubq_error *subscribe_once(ubq_feed *f, bool *stopped) {
    Ubiquity__V1__SubscribeRequest req = UBIQUITY__V1__SUBSCRIBE_REQUEST__INIT;
    Ubiquity__V1__StartPoint from;
    Ubiquity__V1__ChangeFilter filter = UBIQUITY__V1__CHANGE_FILTER__INIT;
    Ubiquity__V1__KeyValueSubscription key_values = UBIQUITY__V1__KEY_VALUE_SUBSCRIPTION__INIT;
    ubq__start_point(&from, f->token, f->start_oldest);
    req.from = &from;
    if (f->store_id) {
        req.store_id = f->store_id;
        filter.entities = f->entities;
        filter.n_entities = f->n_entities;
        filter.exclude_authors = f->exclude_authors;
        filter.n_exclude_authors = f->n_exclude_authors;
        filter.include_values = f->include_values;
        filter.include_tombstones = f->include_tombstones;
        req.filter = &filter;
        req.coalesce_window_ms = f->coalesce_window_ms;
        req.live_query = f->live_query;
        req.acknowledges_store_events = f->acknowledges_store_events;
    } else {  /* the account's key-value changes: no store, no filter */
        key_values.exclude_authors = f->exclude_authors;
        key_values.n_exclude_authors = f->n_exclude_authors;
        req.key_values = &key_values;
    }
    size_t len = ubiquity__v1__subscribe_request__get_packed_size(&req);
    uint8_t *buf = ubq__xmalloc(len);
    ubiquity__v1__subscribe_request__pack(&req, buf);
    /* The session this stream subscribes with is the one its acknowledgements must carry. */
    pthread_mutex_lock(&f->ack_lock);
    free(f->ack_authorization);
    f->ack_authorization = f->client->authorization ? ubq__xstrdup(f->client->authorization) : NULL;
    pthread_mutex_unlock(&f->ack_lock);
    ubq__call_result r;
    f->got_event = false;
    ubq__conn_call(f->client->conn, "/ubiquity.v1.Changes/Subscribe", buf, len, STREAM_TIMEOUT_MS, on_message, f, &r);
    free(buf);
    *stopped = r.stopped && !f->decode_error;
    ubq_error *err = NULL;
    if (f->decode_error) {
        err = f->decode_error;
        f->decode_error = NULL;
    } else if (!r.stopped) {
        err = ubq__error(r.code, r.message, r.details, r.details_len);
    }
    ubq__call_result_free(&r);
    return err;
}

ubq_error *ubq_feed_run(ubq_feed *f, ubq_feed_event_fn on_event, void *user) {
    f->on_event = on_event;
    f->user = user;
    ubq__backoff backoff;
    ubq__backoff_reset(&backoff);
    for (;;) {
        bool stopped = false;
        ubq_error *err = ubq__ensure_session(f->client);
        if (!err) err = subscribe_once(f, &stopped);
        if (stopped) return NULL;
        if (f->got_event) ubq__backoff_reset(&backoff);
        switch (ubq__feed_after_end(err->code, err->reason, f->client->api_key != NULL)) {
        case UBQ__FEED_GIVE_UP:
            return err;
        case UBQ__FEED_SIGN_IN: {
            /* The session ended (expired, revoked, lost): a new one, then on from the token. */
            ubq_error *signed_in = ubq__sign_in(f->client);
            if (signed_in) {
                ubq_error_free(err);
                return signed_in;
            }
            f->sign_ins++;
            break;
        }
        case UBQ__FEED_ASK_HOOK: {
            ProtobufCBinaryData from = {0, NULL};
            if (!f->on_history_expired || !f->on_history_expired(f, err, &from, user) || from.len == 0) return err;
            set_token(f, from);
            ubq_error_free(err);
            continue;  /* the hook re-baselined: no failure, no wait */
        }
        case UBQ__FEED_RESUBSCRIBE:
            break;
        }
        /* A drained or too-slow stream says where it stopped, newer than the last event's token. */
        if (err->resume && err->resume->resume_token.len) set_token(f, err->resume->resume_token);
        int64_t delay = ubq__backoff_next(&backoff, ubq__now_ms(), f->reconnect_for_ms);
        if (delay < 0) return err;
        ubq_error_free(err);
        struct timespec ts = {.tv_sec = delay / 1000, .tv_nsec = (delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        f->reconnects++;
    }
}

/* Feed events read as the typed structs of ubiquity.h: store transitions, key-value changes and
 * live query updates. Every pointer they hold is borrowed from the event; nothing is allocated. */
#include "internal.h"

static int64_t micros_of(const Google__Protobuf__Timestamp *t) {
    return t ? t->seconds * 1000000 + t->nanos / 1000 : 0;
}

bool ubq_store_event_of(const Ubiquity__V1__SubscribeResponse *ev, ubq_store_event *out) {
    if (!ev || ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_STORE_EVENT || !ev->store_event) return false;
    const Ubiquity__V1__StoreEvent *e = ev->store_event;
    *out = (ubq_store_event){
        .phase = (ubq_phase)e->phase,
        .transition = (ubq_transition)e->transition,
        .using_local_storage = e->using_local_storage,
        .has_import_counts = e->import_counts != NULL,
        .token = ev->resume_token,
        .generation = ev->resume_generation,
        .cancelled = e->cancelled,
    };
    if (e->import_counts)
        out->import_counts = (ubq_import_counts){e->import_counts->inserted, e->import_counts->merged,
                                                 e->import_counts->deduplicated, e->import_counts->key_values_moved,
                                                 e->import_counts->key_values_kept};
    if (e->acknowledgement) {
        out->acknowledgement.requested = true;
        out->acknowledgement.event_token = e->acknowledgement->event_token;
        out->acknowledgement.deadline_micros = micros_of(e->acknowledgement->deadline);
    }
    return true;
}

bool ubq_kv_change_of(const Ubiquity__V1__SubscribeResponse *ev, ubq_kv_change *out) {
    if (!ev || ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_KEY_VALUE_CHANGE || !ev->key_value_change)
        return false;
    const Ubiquity__V1__KeyValueChange *c = ev->key_value_change;
    *out = (ubq_kv_change){
        .reason = (ubq_kv_reason)c->reason,
        .key = c->key,
        .value = c->value,
        .version = c->version,
        .deleted = c->deleted,
        .author = c->author,
        .token = ev->resume_token,
    };
    return true;
}

bool ubq_live_query_update_of(const Ubiquity__V1__SubscribeResponse *ev, ubq_live_query_update *out) {
    if (!ev || ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_LIVE_QUERY || !ev->live_query) return false;
    const Ubiquity__V1__LiveQueryUpdate *u = ev->live_query;
    *out = (ubq_live_query_update){
        .token = u->token,
        .generation = u->generation,
        .entered = u->entered,
        .n_entered = u->n_entered,
        .changed = u->changed,
        .n_changed = u->n_changed,
        .left = u->left_object_ids,
        .n_left = u->n_left_object_ids,
    };
    return true;
}

#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CONTEXTS "/ubiquity.v1.Contexts/"

struct ubq_context {
    ubq_store *store;
    char *id;
};

static Ubiquity__V1__GenerationMode mode_of(ubq_pin pin) {
    switch (pin) {
    case UBQ_UNPINNED: return UBIQUITY__V1__GENERATION_MODE__GENERATION_MODE_UNPINNED;
    case UBQ_PIN_AT_TOKEN: return UBIQUITY__V1__GENERATION_MODE__GENERATION_MODE_PINNED_AT_TOKEN;
    default: return UBIQUITY__V1__GENERATION_MODE__GENERATION_MODE_PINNED_AT_FIRST_READ;
    }
}

ubq_error *ubq_context_create(ubq_store *s, const ubq_context_options *o, ubq_context **out) {
    static const ubq_context_options none = {0};
    if (!o) o = &none;
    Ubiquity__V1__CreateContextRequest req = UBIQUITY__V1__CREATE_CONTEXT_REQUEST__INIT;
    req.store_id = s->id;
    if (o->name) req.name = (char *)o->name;
    if (o->author) req.author = (char *)o->author;
    req.merge_policy = o->merge_policy;
    req.generation_mode = mode_of(o->pin);
    req.token = o->token;
    if (o->parent) req.parent_context_id = o->parent->id;
    Ubiquity__V1__ContextState *state = NULL;
    ubq_error *err = ubq__unary(s->client, CONTEXTS "CreateContext", &req.base,
                                &ubiquity__v1__context_state__descriptor, (void **)&state);
    if (err) return err;
    ubq_context *ctx = ubq__xcalloc(1, sizeof *ctx);
    ctx->store = s;
    ctx->id = ubq__xstrdup(state->context_id);
    ubq_message_free(state);
    *out = ctx;
    return NULL;
}

const char *ubq_context_id(const ubq_context *ctx) { return ctx->id; }

/* The calls that take only the context ID and answer a ContextState. */
static ubq_error *simple(ubq_context *ctx, const char *path, const ProtobufCMessageDescriptor *response, void **out) {
    Ubiquity__V1__ContextRequest req = UBIQUITY__V1__CONTEXT_REQUEST__INIT;
    req.context_id = ctx->id;
    return ubq__unary(ctx->store->client, path, &req.base, response, out);
}

void ubq_context_close(ubq_context *ctx) {
    if (!ctx) return;
    /* Best effort: a context the server already dropped (idle timeout, restart) is closed anyway. */
    ubq_error_free(simple(ctx, CONTEXTS "CloseContext", &ubiquity__v1__close_context_response__descriptor, NULL));
    free(ctx->id);
    free(ctx);
}

ubq_error *ubq_context_insert(ubq_context *ctx, const char *entity, const ubq_values *values, char **object_id) {
    Ubiquity__V1__ContextInsertRequest req = UBIQUITY__V1__CONTEXT_INSERT_REQUEST__INIT;
    Ubiquity__V1__Insert ins = UBIQUITY__V1__INSERT__INIT;
    Ubiquity__V1__Insert *list[1] = {&ins};
    req.context_id = ctx->id;
    ins.temporary_id = "new";
    ins.entity = (char *)entity;
    ins.values = (Ubiquity__V1__Insert__ValuesEntry **)ubq__value_entries(
        values, &ubiquity__v1__insert__values_entry__descriptor, &ins.n_values);
    req.inserts = list;
    req.n_inserts = 1;
    Ubiquity__V1__ContextInsertResponse *resp = NULL;
    ubq_error *err = ubq__unary(ctx->store->client, CONTEXTS "Insert", &req.base,
                                &ubiquity__v1__context_insert_response__descriptor, (void **)&resp);
    ubq__entries_free((void **)ins.values, ins.n_values);
    if (err) return err;
    if (object_id) {
        *object_id = NULL;
        for (size_t i = 0; i < resp->n_object_ids; i++)
            if (strcmp(resp->object_ids[i]->key, "new") == 0) *object_id = ubq__xstrdup(resp->object_ids[i]->value);
        if (!*object_id) err = ubq__error(UBQ_INTERNAL, "Contexts.Insert answered without the object's ID", NULL, 0);
    }
    ubq_message_free(resp);
    return err;
}

ubq_error *ubq_context_update(ubq_context *ctx, const char *object_id, const ubq_values *values) {
    Ubiquity__V1__ContextUpdateRequest req = UBIQUITY__V1__CONTEXT_UPDATE_REQUEST__INIT;
    Ubiquity__V1__Update up = UBIQUITY__V1__UPDATE__INIT;
    Ubiquity__V1__Update *list[1] = {&up};
    req.context_id = ctx->id;
    up.object_id = (char *)object_id;
    up.values = (Ubiquity__V1__Update__ValuesEntry **)ubq__value_entries(
        values, &ubiquity__v1__update__values_entry__descriptor, &up.n_values);
    req.updates = list;
    req.n_updates = 1;
    ubq_error *err = ubq__unary(ctx->store->client, CONTEXTS "Update", &req.base,
                                &ubiquity__v1__context_state__descriptor, NULL);
    ubq__entries_free((void **)up.values, up.n_values);
    return err;
}

ubq_error *ubq_context_relate(ubq_context *ctx, const char *object_id, const char *name, const char *const *targets) {
    ubq_changes *c = ubq_changes_new();
    ubq_changes_relate(c, object_id, name, targets);  /* no inserts in c: every target is an object ID */
    Ubiquity__V1__ContextUpdateRequest req = UBIQUITY__V1__CONTEXT_UPDATE_REQUEST__INIT;
    req.context_id = ctx->id;
    req.updates = c->updates;
    req.n_updates = c->n_updates;
    ubq_error *err = ubq__unary(ctx->store->client, CONTEXTS "Update", &req.base,
                                &ubiquity__v1__context_state__descriptor, NULL);
    ubq_changes_free(c);
    return err;
}

ubq_error *ubq_context_delete(ubq_context *ctx, const char *object_id) {
    Ubiquity__V1__ContextDeleteRequest req = UBIQUITY__V1__CONTEXT_DELETE_REQUEST__INIT;
    char *ids[1] = {(char *)object_id};
    req.context_id = ctx->id;
    req.object_ids = ids;
    req.n_object_ids = 1;
    return ubq__unary(ctx->store->client, CONTEXTS "Delete", &req.base, &ubiquity__v1__context_state__descriptor, NULL);
}

ubq_error *ubq_context_fetch(ubq_context *ctx, const char *entity, const ubq_fetch_options *o, bool exclude_pending,
                             Ubiquity__V1__FetchResults **out) {
    Ubiquity__V1__ContextFetchRequest req = UBIQUITY__V1__CONTEXT_FETCH_REQUEST__INIT;
    req.context_id = ctx->id;
    req.fetch = ubq__fetch_spec(entity, o);
    req.excludes_pending_changes = exclude_pending;
    ubq_error *err = ubq__unary(ctx->store->client, CONTEXTS "Fetch", &req.base,
                                &ubiquity__v1__fetch_results__descriptor, (void **)out);
    ubq__fetch_spec_free(req.fetch);
    return err;
}

typedef struct {
    ubq_context *ctx;
    Ubiquity__V1__ContextSaveRequest req;
} save_attempt;

static ubq_error *attempt_save(void *state, void **out) {
    save_attempt *a = state;
    return ubq__unary(a->ctx->store->client, CONTEXTS "Save", &a->req.base,
                      &ubiquity__v1__context_save_response__descriptor, out);
}

ubq_error *ubq_context_save(ubq_context *ctx, const ubq_context_save_options *o, Ubiquity__V1__ContextSaveResponse **out) {
    static const ubq_context_save_options none = {0};
    if (!o) o = &none;
    save_attempt a = {.ctx = ctx, .req = UBIQUITY__V1__CONTEXT_SAVE_REQUEST__INIT};
    char txid[37];
    a.req.context_id = ctx->id;
    a.req.dry_run = o->dry_run;
    a.req.conflicts_in_response = o->conflicts_in_response;
    if (o->client_transaction_id) {
        a.req.client_transaction_id = (char *)o->client_transaction_id;
    } else {
        ubq__uuid(txid);
        a.req.client_transaction_id = txid;
    }
    Ubiquity__V1__ContextSaveResponse *resp = NULL;
    ubq_error *err = ubq__with_retries(ctx->store->client, attempt_save, &a, (void **)&resp);
    if (err) return err;
    if (out) *out = resp;
    else ubq_message_free(resp);
    return NULL;
}

ubq_error *ubq_context_rollback(ubq_context *ctx) {
    return simple(ctx, CONTEXTS "Rollback", &ubiquity__v1__context_state__descriptor, NULL);
}

ubq_error *ubq_context_reset(ubq_context *ctx) {
    return simple(ctx, CONTEXTS "Reset", &ubiquity__v1__context_state__descriptor, NULL);
}

ubq_error *ubq_context_state(ubq_context *ctx, Ubiquity__V1__ContextState **out) {
    return simple(ctx, CONTEXTS "GetState", &ubiquity__v1__context_state__descriptor, (void **)out);
}

ubq_error *ubq_context_refresh(ubq_context *ctx, bool merge_changes) {
    Ubiquity__V1__RefreshRequest req = UBIQUITY__V1__REFRESH_REQUEST__INIT;
    req.context_id = ctx->id;
    req.merge_changes = merge_changes;
    return ubq__unary(ctx->store->client, CONTEXTS "Refresh", &req.base, &ubiquity__v1__context_state__descriptor, NULL);
}

ubq_error *ubq_context_pin(ubq_context *ctx, ubq_pin pin, ProtobufCBinaryData token) {
    Ubiquity__V1__SetQueryGenerationRequest req = UBIQUITY__V1__SET_QUERY_GENERATION_REQUEST__INIT;
    req.context_id = ctx->id;
    req.generation_mode = mode_of(pin);
    req.token = token;
    return ubq__unary(ctx->store->client, CONTEXTS "SetQueryGeneration", &req.base,
                      &ubiquity__v1__context_state__descriptor, NULL);
}

#include <stdlib.h>

#include "internal.h"

/* Whole-store operations (Stores.Deduplicate, Seed, ExportBaseline, ImportStore, ReplaceStore). */

#define STORES "/ubiquity.v1.Stores/"

ubq_error *ubq_deduplicate(ubq_store *s, const char *entity, const char *const *unique_key,
                           const ubq_deduplicate_options *o, Ubiquity__V1__DeduplicateResponse **out) {
    Ubiquity__V1__DeduplicateRequest req = UBIQUITY__V1__DEDUPLICATE_REQUEST__INIT;
    req.store_id = s->id;
    req.entity = (char *)entity;
    while (unique_key && unique_key[req.n_unique_key]) req.n_unique_key++;
    req.unique_key = (char **)unique_key;
    if (o) {
        req.batch_size = o->batch_size;
        if (o->author) req.author = (char *)o->author;
    }
    return ubq__unary(s->client, STORES "Deduplicate", &req.base, &ubiquity__v1__deduplicate_response__descriptor,
                      (void **)out);
}

typedef struct {
    ubq_store *store;
    Ubiquity__V1__SeedRequest req;
} seed_attempt;

static ubq_error *attempt_seed(void *state, void **out) {
    seed_attempt *a = state;
    return ubq__unary(a->store->client, STORES "Seed", &a->req.base, &ubiquity__v1__seed_response__descriptor, out);
}

ubq_error *ubq_seed(ubq_store *s, const char *seed_id, const ubq_changes *inserts, const char *author,
                    Ubiquity__V1__SeedResponse **out) {
    seed_attempt a = {.store = s, .req = UBIQUITY__V1__SEED_REQUEST__INIT};
    a.req.store_id = s->id;
    a.req.seed_id = (char *)seed_id;
    if (author) a.req.author = (char *)author;
    if (inserts) {
        Ubiquity__V1__SaveRequest changes = UBIQUITY__V1__SAVE_REQUEST__INIT;
        ubq__changes_fill(inserts, &changes);
        a.req.inserts = changes.inserts;
        a.req.n_inserts = changes.n_inserts;
    }
    /* The seed ID makes a repeat answer applied = false instead of inserting twice, so a seed whose
     * outcome is unknown is retried like a save. */
    return ubq__with_retries(s->client, attempt_seed, &a, (void **)out);
}

typedef struct {
    ubq_baseline_chunk_fn on_chunk;
    void *user;
    bool undecodable;
} baseline_state;

static bool on_baseline_message(void *user, const uint8_t *message, size_t len) {
    baseline_state *st = user;
    Ubiquity__V1__BaselineChunk *chunk = ubiquity__v1__baseline_chunk__unpack(NULL, len, message);
    if (!chunk) { st->undecodable = true; return true; }
    bool go_on = st->on_chunk(chunk, st->user);
    ubq_message_free(chunk);
    return !go_on;
}

ubq_error *ubq_export_baseline(ubq_store *s, const ProtobufCBinaryData *at, int32_t batch_size,
                               ubq_baseline_chunk_fn on_chunk, void *user) {
    Ubiquity__V1__ExportBaselineRequest req = UBIQUITY__V1__EXPORT_BASELINE_REQUEST__INIT;
    Ubiquity__V1__ReadGeneration gen = UBIQUITY__V1__READ_GENERATION__INIT;
    req.store_id = s->id;
    req.batch_size = batch_size;
    if (at && at->len) {
        gen.token = *at;
        req.at = &gen;
    }
    baseline_state st = {.on_chunk = on_chunk, .user = user};
    ubq_error *err = ubq__server_stream(s->client, STORES "ExportBaseline", &req.base, on_baseline_message, &st);
    if (st.undecodable && !err) err = ubq__error(UBQ_INTERNAL, "an ExportBaseline chunk does not decode", NULL, 0);
    return err;
}

ubq_error *ubq_import_store(ubq_store *s, const char *source_store_id, const ubq_import_options *o,
                            Ubiquity__V1__ImportStoreResponse **out) {
    Ubiquity__V1__ImportStoreRequest req = UBIQUITY__V1__IMPORT_STORE_REQUEST__INIT;
    Ubiquity__V1__ReadGeneration gen = UBIQUITY__V1__READ_GENERATION__INIT;
    req.store_id = s->id;
    req.source_store_id = (char *)source_store_id;
    if (o) {
        if (o->source_at.len) {
            gen.token = o->source_at;
            req.source_at = &gen;
        }
        req.deduplicate_by_constraints = o->deduplicate_by_constraints;
        if (o->author) req.author = (char *)o->author;
    }
    return ubq__unary(s->client, STORES "ImportStore", &req.base, &ubiquity__v1__import_store_response__descriptor,
                      (void **)out);
}

ubq_error *ubq_replace_store(ubq_store *s, const char *source_store_id, Ubiquity__V1__ReplaceStoreResponse **out) {
    Ubiquity__V1__ReplaceStoreRequest req = UBIQUITY__V1__REPLACE_STORE_REQUEST__INIT;
    req.store_id = s->id;
    req.source_store_id = (char *)source_store_id;
    return ubq__unary(s->client, STORES "ReplaceStore", &req.base, &ubiquity__v1__replace_store_response__descriptor,
                      (void **)out);
}

#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define STORES "/ubiquity.v1.Stores/"

ubq_error *ubq_open_store(ubq_client *client, const char *name, bool must_exist, ubq_store **out) {
    Ubiquity__V1__OpenStoreRequest req = UBIQUITY__V1__OPEN_STORE_REQUEST__INIT;
    req.name = (char *)name;
    req.must_exist = must_exist;
    Ubiquity__V1__OpenStoreResponse *resp = NULL;
    ubq_error *err = ubq__unary(client, STORES "OpenStore", &req.base,
                                &ubiquity__v1__open_store_response__descriptor, (void **)&resp);
    if (err) return err;
    if (!resp->store || !resp->store->store_id) {
        ubq_message_free(resp);
        return ubq__error(UBQ_INTERNAL, "OpenStore answered without a store", NULL, 0);
    }
    ubq_store *s = ubq__xcalloc(1, sizeof *s);
    s->client = client;
    s->id = ubq__xstrdup(resp->store->store_id);
    s->created = resp->created;
    ubq_message_free(resp);
    *out = s;
    return NULL;
}

void ubq_store_free(ubq_store *s) {
    if (!s) return;
    free(s->id);
    free(s);
}

const char *ubq_store_id(const ubq_store *s) { return s->id; }
bool ubq_store_created(const ubq_store *s) { return s->created; }

ubq_error *ubq_list_stores(ubq_client *client, Ubiquity__V1__ListStoresResponse **out) {
    Ubiquity__V1__ListStoresRequest req = UBIQUITY__V1__LIST_STORES_REQUEST__INIT;
    return ubq__unary(client, STORES "ListStores", &req.base, &ubiquity__v1__list_stores_response__descriptor,
                      (void **)out);
}

ubq_error *ubq_register_model(ubq_store *s, const Ubiquity__V1__Model *model, Ubiquity__V1__RegisterModelResponse **out) {
    Ubiquity__V1__RegisterModelRequest req = UBIQUITY__V1__REGISTER_MODEL_REQUEST__INIT;
    req.store_id = s->id;
    req.model = (Ubiquity__V1__Model *)model;
    return ubq__unary(s->client, "/ubiquity.v1.Models/RegisterModel", &req.base,
                      &ubiquity__v1__register_model_response__descriptor, (void **)out);
}

ubq_error *ubq_current_token(ubq_store *s, ProtobufCBinaryData *out) {
    Ubiquity__V1__CurrentGenerationRequest req = UBIQUITY__V1__CURRENT_GENERATION_REQUEST__INIT;
    req.store_id = s->id;
    Ubiquity__V1__CurrentGenerationResponse *resp = NULL;
    ubq_error *err = ubq__unary(s->client, STORES "CurrentGeneration", &req.base,
                                &ubiquity__v1__current_generation_response__descriptor, (void **)&resp);
    if (err) return err;
    *out = ubq__token_copy(resp->token);
    ubq_message_free(resp);
    return NULL;
}

static size_t count_strings(const char *const *list) {
    size_t n = 0;
    while (list && list[n]) n++;
    return n;
}

Ubiquity__V1__FetchSpec *ubq__fetch_spec(const char *entity, const ubq_fetch_options *o) {
    static const ubq_fetch_options none = {0};
    if (!o) o = &none;
    Ubiquity__V1__FetchSpec *spec = ubq__xcalloc(1, sizeof *spec);
    ubiquity__v1__fetch_spec__init(spec);
    spec->entity = (char *)entity;
    if (o->predicate) spec->predicate = (char *)o->predicate;
    spec->variables = (Ubiquity__V1__FetchSpec__VariablesEntry **)ubq__argument_entries(
        o->arguments, &ubiquity__v1__fetch_spec__variables_entry__descriptor, &spec->n_variables);
    size_t n_sort = count_strings(o->sort);
    if (n_sort) {
        spec->sort_descriptors = ubq__xcalloc(n_sort, sizeof *spec->sort_descriptors);
        for (size_t i = 0; i < n_sort; i++) {
            Ubiquity__V1__SortDescriptor *d = ubq__xcalloc(1, sizeof *d);
            ubiquity__v1__sort_descriptor__init(d);
            d->descending = o->sort[i][0] == '-';
            d->key_path = (char *)o->sort[i] + (d->descending ? 1 : 0);
            d->case_insensitive = o->sort_case_insensitive;
            spec->sort_descriptors[i] = d;
        }
        spec->n_sort_descriptors = n_sort;
    }
    spec->fetch_limit = o->limit;
    spec->fetch_offset = o->offset;
    spec->result_type = o->result_type;
    spec->fetch_batch_size = o->batch_size;
    /* The lists and strings point into the caller's options: they only live for the call too. */
    spec->properties_to_fetch = (char **)o->properties;
    spec->n_properties_to_fetch = count_strings(o->properties);
    spec->properties_to_group_by = (char **)o->group_by;
    spec->n_properties_to_group_by = count_strings(o->group_by);
    if (o->having) spec->having_predicate = (char *)o->having;
    spec->returns_distinct_results = o->distinct;
    spec->relationship_key_paths_for_prefetching = (char **)o->prefetch;
    spec->n_relationship_key_paths_for_prefetching = count_strings(o->prefetch);
    spec->excludes_subentities = o->excludes_subentities;
    return spec;
}

void ubq__fetch_spec_free(Ubiquity__V1__FetchSpec *spec) {
    ubq__entries_free((void **)spec->variables, spec->n_variables);
    for (size_t i = 0; i < spec->n_sort_descriptors; i++) free(spec->sort_descriptors[i]);
    free(spec->sort_descriptors);
    free(spec);
}

/* The request of Fetch and FetchStream; `at` is its storage for the token. Free req->fetch with
 * ubq__fetch_spec_free. */
static void fetch_request(ubq_store *s, const char *entity, const ubq_fetch_options *o,
                          Ubiquity__V1__FetchRequest *req, Ubiquity__V1__ReadGeneration *at) {
    ubiquity__v1__fetch_request__init(req);
    ubiquity__v1__read_generation__init(at);
    req->store_id = s->id;
    req->fetch = ubq__fetch_spec(entity, o);
    if (o && (o->at.len || o->minimum_generation)) {
        at->token = o->at;
        at->minimum_generation = o->minimum_generation;
        req->at = at;
    }
}

ubq_error *ubq_fetch(ubq_store *s, const char *entity, const ubq_fetch_options *o, Ubiquity__V1__FetchResults **out) {
    Ubiquity__V1__FetchRequest req;
    Ubiquity__V1__ReadGeneration at;
    fetch_request(s, entity, o, &req, &at);
    ubq_error *err = ubq__unary(s->client, STORES "Fetch", &req.base, &ubiquity__v1__fetch_results__descriptor,
                                (void **)out);
    ubq__fetch_spec_free(req.fetch);
    return err;
}

typedef struct {
    ubq_fetch_batch_fn on_batch;
    void *user;
    bool undecodable;
} stream_state;

static bool on_fetch_message(void *user, const uint8_t *message, size_t len) {
    stream_state *st = user;
    Ubiquity__V1__FetchResults *batch = ubiquity__v1__fetch_results__unpack(NULL, len, message);
    if (!batch) { st->undecodable = true; return true; }
    bool go_on = st->on_batch(batch, st->user);
    ubq_message_free(batch);
    return !go_on;
}

ubq_error *ubq_fetch_stream(ubq_store *s, const char *entity, const ubq_fetch_options *o,
                            ubq_fetch_batch_fn on_batch, void *user) {
    Ubiquity__V1__FetchRequest req;
    Ubiquity__V1__ReadGeneration at;
    fetch_request(s, entity, o, &req, &at);
    stream_state st = {.on_batch = on_batch, .user = user};
    ubq_error *err = ubq__server_stream(s->client, STORES "FetchStream", &req.base, on_fetch_message, &st);
    ubq__fetch_spec_free(req.fetch);
    if (st.undecodable && !err) err = ubq__error(UBQ_INTERNAL, "a FetchStream batch does not decode", NULL, 0);
    return err;
}

ubq_error *ubq_get_model(ubq_store *s, Ubiquity__V1__GetModelResponse **out) {
    Ubiquity__V1__GetModelRequest req = UBIQUITY__V1__GET_MODEL_REQUEST__INIT;
    req.store_id = s->id;
    return ubq__unary(s->client, "/ubiquity.v1.Models/GetModel", &req.base, &ubiquity__v1__get_model_response__descriptor,
                      (void **)out);
}

ubq_error *ubq_get_objects(ubq_store *s, const char *const *ids, size_t count, const ProtobufCBinaryData *at,
                           Ubiquity__V1__GetObjectsResponse **out) {
    Ubiquity__V1__GetObjectsRequest req = UBIQUITY__V1__GET_OBJECTS_REQUEST__INIT;
    Ubiquity__V1__ReadGeneration gen = UBIQUITY__V1__READ_GENERATION__INIT;
    req.store_id = s->id;
    req.object_ids = (char **)ids;
    req.n_object_ids = count;
    if (at && at->len) {
        gen.token = *at;
        req.at = &gen;
    }
    return ubq__unary(s->client, STORES "GetObjects", &req.base, &ubiquity__v1__get_objects_response__descriptor,
                      (void **)out);
}

const Ubiquity__V1__ManagedObject *ubq_find_object(const Ubiquity__V1__GetObjectsResponse *r, const char *id) {
    for (size_t i = 0; i < r->n_objects; i++)
        if (strcmp(r->objects[i]->object_id, id) == 0) return r->objects[i];
    return NULL;
}

typedef struct {
    ubq_store *store;
    Ubiquity__V1__SaveRequest req;
} save_attempt;

static ubq_error *attempt_save(void *state, void **out) {
    save_attempt *a = state;
    return ubq__unary(a->store->client, STORES "Save", &a->req.base, &ubiquity__v1__save_result__descriptor, out);
}

ubq_error *ubq_save(ubq_store *s, const ubq_changes *changes, const ubq_save_options *o,
                    Ubiquity__V1__SaveResult **out) {
    static const ubq_save_options none = {0};
    if (!o) o = &none;
    save_attempt a = {.store = s, .req = UBIQUITY__V1__SAVE_REQUEST__INIT};
    char txid[37];
    a.req.store_id = s->id;
    if (changes) ubq__changes_fill(changes, &a.req);
    a.req.merge_policy = o->merge_policy;
    if (o->author) a.req.author = (char *)o->author;
    if (o->client_transaction_id) {
        a.req.client_transaction_id = (char *)o->client_transaction_id;
    } else {
        ubq__uuid(txid);
        a.req.client_transaction_id = txid;
    }
    a.req.dry_run = o->dry_run;
    a.req.conflicts_in_response = o->conflicts_in_response;
    return ubq__with_retries(s->client, attempt_save, &a, (void **)out);
}

const char *ubq_permanent_id(const Ubiquity__V1__SaveResult *r, const char *temporary_id) {
    for (size_t i = 0; i < r->n_permanent_ids; i++)
        if (strcmp(r->permanent_ids[i]->key, temporary_id) == 0) return r->permanent_ids[i]->value;
    return NULL;
}

ubq_error *ubq_delete_history(ubq_store *s, ProtobufCBinaryData token) {
    Ubiquity__V1__DeleteHistoryRequest req = UBIQUITY__V1__DELETE_HISTORY_REQUEST__INIT;
    req.store_id = s->id;
    req.through_token = token;
    return ubq__unary(s->client, "/ubiquity.v1.Changes/DeleteHistory", &req.base,
                      &ubiquity__v1__delete_history_response__descriptor, NULL);
}

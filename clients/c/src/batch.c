#include <stdlib.h>

#include "internal.h"

/* Set-based writes: each one transaction, no merge policy, no context (Stores.Batch*). */

ubq_error *ubq_batch_insert(ubq_store *s, const char *entity, const ubq_values *const *objects, size_t count,
                            const ubq_batch_options *o, Ubiquity__V1__BatchResponse **out) {
    static const ubq_batch_options none = {0};
    if (!o) o = &none;
    Ubiquity__V1__BatchInsertRequest req = UBIQUITY__V1__BATCH_INSERT_REQUEST__INIT;
    req.store_id = s->id;
    req.entity = (char *)entity;
    req.upsert = o->upsert;
    if (o->author) req.author = (char *)o->author;
    req.return_object_ids = o->return_object_ids;
    Ubiquity__V1__ObjectValues *rows = ubq__xcalloc(count, sizeof *rows);
    req.objects = ubq__xcalloc(count, sizeof *req.objects);
    req.n_objects = count;
    for (size_t i = 0; i < count; i++) {
        ubiquity__v1__object_values__init(&rows[i]);
        rows[i].values = (Ubiquity__V1__ObjectValues__ValuesEntry **)ubq__value_entries(
            objects[i], &ubiquity__v1__object_values__values_entry__descriptor, &rows[i].n_values);
        req.objects[i] = &rows[i];
    }
    ubq_error *err = ubq__unary(s->client, "/ubiquity.v1.Stores/BatchInsert", &req.base,
                                &ubiquity__v1__batch_response__descriptor, (void **)out);
    for (size_t i = 0; i < count; i++) ubq__entries_free((void **)rows[i].values, rows[i].n_values);
    free(rows);
    free(req.objects);
    return err;
}

ubq_error *ubq_batch_update(ubq_store *s, const char *entity, const char *predicate, const ubq_values *arguments,
                            const ubq_values *values, const ubq_batch_options *o, Ubiquity__V1__BatchResponse **out) {
    Ubiquity__V1__BatchUpdateRequest req = UBIQUITY__V1__BATCH_UPDATE_REQUEST__INIT;
    req.store_id = s->id;
    req.entity = (char *)entity;
    if (predicate) req.predicate = (char *)predicate;
    if (o && o->author) req.author = (char *)o->author;
    req.variables = (Ubiquity__V1__BatchUpdateRequest__VariablesEntry **)ubq__argument_entries(
        arguments, &ubiquity__v1__batch_update_request__variables_entry__descriptor, &req.n_variables);
    req.values = (Ubiquity__V1__BatchUpdateRequest__ValuesEntry **)ubq__value_entries(
        values, &ubiquity__v1__batch_update_request__values_entry__descriptor, &req.n_values);
    ubq_error *err = ubq__unary(s->client, "/ubiquity.v1.Stores/BatchUpdate", &req.base,
                                &ubiquity__v1__batch_response__descriptor, (void **)out);
    ubq__entries_free((void **)req.variables, req.n_variables);
    ubq__entries_free((void **)req.values, req.n_values);
    return err;
}

ubq_error *ubq_batch_delete(ubq_store *s, const char *entity, const char *predicate, const ubq_values *arguments,
                            const ubq_batch_options *o, Ubiquity__V1__BatchResponse **out) {
    Ubiquity__V1__BatchDeleteRequest req = UBIQUITY__V1__BATCH_DELETE_REQUEST__INIT;
    req.store_id = s->id;
    req.entity = (char *)entity;
    if (predicate) req.predicate = (char *)predicate;
    if (o && o->author) req.author = (char *)o->author;
    if (o && o->object_ids) {
        while (o->object_ids[req.n_object_ids]) req.n_object_ids++;
        req.object_ids = (char **)o->object_ids;
    }
    req.variables = (Ubiquity__V1__BatchDeleteRequest__VariablesEntry **)ubq__argument_entries(
        arguments, &ubiquity__v1__batch_delete_request__variables_entry__descriptor, &req.n_variables);
    ubq_error *err = ubq__unary(s->client, "/ubiquity.v1.Stores/BatchDelete", &req.base,
                                &ubiquity__v1__batch_response__descriptor, (void **)out);
    ubq__entries_free((void **)req.variables, req.n_variables);
    return err;
}

ubq_error *ubq_destroy_store(ubq_store *s) {
    Ubiquity__V1__DestroyStoreRequest req = UBIQUITY__V1__DESTROY_STORE_REQUEST__INIT;
    req.store_id = s->id;
    return ubq__unary(s->client, "/ubiquity.v1.Stores/DestroyStore", &req.base,
                      &ubiquity__v1__destroy_store_response__descriptor, NULL);
}

#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Every value is an unpacked copy (pack + unpack), so one free path owns all of them whatever
 * kind they are and whoever built them. */
typedef struct {
    char *name;
    Ubiquity__V1__Value *value;     /* NULL for a list */
    Ubiquity__V1__Value **items;    /* list items */
    size_t n_items;
    Ubiquity__V1__ValueList list;
    Ubiquity__V1__Argument argument;
} item;

struct ubq_values {
    item **items;
    size_t n;
};

void *ubq__copy_message(const ProtobufCMessage *message) {
    size_t len = protobuf_c_message_get_packed_size(message);
    uint8_t *buf = ubq__xmalloc(len);
    protobuf_c_message_pack(message, buf);
    void *copy = protobuf_c_message_unpack(message->descriptor, NULL, len, buf);
    free(buf);
    if (!copy) abort();  /* only out-of-memory can make our own encoding fail to decode */
    return copy;
}

void ubq_message_free(const void *message) {
    if (message) protobuf_c_message_free_unpacked((ProtobufCMessage *)message, NULL);
}

ubq_values *ubq_values_new(void) { return ubq__xcalloc(1, sizeof(ubq_values)); }

static void item_free(item *it) {
    free(it->name);
    ubq_message_free(it->value);
    for (size_t i = 0; i < it->n_items; i++) ubq_message_free(it->items[i]);
    free(it->items);
    free(it);
}

void ubq_values_free(ubq_values *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) item_free(v->items[i]);
    free(v->items);
    free(v);
}

/* A fresh item for `name`, replacing an earlier one of the same name. */
static item *put(ubq_values *v, const char *name) {
    item *it = ubq__xcalloc(1, sizeof *it);
    it->name = ubq__xstrdup(name);
    for (size_t i = 0; i < v->n; i++) {
        if (strcmp(v->items[i]->name, name) == 0) {
            item_free(v->items[i]);
            v->items[i] = it;
            return it;
        }
    }
    v->items = ubq__xrealloc(v->items, (v->n + 1) * sizeof *v->items);
    v->items[v->n++] = it;
    return it;
}

ubq_values *ubq_values_value(ubq_values *v, const char *name, const Ubiquity__V1__Value *value) {
    item *it = put(v, name);
    it->value = ubq__copy_message(&value->base);
    ubiquity__v1__argument__init(&it->argument);
    it->argument.kind_case = UBIQUITY__V1__ARGUMENT__KIND_VALUE;
    it->argument.value = it->value;
    return v;
}

#define SETTER(fn, ctype, kind, field)                                        \
    ubq_values *fn(ubq_values *v, const char *name, ctype value) {             \
        Ubiquity__V1__Value x = UBIQUITY__V1__VALUE__INIT;                     \
        x.kind_case = UBIQUITY__V1__VALUE__KIND_##kind;                        \
        x.field = value;                                                       \
        return ubq_values_value(v, name, &x);                                  \
    }
SETTER(ubq_values_int16, int16_t, INT16_VALUE, int16_value)
SETTER(ubq_values_int32, int32_t, INT32_VALUE, int32_value)
SETTER(ubq_values_int64, int64_t, INT64_VALUE, int64_value)
SETTER(ubq_values_double, double, DOUBLE_VALUE, double_value)
SETTER(ubq_values_bool, bool, BOOL_VALUE, bool_value)
#undef SETTER

ubq_values *ubq_values_string(ubq_values *v, const char *name, const char *value) {
    Ubiquity__V1__Value x = UBIQUITY__V1__VALUE__INIT;
    x.kind_case = UBIQUITY__V1__VALUE__KIND_STRING_VALUE;
    x.string_value = (char *)value;
    return ubq_values_value(v, name, &x);
}

ubq_values *ubq_values_null(ubq_values *v, const char *name) {
    Ubiquity__V1__Value x = UBIQUITY__V1__VALUE__INIT;
    x.kind_case = UBIQUITY__V1__VALUE__KIND_NULL_VALUE;
    x.null_value = GOOGLE__PROTOBUF__NULL_VALUE__NULL_VALUE;
    return ubq_values_value(v, name, &x);
}

ubq_values *ubq_values_string_list(ubq_values *v, const char *name, const char *const *items, size_t count) {
    item *it = put(v, name);
    it->items = ubq__xcalloc(count, sizeof *it->items);
    for (size_t i = 0; i < count; i++) {
        Ubiquity__V1__Value x = UBIQUITY__V1__VALUE__INIT;
        x.kind_case = UBIQUITY__V1__VALUE__KIND_STRING_VALUE;
        x.string_value = (char *)items[i];
        it->items[i] = ubq__copy_message(&x.base);
    }
    it->n_items = count;
    ubiquity__v1__value_list__init(&it->list);
    it->list.values = it->items;
    it->list.n_values = count;
    ubiquity__v1__argument__init(&it->argument);
    it->argument.kind_case = UBIQUITY__V1__ARGUMENT__KIND_LIST;
    it->argument.list = &it->list;
    return v;
}

static void **entries(const ubq_values *v, const ProtobufCMessageDescriptor *d, bool arguments, size_t *n) {
    *n = 0;
    if (!v || v->n == 0) return NULL;
    void **out = ubq__xcalloc(v->n, sizeof *out);
    for (size_t i = 0; i < v->n; i++) {
        item *it = v->items[i];
        if (!arguments && !it->value) continue;  /* a list is an argument, not an attribute value */
        ubq__entry *e = ubq__xcalloc(1, d->sizeof_message);
        protobuf_c_message_init(d, e);
        e->key = it->name;
        e->value = arguments ? (void *)&it->argument : (void *)it->value;
        out[(*n)++] = e;
    }
    return out;
}

void **ubq__value_entries(const ubq_values *v, const ProtobufCMessageDescriptor *d, size_t *n) {
    return entries(v, d, false, n);
}
void **ubq__argument_entries(const ubq_values *v, const ProtobufCMessageDescriptor *d, size_t *n) {
    return entries(v, d, true, n);
}
void ubq__entries_free(void **e, size_t n) {
    for (size_t i = 0; i < n; i++) free(e[i]);
    free(e);
}

const Ubiquity__V1__Value *ubq_map_get(const void *const *e, size_t count, const char *key) {
    for (size_t i = 0; i < count; i++) {
        const ubq__entry *x = e[i];
        if (x->key && strcmp(x->key, key) == 0) return x->value;
    }
    return NULL;
}

bool ubq_value_int(const Ubiquity__V1__Value *v, int64_t *out) {
    if (!v) return false;
    switch (v->kind_case) {
    case UBIQUITY__V1__VALUE__KIND_INT16_VALUE: *out = v->int16_value; return true;
    case UBIQUITY__V1__VALUE__KIND_INT32_VALUE: *out = v->int32_value; return true;
    case UBIQUITY__V1__VALUE__KIND_INT64_VALUE: *out = v->int64_value; return true;
    default: return false;
    }
}

bool ubq_value_double(const Ubiquity__V1__Value *v, double *out) {
    if (!v) return false;
    switch (v->kind_case) {
    case UBIQUITY__V1__VALUE__KIND_FLOAT_VALUE: *out = v->float_value; return true;
    case UBIQUITY__V1__VALUE__KIND_DOUBLE_VALUE: *out = v->double_value; return true;
    default: return false;
    }
}

const char *ubq_value_string(const Ubiquity__V1__Value *v) {
    if (!v) return NULL;
    switch (v->kind_case) {
    case UBIQUITY__V1__VALUE__KIND_STRING_VALUE: return v->string_value;
    case UBIQUITY__V1__VALUE__KIND_DECIMAL_VALUE: return v->decimal_value;
    case UBIQUITY__V1__VALUE__KIND_UUID_VALUE: return v->uuid_value;
    case UBIQUITY__V1__VALUE__KIND_URI_VALUE: return v->uri_value;
    default: return NULL;
    }
}

/* ---- changes ---------------------------------------------------------------------------------- */

ubq_changes *ubq_changes_new(void) { return ubq__xcalloc(1, sizeof(ubq_changes)); }

void ubq_changes_free(ubq_changes *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_inserts; i++) ubq_message_free(c->inserts[i]);
    for (size_t i = 0; i < c->n_updates; i++) ubq_message_free(c->updates[i]);
    for (size_t i = 0; i < c->n_deletes; i++) ubq_message_free(c->deletes[i]);
    free(c->inserts); free(c->updates); free(c->deletes);
    free(c);
}


void ubq_changes_insert(ubq_changes *c, const char *temporary_id, const char *entity, const ubq_values *values) {
    Ubiquity__V1__Insert x = UBIQUITY__V1__INSERT__INIT;
    x.temporary_id = (char *)temporary_id;
    x.entity = (char *)entity;
    x.values = (Ubiquity__V1__Insert__ValuesEntry **)ubq__value_entries(
        values, &ubiquity__v1__insert__values_entry__descriptor, &x.n_values);
    UBQ__PUSH(c->inserts, c->n_inserts, ubq__copy_message(&x.base));
    ubq__entries_free((void **)x.values, x.n_values);
}

void ubq_changes_update(ubq_changes *c, const char *object_id, const ubq_values *values, int64_t expected_version) {
    Ubiquity__V1__Update x = UBIQUITY__V1__UPDATE__INIT;
    x.object_id = (char *)object_id;
    if (expected_version >= 0) {
        x._expected_version_case = UBIQUITY__V1__UPDATE___EXPECTED_VERSION_EXPECTED_VERSION;
        x.expected_version = expected_version;
    }
    x.values = (Ubiquity__V1__Update__ValuesEntry **)ubq__value_entries(
        values, &ubiquity__v1__update__values_entry__descriptor, &x.n_values);
    UBQ__PUSH(c->updates, c->n_updates, ubq__copy_message(&x.base));
    ubq__entries_free((void **)x.values, x.n_values);
}

void ubq_changes_delete(ubq_changes *c, const char *object_id, int64_t expected_version) {
    Ubiquity__V1__Delete x = UBIQUITY__V1__DELETE__INIT;
    x.object_id = (char *)object_id;
    if (expected_version >= 0) {
        x._expected_version_case = UBIQUITY__V1__DELETE___EXPECTED_VERSION_EXPECTED_VERSION;
        x.expected_version = expected_version;
    }
    UBQ__PUSH(c->deletes, c->n_deletes, ubq__copy_message(&x.base));
}

/* Used by stores.c to fill a SaveRequest without copying. */
void ubq__changes_fill(const ubq_changes *c, Ubiquity__V1__SaveRequest *r) {
    r->inserts = c->inserts; r->n_inserts = c->n_inserts;
    r->updates = c->updates; r->n_updates = c->n_updates;
    r->deletes = c->deletes; r->n_deletes = c->n_deletes;
}

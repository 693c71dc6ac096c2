#include "internal.h"

/* The account's key-value store (KeyValue service, docs/keyvalue.md): small values by key with
 * compare-and-set versions. Not tied to a store: the calls take the client. */

#define KV "/ubiquity.v1.KeyValue/"

/* The precondition of a write; NULL when there is none. */
static Ubiquity__V1__KeyValuePrecondition *precondition(const ubq_kv_options *o, Ubiquity__V1__KeyValuePrecondition *p) {
    ubiquity__v1__key_value_precondition__init(p);
    if (o && o->must_not_exist) {
        p->condition_case = UBIQUITY__V1__KEY_VALUE_PRECONDITION__CONDITION_MUST_NOT_EXIST;
        p->must_not_exist = true;
    } else if (o && o->expected_version > 0) {
        p->condition_case = UBIQUITY__V1__KEY_VALUE_PRECONDITION__CONDITION_EXPECTED_VERSION;
        p->expected_version = o->expected_version;
    } else {
        return NULL;
    }
    return p;
}

ubq_error *ubq_kv_get(ubq_client *c, const char *key, Ubiquity__V1__KeyValueEntry **out) {
    Ubiquity__V1__KeyValueGetRequest req = UBIQUITY__V1__KEY_VALUE_GET_REQUEST__INIT;
    req.key = (char *)key;
    return ubq__unary(c, KV "Get", &req.base, &ubiquity__v1__key_value_entry__descriptor, (void **)out);
}

ubq_error *ubq_kv_set(ubq_client *c, const char *key, const void *value, size_t len, const ubq_kv_options *o,
                      Ubiquity__V1__KeyValueWriteResponse **out) {
    Ubiquity__V1__KeyValueSetRequest req = UBIQUITY__V1__KEY_VALUE_SET_REQUEST__INIT;
    Ubiquity__V1__KeyValuePrecondition p;
    req.key = (char *)key;
    req.value.data = (uint8_t *)value;
    req.value.len = len;
    req.precondition = precondition(o, &p);
    if (o && o->author) req.author = (char *)o->author;
    return ubq__unary(c, KV "Set", &req.base, &ubiquity__v1__key_value_write_response__descriptor, (void **)out);
}

ubq_error *ubq_kv_delete(ubq_client *c, const char *key, const ubq_kv_options *o, Ubiquity__V1__KeyValueWriteResponse **out) {
    Ubiquity__V1__KeyValueDeleteRequest req = UBIQUITY__V1__KEY_VALUE_DELETE_REQUEST__INIT;
    Ubiquity__V1__KeyValuePrecondition p;
    req.key = (char *)key;
    req.precondition = precondition(o, &p);
    if (o && o->author) req.author = (char *)o->author;
    return ubq__unary(c, KV "Delete", &req.base, &ubiquity__v1__key_value_write_response__descriptor, (void **)out);
}

ubq_error *ubq_kv_list(ubq_client *c, const char *prefix, uint32_t page_size, ProtobufCBinaryData page_token,
                       Ubiquity__V1__KeyValueListResponse **out) {
    Ubiquity__V1__KeyValueListRequest req = UBIQUITY__V1__KEY_VALUE_LIST_REQUEST__INIT;
    if (prefix) req.prefix = (char *)prefix;
    req.page_size = page_size;
    req.page_token = page_token;
    return ubq__unary(c, KV "List", &req.base, &ubiquity__v1__key_value_list_response__descriptor, (void **)out);
}

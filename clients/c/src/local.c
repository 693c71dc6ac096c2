/* Local sessions (docs/accounts.md "Local stores"): a device working in its own stores before it
 * signs in; the session itself is made and renewed by ubq__sign_in (auth.c). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

ubq_error *ubq_start_local_session(const char *target, const ubq_client_options *o, const char *device_id,
                                   const char *device_secret, ubq_client **out) {
    if (!device_id || !*device_id)
        return ubq__error(UBQ_INVALID_ARGUMENT, "a local session needs the device's ID (device_id)", NULL, 0);
    ubq_client_options plain = o ? *o : (ubq_client_options){0};
    plain.api_key = plain.device_id = plain.local_device_secret = plain.bearer_token = NULL;
    ubq_client *c = NULL;
    ubq_error *err = ubq_connect(target, &plain, &c);
    if (err) return err;
    c->local = true;
    c->device_id = ubq__xstrdup(device_id);
    if (device_secret && *device_secret) c->device_secret = ubq__xstrdup(device_secret);
    err = ubq__sign_in(c);
    if (err) {
        ubq_client_free(c);
        return err;
    }
    *out = c;
    return NULL;
}

const char *ubq_device_secret(const ubq_client *c) {
    return c->local ? c->device_secret : NULL;
}

bool ubq_local_import(const ubq_client *c, ubq_import_counts *out) {
    if (c->has_import && out) *out = c->import;
    return c->has_import;
}

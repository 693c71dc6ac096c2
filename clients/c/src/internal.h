/* What the library's files share and ubiquity.h does not show. */
#ifndef UBQ_INTERNAL_H
#define UBQ_INTERNAL_H

#include "ubiquity.h"
#include "conn.h"
#include "tls.h"
#include "wire.h"

struct ubq_client {
    char *target;
    char *authorization;          /* "Bearer …" or NULL */
    ubq__conn *conn;
    ubq__tls *tls;                /* NULL: plaintext; shared with the client's feeds */
    int64_t timeout_ms;
    int save_attempts;
    /* Sign-in (Accounts.SignIn) when the client was given an API key; NULL otherwise. */
    char *api_key, *device_id;
    int64_t signed_in_us, expires_us;   /* the session's start and end, wall-clock microseconds */
    /* With api_key: the local device secret the next SignIn sends (cleared once it imported). */
    char *local_device_secret;
    bool has_import;
    ubq_import_counts import;           /* what that sign-in imported */
    /* A local session (ubq_start_local_session): device_id and its secret renew it through
     * Accounts.StartLocalSession instead of SignIn. */
    bool local;
    char *device_secret;
};

struct ubq_store {
    ubq_client *client;
    char *id;
    bool created;
};

/* A map entry of any protobuf-c map (string key, message value): every generated *Entry struct has
 * this layout; the descriptor given at init says which one it is on the wire. */
typedef struct { ProtobufCMessage base; char *key; void *value; } ubq__entry;

/* Entries for a map field: values (as Value) or arguments (as Argument), pointing into `v`, which
 * must outlive them. Free with ubq__entries_free (the entries only). NULL `v`: no entries. */
void **ubq__value_entries(const ubq_values *v, const ProtobufCMessageDescriptor *entry, size_t *n);
void **ubq__argument_entries(const ubq_values *v, const ProtobufCMessageDescriptor *entry, size_t *n);
void ubq__entries_free(void **entries, size_t n);

/* A deep copy of a message (pack + unpack), owned by the caller: free with ubq_message_free. */
void *ubq__copy_message(const ProtobufCMessage *message);

ubq_error *ubq__error(int code, const char *message, const uint8_t *details, size_t details_len);
/* One unary call: packs `request`, unpacks the response into *out (free with ubq_message_free).
 * With an API key it renews the session before it expires and, once, when the call answers
 * UNAUTHENTICATED (a revoked or lost session): sign in, call again. */
ubq_error *ubq__unary(ubq_client *c, const char *path, const ProtobufCMessage *request,
                      const ProtobufCMessageDescriptor *response, void **out);
/* The same without any session handling (SignIn itself, and what ubq__unary builds on). */
ubq_error *ubq__call(ubq_client *c, const char *path, const ProtobufCMessage *request,
                     const ProtobufCMessageDescriptor *response, void **out);
/* One server-streaming call: each response message goes to on_message (which returns true to stop
 * the call; stopping is not an error). Packs `request`; session handling as ubq__unary. */
ubq_error *ubq__server_stream(ubq_client *c, const char *path, const ProtobufCMessage *request,
                              ubq__on_message on_message, void *user);
/* Signs in with the client's API key and device ID; the session then goes on every call. */
ubq_error *ubq__sign_in(ubq_client *c);
/* Signs in again when the session is close to its end (a no-op without an API key). */
ubq_error *ubq__ensure_session(ubq_client *c);
/* Whether a session from signed_in_us to expires_us should be renewed at now_us: with a tenth of
 * its lifetime left, at least one second and at most one minute. */
bool ubq__session_due(int64_t signed_in_us, int64_t expires_us, int64_t now_us);
int64_t ubq__wall_micros(void);
/* Whether a save's outcome is unknown after this code (the server may have applied it). */
bool ubq__save_retryable(int code);
/* Retries `attempt` with backoff while ubq__save_retryable: one client transaction ID throughout. */
typedef ubq_error *(*ubq__attempt_fn)(void *state, void **out);
ubq_error *ubq__with_retries(ubq_client *c, ubq__attempt_fn attempt, void *state, void **out);
/* A random (version 4) UUID in canonical form, into out[37]. */
void ubq__uuid(char out[37]);
/* A start point: after `token` when it is not empty, else the oldest retained (oldest) or now. */
void ubq__start_point(Ubiquity__V1__StartPoint *from, ProtobufCBinaryData token, bool oldest);
/* A malloc'd copy of a token. */
ProtobufCBinaryData ubq__token_copy(ProtobufCBinaryData t);
/* The changes of a save: owned copies of each message, in the order given. */
struct ubq_changes {
    Ubiquity__V1__Insert **inserts;
    size_t n_inserts;
    Ubiquity__V1__Update **updates;
    size_t n_updates;
    Ubiquity__V1__Delete **deletes;
    size_t n_deletes;
};
/* Appends x to the malloc'd array arr of n elements. */
#define UBQ__PUSH(arr, n, x) do { (arr) = ubq__xrealloc((arr), ((n) + 1) * sizeof *(arr)); (arr)[(n)++] = (x); } while (0)

/* Points a SaveRequest's inserts/updates/deletes at the changes' own messages (no copy). */
void ubq__changes_fill(const ubq_changes *c, Ubiquity__V1__SaveRequest *r);
/* FetchSpec for a fetch; free with ubq__fetch_spec_free. */
Ubiquity__V1__FetchSpec *ubq__fetch_spec(const char *entity, const ubq_fetch_options *o);
void ubq__fetch_spec_free(Ubiquity__V1__FetchSpec *spec);

#endif

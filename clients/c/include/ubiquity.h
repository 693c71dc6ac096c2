/*
 * The Ubiquity C client: gRPC over one HTTP/2 connection (nghttp2 client session on a socket,
 * plaintext or TLS), protobuf-c messages generated from Protos/ (clients/c/gen).
 *
 * Conventions (README.md "Ownership" says the same with examples):
 *  - Every call that can fail returns `ubq_error *`: NULL on success, else an error the caller
 *    frees with ubq_error_free(). Out-parameters are written only on success.
 *  - Results are the generated protobuf-c messages (Ubiquity__V1__FetchResults, …). The caller owns
 *    each returned message and frees it with ubq_message_free(); pointers into it (objects, values,
 *    tokens) live as long as the message.
 *  - Strings and tokens passed in are borrowed for the duration of the call only (copied when an
 *    object must keep them: a store's ID, a feed's resume token).
 *  - Handles (ubq_client, ubq_store, ubq_context, ubq_feed, ubq_values, ubq_changes) are freed with
 *    their own *_free / *_close function. A store or context must be freed before its client.
 *  - Threads: a ubq_client and everything made from it belong to one thread at a time (one blocking
 *    call in flight per connection). A ubq_feed has its own connection and may run on another
 *    thread than its client's.
 */
#ifndef UBIQUITY_H
#define UBIQUITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "google/rpc/error_details.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "ubiquity/v1/accounts.pb-c.h"
#include "ubiquity/v1/admin.pb-c.h"
#include "ubiquity/v1/changes.pb-c.h"
#include "ubiquity/v1/contexts.pb-c.h"
#include "ubiquity/v1/keyvalue.pb-c.h"
#include "ubiquity/v1/models.pb-c.h"
#include "ubiquity/v1/stores.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors -------------------------------------------------------------------------------- */

/* gRPC status codes. */
typedef enum {
    UBQ_OK = 0, UBQ_CANCELLED = 1, UBQ_UNKNOWN = 2, UBQ_INVALID_ARGUMENT = 3,
    UBQ_DEADLINE_EXCEEDED = 4, UBQ_NOT_FOUND = 5, UBQ_ALREADY_EXISTS = 6,
    UBQ_PERMISSION_DENIED = 7, UBQ_RESOURCE_EXHAUSTED = 8, UBQ_FAILED_PRECONDITION = 9,
    UBQ_ABORTED = 10, UBQ_OUT_OF_RANGE = 11, UBQ_UNIMPLEMENTED = 12, UBQ_INTERNAL = 13,
    UBQ_UNAVAILABLE = 14, UBQ_DATA_LOSS = 15, UBQ_UNAUTHENTICATED = 16
} ubq_code;

/*
 * A failed call: the gRPC status and its decoded `grpc-status-details-bin` (docs/errors.md).
 * Everything it points to is owned by the error and freed by ubq_error_free().
 */
typedef struct ubq_error {
    ubq_code code;
    char *message;                 /* grpc-message, percent-decoded; never NULL */
    const char *reason;            /* ErrorInfo.reason ("MERGE_CONFLICT", …); NULL if none */
    const Google__Rpc__ErrorInfo *info;             /* NULL if absent */
    const Google__Rpc__BadRequest *bad_request;     /* field violations; NULL if absent */
    /* MERGE_CONFLICT / CONSTRAINT_CONFLICT: the conflict records; NULL if absent. */
    const Ubiquity__V1__ConflictDetails *conflicts;
    /* HISTORY_EXPIRED: the oldest retained and current tokens; NULL if absent. */
    const Ubiquity__V1__HistoryExpiredDetails *history_expired;
    /* SHUTTING_DOWN / SUBSCRIBER_TOO_SLOW: where to subscribe again from; NULL if absent. */
    const Ubiquity__V1__ResumeDetails *resume;
    /* KEY_VERSION_CONFLICT: the key's current version and whether it exists; NULL if absent. */
    const Ubiquity__V1__KeyValueConflictDetails *key_conflict;
    /* KEY_VALUE_QUOTA: which quota, its limit, what the write asked for, what is used. */
    const Ubiquity__V1__KeyValueQuotaDetails *key_quota;
    Google__Rpc__Status *status;   /* the whole decoded details message; NULL if none was sent */
} ubq_error;

void ubq_error_free(ubq_error *error);
/* True when the error's reason is `reason` (e.g. ubq_error_is(e, "CONTEXT_NOT_FOUND")). */
bool ubq_error_is(const ubq_error *error, const char *reason);
/* The canonical name of a code ("ABORTED"); static storage. */
const char *ubq_code_name(ubq_code code);

/* Frees any message this library returned (FetchResults, SaveResult, ContextState, …). NULL is fine. */
void ubq_message_free(const void *message);

/* ---- client -------------------------------------------------------------------------------- */

typedef struct ubq_client ubq_client;

/* TLS (docs/tls.md: ubiquityd's --tls-cert / --tls-key, and --tls-client-ca to require client
 * certificates). HTTP/2 is agreed with ALPN "h2"; TLS 1.2 and 1.3 only. The files are read by
 * ubq_connect (a file that cannot be read is INVALID_ARGUMENT then); the strings are borrowed for
 * that call only. */
typedef struct ubq_tls_options {
    const char *ca_file;       /* PEM file of the CAs to trust; NULL: the system's trusted roots */
    const char *cert_file;     /* a client certificate (PEM, chain first to last) and its key: */
    const char *key_file;      /*   both or neither */
    /* The name the server's certificate must carry (and the SNI sent) instead of the target's
     * host; an IP address is checked against the certificate's IP addresses. NULL: the host. */
    const char *server_name;
} ubq_tls_options;

typedef struct ubq_client_options {
    /* Deadline of each call in milliseconds (sent as grpc-timeout); 0 means 30000. ubq_sign_out,
     * ubq_archive_account and ubq_delete_account get at least 120000: the server answers them
     * after its acknowledgement and save windows (40 s at its defaults). */
    int64_t timeout_ms;
    /* A session token sent as `authorization: Bearer <token>` on every call; NULL for none. */
    const char *bearer_token;
    /* Sign-in (Accounts.SignIn, docs/accounts.md): with an API key (and this device's ID, 1–200
     * printable characters), ubq_connect signs in and every call carries the session; the client
     * signs in again before the session expires and once when a call answers UNAUTHENTICATED
     * (the session was revoked or lost). Takes the place of bearer_token. */
    const char *api_key;
    const char *device_id;
    /* Attempts of a save whose outcome is unknown (UNAVAILABLE, DEADLINE_EXCEEDED), with one
     * client transaction ID; 0 means 3. */
    int save_attempts;
    /* NULL: plaintext HTTP/2 (h2c). Else TLS with these settings, for the client's calls and its
     * feeds' connections alike. A handshake that fails (an untrusted certificate, a name that
     * does not match, no h2) makes the call UNAVAILABLE with OpenSSL's reason in the message. */
    const ubq_tls_options *tls;
    /* With api_key: the device secret ubq_start_local_session gave this device (device_id the
     * same). The first sign-in imports the device's local stores into the account's stores of
     * the same names (docs/accounts.md "Local stores"); ubq_local_import says what it did. */
    const char *local_device_secret;
} ubq_client_options;

/* Connects to `target` ("host:port"; plain-text HTTP/2 unless options->tls). `options` may be NULL. The connection is
 * made lazily again after a failure. On success *out is the caller's: free it with ubq_client_free. */
ubq_error *ubq_connect(const char *target, const ubq_client_options *options, ubq_client **out);
void ubq_client_free(ubq_client *client);
/* Ends the client's session on the server (Accounts.SignOut): its token stops working and its
 * streams end. A client with an API key signs in again on its next call. */
ubq_error *ubq_sign_out(ubq_client *client);

/* What a first-sign-in import did (SignIn's local_import, a DID_CHANGE's import_counts); the first
 * three add up to the number of local objects, the last two to the local key-value entries. */
typedef struct ubq_import_counts {
    int64_t inserted;          /* objects inserted into the account's store */
    int64_t merged;            /* merged into existing objects through uniqueness constraints */
    int64_t deduplicated;      /* duplicates among the local objects removed */
    int64_t key_values_moved;  /* local key-value entries set in the account */
    int64_t key_values_kept;   /* local entries of keys the account had: the account's value kept */
} ubq_import_counts;

/* A client working in this device's local stores before it signs in to any account
 * (Accounts.StartLocalSession; the server must run with --local-stores, else FAILED_PRECONDITION
 * LOCAL_STORES_DISABLED). device_secret NULL registers the device: keep ubq_device_secret(*out)
 * (the server shows it once) for later local sessions and for the first sign-in's
 * options.local_device_secret. The session is renewed with the secret before it expires.
 * `options` may be NULL (its api_key is ignored). Free *out with ubq_client_free. */
ubq_error *ubq_start_local_session(const char *target, const ubq_client_options *options, const char *device_id,
                                   const char *device_secret, ubq_client **out);
/* A local session's device secret, owned by the client (valid until ubq_client_free); NULL for
 * other clients. */
const char *ubq_device_secret(const ubq_client *client);
/* Whether the client's sign-in (with options.local_device_secret) imported local stores; the
 * counts into *out then. */
bool ubq_local_import(const ubq_client *client, ubq_import_counts *out);

/* ---- Admin (admin.proto) ----------------------------------------------------------------------
 * Ping, server info and stats are open to any caller; backup and restore are operator calls: a
 * client connected with options.bearer_token = the operator key (<data-dir>/operator.key), else
 * UNAUTHENTICATED. Free each *out with ubq_message_free; `out` may be NULL. */
/* Echoes `payload` (len bytes; NULL with 0) back with the server's time. */
ubq_error *ubq_admin_ping(ubq_client *client, const void *payload, size_t len, Ubiquity__V1__PingResponse **out);
/* Version, listen address, start time, transport limits, services, event loops. */
ubq_error *ubq_admin_server_info(ubq_client *client, Ubiquity__V1__ServerInfo **out);
/* Live counters: connections, streams, calls by status code (calls_by_status entries). */
ubq_error *ubq_admin_server_stats(ubq_client *client, Ubiquity__V1__ServerStats **out);
/* An online backup of one store (`store_id`) or, NULL, of the whole server, into `directory` on
 * the server's file system (new or empty, else FAILED_PRECONDITION BACKUP_DIRECTORY_NOT_EMPTY).
 * out is its manifest: each store's generation, file, sha256. */
ubq_error *ubq_admin_backup(ubq_client *client, const char *directory, const char *store_id,
                            Ubiquity__V1__BackupManifest **out);
/* Restores one store (`store_id`; NULL if the backup holds one) of a finished backup into the running
 * server; an existing store is replaced only with replace_existing (else FAILED_PRECONDITION
 * STORE_EXISTS). It gets a new epoch: its older tokens are refused, its feeds and contexts end. */
ubq_error *ubq_admin_restore_store(ubq_client *client, const char *directory, const char *store_id,
                                   bool replace_existing, Ubiquity__V1__RestoreStoreResponse **out);

/* ---- Accounts: the operator calls (accounts.proto, docs/accounts.md) ---------------------------
 * For a client connected with options.bearer_token = the operator key (<data-dir>/operator.key);
 * a session is refused (UNAUTHENTICATED). Each *out is the caller's: free it with
 * ubq_message_free; `out` may be NULL. Strings passed in are borrowed for the call. */
/* A new account with a server-generated ID (out->account_id); display_name may be NULL. */
ubq_error *ubq_create_account(ubq_client *client, const char *display_name, Ubiquity__V1__Account **out);
/* One account (NOT_FOUND if none, or deleted). */
ubq_error *ubq_get_account(ubq_client *client, const char *account_id, Ubiquity__V1__Account **out);
/* One page of the accounts, ordered by ID: page_size 0 is the server's default (100), at most
 * 1,000; page_token NULL or "" for the first page, else the previous page's
 * out->next_page_token (copy it before freeing that page). out->next_page_token is "" after the
 * last page. *out is the caller's: ubq_message_free. */
ubq_error *ubq_list_accounts(ubq_client *client, uint32_t page_size, const char *page_token,
                             Ubiquity__V1__ListAccountsResponse **out);

typedef struct ubq_api_key_options {
    /* What the key's sessions may do; 0: read-write. READ_ONLY: writes answer PERMISSION_DENIED
     * SCOPE_EXCEEDED; ONE_STORE: only the store `store_name`. */
    Ubiquity__V1__ApiKeyScope scope;
    const char *store_name;   /* for UBIQUITY__V1__API_KEY_SCOPE__API_KEY_SCOPE_ONE_STORE */
    const char *label;
} ubq_api_key_options;
/* A new API key for `account_id`; out->secret ("ubk_…", the only time it is shown: it goes to
 * ubq_client_options.api_key) and out->key (its ID, scope, …). `options` may be NULL. */
ubq_error *ubq_create_api_key(ubq_client *client, const char *account_id, const ubq_api_key_options *options,
                              Ubiquity__V1__CreateApiKeyResponse **out);
/* Revokes a key (its ApiKey.key_id): it no longer signs in, and its sessions end
 * (out->sessions_revoked). */
ubq_error *ubq_revoke_api_key(ubq_client *client, const char *key_id, Ubiquity__V1__RevokeApiKeyResponse **out);
/* Archives an account: its sessions end (its feeds hear WILL_CHANGE / DID_CHANGE(ACCOUNT_REMOVED)
 * first), its stores are kept and served to nobody, its keys do not sign in. out: ARCHIVED.
 * FAILED_PRECONDITION ACCOUNT_ARCHIVED / ACCOUNT_BUSY / DEFAULT_ACCOUNT. */
ubq_error *ubq_archive_account(ubq_client *client, const char *account_id, Ubiquity__V1__Account **out);
/* Brings an archived account back unchanged; its keys sign in again. out: ACTIVE. ALREADY_EXISTS
 * ACCOUNT_NOT_ARCHIVED for an active one. */
ubq_error *ubq_restore_account(ubq_client *client, const char *account_id, Ubiquity__V1__Account **out);
/* "Start over": removes the account and everything of it (stores, archive, key-value entries,
 * keys, sessions); out says what was removed. FAILED_PRECONDITION DEFAULT_ACCOUNT for "default". */
ubq_error *ubq_delete_account(ubq_client *client, const char *account_id, Ubiquity__V1__DeleteAccountResponse **out);

/* ---- values -------------------------------------------------------------------------------- */

/*
 * A set of named values: an object's attribute values for inserts and updates, or a fetch's
 * predicate arguments (`$name`). The set copies what it is given; free it with ubq_values_free.
 * Setters return the set (for chaining) and never fail except by aborting on out-of-memory.
 */
typedef struct ubq_values ubq_values;
ubq_values *ubq_values_new(void);
void ubq_values_free(ubq_values *values);
ubq_values *ubq_values_string(ubq_values *v, const char *name, const char *value);
ubq_values *ubq_values_int16(ubq_values *v, const char *name, int16_t value);
ubq_values *ubq_values_int32(ubq_values *v, const char *name, int32_t value);
ubq_values *ubq_values_int64(ubq_values *v, const char *name, int64_t value);
ubq_values *ubq_values_double(ubq_values *v, const char *name, double value);
ubq_values *ubq_values_bool(ubq_values *v, const char *name, bool value);
ubq_values *ubq_values_null(ubq_values *v, const char *name);
/* Any value kind (decimal, date, binary, uuid, uri, float): copied. */
ubq_values *ubq_values_value(ubq_values *v, const char *name, const Ubiquity__V1__Value *value);
/* An argument list for `IN $name`: `count` strings. */
ubq_values *ubq_values_string_list(ubq_values *v, const char *name, const char *const *items, size_t count);

/*
 * Reading values from results. Every protobuf map of values (ManagedObject.values,
 * ConflictRecord.store_values, Change.values, Row.values …) is an array of entries with a key and
 * a value; UBQ_GET(msg, field, key) finds one: UBQ_GET(obj, values, "age"). The pointer lives as
 * long as the message; NULL when the key is absent.
 */
const Ubiquity__V1__Value *ubq_map_get(const void *const *entries, size_t count, const char *key);
#define UBQ_GET(msg, field, key) ubq_map_get((const void *const *)(msg)->field, (msg)->n_##field, (key))
/* The value as an integer (int16/int32/int64 kinds) or double (float/double kinds); false when
 * absent, null or of another kind. */
bool ubq_value_int(const Ubiquity__V1__Value *value, int64_t *out);
bool ubq_value_double(const Ubiquity__V1__Value *value, double *out);
/* The string of a string/decimal/uuid/uri value; NULL otherwise. Owned by the message the value is in. */
const char *ubq_value_string(const Ubiquity__V1__Value *value);

/* ---- stores -------------------------------------------------------------------------------- */

typedef struct ubq_store ubq_store;
/* Opens (creates unless must_exist) the store `name`. Free *out with ubq_store_free. */
ubq_error *ubq_open_store(ubq_client *client, const char *name, bool must_exist, ubq_store **out);
void ubq_store_free(ubq_store *store);
/* The store's ID (owned by the store, valid until ubq_store_free). */
const char *ubq_store_id(const ubq_store *store);
/* Whether ubq_open_store created the store. */
bool ubq_store_created(const ubq_store *store);
/* All stores; free *out with ubq_message_free. */
ubq_error *ubq_list_stores(ubq_client *client, Ubiquity__V1__ListStoresResponse **out);
/* Registers (or migrates to) a model built with the generated structs (borrowed for the call).
 * `out` may be NULL; else free *out with ubq_message_free. */
ubq_error *ubq_register_model(ubq_store *store, const Ubiquity__V1__Model *model,
                              Ubiquity__V1__RegisterModelResponse **out);
/* The current generation's token: a copy in *out the caller frees with free(out->data). */
ubq_error *ubq_current_token(ubq_store *store, ProtobufCBinaryData *out);

/* A fetch. Zero-initialise and set what you need: `{ .predicate = "age > $min", .arguments = a }`. */
typedef struct ubq_fetch_options {
    const char *predicate;             /* NSPredicate format; NULL or "" fetches every object */
    const ubq_values *arguments;       /* values of `$name` variables; NULL for none */
    const char *const *sort;           /* NULL-terminated key paths; a leading '-' sorts descending */
    int32_t limit;                     /* 0: no limit */
    int32_t offset;
    Ubiquity__V1__ResultType result_type;  /* 0: objects */
    ProtobufCBinaryData at;            /* read at this token; {0, NULL}: current */
    int32_t batch_size;                /* ubq_fetch_stream: objects per batch; 0: the server's default */
    /* UBIQUITY__V1__RESULT_TYPE__RESULT_TYPE_DICTIONARIES (results->rows; UBQ_GET(row, values, k)):
     * NULL-terminated key paths to return, or aggregates written "alias = fn:(keyPath)" with fn
     * count, sum, min, max or average ("n = count:(SELF)"); NULL: every attribute. */
    const char *const *properties;
    const char *const *group_by;       /* NULL-terminated key paths to group rows by */
    const char *having;                /* with group_by: a predicate over the groups ("n > 1") */
    bool distinct;                     /* dictionaries: drop duplicate rows */
    /* NULL-terminated relationship key paths whose destinations come with the results
     * (results->prefetched). */
    const char *const *prefetch;
    bool excludes_subentities;         /* leave out objects of sub-entities */
    bool sort_case_insensitive;        /* every sort key compares strings ignoring case */
    /* ubq_fetch and ubq_fetch_stream: a read-your-writes fence, UNAVAILABLE GENERATION_NOT_REACHED
     * unless the store has reached this generation (a save's result->generation); 0: none. */
    int64_t minimum_generation;
} ubq_fetch_options;

/* Fetch objects of `entity`; `options` may be NULL. Free *out with ubq_message_free; out->token
 * is the generation read (pass it as `at` to read the same generation again). */
ubq_error *ubq_fetch(ubq_store *store, const char *entity, const ubq_fetch_options *options,
                     Ubiquity__V1__FetchResults **out);
/* A fetch whose results arrive in batches, all at one generation (Stores.FetchStream), for
 * results too large for one message. `on_batch` gets each batch (borrowed for the call) and
 * returns false to stop early (the call then returns NULL). */
typedef bool (*ubq_fetch_batch_fn)(const Ubiquity__V1__FetchResults *batch, void *user);
ubq_error *ubq_fetch_stream(ubq_store *store, const char *entity, const ubq_fetch_options *options,
                            ubq_fetch_batch_fn on_batch, void *user);
/* The store's model and its version hash. Free *out with ubq_message_free. */
ubq_error *ubq_get_model(ubq_store *store, Ubiquity__V1__GetModelResponse **out);
/* Objects by ID at `at` (NULL: current). Free *out with ubq_message_free. */
ubq_error *ubq_get_objects(ubq_store *store, const char *const *object_ids, size_t count,
                           const ProtobufCBinaryData *at, Ubiquity__V1__GetObjectsResponse **out);
/* The object with `object_id` in a GetObjects response (owned by the response); NULL when missing. */
const Ubiquity__V1__ManagedObject *ubq_find_object(const Ubiquity__V1__GetObjectsResponse *response,
                                                   const char *object_id);

/* ---- saves ----------------------------------------------------------------------------------- */

/* A set of changes for ubq_save: copies what it is given; free with ubq_changes_free. */
typedef struct ubq_changes ubq_changes;
ubq_changes *ubq_changes_new(void);
void ubq_changes_free(ubq_changes *changes);
/* A new object labelled `temporary_id` (SaveResult.permanent_ids maps the label to its ID). */
void ubq_changes_insert(ubq_changes *c, const char *temporary_id, const char *entity, const ubq_values *values);
/* New values for an existing object; expected_version < 0: no optimistic-locking check. */
void ubq_changes_update(ubq_changes *c, const char *object_id, const ubq_values *values, int64_t expected_version);
void ubq_changes_delete(ubq_changes *c, const char *object_id, int64_t expected_version);
/* Sets relationship `name` of `from` to `targets` (NULL-terminated; NULL or empty: no target),
 * replacing its whole set (zero or one target for a to-one). `from` is the temporary ID of an
 * insert in these changes, else an object ID (its update in these changes, or a new one with no
 * values). Each target that is the temporary ID of an insert already in these changes points at
 * that insert; any other is an object ID. Copied, like everything given to the changes. */
void ubq_changes_relate(ubq_changes *c, const char *from, const char *name, const char *const *targets);

typedef struct ubq_save_options {
    Ubiquity__V1__MergePolicy merge_policy;  /* 0: the server's default (error) */
    const char *author;
    /* NULL: a fresh random UUID. Every retry of this save sends the same one, so a save whose
     * answer was lost is applied once (SaveResult.replayed says a retry found it applied). */
    const char *client_transaction_id;
    bool dry_run;
    bool conflicts_in_response;
} ubq_save_options;

/* One transaction; retried (ubq_client_options.save_attempts) when its outcome is unknown.
 * `options` may be NULL. Free *out with ubq_message_free. */
ubq_error *ubq_save(ubq_store *store, const ubq_changes *changes, const ubq_save_options *options,
                    Ubiquity__V1__SaveResult **out);
/* The permanent ID of a temporary label in a SaveResult; NULL if absent. Owned by the result. */
const char *ubq_permanent_id(const Ubiquity__V1__SaveResult *result, const char *temporary_id);
/* Trims history through `token` (Changes.DeleteHistory). */
ubq_error *ubq_delete_history(ubq_store *store, ProtobufCBinaryData token);
/* A page of committed transactions after `after` (exclusive; {0, NULL}: from the oldest retained),
 * at most page_size (0: the server's default). Go on from out->next_token while out->has_more.
 * Free *out with ubq_message_free. */
ubq_error *ubq_fetch_history(ubq_store *store, ProtobufCBinaryData after, uint32_t page_size,
                             Ubiquity__V1__FetchHistoryResponse **out);
/* A page of IDs deleted after `after` (exclusive), from the tombstone index that outlives the full
 * history: after HISTORY_EXPIRED with deletions_available, what to drop from a cache. Paged like
 * ubq_fetch_history. Free *out with ubq_message_free. */
ubq_error *ubq_fetch_deletions(ubq_store *store, ProtobufCBinaryData after, uint32_t page_size,
                               Ubiquity__V1__FetchDeletionsResponse **out);

/* ---- set-based writes -------------------------------------------------------------------------- */

typedef struct ubq_batch_options {
    const char *author;            /* recorded in history */
    bool upsert;                   /* insert: a uniqueness clash updates the existing object */
    bool return_object_ids;        /* insert: answer the new objects' IDs */
    const char *const *object_ids; /* delete: these objects (NULL-terminated) instead of a predicate */
} ubq_batch_options;

/* Each is one transaction (Stores.BatchInsert / BatchUpdate / BatchDelete); `options` may be NULL;
 * out->count says how many objects it wrote. Free *out with ubq_message_free; `out` may be NULL. */
ubq_error *ubq_batch_insert(ubq_store *store, const char *entity, const ubq_values *const *objects, size_t count,
                            const ubq_batch_options *options, Ubiquity__V1__BatchResponse **out);
/* Sets `values` on every object of `entity` matching `predicate` (NULL: all) with `arguments`. */
ubq_error *ubq_batch_update(ubq_store *store, const char *entity, const char *predicate, const ubq_values *arguments,
                            const ubq_values *values, const ubq_batch_options *options,
                            Ubiquity__V1__BatchResponse **out);
ubq_error *ubq_batch_delete(ubq_store *store, const char *entity, const char *predicate, const ubq_values *arguments,
                            const ubq_batch_options *options, Ubiquity__V1__BatchResponse **out);
/* Removes the store and its files on the server (the handle still needs ubq_store_free). */
ubq_error *ubq_destroy_store(ubq_store *store);

/* ---- whole-store operations ------------------------------------------------------------------- */

typedef struct ubq_deduplicate_options {
    int32_t batch_size;            /* objects deleted per transaction; 0: the server's default */
    const char *author;            /* recorded in history */
} ubq_deduplicate_options;

/* Keeps one object of `entity` per value of `unique_key` (a NULL-terminated list of attributes)
 * and deletes the others (Stores.Deduplicate). `options` may be NULL. out->groups, out->removed and
 * out->details (winner and removed IDs per group). Free *out with ubq_message_free; `out` may be NULL. */
ubq_error *ubq_deduplicate(ubq_store *store, const char *entity, const char *const *unique_key,
                           const ubq_deduplicate_options *options, Ubiquity__V1__DeduplicateResponse **out);
/* Inserts the inserts of `inserts` (its updates and deletes are ignored) at most once per `seed_id`
 * (Stores.Seed): a later call with the same ID changes nothing and answers out->applied = false
 * with the first call's permanent IDs. Retried like ubq_save when the outcome is unknown. `author`
 * may be NULL. Free *out with ubq_message_free; `out` may be NULL. */
ubq_error *ubq_seed(ubq_store *store, const char *seed_id, const ubq_changes *inserts, const char *author,
                    Ubiquity__V1__SeedResponse **out);
/* Every object at one generation (`at`, NULL or empty: current), in chunks of batch_size (0: the
 * server's default, 500) (Stores.ExportBaseline). `on_chunk` gets each chunk, borrowed for the
 * call: all carry the snapshot's token (subscribe from it to follow later changes with no gap);
 * the last has `last` and `total`. Return false to stop early (the call then returns NULL). */
typedef bool (*ubq_baseline_chunk_fn)(const Ubiquity__V1__BaselineChunk *chunk, void *user);
ubq_error *ubq_export_baseline(ubq_store *store, const ProtobufCBinaryData *at, int32_t batch_size,
                               ubq_baseline_chunk_fn on_chunk, void *user);

typedef struct ubq_import_options {
    ProtobufCBinaryData source_at;     /* the source's generation; {0, NULL}: current */
    bool deduplicate_by_constraints;   /* an object clashing on a uniqueness constraint merges */
    const char *author;
} ubq_import_options;

/* Copies the objects of the store `source_store_id` (same account, left unchanged) into this one,
 * relationships kept (Stores.ImportStore). `options` may be NULL. out->imported and
 * out->object_id_map (source ID → new ID). Free *out with ubq_message_free; `out` may be NULL. */
ubq_error *ubq_import_store(ubq_store *store, const char *source_store_id, const ubq_import_options *options,
                            Ubiquity__V1__ImportStoreResponse **out);
/* Replaces this store's contents with those of `source_store_id` (Stores.ReplaceStore); it keeps its
 * ID and name. Tokens from before answer GENERATION_EXPIRED / STORE_REPLACED afterwards, and its
 * feeds and contexts end. out->token is the new current token. Free *out with ubq_message_free;
 * `out` may be NULL. */
ubq_error *ubq_replace_store(ubq_store *store, const char *source_store_id, Ubiquity__V1__ReplaceStoreResponse **out);

/* ---- contexts -------------------------------------------------------------------------------- */

typedef struct ubq_context ubq_context;

typedef enum {
    UBQ_PIN_AT_FIRST_READ = 0,  /* the default: the first read pins its generation until refresh */
    UBQ_UNPINNED,               /* every read sees the newest generation */
    UBQ_PIN_AT_TOKEN            /* reads see `token`'s generation */
} ubq_pin;

typedef struct ubq_context_options {
    const char *name;
    const char *author;
    Ubiquity__V1__MergePolicy merge_policy;   /* 0: error */
    ubq_pin pin;
    ProtobufCBinaryData token;                /* for UBQ_PIN_AT_TOKEN */
    const ubq_context *parent;                /* a nested context saves into its parent */
} ubq_context_options;

/* A server-side unit of work. `options` may be NULL (its token and parent are borrowed for the
 * call). Close *out with ubq_context_close. */
ubq_error *ubq_context_create(ubq_store *store, const ubq_context_options *options, ubq_context **out);
/* Closes the context on the server (best effort) and frees the handle. NULL is fine. */
void ubq_context_close(ubq_context *ctx);
/* The context's ID (owned by the context, valid until ubq_context_close). */
const char *ubq_context_id(const ubq_context *ctx);
/* Inserts one pending object; *object_id (malloc'd, the caller frees it with free()) is its ID in
 * the context, which SaveResult.permanent_ids maps to the permanent one. object_id may be NULL. */
ubq_error *ubq_context_insert(ubq_context *ctx, const char *entity, const ubq_values *values, char **object_id);
ubq_error *ubq_context_update(ubq_context *ctx, const char *object_id, const ubq_values *values);
ubq_error *ubq_context_delete(ubq_context *ctx, const char *object_id);
/* Sets relationship `name` of `object_id` to `targets`, NULL-terminated object IDs (the IDs of
 * the context's pending inserts too), replacing its whole set: pending until the save. The
 * strings are borrowed for the call. */
ubq_error *ubq_context_relate(ubq_context *ctx, const char *object_id, const char *name, const char *const *targets);
/* A fetch through the context (its pinned generation; pending changes unless excluded). Free *out
 * with ubq_message_free. */
ubq_error *ubq_context_fetch(ubq_context *ctx, const char *entity, const ubq_fetch_options *options,
                             bool exclude_pending, Ubiquity__V1__FetchResults **out);
typedef struct ubq_context_save_options {
    const char *client_transaction_id;  /* NULL: a fresh random UUID, the same for every retry */
    bool dry_run;                       /* check and report, apply nothing */
    /* Under the error policy a conflicting save answers OK with its conflicts in
     * result->unresolved_conflicts (all of them, in full) instead of failing ABORTED; nothing is
     * applied and the pending changes stay. */
    bool conflicts_in_response;
} ubq_context_save_options;

/* Saves the pending changes in one transaction with the context's merge policy, retried like
 * ubq_save with one client transaction ID. `options` may be NULL. On a conflict under the error
 * policy the pending changes stay. Free *out with ubq_message_free; `out` may be NULL. */
ubq_error *ubq_context_save(ubq_context *ctx, const ubq_context_save_options *options,
                            Ubiquity__V1__ContextSaveResponse **out);
/* Discards pending changes (rollback) / also forgets what was read (reset). */
ubq_error *ubq_context_rollback(ubq_context *ctx);
ubq_error *ubq_context_reset(ubq_context *ctx);
/* Moves a pinned context to the newest generation; merge_changes keeps pending changes on top. */
ubq_error *ubq_context_refresh(ubq_context *ctx, bool merge_changes);
/* Changes how the context pins its generation. */
ubq_error *ubq_context_pin(ubq_context *ctx, ubq_pin pin, ProtobufCBinaryData token);
/* The pending state (counts, token, mode). Free *out with ubq_message_free. */
ubq_error *ubq_context_state(ubq_context *ctx, Ubiquity__V1__ContextState **out);

/* ---- the account's key-value store -------------------------------------------------------------- */

typedef struct ubq_kv_options {
    int64_t expected_version;   /* > 0: write only if the key is at this version (compare-and-set) */
    bool must_not_exist;        /* write only if the key is not set */
    const char *author;         /* recorded with the change (feeds can exclude it) */
} ubq_kv_options;

/* Each answers KEY_VERSION_CONFLICT (error->key_conflict) when its precondition does not hold and
 * KEY_VALUE_QUOTA (error->key_quota) over a quota. `options` may be NULL. Free *out with
 * ubq_message_free; for set and delete `out` may be NULL. */
ubq_error *ubq_kv_get(ubq_client *client, const char *key, Ubiquity__V1__KeyValueEntry **out);
ubq_error *ubq_kv_set(ubq_client *client, const char *key, const void *value, size_t len,
                      const ubq_kv_options *options, Ubiquity__V1__KeyValueWriteResponse **out);
ubq_error *ubq_kv_delete(ubq_client *client, const char *key, const ubq_kv_options *options,
                         Ubiquity__V1__KeyValueWriteResponse **out);
/* Keys starting with `prefix` (NULL: all), a page at a time: pass out->next_page_token back until
 * it is empty ({0, NULL} for the first page). */
ubq_error *ubq_kv_list(ubq_client *client, const char *prefix, uint32_t page_size, ProtobufCBinaryData page_token,
                       Ubiquity__V1__KeyValueListResponse **out);

/* ---- the change feed --------------------------------------------------------------------------- */

typedef struct ubq_feed ubq_feed;

typedef enum { UBQ_FEED_CONTINUE = 0, UBQ_FEED_STOP = 1 } ubq_feed_action;

/* Called for every event (transactions, caught_up, progress, …), in order. The event is borrowed
 * for the call. Return UBQ_FEED_STOP to end ubq_feed_run (which then returns NULL). */
typedef ubq_feed_action (*ubq_feed_event_fn)(ubq_feed *feed, const Ubiquity__V1__SubscribeResponse *event,
                                             void *user);
/* A store transition (docs/lifecycle.md), announced before (WILL_CHANGE: save what you need) and
 * after (DID_CHANGE: drop your contexts, re-read) it happens, in order with the transactions. */
typedef enum {
    UBQ_PHASE_UNSPECIFIED = 0,  /* never sent */
    UBQ_PHASE_WILL_CHANGE = 1,
    UBQ_PHASE_DID_CHANGE = 2
} ubq_phase;

typedef enum {
    UBQ_TRANSITION_NONE = 0,                      /* the state as a subscription starts (a local
                                                     session's first event, using_local_storage) */
    UBQ_TRANSITION_ACCOUNT_ADDED = 1,             /* the device signed in to an account */
    UBQ_TRANSITION_ACCOUNT_REMOVED = 2,           /* it signed out or switched account */
    UBQ_TRANSITION_CONTENT_REMOVED = 3,           /* the account was deleted: no DID_CHANGE follows */
    UBQ_TRANSITION_INITIAL_IMPORT_COMPLETED = 4   /* the local stores were imported at first sign-in */
} ubq_transition;

typedef struct ubq_store_event {
    ubq_phase phase;
    ubq_transition transition;
    bool using_local_storage;         /* the device works in its local store (after the event) */
    bool has_import_counts;           /* DID_CHANGE of INITIAL_IMPORT_COMPLETED: */
    ubq_import_counts import_counts;  /*   what the import did */
    ProtobufCBinaryData token;        /* the event's resume token: borrowed from the feed event */
    int64_t generation;               /* its place in the store's history */
    /* DID_CHANGE only: the transition announced by the WILL_CHANGE did not happen (it failed
     * part-way, or the server was killed and closed it at its next start). The store is as it
     * was; contexts were reset all the same: re-create them and carry on. */
    bool cancelled;
    /* WILL_CHANGE on a feed with options.acknowledges_store_events (and a server that waits,
     * --transition-ack-seconds > 0): `requested` is true and the transition waits until
     * ubq_acknowledge_store_event(feed, event_token, …) or deadline_micros (wall clock,
     * microseconds since the Unix epoch; in the past on a replayed event). event_token is
     * borrowed from the feed event, like `token` (they are equal on a store feed). */
    struct {
        bool requested;
        ProtobufCBinaryData event_token;
        int64_t deadline_micros;
    } acknowledgement;
} ubq_store_event;

/* Reads a feed event as a store transition into *out; false (out untouched) for any other event. */
bool ubq_store_event_of(const Ubiquity__V1__SubscribeResponse *event, ubq_store_event *out);

/* Why a key changed (KeyValueChange.Reason, docs/keyvalue.md "Change feed"). */
typedef enum {
    UBQ_KV_REASON_UNSPECIFIED = 0,      /* never sent */
    UBQ_KV_REASON_SERVER_CHANGE = 1,    /* a device set or deleted the key */
    UBQ_KV_REASON_INITIAL_SYNC = 2,     /* start_oldest: every key set, as the feed begins */
    UBQ_KV_REASON_QUOTA_VIOLATION = 3,  /* a notice, not a change: a Set of `key` was refused for a
                                           quota (key "" : the account is over a quota); value,
                                           version and deleted unset, the token does not move */
    UBQ_KV_REASON_ACCOUNT_CHANGE = 4    /* moved in from a device's local entries at its first sign-in */
} ubq_kv_reason;

/* One key-value change, typed. The strings and the value are borrowed from the feed event. */
typedef struct ubq_kv_change {
    ubq_kv_reason reason;
    const char *key;
    ProtobufCBinaryData value;        /* empty when deleted */
    int64_t version;                  /* the key's version after the change (for compare-and-set) */
    bool deleted;
    const char *author;               /* "" when the writer gave none */
    ProtobufCBinaryData token;        /* the event's resume token (a key-value feed token) */
} ubq_kv_change;

/* Reads a feed event as a key-value change into *out; false (out untouched) for any other event. */
bool ubq_kv_change_of(const Ubiquity__V1__SubscribeResponse *event, ubq_kv_change *out);

/* One transaction's effect on a live query's result set, typed. Every pointer is borrowed from
 * the feed event. An object's `object` (its values) is set with options.include_values. */
typedef struct ubq_live_query_update {
    ProtobufCBinaryData token;        /* the transaction's token */
    int64_t generation;
    Ubiquity__V1__LiveQueryObject *const *entered;   /* now match, did not before */
    size_t n_entered;
    Ubiquity__V1__LiveQueryObject *const *changed;   /* matched before and after, and changed */
    size_t n_changed;
    char *const *left;                                /* object IDs that matched and no longer do */
    size_t n_left;
} ubq_live_query_update;

/* Reads a feed event as a live query update into *out; false (out untouched) for any other event. */
bool ubq_live_query_update_of(const Ubiquity__V1__SubscribeResponse *event, ubq_live_query_update *out);
/* Called with each store transition, typed (borrowed for the call), before on_event gets the same
 * event; return UBQ_FEED_STOP to end ubq_feed_run there (on_event is then not called). */
typedef ubq_feed_action (*ubq_store_event_fn)(ubq_feed *feed, const ubq_store_event *event, void *user);
/* The same for key-value changes and live query updates: typed, borrowed for the call, before
 * on_event gets the same event; UBQ_FEED_STOP ends ubq_feed_run there. */
typedef ubq_feed_action (*ubq_kv_change_fn)(ubq_feed *feed, const ubq_kv_change *change, void *user);
typedef ubq_feed_action (*ubq_live_query_fn)(ubq_feed *feed, const ubq_live_query_update *update, void *user);

/* HISTORY_EXPIRED: re-baseline (e.g. a fetch at error->history_expired->current_token), then set
 * *resume_from to the token to continue from (copied by the feed; it stays the hook's) and return
 * true; return false to end ubq_feed_run with the error. */
typedef bool (*ubq_history_expired_fn)(ubq_feed *feed, const ubq_error *error,
                                       ProtobufCBinaryData *resume_from, void *user);

typedef struct ubq_feed_options {
    /* Where to start: a token (start_token.len > 0), else the oldest retained history
     * (start_oldest), else now. */
    ProtobufCBinaryData start_token;
    bool start_oldest;
    const char *const *entities;    /* NULL-terminated filter; NULL: every entity */
    /* NULL-terminated authors whose transactions are skipped (typically this device's own
     * saves' author); progress markers still advance the token past them. */
    const char *const *exclude_authors;
    bool include_values;
    bool include_tombstones;        /* deletes carry the kept-on-delete attributes' last values */
    uint32_t coalesce_window_ms;    /* the server may hold transactions this long to batch them */
    /* A live query instead of raw changes (docs/changes.md "Live queries"): events are
     * SubscribeResponse.live_query updates saying which objects entered, changed inside or left
     * the predicate's result set. Set `entity` to use it (then leave `entities` NULL). */
    struct {
        const char *entity;
        const char *predicate;          /* NULL or "": every object of the entity */
        const ubq_values *arguments;    /* `$name` values; copied */
    } live_query;
    /* How long failures may last in a row before ubq_feed_run gives up (ms); 0 means 60000. */
    int64_t reconnect_for_ms;
    ubq_history_expired_fn on_history_expired;   /* NULL: HISTORY_EXPIRED ends the run */
    /* Store transitions (store and key-value feeds), typed; `user` is ubq_feed_run's. NULL: they
     * reach on_event only. After a sign-out's DID_CHANGE the stream ends SESSION_REVOKED: a feed
     * with an API key signs in again and goes on from that event's token. */
    ubq_store_event_fn on_store_event;
    /* Opt in to acknowledging store transitions (docs/lifecycle.md "Acknowledgements"; store feeds
     * only, a key-value feed refuses it): each WILL_CHANGE carries event->acknowledgement, and the
     * transition (a sign-out: ubq_sign_out does not return) waits until the feed acknowledges
     * with ubq_acknowledge_store_event, its stream ends, or the deadline passes. Flush what you
     * hold outside contexts first. Do not sign out this feed's session from inside its own
     * callbacks then: the sign-out would wait for an acknowledgement the blocked callback cannot
     * give until the deadline (sign out from another thread). */
    bool acknowledges_store_events;
    ubq_kv_change_fn on_kv_change;       /* key-value feeds: each change typed; NULL: on_event only */
    ubq_live_query_fn on_live_query;     /* live query feeds: each update typed; NULL: on_event only */
} ubq_feed_options;

/* A feed on its own connection to the store's server. `options` may be NULL. Free with ubq_feed_free. */
ubq_error *ubq_feed_new(ubq_store *store, const ubq_feed_options *options, ubq_feed **out);
/* A feed of the account's key-value changes (events: SubscribeResponse.key_value_change, caught_up,
 * progress). Of `options` it uses the start point, exclude_authors, reconnect_for_ms and
 * on_history_expired; start_oldest begins with every key set now (reason INITIAL_SYNC). */
ubq_error *ubq_kv_feed_new(ubq_client *client, const ubq_feed_options *options, ubq_feed **out);
/* Delivers events to `on_event` until it returns UBQ_FEED_STOP (NULL returned), or an error that
 * is not resumable, or failures lasting longer than reconnect_for_ms. When the stream breaks
 * (server restart or drain, network, SUBSCRIBER_TOO_SLOW) it subscribes again from the last resume
 * token: no transaction is lost or delivered twice. Can be called again after it returned. */
ubq_error *ubq_feed_run(ubq_feed *feed, ubq_feed_event_fn on_event, void *user);
/* Confirms a WILL_CHANGE the feed received with an acknowledgement (Changes.AcknowledgeStoreEvent,
 * event->acknowledgement.event_token, borrowed for the call): the transition stops waiting for
 * this feed's session on that store. Safe from inside the feed's callbacks (on_store_event is the
 * place: flush, then acknowledge) and from any other thread while ubq_feed_run runs: it goes on a
 * connection of its own with the feed's current session, never the stream's or the client's (a
 * client blocked in ubq_sign_out is no obstacle). Acknowledging twice or late is no error; *awaited
 * (may be NULL) says whether the transition was still waiting for it. Errors: NOT_FOUND
 * STORE_EVENT_NOT_FOUND for a token that is not a WILL_CHANGE of this device, INVALID_ARGUMENT
 * BAD_TOKEN for a malformed one. Not after ubq_feed_free. */
ubq_error *ubq_acknowledge_store_event(ubq_feed *feed, ProtobufCBinaryData event_token, bool *awaited);
/* The last resume token (borrowed; valid until the next event or ubq_feed_free). */
ProtobufCBinaryData ubq_feed_token(const ubq_feed *feed);
/* How many times the feed subscribed again after a broken stream. */
int ubq_feed_reconnects(const ubq_feed *feed);
/* How many times the feed signed in again (API key) after its session expired or was revoked. */
int ubq_feed_sign_ins(const ubq_feed *feed);
void ubq_feed_free(ubq_feed *feed);

#ifdef __cplusplus
}
#endif
#endif

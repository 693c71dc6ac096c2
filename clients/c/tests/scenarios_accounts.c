/* The operator's account calls (accounts.proto, docs/accounts.md): accounts created, read and
 * listed, API keys with scopes created and revoked, an account archived, restored and deleted —
 * each checked through what a device signing in with its keys can then do. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"

static ubq_error *operator_client(ubq_client **out) {
    char key[256];
    if (test_server_operator_key(shared_server, key, sizeof key) != 0)
        return ubq__error(UBQ_INTERNAL, "no operator key", NULL, 0);
    return ubq_connect(shared_server->address, &(ubq_client_options){.bearer_token = key}, out);
}

static bool listed(const Ubiquity__V1__ListAccountsResponse *list, const char *account_id) {
    for (size_t i = 0; i < list->n_accounts; i++)
        if (strcmp(list->accounts[i]->account_id, account_id) == 0) return true;
    return false;
}

/* Follows ListAccounts one account a page: true if account_id is on a page and the IDs come in
 * order, each page holding one, until a page without a next token. */
static bool listed_paged(ubq_client *op, const char *account_id) {
    char token[256] = "", last[256] = "";
    bool found = false, ordered = true;
    for (int pages = 0; pages < 1000; pages++) {
        Ubiquity__V1__ListAccountsResponse *page = NULL;
        ubq_error *e = ubq_list_accounts(op, 1, token, &page);
        if (e) {
            ubq_error_free(e);
            return false;
        }
        ordered = ordered && page->n_accounts == 1 && strcmp(last, page->accounts[0]->account_id) < 0;
        if (page->n_accounts == 1) {
            found = found || strcmp(page->accounts[0]->account_id, account_id) == 0;
            snprintf(last, sizeof last, "%s", page->accounts[0]->account_id);
        }
        snprintf(token, sizeof token, "%s", page->next_page_token);
        ubq_message_free(page);
        if (!token[0]) return found && ordered;
    }
    return false;
}

/* A new account with a read-write and a read-only key: the read-only session reads and is refused
 * a write with PERMISSION_DENIED SCOPE_EXCEEDED (nothing written); revoking the key ends its
 * session, and it no longer signs in; a session is not the operator. */
static void test_operator_creates_accounts_and_scoped_keys(ubq_client *c) {
    ubq_client *op = NULL, *writer = NULL, *reader = NULL, *again = NULL;
    Ubiquity__V1__Account *account = NULL, *got = NULL;
    Ubiquity__V1__ListAccountsResponse *list = NULL;
    Ubiquity__V1__CreateApiKeyResponse *rw = NULL, *ro = NULL;
    Ubiquity__V1__RevokeApiKeyResponse *revoked = NULL;
    Ubiquity__V1__KeyValueEntry *entry = NULL;
    OK(operator_client(&op));
    OK(ubq_create_account(op, "c-tests account", &account));
    CHECK(account->state == UBIQUITY__V1__ACCOUNT_STATE__ACCOUNT_STATE_ACTIVE && account->account_id[0]);
    CHECK(strcmp(account->display_name, "c-tests account") == 0 && account->created_at_micros > 0);
    OK(ubq_get_account(op, account->account_id, &got));
    CHECK(strcmp(got->account_id, account->account_id) == 0 && strcmp(got->display_name, "c-tests account") == 0);
    OK(ubq_list_accounts(op, 0, NULL, &list));
    CHECK(listed(list, account->account_id) && listed(list, "default") && !list->next_page_token[0]);
    CHECK(listed_paged(op, account->account_id));

    OK(ubq_create_api_key(op, account->account_id, &(ubq_api_key_options){.label = "writer"}, &rw));
    CHECK(rw->key->scope == UBIQUITY__V1__API_KEY_SCOPE__API_KEY_SCOPE_READ_WRITE);
    CHECK(strncmp(rw->secret, "ubk_", 4) == 0 && strcmp(rw->key->account_id, account->account_id) == 0);
    OK(ubq_create_api_key(op, account->account_id,
                          &(ubq_api_key_options){.scope = UBIQUITY__V1__API_KEY_SCOPE__API_KEY_SCOPE_READ_ONLY,
                                                 .label = "reader"}, &ro));
    CHECK(ro->key->scope == UBIQUITY__V1__API_KEY_SCOPE__API_KEY_SCOPE_READ_ONLY && !ro->key->revoked);
    CHECK(strcmp(ro->key->label, "reader") == 0);

    OK(ubq_connect(shared_server->address, &(ubq_client_options){.api_key = rw->secret, .device_id = "c-writer"}, &writer));
    OK(ubq_kv_set(writer, "greeting", "hi", 2, NULL, NULL));
    OK(ubq_connect(shared_server->address, &(ubq_client_options){.api_key = ro->secret, .device_id = "c-reader"}, &reader));
    OK(ubq_kv_get(reader, "greeting", &entry));   /* the account's own value, readable */
    CHECK(entry->value.len == 2 && memcmp(entry->value.data, "hi", 2) == 0);
    ubq_error *e = ubq_kv_set(reader, "greeting", "no", 2, NULL, NULL);
    CHECK(e && e->code == UBQ_PERMISSION_DENIED && ubq_error_is(e, "SCOPE_EXCEEDED"));
    ubq_error_free(e);
    ubq_message_free(entry);
    entry = NULL;
    OK(ubq_kv_get(writer, "greeting", &entry));   /* the refused write changed nothing */
    CHECK(entry->value.len == 2 && memcmp(entry->value.data, "hi", 2) == 0);

    /* the default account's session sees nothing of this account, and is not the operator */
    e = ubq_create_account(c, "not allowed", NULL);
    CHECK(e && e->code == UBQ_UNAUTHENTICATED);
    ubq_error_free(e);

    OK(ubq_revoke_api_key(op, ro->key->key_id, &revoked));
    CHECK(revoked->sessions_revoked >= 1);
    e = ubq_kv_get(reader, "greeting", NULL);     /* the session ended; the key signs in no more */
    CHECK(e && e->code == UBQ_UNAUTHENTICATED && ubq_error_is(e, "BAD_CREDENTIALS"));
    ubq_error_free(e);
    e = ubq_connect(shared_server->address, &(ubq_client_options){.api_key = ro->secret, .device_id = "c-reader"}, &again);
    CHECK(e && e->code == UBQ_UNAUTHENTICATED && ubq_error_is(e, "BAD_CREDENTIALS") && again == NULL);
    ubq_error_free(e);
    OK(ubq_kv_get(writer, "greeting", NULL));      /* the other key is untouched */
done:
    ubq_message_free(entry);
    ubq_message_free(revoked);
    ubq_message_free(ro);
    ubq_message_free(rw);
    ubq_message_free(list);
    ubq_message_free(got);
    ubq_message_free(account);
    ubq_client_free(again);
    ubq_client_free(reader);
    ubq_client_free(writer);
    ubq_client_free(op);
}

/* Archive: the key no longer signs in, the account says ARCHIVED, a second archive is refused;
 * restore: the same key signs in and finds the account's data; delete: the receipt counts it and
 * the account is gone. The default account cannot be archived. */
static void test_operator_archives_restores_and_deletes_an_account(ubq_client *unused) {
    (void)unused;
    ubq_client *op = NULL, *device = NULL, *refused = NULL;
    Ubiquity__V1__Account *account = NULL, *archived = NULL, *restored = NULL, *got = NULL;
    Ubiquity__V1__CreateApiKeyResponse *key = NULL;
    Ubiquity__V1__DeleteAccountResponse *receipt = NULL;
    Ubiquity__V1__KeyValueEntry *entry = NULL;
    OK(operator_client(&op));
    OK(ubq_create_account(op, NULL, &account));
    OK(ubq_create_api_key(op, account->account_id, NULL, &key));
    OK(ubq_connect(shared_server->address, &(ubq_client_options){.api_key = key->secret, .device_id = "c-arch"}, &device));
    OK(ubq_kv_set(device, "kept", "yes", 3, NULL, NULL));
    ubq_client_free(device);
    device = NULL;

    OK(ubq_archive_account(op, account->account_id, &archived));
    CHECK(archived->state == UBIQUITY__V1__ACCOUNT_STATE__ACCOUNT_STATE_ARCHIVED);
    OK(ubq_get_account(op, account->account_id, &got));
    CHECK(got->state == UBIQUITY__V1__ACCOUNT_STATE__ACCOUNT_STATE_ARCHIVED);
    ubq_error *e = ubq_connect(shared_server->address,
                               &(ubq_client_options){.api_key = key->secret, .device_id = "c-arch"}, &refused);
    CHECK(e && e->code == UBQ_UNAUTHENTICATED && refused == NULL);
    ubq_error_free(e);
    e = ubq_archive_account(op, account->account_id, NULL);
    CHECK(e && e->code == UBQ_FAILED_PRECONDITION && ubq_error_is(e, "ACCOUNT_ARCHIVED"));
    ubq_error_free(e);
    e = ubq_archive_account(op, "default", NULL);
    CHECK(e && e->code == UBQ_FAILED_PRECONDITION && ubq_error_is(e, "DEFAULT_ACCOUNT"));
    ubq_error_free(e);

    OK(ubq_restore_account(op, account->account_id, &restored));
    CHECK(restored->state == UBIQUITY__V1__ACCOUNT_STATE__ACCOUNT_STATE_ACTIVE);
    e = ubq_restore_account(op, account->account_id, NULL);
    CHECK(e && e->code == UBQ_ALREADY_EXISTS && ubq_error_is(e, "ACCOUNT_NOT_ARCHIVED"));
    ubq_error_free(e);
    OK(ubq_connect(shared_server->address, &(ubq_client_options){.api_key = key->secret, .device_id = "c-arch"}, &device));
    OK(ubq_kv_get(device, "kept", &entry));
    CHECK(entry->value.len == 3 && memcmp(entry->value.data, "yes", 3) == 0);
    ubq_client_free(device);
    device = NULL;

    OK(ubq_delete_account(op, account->account_id, &receipt));
    CHECK(receipt->key_value_entries_removed == 1 && receipt->api_keys_removed == 1);
    e = ubq_get_account(op, account->account_id, NULL);
    CHECK(e && e->code == UBQ_NOT_FOUND);
    ubq_error_free(e);
    e = ubq_connect(shared_server->address, &(ubq_client_options){.api_key = key->secret, .device_id = "c-arch"}, &refused);
    CHECK(e && e->code == UBQ_UNAUTHENTICATED && refused == NULL);
    ubq_error_free(e);
done:
    ubq_message_free(entry);
    ubq_message_free(receipt);
    ubq_message_free(got);
    ubq_message_free(restored);
    ubq_message_free(archived);
    ubq_message_free(key);
    ubq_message_free(account);
    ubq_client_free(refused);
    ubq_client_free(device);
    ubq_client_free(op);
}

const scenario account_scenarios[] = {
#define T(f) {#f, f}
    T(test_operator_creates_accounts_and_scoped_keys),
    T(test_operator_archives_restores_and_deletes_an_account),
#undef T
    {NULL, NULL}};

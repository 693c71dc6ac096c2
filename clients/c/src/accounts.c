/* Accounts (accounts.proto): typed wrappers of the operator calls. The client carries the operator
 * key as its bearer token; the server refuses these calls to any session. */
#include "internal.h"
#include "ubiquity/v1/accounts.pb-c.h"

#define ACCOUNTS "/ubiquity.v1.Accounts/"

ubq_error *ubq_create_account(ubq_client *c, const char *display_name, Ubiquity__V1__Account **out) {
    Ubiquity__V1__CreateAccountRequest req = UBIQUITY__V1__CREATE_ACCOUNT_REQUEST__INIT;
    if (display_name) req.display_name = (char *)display_name;
    return ubq__unary(c, ACCOUNTS "CreateAccount", &req.base, &ubiquity__v1__account__descriptor, (void **)out);
}

ubq_error *ubq_get_account(ubq_client *c, const char *account_id, Ubiquity__V1__Account **out) {
    Ubiquity__V1__GetAccountRequest req = UBIQUITY__V1__GET_ACCOUNT_REQUEST__INIT;
    req.account_id = (char *)account_id;
    return ubq__unary(c, ACCOUNTS "GetAccount", &req.base, &ubiquity__v1__account__descriptor, (void **)out);
}

ubq_error *ubq_list_accounts(ubq_client *c, uint32_t page_size, const char *page_token,
                             Ubiquity__V1__ListAccountsResponse **out) {
    Ubiquity__V1__ListAccountsRequest req = UBIQUITY__V1__LIST_ACCOUNTS_REQUEST__INIT;
    req.page_size = page_size;
    req.page_token = (char *)(page_token ? page_token : "");
    return ubq__unary(c, ACCOUNTS "ListAccounts", &req.base, &ubiquity__v1__list_accounts_response__descriptor,
                      (void **)out);
}

ubq_error *ubq_create_api_key(ubq_client *c, const char *account_id, const ubq_api_key_options *o,
                              Ubiquity__V1__CreateApiKeyResponse **out) {
    Ubiquity__V1__CreateApiKeyRequest req = UBIQUITY__V1__CREATE_API_KEY_REQUEST__INIT;
    req.account_id = (char *)account_id;
    req.scope = o && o->scope ? o->scope : UBIQUITY__V1__API_KEY_SCOPE__API_KEY_SCOPE_READ_WRITE;
    if (o && o->store_name) req.store_name = (char *)o->store_name;
    if (o && o->label) req.label = (char *)o->label;
    return ubq__unary(c, ACCOUNTS "CreateApiKey", &req.base, &ubiquity__v1__create_api_key_response__descriptor,
                      (void **)out);
}

ubq_error *ubq_revoke_api_key(ubq_client *c, const char *key_id, Ubiquity__V1__RevokeApiKeyResponse **out) {
    Ubiquity__V1__RevokeApiKeyRequest req = UBIQUITY__V1__REVOKE_API_KEY_REQUEST__INIT;
    req.key_id = (char *)key_id;
    return ubq__unary(c, ACCOUNTS "RevokeApiKey", &req.base, &ubiquity__v1__revoke_api_key_response__descriptor,
                      (void **)out);
}

ubq_error *ubq_archive_account(ubq_client *c, const char *account_id, Ubiquity__V1__Account **out) {
    Ubiquity__V1__ArchiveAccountRequest req = UBIQUITY__V1__ARCHIVE_ACCOUNT_REQUEST__INIT;
    req.account_id = (char *)account_id;
    return ubq__unary(c, ACCOUNTS "ArchiveAccount", &req.base, &ubiquity__v1__account__descriptor, (void **)out);
}

ubq_error *ubq_restore_account(ubq_client *c, const char *account_id, Ubiquity__V1__Account **out) {
    Ubiquity__V1__RestoreAccountRequest req = UBIQUITY__V1__RESTORE_ACCOUNT_REQUEST__INIT;
    req.account_id = (char *)account_id;
    return ubq__unary(c, ACCOUNTS "RestoreAccount", &req.base, &ubiquity__v1__account__descriptor, (void **)out);
}

ubq_error *ubq_delete_account(ubq_client *c, const char *account_id, Ubiquity__V1__DeleteAccountResponse **out) {
    Ubiquity__V1__DeleteAccountRequest req = UBIQUITY__V1__DELETE_ACCOUNT_REQUEST__INIT;
    req.account_id = (char *)account_id;
    return ubq__unary(c, ACCOUNTS "DeleteAccount", &req.base, &ubiquity__v1__delete_account_response__descriptor,
                      (void **)out);
}

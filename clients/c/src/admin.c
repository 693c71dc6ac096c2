/* Admin (admin.proto): typed wrappers of the server's operational calls. */
#include "internal.h"

ubq_error *ubq_admin_ping(ubq_client *c, const void *payload, size_t len, Ubiquity__V1__PingResponse **out) {
    Ubiquity__V1__PingRequest req = UBIQUITY__V1__PING_REQUEST__INIT;
    req.payload = (ProtobufCBinaryData){len, (uint8_t *)payload};
    return ubq__unary(c, "/ubiquity.v1.Admin/Ping", &req.base, &ubiquity__v1__ping_response__descriptor, (void **)out);
}

ubq_error *ubq_admin_server_info(ubq_client *c, Ubiquity__V1__ServerInfo **out) {
    Ubiquity__V1__GetServerInfoRequest req = UBIQUITY__V1__GET_SERVER_INFO_REQUEST__INIT;
    return ubq__unary(c, "/ubiquity.v1.Admin/GetServerInfo", &req.base, &ubiquity__v1__server_info__descriptor,
                      (void **)out);
}

ubq_error *ubq_admin_server_stats(ubq_client *c, Ubiquity__V1__ServerStats **out) {
    Ubiquity__V1__GetServerStatsRequest req = UBIQUITY__V1__GET_SERVER_STATS_REQUEST__INIT;
    return ubq__unary(c, "/ubiquity.v1.Admin/GetServerStats", &req.base, &ubiquity__v1__server_stats__descriptor,
                      (void **)out);
}

ubq_error *ubq_admin_backup(ubq_client *c, const char *directory, const char *store_id,
                            Ubiquity__V1__BackupManifest **out) {
    Ubiquity__V1__BackupRequest req = UBIQUITY__V1__BACKUP_REQUEST__INIT;
    req.directory = (char *)(directory ? directory : "");
    if (store_id) req.store_id = (char *)store_id;
    return ubq__unary(c, "/ubiquity.v1.Admin/Backup", &req.base, &ubiquity__v1__backup_manifest__descriptor,
                      (void **)out);
}

ubq_error *ubq_admin_restore_store(ubq_client *c, const char *directory, const char *store_id, bool replace_existing,
                                   Ubiquity__V1__RestoreStoreResponse **out) {
    Ubiquity__V1__RestoreStoreRequest req = UBIQUITY__V1__RESTORE_STORE_REQUEST__INIT;
    req.directory = (char *)(directory ? directory : "");
    if (store_id) req.store_id = (char *)store_id;
    req.replace_existing = replace_existing;
    return ubq__unary(c, "/ubiquity.v1.Admin/RestoreStore", &req.base,
                      &ubiquity__v1__restore_store_response__descriptor, (void **)out);
}

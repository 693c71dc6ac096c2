#include "internal.h"

/* Reading history and the tombstone index page by page (Changes.FetchHistory / FetchDeletions):
 * what a cache needs after HISTORY_EXPIRED (docs/changes.md "Retention"). */

void ubq__start_point(Ubiquity__V1__StartPoint *from, ProtobufCBinaryData token, bool oldest) {
    ubiquity__v1__start_point__init(from);
    if (token.len) {
        from->start_case = UBIQUITY__V1__START_POINT__START_TOKEN;
        from->token = token;
    } else if (oldest) {
        from->start_case = UBIQUITY__V1__START_POINT__START_OLDEST;
        from->oldest = true;
    } else {
        from->start_case = UBIQUITY__V1__START_POINT__START_NOW;
        from->now = true;
    }
}

ubq_error *ubq_fetch_history(ubq_store *s, ProtobufCBinaryData after, uint32_t page_size,
                             Ubiquity__V1__FetchHistoryResponse **out) {
    Ubiquity__V1__FetchHistoryRequest req = UBIQUITY__V1__FETCH_HISTORY_REQUEST__INIT;
    Ubiquity__V1__StartPoint from = UBIQUITY__V1__START_POINT__INIT;
    req.store_id = s->id;
    ubq__start_point(&from, after, true);
    req.from = &from;
    req.page_size = page_size;
    return ubq__unary(s->client, "/ubiquity.v1.Changes/FetchHistory", &req.base,
                      &ubiquity__v1__fetch_history_response__descriptor, (void **)out);
}

ubq_error *ubq_fetch_deletions(ubq_store *s, ProtobufCBinaryData after, uint32_t page_size,
                               Ubiquity__V1__FetchDeletionsResponse **out) {
    Ubiquity__V1__FetchDeletionsRequest req = UBIQUITY__V1__FETCH_DELETIONS_REQUEST__INIT;
    req.store_id = s->id;
    req.after_token = after;
    req.page_size = page_size;
    return ubq__unary(s->client, "/ubiquity.v1.Changes/FetchDeletions", &req.base,
                      &ubiquity__v1__fetch_deletions_response__descriptor, (void **)out);
}

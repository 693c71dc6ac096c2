#include "feed_policy.h"

#include <string.h>

ubq__feed_next ubq__feed_after_end(int code, const char *reason, bool can_sign_in) {
    switch (code) {
    case 16:  /* UNAUTHENTICATED: SESSION_EXPIRED / SESSION_REVOKED end a running stream */
        return can_sign_in ? UBQ__FEED_SIGN_IN : UBQ__FEED_GIVE_UP;
    case 0:   /* the server ended the stream (drain): nothing is wrong with where we are */
    case 4:   /* our own stream deadline */
    case 14:  /* UNAVAILABLE: restart, SHUTTING_DOWN, connection lost, store busy */
        return UBQ__FEED_RESUBSCRIBE;
    case 8:   /* RESOURCE_EXHAUSTED: only a slow subscriber may come back; other limits stay */
        return reason && strcmp(reason, "SUBSCRIBER_TOO_SLOW") == 0 ? UBQ__FEED_RESUBSCRIBE : UBQ__FEED_GIVE_UP;
    case 9:
        return reason && strcmp(reason, "HISTORY_EXPIRED") == 0 ? UBQ__FEED_ASK_HOOK : UBQ__FEED_GIVE_UP;
    default:
        return UBQ__FEED_GIVE_UP;
    }
}

void ubq__backoff_reset(ubq__backoff *b) {
    b->failing_since_ms = -1;
    b->attempt = 0;
}

int64_t ubq__backoff_next(ubq__backoff *b, int64_t now_ms, int64_t budget_ms) {
    if (b->failing_since_ms < 0) b->failing_since_ms = now_ms;
    if (now_ms - b->failing_since_ms > budget_ms) return -1;
    int64_t delay = 50;
    for (int i = 0; i < b->attempt && delay < 1000; i++) delay *= 2;
    if (delay > 1000) delay = 1000;
    b->attempt++;
    return delay;
}

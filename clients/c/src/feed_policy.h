/* What a change feed does when its stream ends, and how long it keeps trying: plain functions of
 * the status and the clock, unit-tested in tests/test_wire.c without a server. */
#ifndef UBQ_FEED_POLICY_H
#define UBQ_FEED_POLICY_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    UBQ__FEED_RESUBSCRIBE,     /* subscribe again from the last resume token */
    UBQ__FEED_ASK_HOOK,        /* HISTORY_EXPIRED: the caller's hook says where to go on from */
    UBQ__FEED_SIGN_IN,         /* the session ended: sign in again, then subscribe from the token */
    UBQ__FEED_GIVE_UP          /* hand the error to the caller */
} ubq__feed_next;

/* code: the ended stream's gRPC status; reason: its ErrorInfo reason or NULL; can_sign_in: the
 * feed has an API key to get a new session with. */
ubq__feed_next ubq__feed_after_end(int code, const char *reason, bool can_sign_in);

/* Backoff between resubscriptions, bounded by a budget of failure time in a row. */
typedef struct {
    int64_t failing_since_ms;  /* -1: not failing */
    int attempt;
} ubq__backoff;

void ubq__backoff_reset(ubq__backoff *b);
/* The delay before the next attempt (50 ms doubling to 1 s), or -1 once failures have lasted
 * longer than budget_ms. */
int64_t ubq__backoff_next(ubq__backoff *b, int64_t now_ms, int64_t budget_ms);

#endif

/* W5 fan-out anchors for scripts/bench (issue 17, ANCHORS.md "Fan-out anchors"): one publisher
 * paced at RATE messages/s, SUBSCRIBERS subscriber connections, all in C, so the anchors are
 * measured the way ubiquity-load measures Ubiquity (compiled subscribers; Python ones cost
 * ~15 µs per delivery and distort them).
 *
 *   fanout_anchor redis     HOST PORT SUBSCRIBERS RATE SECONDS [SERVER_PID]   PUBLISH → SUBSCRIBE
 *   fanout_anchor pg-notify CONNINFO  SUBSCRIBERS RATE SECONDS                NOTIFY → LISTEN
 *   fanout_anchor pg-insert CONNINFO  SUBSCRIBERS RATE SECONDS                INSERT + NOTIFY (one
 *                                                                             durable commit) → LISTEN
 *
 * The publisher sends message i at start + i / RATE. Redis: open loop, like ubiquity-load's
 * writer (PUBLISH commands are pipelined on one connection; a thread reads the replies, in
 * order, as the acknowledgements), so a slow reply never lowers the rate. PostgreSQL: one command
 * at a time (a commit's round trip: when it takes longer than 1 / RATE the achieved rate falls,
 * as ANCHORS.md reports). Each message carries its sequence number; the publisher records when it started
 * sending it and when the server acknowledged it (the PUBLISH reply, the COMMIT). One epoll
 * thread per reader (FANOUT_READERS, default 2, subscribers round robin) reads the subscriber
 * connections and records each receipt. Latency = receipt − ack
 * (0 when the receipt came first) and receipt − start, as ubiquity-load's fanout workload.
 *
 * Server CPU per delivery: /proc/PID/stat utime + stime of SERVER_PID (Redis) or of every
 * backend of the anchor's connections (PostgreSQL: pg_backend_pid()), from the first message to
 * the last receipt. Prints one JSON object; FANOUT_READERS=N sets the reader threads.
 * Build: cc -O2 -o fanout_anchor fanout_anchor.c -lhiredis -lpq -lpthread
 *        (-I/usr/include/postgresql)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "fanout_anchor: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

enum kind { REDIS, PG_NOTIFY, PG_INSERT };

typedef struct { uint32_t sub; uint32_t seq; uint64_t t; } receipt_t;

static enum kind kind;
static int subscribers;
static redisContext **rsubs;
static PGconn **psubs;
/* One epoll thread per reader; subscriber i belongs to reader i % READERS, which alone appends
 * to its receipts. */
#define MAX_READERS 16
typedef struct {
    int epfd;
    receipt_t *receipts;
    size_t cap;
    _Atomic size_t n;
} reader_t;
static reader_t readers[MAX_READERS];
static int reader_count = 2;
static _Atomic int stop_reading;

static void record(int sub, long long seq) {
    reader_t *r = &readers[sub % reader_count];
    size_t n = atomic_load_explicit(&r->n, memory_order_relaxed);
    if (n >= r->cap || seq < 0) return;
    r->receipts[n] = (receipt_t){(uint32_t)sub, (uint32_t)seq, now_ns()};
    atomic_store_explicit(&r->n, n + 1, memory_order_release);
}

static size_t receipts_total(void) {
    size_t n = 0;
    for (int k = 0; k < reader_count; k++) n += atomic_load_explicit(&readers[k].n, memory_order_acquire);
    return n;
}

static void read_redis(int i) {
    redisContext *c = rsubs[i];
    if (redisBufferRead(c) != REDIS_OK) die("redis read", c->errstr);
    void *r;
    while (redisReaderGetReply(c->reader, &r) == REDIS_OK && r) {
        redisReply *reply = r;
        if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 && reply->element[2]->type == REDIS_REPLY_STRING &&
            strcmp(reply->element[0]->str, "message") == 0) {
            record(i, atoll(reply->element[2]->str));
        }
        freeReplyObject(reply);
    }
}

static void read_pg(int i) {
    PGconn *c = psubs[i];
    if (!PQconsumeInput(c)) die("postgres read", PQerrorMessage(c));
    PGnotify *n;
    while ((n = PQnotifies(c)) != NULL) {
        record(i, atoll(n->extra));
        PQfreemem(n);
    }
}

static void *reader(void *arg) {
    reader_t *self = arg;
    struct epoll_event events[256];
    while (!atomic_load(&stop_reading)) {
        int n = epoll_wait(self->epfd, events, 256, 50);
        if (n < 0 && errno != EINTR) die("epoll_wait", strerror(errno));
        for (int k = 0; k < n; k++) {
            int i = (int)events[k].data.u32;
            if (kind == REDIS) read_redis(i); else read_pg(i);
        }
    }
    return NULL;
}

static void watch(int fd, int i) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(readers[i % reader_count].epfd, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl", strerror(errno));
}

static double cpu_seconds(const int *pids, int count) {
    double total = 0;
    long tck = sysconf(_SC_CLK_TCK);
    for (int i = 0; i < count; i++) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = 0;
        char *p = strrchr(buf, ')');
        if (!p) continue;
        unsigned long long ut = 0, st = 0;
        /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
        if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
            total += (double)(ut + st) / (double)tck;
    }
    return total;
}

static long rss_kib(int pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
    fclose(f);
    return kib;
}

/* The k-th receipt across readers (after they were joined). */
static receipt_t receipts_at(size_t k) {
    for (int j = 0; j < reader_count; j++) {
        size_t n = atomic_load(&readers[j].n);
        if (k < n) return readers[j].receipts[k];
        k -= n;
    }
    return (receipt_t){0, UINT32_MAX, 0};
}

/* Redis's publisher: replies to the pipelined PUBLISHes (":<receivers>\r\n" each), read in order
 * on their own thread; the i-th reply acknowledges message i. */
typedef struct { int fd; uint64_t *ack; _Atomic size_t acked; _Atomic int errors; } acks_t;

static void *read_acks(void *arg) {
    acks_t *a = arg;
    char buf[65536];
    int at_line_start = 1;
    for (;;) {
        ssize_t n = read(a->fd, buf, sizeof buf);
        if (n <= 0) return NULL;
        uint64_t t = now_ns();
        for (ssize_t k = 0; k < n; k++) {
            if (at_line_start && buf[k] != ':') atomic_fetch_add(&a->errors, 1);
            at_line_start = 0;
            if (buf[k] == '\n') {
                size_t i = atomic_load_explicit(&a->acked, memory_order_relaxed);
                a->ack[i] = t;
                atomic_store_explicit(&a->acked, i + 1, memory_order_release);
                at_line_start = 1;
            }
        }
    }
}

static void write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("redis write", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p) {
    if (n == 0) return 0;
    size_t i = (size_t)(p / 100.0 * (double)n);
    return (double)v[i < n ? i : n - 1] / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: fanout_anchor redis HOST PORT SUBSCRIBERS RATE SECONDS [SERVER_PID]\n"
                        "       fanout_anchor pg-notify|pg-insert CONNINFO SUBSCRIBERS RATE SECONDS\n");
        return 2;
    }
    int a = 2;
    const char *host = NULL, *conninfo = NULL;
    int port = 0, server_pid = 0;
    if (strcmp(argv[1], "redis") == 0) {
        if (argc < 7) die("usage", "redis needs HOST PORT SUBSCRIBERS RATE SECONDS");
        kind = REDIS;
        host = argv[a++];
        port = atoi(argv[a++]);
    } else {
        kind = strcmp(argv[1], "pg-insert") == 0 ? PG_INSERT : PG_NOTIFY;
        if (kind == PG_NOTIFY && strcmp(argv[1], "pg-notify") != 0) die("unknown mode", argv[1]);
        conninfo = argv[a++];
    }
    subscribers = atoi(argv[a++]);
    double rate = atof(argv[a++]);
    double seconds = atof(argv[a++]);
    if (kind == REDIS && a < argc) server_pid = atoi(argv[a++]);
    if (subscribers < 1 || rate <= 0 || seconds <= 0) die("usage", "SUBSCRIBERS, RATE and SECONDS must be positive");

    size_t planned = (size_t)(rate * seconds) + 16;
    uint64_t *start = calloc(planned, sizeof *start), *ack = calloc(planned, sizeof *ack);
    const char *readers_env = getenv("FANOUT_READERS");
    if (readers_env) reader_count = atoi(readers_env);
    if (reader_count < 1 || reader_count > MAX_READERS) die("FANOUT_READERS", "must be 1-16");
    for (int k = 0; k < reader_count; k++) {
        readers[k].cap = planned * (size_t)(subscribers / reader_count + 1);
        readers[k].receipts = malloc(readers[k].cap * sizeof(receipt_t));
        readers[k].epfd = epoll_create1(0);
        if (!readers[k].receipts) die("out of memory", NULL);
    }
    if (!start || !ack) die("out of memory", NULL);

    /* Connect and subscribe every subscriber before the first message. */
    int *cpu_pids = calloc((size_t)subscribers + 2, sizeof *cpu_pids);
    int cpu_count = 0;
    long rss_before = server_pid ? rss_kib(server_pid) : -1;
    redisContext *rpub = NULL;
    PGconn *ppub = NULL;
    if (kind == REDIS) {
        if (server_pid) cpu_pids[cpu_count++] = server_pid;
        rsubs = calloc((size_t)subscribers, sizeof *rsubs);
        for (int i = 0; i < subscribers; i++) {
            redisContext *c = redisConnect(host, port);
            if (!c || c->err) die("redis connect", c ? c->errstr : "out of memory");
            redisReply *r = redisCommand(c, "SUBSCRIBE w5");
            if (!r || r->type != REDIS_REPLY_ARRAY) die("redis SUBSCRIBE", c->errstr);
            freeReplyObject(r);
            /* Non-blocking from here: redisBufferRead then treats EAGAIN as "nothing yet". */
            c->flags &= ~REDIS_BLOCK;
            rsubs[i] = c;
            watch(c->fd, i);
        }
        rpub = redisConnect(host, port);
        if (!rpub || rpub->err) die("redis connect", rpub ? rpub->errstr : "out of memory");
    } else {
        psubs = calloc((size_t)subscribers, sizeof *psubs);
        ppub = PQconnectdb(conninfo);
        if (PQstatus(ppub) != CONNECTION_OK) die("postgres connect", PQerrorMessage(ppub));
        cpu_pids[cpu_count++] = PQbackendPID(ppub);
        PGresult *r = PQexec(ppub, "CREATE TABLE IF NOT EXISTS w5_anchor (seq bigint NOT NULL, sent text NOT NULL)");
        if (PQresultStatus(r) != PGRES_COMMAND_OK) die("CREATE TABLE", PQerrorMessage(ppub));
        PQclear(r);
        for (int i = 0; i < subscribers; i++) {
            PGconn *c = PQconnectdb(conninfo);
            if (PQstatus(c) != CONNECTION_OK) die("postgres connect", PQerrorMessage(c));
            r = PQexec(c, "LISTEN w5");
            if (PQresultStatus(r) != PGRES_COMMAND_OK) die("LISTEN", PQerrorMessage(c));
            PQclear(r);
            PQsetnonblocking(c, 1);
            cpu_pids[cpu_count++] = PQbackendPID(c);
            psubs[i] = c;
            watch(PQsocket(c), i);
        }
    }
    long rss_subscribed = server_pid ? rss_kib(server_pid) : -1;
    pthread_t threads[MAX_READERS];
    for (int k = 0; k < reader_count; k++) pthread_create(&threads[k], NULL, reader, &readers[k]);
    acks_t acks = {.fd = rpub ? rpub->fd : -1, .ack = ack};
    pthread_t ack_thread;
    if (kind == REDIS) pthread_create(&ack_thread, NULL, read_acks, &acks);

    double cpu_before = cpu_seconds(cpu_pids, cpu_count);
    uint64_t t0 = now_ns(), interval = (uint64_t)(1e9 / rate), end = t0 + (uint64_t)(seconds * 1e9);
    size_t sent = 0;
    int errors = 0;
    char command[256];
    for (size_t i = 0; i < planned; i++) {
        uint64_t due = t0 + i * interval;
        if (due >= end) break;
        uint64_t now = now_ns();
        if (now < due) {
            struct timespec ts = {.tv_sec = (time_t)(due / 1000000000ull), .tv_nsec = (long)(due % 1000000000ull)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
        } else if (now >= end) {
            break;
        }
        start[i] = now_ns();
        if (kind == REDIS) {
            char seq[32];
            int len = snprintf(seq, sizeof seq, "%zu", i);
            int n = snprintf(command, sizeof command, "*3\r\n$7\r\nPUBLISH\r\n$2\r\nw5\r\n$%d\r\n%s\r\n", len, seq);
            write_all(rpub->fd, command, (size_t)n);
            sent = i + 1;
            continue;
        } else {
            if (kind == PG_NOTIFY)
                snprintf(command, sizeof command, "NOTIFY w5, '%zu'", i);
            else /* one simple query: both statements commit as one implicit transaction */
                snprintf(command, sizeof command, "INSERT INTO w5_anchor (seq, sent) VALUES (%zu, 'w5'); NOTIFY w5, '%zu'", i, i);
            PGresult *r = PQexec(ppub, command);
            if (PQresultStatus(r) != PGRES_COMMAND_OK) errors++;
            PQclear(r);
        }
        ack[i] = now_ns();
        sent = i + 1;
    }
    uint64_t pub_end = now_ns();
    if (kind == REDIS) {  /* every PUBLISH acknowledged (or 10 s) before the drain */
        uint64_t until = now_ns() + 10000000000ull;
        while (atomic_load_explicit(&acks.acked, memory_order_acquire) < sent && now_ns() < until) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        errors += atomic_load(&acks.errors) + (int)(sent - atomic_load(&acks.acked));
        shutdown(rpub->fd, SHUT_RDWR);
        pthread_join(ack_thread, NULL);
    }

    /* Drain: every subscriber gets up to 10 s to receive the last message. */
    size_t expected = sent * (size_t)subscribers;
    uint64_t drain_end = now_ns() + 10000000000ull;
    int drain_timed_out = 0;
    while (receipts_total() < expected) {
        if (now_ns() > drain_end) { drain_timed_out = 1; break; }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    double cpu_after = cpu_seconds(cpu_pids, cpu_count);
    long rss_end = server_pid ? rss_kib(server_pid) : -1;
    atomic_store(&stop_reading, 1);
    for (int k = 0; k < reader_count; k++) pthread_join(threads[k], NULL);

    size_t n = receipts_total();
    uint64_t *from_ack = malloc((n + 1) * sizeof *from_ack), *from_start = malloc((n + 1) * sizeof *from_start);
    unsigned char *seen = calloc(sent ? sent : 1, (size_t)subscribers);
    size_t deliveries = 0, duplicates = 0, before_ack = 0;
    for (size_t k = 0; k < n; k++) {
        receipt_t r = receipts_at(k);
        if (r.seq >= sent) continue;
        unsigned char *s = &seen[(size_t)r.seq * (size_t)subscribers + r.sub];
        if (*s) { duplicates++; continue; }
        *s = 1;
        if (r.t < ack[r.seq]) before_ack++;
        from_ack[deliveries] = r.t > ack[r.seq] ? r.t - ack[r.seq] : 0;
        from_start[deliveries] = r.t - start[r.seq];
        deliveries++;
    }
    qsort(from_ack, deliveries, sizeof *from_ack, cmp_u64);
    qsort(from_start, deliveries, sizeof *from_start, cmp_u64);
    uint64_t *save = malloc((sent + 1) * sizeof *save);
    for (size_t i = 0; i < sent; i++) save[i] = ack[i] - start[i];
    qsort(save, sent, sizeof *save, cmp_u64);
    double pub_seconds = (double)(pub_end - t0) / 1e9;
    double cpu = cpu_after - cpu_before;

    printf("{\"workload\": \"fanout\", \"system\": \"%s\", \"subscribers\": %d, \"connections\": %d, \"rate\": %.1f, "
           "\"saves\": %zu, \"save_errors\": %d, \"seconds\": %.4f, \"throughput\": %.1f, "
           "\"save_p50_ms\": %.4f, \"save_p99_ms\": %.4f, \"deliveries\": %zu, \"expected_deliveries\": %zu, "
           "\"missing\": %zu, \"duplicates\": %zu, \"before_ack\": %zu, \"drain_timed_out\": %s, "
           "\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"p999_ms\": %.4f, \"max_ms\": %.4f, "
           "\"from_start_p50_ms\": %.4f, \"from_start_p99_ms\": %.4f, \"from_start_p999_ms\": %.4f, "
           "\"server_cpu_seconds\": %.4f, \"server_cpu_us_per_delivery\": %.2f",
           kind == REDIS ? "redis" : kind == PG_NOTIFY ? "pg-notify" : "pg-insert", subscribers, subscribers, rate,
           sent, errors, pub_seconds, (double)sent / pub_seconds, pct(save, sent, 50), pct(save, sent, 99),
           deliveries, expected, expected - deliveries, duplicates, before_ack, drain_timed_out ? "true" : "false",
           pct(from_ack, deliveries, 50), pct(from_ack, deliveries, 99), pct(from_ack, deliveries, 99.9),
           deliveries ? (double)from_ack[deliveries - 1] / 1e6 : 0.0,
           pct(from_start, deliveries, 50), pct(from_start, deliveries, 99), pct(from_start, deliveries, 99.9),
           cpu, deliveries ? cpu * 1e6 / (double)deliveries : 0.0);
    if (rss_before >= 0)
        printf(", \"rss_before_kib\": %ld, \"rss_subscribed_kib\": %ld, \"rss_end_kib\": %ld, \"kib_per_subscriber\": %.2f",
               rss_before, rss_subscribed, rss_end, (double)(rss_subscribed - rss_before) / subscribers);
    printf("}\n");

    if (kind == REDIS) {
        for (int i = 0; i < subscribers; i++) redisFree(rsubs[i]);
        redisFree(rpub);
    } else {
        for (int i = 0; i < subscribers; i++) PQfinish(psubs[i]);
        PQfinish(ppub);
    }
    return 0;
}

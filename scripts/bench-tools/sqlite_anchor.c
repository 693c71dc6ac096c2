/* Raw SQLite anchor for scripts/bench: the same reads and writes as Ubiquity's W1-W3, done
 * in-process through the C API with prepared statements (ANCHORS.md, "SQLite ...").
 *
 *   sqlite_anchor prepare  DB ROWS                 1 table, index on age, ROWS rows, WAL
 *   sqlite_anchor point    DB SECONDS THREADS      SELECT … WHERE id = ?   (random id)
 *   sqlite_anchor age10    DB SECONDS THREADS      SELECT … WHERE age = ?  (10 rows each)
 *   sqlite_anchor insert100 DB SECONDS FULL|NORMAL [FROM]
 *                                                 100-row insert transactions, age index: into a fresh
 *                                                 DB (as ANCHORS.md), or into a copy of database FROM
 *                                                 (e.g. the 1M-row one `prepare` made)
 *
 * Each run prints one JSON object: ops, seconds, throughput (ops/s), rows_per_s, p50/p90/p99 ms.
 * One connection per thread (read-only for reads), as ANCHORS.md did.
 * Build: cc -O2 -o sqlite_anchor sqlite_anchor.c -lsqlite3 -lpthread
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUCKETS 200000 /* 1 µs buckets up to 200 ms; slower ops land in the last one */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(sqlite3 *db, const char *what) {
    fprintf(stderr, "sqlite_anchor: %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
    exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite_anchor: %s: %s\n", sql, err);
        exit(1);
    }
}

/* xorshift64*: cheap per-thread randomness. */
static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

typedef struct {
    const char *path;
    const char *mode;
    double seconds;
    int64_t rows;
    int index;
    uint64_t ops, rows_read;
    uint64_t *hist;
} worker_t;

static int64_t count_rows(const char *path) {
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) die(db, "open");
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT max(id) FROM objects", -1, &st, NULL) != SQLITE_OK) die(db, "prepare");
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

static void *reader(void *arg) {
    worker_t *w = arg;
    sqlite3 *db;
    if (sqlite3_open_v2(w->path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) die(db, "open");
    /* Readers opening together may find the WAL index being rebuilt by another: wait, don't fail. */
    sqlite3_busy_timeout(db, 10000);
    int point = strcmp(w->mode, "point") == 0;
    const char *sql = point ? "SELECT id, name, age, score FROM objects WHERE id = ?"
                            : "SELECT id, name, age, score FROM objects WHERE age = ?";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(db, "prepare");
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(w->index + 1);
    int64_t ages = w->rows / 10;
    uint64_t end = now_ns() + (uint64_t)(w->seconds * 1e9);
    uint64_t t = now_ns();
    while (t < end) {
        int64_t key = point ? 1 + (int64_t)(next_rand(&seed) % (uint64_t)w->rows)
                            : (int64_t)(next_rand(&seed) % (uint64_t)(ages > 0 ? ages : 1));
        sqlite3_bind_int64(st, 1, key);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            /* Read every column, as a fetch that builds objects would. */
            (void)sqlite3_column_int64(st, 0);
            (void)sqlite3_column_text(st, 1);
            (void)sqlite3_column_int64(st, 2);
            (void)sqlite3_column_double(st, 3);
            w->rows_read++;
        }
        if (rc != SQLITE_DONE) die(db, "step");
        sqlite3_reset(st);
        uint64_t t2 = now_ns();
        uint64_t us = (t2 - t) / 1000;
        w->hist[us < BUCKETS ? us : BUCKETS - 1]++;
        w->ops++;
        t = t2;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return NULL;
}

static double percentile(const uint64_t *hist, uint64_t total, double p) {
    if (total == 0) return 0;
    uint64_t want = (uint64_t)(p / 100.0 * (double)total);
    if (want == 0) want = 1;
    uint64_t seen = 0;
    for (int i = 0; i < BUCKETS; i++) {
        seen += hist[i];
        if (seen >= want) return (i + 0.5) / 1000.0; /* ms, bucket middle */
    }
    return BUCKETS / 1000.0;
}

static void report(const char *mode, int threads, const char *sync, uint64_t ops, uint64_t rows, double secs,
                   const uint64_t *hist) {
    printf("{\"mode\": \"%s\", \"threads\": %d, \"synchronous\": \"%s\", \"ops\": %llu, \"rows\": %llu, "
           "\"seconds\": %.4f, \"throughput\": %.1f, \"rows_per_s\": %.1f, "
           "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"sqlite\": \"%s\"}\n",
           mode, threads, sync, (unsigned long long)ops, (unsigned long long)rows, secs, ops / secs, rows / secs,
           percentile(hist, ops, 50), percentile(hist, ops, 90), percentile(hist, ops, 99), sqlite3_libversion());
}

static void create_schema(sqlite3 *db) {
    exec(db, "PRAGMA journal_mode=WAL");
    exec(db, "CREATE TABLE objects (id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER NOT NULL, score REAL NOT NULL)");
    exec(db, "CREATE INDEX objects_age ON objects(age)");
}

static int cmd_prepare(const char *path, int64_t rows) {
    unlink(path);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die(db, "open");
    exec(db, "PRAGMA synchronous=OFF");
    create_schema(db);
    exec(db, "BEGIN");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "INSERT INTO objects (id, name, age, score) VALUES (?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK)
        die(db, "prepare");
    int64_t ages = rows / 10 > 0 ? rows / 10 : 1;
    char name[32];
    for (int64_t i = 1; i <= rows; i++) {
        int n = snprintf(name, sizeof name, "name-%lld", (long long)i);
        sqlite3_bind_int64(st, 1, i);
        sqlite3_bind_text(st, 2, name, n, SQLITE_STATIC);
        /* Every age value 0..rows/10-1 exactly 10 times, scattered over the ids. */
        sqlite3_bind_int64(st, 3, (i * 7919) % ages);
        sqlite3_bind_double(st, 4, (double)(i % 1000) / 10.0);
        if (sqlite3_step(st) != SQLITE_DONE) die(db, "insert");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    exec(db, "COMMIT");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    sqlite3_close(db);
    printf("{\"mode\": \"prepare\", \"rows\": %lld}\n", (long long)rows);
    return 0;
}

static int cmd_read(const char *mode, const char *path, double seconds, int threads) {
    int64_t rows = count_rows(path);
    if (rows <= 0) { fprintf(stderr, "sqlite_anchor: %s has no rows (run prepare)\n", path); return 1; }
    pthread_t tids[64];
    worker_t ws[64];
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    uint64_t start = now_ns();
    for (int i = 0; i < threads; i++) {
        ws[i] = (worker_t){.path = path, .mode = mode, .seconds = seconds, .rows = rows, .index = i};
        ws[i].hist = calloc(BUCKETS, sizeof(uint64_t));
        pthread_create(&tids[i], NULL, reader, &ws[i]);
    }
    uint64_t *hist = calloc(BUCKETS, sizeof(uint64_t));
    uint64_t ops = 0, rows_read = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tids[i], NULL);
        ops += ws[i].ops;
        rows_read += ws[i].rows_read;
        for (int b = 0; b < BUCKETS; b++) hist[b] += ws[i].hist[b];
        free(ws[i].hist);
    }
    double secs = (now_ns() - start) / 1e9;
    report(mode, threads, "-", ops, rows_read, secs, hist);
    free(hist);
    return 0;
}

/* Copies database `from` into the open, empty `db` with SQLite's online backup API. */
static void copy_database(sqlite3 *db, const char *from) {
    sqlite3 *src;
    if (sqlite3_open_v2(from, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) die(src, "open source");
    sqlite3_backup *b = sqlite3_backup_init(db, "main", src, "main");
    if (!b) die(db, "backup init");
    if (sqlite3_backup_step(b, -1) != SQLITE_DONE) die(db, "backup step");
    sqlite3_backup_finish(b);
    sqlite3_close(src);
    exec(db, "PRAGMA journal_mode=WAL");
}

static int cmd_insert100(const char *path, double seconds, const char *sync, const char *from) {
    char wal[4096], shm[4096];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    unlink(path); unlink(wal); unlink(shm);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die(db, "open");
    if (from)
        copy_database(db, from);
    else
        create_schema(db);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", sync);
    exec(db, pragma);
    sqlite3_stmt *begin, *commit, *ins;
    if (sqlite3_prepare_v2(db, "BEGIN", -1, &begin, NULL) != SQLITE_OK) die(db, "prepare");
    if (sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL) != SQLITE_OK) die(db, "prepare");
    if (sqlite3_prepare_v2(db, "INSERT INTO objects (name, age, score) VALUES (?, ?, ?)", -1, &ins, NULL) != SQLITE_OK)
        die(db, "prepare");
    uint64_t *hist = calloc(BUCKETS, sizeof(uint64_t));
    uint64_t seed = 42, ops = 0, rows = 0;
    char name[32];
    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9), t = start;
    while (t < end) {
        if (sqlite3_step(begin) != SQLITE_DONE) die(db, "begin");
        sqlite3_reset(begin);
        for (int i = 0; i < 100; i++) {
            int n = snprintf(name, sizeof name, "name-%llu", (unsigned long long)(rows + i));
            sqlite3_bind_text(ins, 1, name, n, SQLITE_STATIC);
            sqlite3_bind_int64(ins, 2, (int64_t)(next_rand(&seed) % 100000)); /* random key: index pages scattered */
            sqlite3_bind_double(ins, 3, (double)(next_rand(&seed) % 1000) / 10.0);
            if (sqlite3_step(ins) != SQLITE_DONE) die(db, "insert");
            sqlite3_reset(ins);
        }
        if (sqlite3_step(commit) != SQLITE_DONE) die(db, "commit");
        sqlite3_reset(commit);
        rows += 100;
        ops++;
        uint64_t t2 = now_ns();
        uint64_t us = (t2 - t) / 1000;
        hist[us < BUCKETS ? us : BUCKETS - 1]++;
        t = t2;
    }
    double secs = (now_ns() - start) / 1e9;
    sqlite3_finalize(begin); sqlite3_finalize(commit); sqlite3_finalize(ins);
    sqlite3_close(db);
    report("insert100", 1, sync, ops, rows, secs, hist);
    free(hist);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "prepare") == 0) return cmd_prepare(argv[2], atoll(argv[3]));
    if (argc >= 5 && (strcmp(argv[1], "point") == 0 || strcmp(argv[1], "age10") == 0))
        return cmd_read(argv[1], argv[2], atof(argv[3]), atoi(argv[4]));
    if (argc >= 5 && strcmp(argv[1], "insert100") == 0)
        return cmd_insert100(argv[2], atof(argv[3]), argv[4], argc >= 6 ? argv[5] : NULL);
    fprintf(stderr, "usage: sqlite_anchor prepare DB ROWS | point|age10 DB SECONDS THREADS | insert100 DB SECONDS FULL|NORMAL [FROM]\n");
    return 64;
}

/* WAL write-coalescing wrapper VFS for the writer connection.
 *
 * Files opened with SQLITE_OPEN_WAL get a wrapper that gathers contiguous xWrite calls in a
 * buffer and writes each run with one pwrite per 124 KiB; every other file is the base VFS's own
 * file (opened in place, its own methods: no wrapper). Buffered bytes reach the file:
 *  - when a write is not contiguous with the buffer or would overflow it (the buffer first),
 *  - right after the page of a commit frame (a 24-byte frame header with a non-zero commit
 *    field, wal.c walWriteOneFrame, then its page): so a commit's frames are in the file before
 *    wal.c publishes the new wal-index header to readers (synchronous=NORMAL has no xSync at
 *    commit), and a failed write is returned by that xWrite, failing the commit,
 *  - before every other method of the WAL file (xSync, xRead, xTruncate, xFileSize, locks,
 *    xFileControl, shm, xClose); the error of a failed flush (SQLITE_IOERR_WRITE, SQLITE_FULL) is
 *    that method's result. Buffered bytes of a failed flush are dropped (the transaction that
 *    wrote them fails).
 * A WAL file is used by one connection at a time (SQLite serializes a connection's calls), so
 * the buffer needs no lock. */
#include "ubq_walbuf.h"
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#define CAP (1 << 20)
/* The unix VFS writes at most 0x1ffff bytes per pwrite call (seekAndWrite masks the count, and a
 * count that masks to 0 comes back as SQLITE_FULL): write in chunks below that. */
#define CHUNK (31 << 12)
#define FRAME_HEADER 24

typedef struct wb_file {
    sqlite3_file base;
    sqlite3_file *real;
    unsigned char *buf;
    int len;
    int commit_pending;
    sqlite3_int64 off;
} wb_file;

/* Slot 0 wraps the default VFS, slot 1 one named VFS (tests: the fault-injection VFS). */
typedef struct wb_vfs {
    sqlite3_vfs *real;
    sqlite3_vfs vfs;
    sqlite3_io_methods methods;
    char name[64];
} wb_vfs;
static wb_vfs slots[2];

#define REAL(f) (((wb_file *)(f))->real)
#define BASE_VFS(v) ((sqlite3_vfs *)(v)->pAppData)

static int flush(wb_file *p) {
    if (p->len == 0) return SQLITE_OK;
    int n = p->len;
    p->len = 0;
    p->commit_pending = 0;
    for (int done = 0; done < n;) {
        int k = n - done < CHUNK ? n - done : CHUNK;
        int rc = p->real->pMethods->xWrite(p->real, p->buf + done, k, p->off + done);
        if (rc != SQLITE_OK) return rc;
        done += k;
    }
    return SQLITE_OK;
}

#define FLUSH_OR_RETURN(f) do { int frc_ = flush((wb_file *)(f)); if (frc_ != SQLITE_OK) return frc_; } while (0)

static int wb_close(sqlite3_file *f) {
    wb_file *p = (wb_file *)f;
    int frc = flush(p);
    int rc = p->real->pMethods->xClose(p->real);
    sqlite3_free(p->buf);
    p->buf = 0;
    return frc != SQLITE_OK ? frc : rc;
}

static int wb_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    wb_file *p = (wb_file *)f;
    if (!p->buf) {
        p->buf = (unsigned char *)sqlite3_malloc(CAP);
        if (!p->buf) return p->real->pMethods->xWrite(p->real, b, n, o);
    }
    int commit_page = p->commit_pending;
    if (p->len > 0 && (o != p->off + p->len || p->len + n > CAP)) FLUSH_OR_RETURN(f);
    if (n > CHUNK) return p->real->pMethods->xWrite(p->real, b, n, o); /* SQLite's own size: pass it on */
    if (p->len == 0) p->off = o;
    memcpy(p->buf + p->len, b, (size_t)n);
    p->len += n;
    if (commit_page) return flush(p); /* the page of a commit frame: the commit goes out now */
    const unsigned char *h = (const unsigned char *)b;
    if (n == FRAME_HEADER && (h[4] | h[5] | h[6] | h[7])) p->commit_pending = 1;
    return SQLITE_OK;
}

static int wb_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
static int wb_truncate(sqlite3_file *f, sqlite3_int64 s) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xTruncate(REAL(f), s); }
static int wb_sync(sqlite3_file *f, int fl) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xSync(REAL(f), fl); }
static int wb_size(sqlite3_file *f, sqlite3_int64 *s) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xFileSize(REAL(f), s); }
static int wb_lock(sqlite3_file *f, int l) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xLock(REAL(f), l); }
static int wb_unlock(sqlite3_file *f, int l) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int wb_reserved(sqlite3_file *f, int *r) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int wb_fcntl(sqlite3_file *f, int op, void *a) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xFileControl(REAL(f), op, a); }
static int wb_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int wb_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int wb_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp); }
static int wb_shmlock(sqlite3_file *f, int o, int n, int fl) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl); }
static void wb_shmbarrier(sqlite3_file *f) { (void)flush((wb_file *)f); REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int wb_shmunmap(sqlite3_file *f, int d) { FLUSH_OR_RETURN(f); return REAL(f)->pMethods->xShmUnmap(REAL(f), d); }

static int open_slot(int i, const char *name, sqlite3_file *f, int flags, int *out) {
    sqlite3_vfs *r = slots[i].real;
    if (!(flags & SQLITE_OPEN_WAL)) return r->xOpen(r, name, f, flags, out); /* the base VFS's file, in place */
    wb_file *p = (wb_file *)f;
    memset(p, 0, sizeof *p);
    p->real = (sqlite3_file *)&p[1];
    int rc = r->xOpen(r, name, p->real, flags, out);
    p->base.pMethods = p->real->pMethods ? &slots[i].methods : 0;
    return rc;
}
static int wbv_open0(sqlite3_vfs *v, const char *n, sqlite3_file *f, int fl, int *o) { (void)v; return open_slot(0, n, f, fl, o); }
static int wbv_open1(sqlite3_vfs *v, const char *n, sqlite3_file *f, int fl, int *o) { (void)v; return open_slot(1, n, f, fl, o); }
static int wbv_delete(sqlite3_vfs *v, const char *n, int d) { return BASE_VFS(v)->xDelete(BASE_VFS(v), n, d); }
static int wbv_access(sqlite3_vfs *v, const char *n, int fl, int *o) { return BASE_VFS(v)->xAccess(BASE_VFS(v), n, fl, o); }
static int wbv_fullpath(sqlite3_vfs *v, const char *n, int sz, char *o) { return BASE_VFS(v)->xFullPathname(BASE_VFS(v), n, sz, o); }
static void *wbv_dlopen(sqlite3_vfs *v, const char *n) { return BASE_VFS(v)->xDlOpen(BASE_VFS(v), n); }
static void wbv_dlerror(sqlite3_vfs *v, int n, char *m) { BASE_VFS(v)->xDlError(BASE_VFS(v), n, m); }
static void (*wbv_dlsym(sqlite3_vfs *v, void *h, const char *s))(void) { return BASE_VFS(v)->xDlSym(BASE_VFS(v), h, s); }
static void wbv_dlclose(sqlite3_vfs *v, void *h) { BASE_VFS(v)->xDlClose(BASE_VFS(v), h); }
static int wbv_random(sqlite3_vfs *v, int n, char *o) { return BASE_VFS(v)->xRandomness(BASE_VFS(v), n, o); }
static int wbv_sleep(sqlite3_vfs *v, int us) { return BASE_VFS(v)->xSleep(BASE_VFS(v), us); }
static int wbv_time(sqlite3_vfs *v, double *t) { return BASE_VFS(v)->xCurrentTime(BASE_VFS(v), t); }
static int wbv_lasterr(sqlite3_vfs *v, int n, char *m) { return BASE_VFS(v)->xGetLastError(BASE_VFS(v), n, m); }
static int wbv_time64(sqlite3_vfs *v, sqlite3_int64 *t) { return BASE_VFS(v)->xCurrentTimeInt64(BASE_VFS(v), t); }

const char *ubq_walbuf_register(const char *base) {
    int i = base ? 1 : 0;
    wb_vfs *s = &slots[i];
    if (s->real) {
        if (i == 1 && strcmp(s->real->zName, base) != 0) return 0; /* one named base only */
        return s->vfs.zName;
    }
    sqlite3_vfs *real = sqlite3_vfs_find(base);
    if (!real) return 0;
    if (i == 0) strcpy(s->name, "ubq-walbuf");
    else if (snprintf(s->name, sizeof s->name, "ubq-walbuf-%s", base) >= (int)sizeof s->name) return 0;
    sqlite3_io_methods m = {
        2, wb_close, wb_read, wb_write, wb_truncate, wb_sync, wb_size,
        wb_lock, wb_unlock, wb_reserved, wb_fcntl, wb_sector, wb_devchar,
        wb_shmmap, wb_shmlock, wb_shmbarrier, wb_shmunmap, 0, 0
    };
    s->methods = m;
    memset(&s->vfs, 0, sizeof s->vfs);
    s->vfs.iVersion = 2;
    s->vfs.szOsFile = (int)sizeof(wb_file) + real->szOsFile;
    s->vfs.mxPathname = real->mxPathname;
    s->vfs.zName = s->name;
    s->vfs.pAppData = real;
    s->vfs.xOpen = i == 0 ? wbv_open0 : wbv_open1;
    s->vfs.xDelete = wbv_delete; s->vfs.xAccess = wbv_access; s->vfs.xFullPathname = wbv_fullpath;
    s->vfs.xDlOpen = wbv_dlopen; s->vfs.xDlError = wbv_dlerror; s->vfs.xDlSym = wbv_dlsym;
    s->vfs.xDlClose = wbv_dlclose; s->vfs.xRandomness = wbv_random; s->vfs.xSleep = wbv_sleep;
    s->vfs.xCurrentTime = wbv_time; s->vfs.xGetLastError = wbv_lasterr; s->vfs.xCurrentTimeInt64 = wbv_time64;
    if (sqlite3_vfs_register(&s->vfs, 0) != SQLITE_OK) return 0;
    s->real = real;
    return s->vfs.zName;
}

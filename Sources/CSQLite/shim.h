#ifndef UBIQUITY_CSQLITE_SHIM_H
#define UBIQUITY_CSQLITE_SHIM_H
#include <sqlite3.h>

/* sqlite3_db_config and sqlite3_config are variadic: Swift cannot call them directly. */
static inline int ubq_sqlite3_db_config_int(sqlite3 *db, int op, int value, int *out) {
    return sqlite3_db_config(db, op, value, out);
}
static inline int ubq_sqlite3_config_int(int op, int value) {
    return sqlite3_config(op, value);
}
/* SQLITE_TRANSIENT is a cast macro Swift cannot import. */
static inline sqlite3_destructor_type ubq_sqlite_transient(void) { return SQLITE_TRANSIENT; }
static inline sqlite3_destructor_type ubq_sqlite_static(void) { return SQLITE_STATIC; }

/* ---- UbiquityStorage: fault-injecting wrapper VFS "ubq-fault" (tests only) ----
 * Wraps the default VFS and forwards every call. ubq_fault_arm(w, s, rc) makes the w-th
 * xWrite from now (and/or the s-th xSync) fail once with rc. State is process-global and
 * only referenced from UbiquityStorage (static in a header: one copy per importing module). */
#include <string.h>
typedef struct ubq_ff { sqlite3_file base; sqlite3_file *real; } ubq_ff;
typedef struct ubq_fault_state {
    sqlite3_vfs *real; sqlite3_vfs vfs; sqlite3_io_methods methods;
    int write_countdown, sync_countdown, rc, writes, syncs, fired;
} ubq_fault_state;
/* Function-local static: Swift's clang importer emits it with the function (file-scope statics are not emitted). */
static inline ubq_fault_state *ubq_fault_st(void) { static ubq_fault_state st; return &st; }
#define ubq_fault_real_vfs (ubq_fault_st()->real)
#define ubq_fault_vfs (ubq_fault_st()->vfs)
#define ubq_ff_methods (ubq_fault_st()->methods)
#define ubq_fault_write_countdown (ubq_fault_st()->write_countdown)
#define ubq_fault_sync_countdown (ubq_fault_st()->sync_countdown)
#define ubq_fault_rc (ubq_fault_st()->rc)
#define ubq_fault_writes (ubq_fault_st()->writes)
#define ubq_fault_syncs (ubq_fault_st()->syncs)
#define ubq_fault_fired (ubq_fault_st()->fired)
static int ubq_ff_hit(int *cd) {
    if (__atomic_load_n(cd, __ATOMIC_SEQ_CST) <= 0) return 0;
    if (__atomic_sub_fetch(cd, 1, __ATOMIC_SEQ_CST) == 0) { __atomic_add_fetch(&ubq_fault_fired, 1, __ATOMIC_SEQ_CST); return 1; }
    return 0;
}
#define UBQ_REAL(f) (((ubq_ff *)(f))->real)
static int ubq_ff_close(sqlite3_file *f) { return UBQ_REAL(f)->pMethods->xClose(UBQ_REAL(f)); }
static int ubq_ff_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return UBQ_REAL(f)->pMethods->xRead(UBQ_REAL(f), b, n, o); }
static int ubq_ff_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    __atomic_add_fetch(&ubq_fault_writes, 1, __ATOMIC_SEQ_CST);
    if (ubq_ff_hit(&ubq_fault_write_countdown)) { int rc = ubq_fault_rc; return rc == SQLITE_IOERR ? SQLITE_IOERR_WRITE : rc; }
    return UBQ_REAL(f)->pMethods->xWrite(UBQ_REAL(f), b, n, o);
}
static int ubq_ff_truncate(sqlite3_file *f, sqlite3_int64 s) { return UBQ_REAL(f)->pMethods->xTruncate(UBQ_REAL(f), s); }
static int ubq_ff_sync(sqlite3_file *f, int flags) {
    __atomic_add_fetch(&ubq_fault_syncs, 1, __ATOMIC_SEQ_CST);
    if (ubq_ff_hit(&ubq_fault_sync_countdown)) { int rc = ubq_fault_rc; return rc == SQLITE_IOERR ? SQLITE_IOERR_FSYNC : rc; }
    return UBQ_REAL(f)->pMethods->xSync(UBQ_REAL(f), flags);
}
static int ubq_ff_size(sqlite3_file *f, sqlite3_int64 *s) { return UBQ_REAL(f)->pMethods->xFileSize(UBQ_REAL(f), s); }
static int ubq_ff_lock(sqlite3_file *f, int l) { return UBQ_REAL(f)->pMethods->xLock(UBQ_REAL(f), l); }
static int ubq_ff_unlock(sqlite3_file *f, int l) { return UBQ_REAL(f)->pMethods->xUnlock(UBQ_REAL(f), l); }
static int ubq_ff_reserved(sqlite3_file *f, int *r) { return UBQ_REAL(f)->pMethods->xCheckReservedLock(UBQ_REAL(f), r); }
static int ubq_ff_fcntl(sqlite3_file *f, int op, void *a) { return UBQ_REAL(f)->pMethods->xFileControl(UBQ_REAL(f), op, a); }
static int ubq_ff_sector(sqlite3_file *f) { return UBQ_REAL(f)->pMethods->xSectorSize(UBQ_REAL(f)); }
static int ubq_ff_devchar(sqlite3_file *f) { return UBQ_REAL(f)->pMethods->xDeviceCharacteristics(UBQ_REAL(f)); }
static int ubq_ff_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp) { return UBQ_REAL(f)->pMethods->xShmMap(UBQ_REAL(f), pg, sz, ext, pp); }
static int ubq_ff_shmlock(sqlite3_file *f, int o, int n, int fl) { return UBQ_REAL(f)->pMethods->xShmLock(UBQ_REAL(f), o, n, fl); }
static void ubq_ff_shmbarrier(sqlite3_file *f) { UBQ_REAL(f)->pMethods->xShmBarrier(UBQ_REAL(f)); }
static int ubq_ff_shmunmap(sqlite3_file *f, int d) { return UBQ_REAL(f)->pMethods->xShmUnmap(UBQ_REAL(f), d); }
static int ubq_fv_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    ubq_ff *p = (ubq_ff *)f;
    p->real = (sqlite3_file *)&p[1];
    int rc = ubq_fault_real_vfs->xOpen(ubq_fault_real_vfs, name, p->real, flags, out);
    p->base.pMethods = p->real->pMethods ? &ubq_ff_methods : 0;
    return rc;
}
static int ubq_fv_delete(sqlite3_vfs *v, const char *n, int d) { return ubq_fault_real_vfs->xDelete(ubq_fault_real_vfs, n, d); }
static int ubq_fv_access(sqlite3_vfs *v, const char *n, int fl, int *r) { return ubq_fault_real_vfs->xAccess(ubq_fault_real_vfs, n, fl, r); }
static int ubq_fv_fullpath(sqlite3_vfs *v, const char *n, int sz, char *o) { return ubq_fault_real_vfs->xFullPathname(ubq_fault_real_vfs, n, sz, o); }
static void *ubq_fv_dlopen(sqlite3_vfs *v, const char *n) { return ubq_fault_real_vfs->xDlOpen(ubq_fault_real_vfs, n); }
static void ubq_fv_dlerror(sqlite3_vfs *v, int n, char *m) { ubq_fault_real_vfs->xDlError(ubq_fault_real_vfs, n, m); }
static void (*ubq_fv_dlsym(sqlite3_vfs *v, void *h, const char *s))(void) { return ubq_fault_real_vfs->xDlSym(ubq_fault_real_vfs, h, s); }
static void ubq_fv_dlclose(sqlite3_vfs *v, void *h) { ubq_fault_real_vfs->xDlClose(ubq_fault_real_vfs, h); }
static int ubq_fv_random(sqlite3_vfs *v, int n, char *o) { return ubq_fault_real_vfs->xRandomness(ubq_fault_real_vfs, n, o); }
static int ubq_fv_sleep(sqlite3_vfs *v, int us) { return ubq_fault_real_vfs->xSleep(ubq_fault_real_vfs, us); }
static int ubq_fv_time(sqlite3_vfs *v, double *t) { return ubq_fault_real_vfs->xCurrentTime(ubq_fault_real_vfs, t); }
static int ubq_fv_lasterr(sqlite3_vfs *v, int n, char *m) { return ubq_fault_real_vfs->xGetLastError(ubq_fault_real_vfs, n, m); }
static int ubq_fv_time64(sqlite3_vfs *v, sqlite3_int64 *t) { return ubq_fault_real_vfs->xCurrentTimeInt64(ubq_fault_real_vfs, t); }
/* Registers "ubq-fault" once (not thread-safe: call under a lock). Returns SQLITE_OK. */
static inline int ubq_fault_vfs_register(void) {
    if (ubq_fault_real_vfs) return SQLITE_OK;
    sqlite3_vfs *real = sqlite3_vfs_find(0);
    if (!real) return SQLITE_ERROR;
    sqlite3_io_methods m = {
        2, ubq_ff_close, ubq_ff_read, ubq_ff_write, ubq_ff_truncate, ubq_ff_sync, ubq_ff_size,
        ubq_ff_lock, ubq_ff_unlock, ubq_ff_reserved, ubq_ff_fcntl, ubq_ff_sector, ubq_ff_devchar,
        ubq_ff_shmmap, ubq_ff_shmlock, ubq_ff_shmbarrier, ubq_ff_shmunmap, 0, 0
    };
    ubq_ff_methods = m;
    ubq_fault_rc = SQLITE_IOERR;
    memset(&ubq_fault_vfs, 0, sizeof ubq_fault_vfs);
    ubq_fault_vfs.iVersion = 2;
    ubq_fault_vfs.szOsFile = (int)sizeof(ubq_ff) + real->szOsFile;
    ubq_fault_vfs.mxPathname = real->mxPathname;
    ubq_fault_vfs.zName = "ubq-fault";
    ubq_fault_vfs.xOpen = ubq_fv_open; ubq_fault_vfs.xDelete = ubq_fv_delete; ubq_fault_vfs.xAccess = ubq_fv_access;
    ubq_fault_vfs.xFullPathname = ubq_fv_fullpath; ubq_fault_vfs.xDlOpen = ubq_fv_dlopen; ubq_fault_vfs.xDlError = ubq_fv_dlerror;
    ubq_fault_vfs.xDlSym = ubq_fv_dlsym; ubq_fault_vfs.xDlClose = ubq_fv_dlclose; ubq_fault_vfs.xRandomness = ubq_fv_random;
    ubq_fault_vfs.xSleep = ubq_fv_sleep; ubq_fault_vfs.xCurrentTime = ubq_fv_time; ubq_fault_vfs.xGetLastError = ubq_fv_lasterr;
    ubq_fault_vfs.xCurrentTimeInt64 = ubq_fv_time64;
    ubq_fault_real_vfs = real;
    return sqlite3_vfs_register(&ubq_fault_vfs, 0);
}
/* Arm: the write_nth-th xWrite / sync_nth-th xSync from now fails once with rc (0 = off). */
static inline void ubq_fault_arm(int write_nth, int sync_nth, int rc) {
    __atomic_store_n(&ubq_fault_rc, rc, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ubq_fault_fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ubq_fault_write_countdown, write_nth, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ubq_fault_sync_countdown, sync_nth, __ATOMIC_SEQ_CST);
}
static inline int ubq_fault_fired_count(void) { return __atomic_load_n(&ubq_fault_fired, __ATOMIC_SEQ_CST); }
static inline int ubq_fault_write_count(void) { return __atomic_load_n(&ubq_fault_writes, __ATOMIC_SEQ_CST); }
static inline int ubq_fault_sync_count(void) { return __atomic_load_n(&ubq_fault_syncs, __ATOMIC_SEQ_CST); }
/* ---- UbiquityStorage: WAL write-coalescing wrapper VFS "ubq-walbuf" (writer connection) ----
 * Files opened with SQLITE_OPEN_WAL get a wrapper that gathers contiguous xWrite calls in a
 * buffer and writes each run with one pwrite per 124 KiB; every other file is the base VFS's own file
 * (opened in place, its own methods: no wrapper). Buffered bytes reach the file:
 *  - when a write is not contiguous with the buffer or would overflow it (the buffer first),
 *  - right after the page of a commit frame (a 24-byte frame header with a non-zero commit
 *    field, wal.c walWriteOneFrame, then its page): so a commit's frames are in the file
 *    before wal.c publishes the new wal-index header to readers (synchronous=NORMAL has no
 *    xSync at commit), and a failed write is returned by that xWrite, failing the commit,
 *  - before every other method of the WAL file (xSync, xRead, xTruncate, xFileSize, locks,
 *    xFileControl, shm, xClose); the error of a failed flush (SQLITE_IOERR_WRITE, SQLITE_FULL)
 *    is that method's result. Buffered bytes of a failed flush are dropped (the transaction
 *    that wrote them fails).
 * Instance 0 wraps the default VFS ("ubq-walbuf"), instance 1 wraps "ubq-fault"
 * ("ubq-walbuf-fault", tests: faults then hit the coalesced writes). A WAL file is used by one
 * connection at a time (SQLite serializes a connection's calls), so the buffer needs no lock. */
#include <stdlib.h>
#define UBQ_WB_CAP (1 << 20)
#define UBQ_WB_CHUNK (31 << 12)
typedef struct ubq_wbf {
    sqlite3_file base; sqlite3_file *real;
    unsigned char *buf; int len; int commit_pending; sqlite3_int64 off;
} ubq_wbf;
typedef struct ubq_wb_state { sqlite3_vfs *real; sqlite3_vfs vfs; sqlite3_io_methods methods; } ubq_wb_state;
static inline ubq_wb_state *ubq_wb_st(int i) { static ubq_wb_state st[2]; return &st[i]; }
#define UBQ_WB_REAL(f) (((ubq_wbf *)(f))->real)
static int ubq_wb_flush(ubq_wbf *p) {
    if (p->len == 0) return SQLITE_OK;
    int n = p->len; p->len = 0; p->commit_pending = 0;
    /* The unix VFS writes at most 0x1ffff bytes per pwrite call (seekAndWrite masks the count,
     * and a count that masks to 0 comes back as SQLITE_FULL): write in chunks below that. */
    for (int done = 0; done < n; ) {
        int k = n - done < UBQ_WB_CHUNK ? n - done : UBQ_WB_CHUNK;
        int rc = p->real->pMethods->xWrite(p->real, p->buf + done, k, p->off + done);
        if (rc != SQLITE_OK) return rc;
        done += k;
    }
    return SQLITE_OK;
}
#define UBQ_WB_FLUSH_OR_RETURN(f) do { int frc_ = ubq_wb_flush((ubq_wbf *)(f)); if (frc_ != SQLITE_OK) return frc_; } while (0)
static int ubq_wb_close(sqlite3_file *f) {
    ubq_wbf *p = (ubq_wbf *)f;
    int frc = ubq_wb_flush(p);
    int rc = p->real->pMethods->xClose(p->real);
    sqlite3_free(p->buf); p->buf = 0;
    return frc != SQLITE_OK ? frc : rc;
}
static int ubq_wb_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xRead(UBQ_WB_REAL(f), b, n, o); }
static int ubq_wb_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    ubq_wbf *p = (ubq_wbf *)f;
    if (!p->buf) { p->buf = (unsigned char *)sqlite3_malloc(UBQ_WB_CAP); if (!p->buf) return p->real->pMethods->xWrite(p->real, b, n, o); }
    int commit_page = p->commit_pending;
    if (p->len > 0 && (o != p->off + p->len || p->len + n > UBQ_WB_CAP)) UBQ_WB_FLUSH_OR_RETURN(f);
    if (n > UBQ_WB_CHUNK) return p->real->pMethods->xWrite(p->real, b, n, o);  /* SQLite's own size: pass it on */
    if (p->len == 0) p->off = o;
    memcpy(p->buf + p->len, b, (size_t)n);
    p->len += n;
    const unsigned char *h = (const unsigned char *)b;
    if (commit_page) return ubq_wb_flush(p);  /* the page of a commit frame: the commit goes out now */
    if (n == 24 && (h[4] | h[5] | h[6] | h[7])) p->commit_pending = 1;
    return SQLITE_OK;
}
static int ubq_wb_truncate(sqlite3_file *f, sqlite3_int64 s) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xTruncate(UBQ_WB_REAL(f), s); }
static int ubq_wb_sync(sqlite3_file *f, int fl) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xSync(UBQ_WB_REAL(f), fl); }
static int ubq_wb_size(sqlite3_file *f, sqlite3_int64 *s) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xFileSize(UBQ_WB_REAL(f), s); }
static int ubq_wb_lock(sqlite3_file *f, int l) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xLock(UBQ_WB_REAL(f), l); }
static int ubq_wb_unlock(sqlite3_file *f, int l) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xUnlock(UBQ_WB_REAL(f), l); }
static int ubq_wb_reserved(sqlite3_file *f, int *r) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xCheckReservedLock(UBQ_WB_REAL(f), r); }
static int ubq_wb_fcntl(sqlite3_file *f, int op, void *a) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xFileControl(UBQ_WB_REAL(f), op, a); }
static int ubq_wb_sector(sqlite3_file *f) { return UBQ_WB_REAL(f)->pMethods->xSectorSize(UBQ_WB_REAL(f)); }
static int ubq_wb_devchar(sqlite3_file *f) { return UBQ_WB_REAL(f)->pMethods->xDeviceCharacteristics(UBQ_WB_REAL(f)); }
static int ubq_wb_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xShmMap(UBQ_WB_REAL(f), pg, sz, ext, pp); }
static int ubq_wb_shmlock(sqlite3_file *f, int o, int n, int fl) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xShmLock(UBQ_WB_REAL(f), o, n, fl); }
static void ubq_wb_shmbarrier(sqlite3_file *f) { (void)ubq_wb_flush((ubq_wbf *)f); UBQ_WB_REAL(f)->pMethods->xShmBarrier(UBQ_WB_REAL(f)); }
static int ubq_wb_shmunmap(sqlite3_file *f, int d) { UBQ_WB_FLUSH_OR_RETURN(f); return UBQ_WB_REAL(f)->pMethods->xShmUnmap(UBQ_WB_REAL(f), d); }
#define UBQ_WB_OPEN(i) \
static int ubq_wbv_open##i(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) { \
    sqlite3_vfs *r = ubq_wb_st(i)->real; \
    if (!(flags & SQLITE_OPEN_WAL)) return r->xOpen(r, name, f, flags, out); /* the base VFS's file, in place */ \
    ubq_wbf *p = (ubq_wbf *)f; \
    memset(p, 0, sizeof *p); \
    p->real = (sqlite3_file *)&p[1]; \
    int rc = r->xOpen(r, name, p->real, flags, out); \
    p->base.pMethods = p->real->pMethods ? &ubq_wb_st(i)->methods : 0; \
    return rc; \
}
UBQ_WB_OPEN(0)
UBQ_WB_OPEN(1)
static int ubq_wbv_delete(sqlite3_vfs *v, const char *n, int d) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xDelete(r, n, d); }
static int ubq_wbv_access(sqlite3_vfs *v, const char *n, int fl, int *o) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xAccess(r, n, fl, o); }
static int ubq_wbv_fullpath(sqlite3_vfs *v, const char *n, int sz, char *o) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xFullPathname(r, n, sz, o); }
static void *ubq_wbv_dlopen(sqlite3_vfs *v, const char *n) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xDlOpen(r, n); }
static void ubq_wbv_dlerror(sqlite3_vfs *v, int n, char *m) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; r->xDlError(r, n, m); }
static void (*ubq_wbv_dlsym(sqlite3_vfs *v, void *h, const char *s))(void) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xDlSym(r, h, s); }
static void ubq_wbv_dlclose(sqlite3_vfs *v, void *h) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; r->xDlClose(r, h); }
static int ubq_wbv_random(sqlite3_vfs *v, int n, char *o) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xRandomness(r, n, o); }
static int ubq_wbv_sleep(sqlite3_vfs *v, int us) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xSleep(r, us); }
static int ubq_wbv_time(sqlite3_vfs *v, double *t) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xCurrentTime(r, t); }
static int ubq_wbv_lasterr(sqlite3_vfs *v, int n, char *m) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xGetLastError(r, n, m); }
static int ubq_wbv_time64(sqlite3_vfs *v, sqlite3_int64 *t) { sqlite3_vfs *r = (sqlite3_vfs *)v->pAppData; return r->xCurrentTimeInt64(r, t); }
/* Registers instance i (0: over the default VFS as "ubq-walbuf"; 1: over "ubq-fault", which
 * must be registered, as "ubq-walbuf-fault") once; not thread-safe: call under a lock. */
static inline int ubq_walbuf_vfs_register(int i) {
    ubq_wb_state *st = ubq_wb_st(i);
    if (st->real) return SQLITE_OK;
    sqlite3_vfs *real = sqlite3_vfs_find(i == 0 ? 0 : "ubq-fault");
    if (!real) return SQLITE_ERROR;
    sqlite3_io_methods m = {
        2, ubq_wb_close, ubq_wb_read, ubq_wb_write, ubq_wb_truncate, ubq_wb_sync, ubq_wb_size,
        ubq_wb_lock, ubq_wb_unlock, ubq_wb_reserved, ubq_wb_fcntl, ubq_wb_sector, ubq_wb_devchar,
        ubq_wb_shmmap, ubq_wb_shmlock, ubq_wb_shmbarrier, ubq_wb_shmunmap, 0, 0
    };
    st->methods = m;
    memset(&st->vfs, 0, sizeof st->vfs);
    st->vfs.iVersion = 2;
    st->vfs.szOsFile = (int)sizeof(ubq_wbf) + real->szOsFile;
    st->vfs.mxPathname = real->mxPathname;
    st->vfs.zName = i == 0 ? "ubq-walbuf" : "ubq-walbuf-fault";
    st->vfs.pAppData = real;
    st->vfs.xOpen = i == 0 ? ubq_wbv_open0 : ubq_wbv_open1;
    st->vfs.xDelete = ubq_wbv_delete; st->vfs.xAccess = ubq_wbv_access; st->vfs.xFullPathname = ubq_wbv_fullpath;
    st->vfs.xDlOpen = ubq_wbv_dlopen; st->vfs.xDlError = ubq_wbv_dlerror; st->vfs.xDlSym = ubq_wbv_dlsym;
    st->vfs.xDlClose = ubq_wbv_dlclose; st->vfs.xRandomness = ubq_wbv_random; st->vfs.xSleep = ubq_wbv_sleep;
    st->vfs.xCurrentTime = ubq_wbv_time; st->vfs.xGetLastError = ubq_wbv_lasterr; st->vfs.xCurrentTimeInt64 = ubq_wbv_time64;
    st->real = real;
    return sqlite3_vfs_register(&st->vfs, 0);
}
#endif

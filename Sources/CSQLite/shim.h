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
#endif

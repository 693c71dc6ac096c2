/* "ubq-fault": a wrapper over the default VFS that makes the N-th write, sync or writer open fail once
 * (SQLite's own *fault.test approach), so tests can check that nothing partial is visible. */
#include "ubq_fault.h"
#include <sqlite3.h>
#include <string.h>

typedef struct ff_file { sqlite3_file base; sqlite3_file *real; } ff_file;

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static sqlite3_io_methods methods;
/* Read and written with atomics: tests arm from their thread, the writer thread hits them. */
static int write_countdown, sync_countdown, fault_rc = SQLITE_IOERR, writes, syncs, fired;
/* Read-write opens of a main database file: a store's writer connection (readers open read-only). */
static int writer_open_countdown, writer_opens;

static int hit(int *countdown) {
    if (__atomic_load_n(countdown, __ATOMIC_SEQ_CST) <= 0) return 0;
    if (__atomic_sub_fetch(countdown, 1, __ATOMIC_SEQ_CST) != 0) return 0;
    __atomic_add_fetch(&fired, 1, __ATOMIC_SEQ_CST);
    return 1;
}

#define REAL(f) (((ff_file *)(f))->real)
static int ff_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int ff_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
static int ff_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
    __atomic_add_fetch(&writes, 1, __ATOMIC_SEQ_CST);
    if (hit(&write_countdown)) { int rc = __atomic_load_n(&fault_rc, __ATOMIC_SEQ_CST); return rc == SQLITE_IOERR ? SQLITE_IOERR_WRITE : rc; }
    return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int ff_truncate(sqlite3_file *f, sqlite3_int64 s) { return REAL(f)->pMethods->xTruncate(REAL(f), s); }
static int ff_sync(sqlite3_file *f, int flags) {
    __atomic_add_fetch(&syncs, 1, __ATOMIC_SEQ_CST);
    if (hit(&sync_countdown)) { int rc = __atomic_load_n(&fault_rc, __ATOMIC_SEQ_CST); return rc == SQLITE_IOERR ? SQLITE_IOERR_FSYNC : rc; }
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int ff_size(sqlite3_file *f, sqlite3_int64 *s) { return REAL(f)->pMethods->xFileSize(REAL(f), s); }
static int ff_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int ff_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int ff_reserved(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int ff_fcntl(sqlite3_file *f, int op, void *a) { return REAL(f)->pMethods->xFileControl(REAL(f), op, a); }
static int ff_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int ff_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int ff_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp) { return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp); }
static int ff_shmlock(sqlite3_file *f, int o, int n, int fl) { return REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl); }
static void ff_shmbarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int ff_shmunmap(sqlite3_file *f, int d) { return REAL(f)->pMethods->xShmUnmap(REAL(f), d); }

static int fv_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out) {
    (void)v;
    ff_file *p = (ff_file *)f;
    p->real = (sqlite3_file *)&p[1];
    p->base.pMethods = 0;
    if ((flags & SQLITE_OPEN_MAIN_DB) && (flags & SQLITE_OPEN_READWRITE)) {
        __atomic_add_fetch(&writer_opens, 1, __ATOMIC_SEQ_CST);
        if (hit(&writer_open_countdown)) return SQLITE_CANTOPEN;
    }
    int rc = real_vfs->xOpen(real_vfs, name, p->real, flags, out);
    p->base.pMethods = p->real->pMethods ? &methods : 0;
    return rc;
}
static int fv_delete(sqlite3_vfs *v, const char *n, int d) { (void)v; return real_vfs->xDelete(real_vfs, n, d); }
static int fv_access(sqlite3_vfs *v, const char *n, int fl, int *r) { (void)v; return real_vfs->xAccess(real_vfs, n, fl, r); }
static int fv_fullpath(sqlite3_vfs *v, const char *n, int sz, char *o) { (void)v; return real_vfs->xFullPathname(real_vfs, n, sz, o); }
static void *fv_dlopen(sqlite3_vfs *v, const char *n) { (void)v; return real_vfs->xDlOpen(real_vfs, n); }
static void fv_dlerror(sqlite3_vfs *v, int n, char *m) { (void)v; real_vfs->xDlError(real_vfs, n, m); }
static void (*fv_dlsym(sqlite3_vfs *v, void *h, const char *s))(void) { (void)v; return real_vfs->xDlSym(real_vfs, h, s); }
static void fv_dlclose(sqlite3_vfs *v, void *h) { (void)v; real_vfs->xDlClose(real_vfs, h); }
static int fv_random(sqlite3_vfs *v, int n, char *o) { (void)v; return real_vfs->xRandomness(real_vfs, n, o); }
static int fv_sleep(sqlite3_vfs *v, int us) { (void)v; return real_vfs->xSleep(real_vfs, us); }
static int fv_time(sqlite3_vfs *v, double *t) { (void)v; return real_vfs->xCurrentTime(real_vfs, t); }
static int fv_lasterr(sqlite3_vfs *v, int n, char *m) { (void)v; return real_vfs->xGetLastError(real_vfs, n, m); }
static int fv_time64(sqlite3_vfs *v, sqlite3_int64 *t) { (void)v; return real_vfs->xCurrentTimeInt64(real_vfs, t); }

int ubq_fault_register(void) {
    if (real_vfs) return SQLITE_OK;
    sqlite3_vfs *real = sqlite3_vfs_find(0);
    if (!real) return SQLITE_ERROR;
    sqlite3_io_methods m = {
        2, ff_close, ff_read, ff_write, ff_truncate, ff_sync, ff_size,
        ff_lock, ff_unlock, ff_reserved, ff_fcntl, ff_sector, ff_devchar,
        ff_shmmap, ff_shmlock, ff_shmbarrier, ff_shmunmap, 0, 0
    };
    methods = m;
    memset(&fault_vfs, 0, sizeof fault_vfs);
    fault_vfs.iVersion = 2;
    fault_vfs.szOsFile = (int)sizeof(ff_file) + real->szOsFile;
    fault_vfs.mxPathname = real->mxPathname;
    fault_vfs.zName = "ubq-fault";
    fault_vfs.xOpen = fv_open; fault_vfs.xDelete = fv_delete; fault_vfs.xAccess = fv_access;
    fault_vfs.xFullPathname = fv_fullpath; fault_vfs.xDlOpen = fv_dlopen; fault_vfs.xDlError = fv_dlerror;
    fault_vfs.xDlSym = fv_dlsym; fault_vfs.xDlClose = fv_dlclose; fault_vfs.xRandomness = fv_random;
    fault_vfs.xSleep = fv_sleep; fault_vfs.xCurrentTime = fv_time; fault_vfs.xGetLastError = fv_lasterr;
    fault_vfs.xCurrentTimeInt64 = fv_time64;
    real_vfs = real;
    return sqlite3_vfs_register(&fault_vfs, 0);
}

void ubq_fault_arm(int write_nth, int sync_nth, int rc) {
    __atomic_store_n(&fault_rc, rc, __ATOMIC_SEQ_CST);
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&write_countdown, write_nth, __ATOMIC_SEQ_CST);
    __atomic_store_n(&sync_countdown, sync_nth, __ATOMIC_SEQ_CST);
    __atomic_store_n(&writer_open_countdown, 0, __ATOMIC_SEQ_CST);
}
void ubq_fault_arm_writer_open(int nth) {
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&writer_open_countdown, nth, __ATOMIC_SEQ_CST);
}
int ubq_fault_writer_open_count(void) { return __atomic_load_n(&writer_opens, __ATOMIC_SEQ_CST); }
int ubq_fault_fired_count(void) { return __atomic_load_n(&fired, __ATOMIC_SEQ_CST); }
int ubq_fault_write_count(void) { return __atomic_load_n(&writes, __ATOMIC_SEQ_CST); }
int ubq_fault_sync_count(void) { return __atomic_load_n(&syncs, __ATOMIC_SEQ_CST); }

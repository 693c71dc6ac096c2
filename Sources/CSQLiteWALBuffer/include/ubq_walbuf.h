#ifndef UBQ_WALBUF_H
#define UBQ_WALBUF_H
/* The writer connection's WAL write-coalescing VFS (walbuf.c; docs/storage.md "WAL write coalescing"). */

/* The SQLite version the coalescing was validated on (sqlite3_libversion_number()): it
 * recognises commit frames by the shape of wal.c's private frame writes, so another version
 * may write them differently. */
#define UBQ_WALBUF_VALIDATED_SQLITE 3040001

/* Registers (once) a wrapper over the VFS named `base` (NULL: the default VFS) and returns its
 * name ("ubq-walbuf" over the default, "ubq-walbuf-<base>" otherwise), or NULL if `base` is not
 * registered or a second named base is asked for. Not thread-safe: call under a lock. */
const char *ubq_walbuf_register(const char *base);

/* Writes back every dirty page of the open file `fd` and waits until they are on the device
 * (sync_file_range: no device cache flush, no metadata). 0 on success, else errno. Blocks: the
 * writer hands it to its writeback thread, never calls it itself. */
int ubq_writeback_file(int fd);

/* Submits every dirty page of `fd` for writeback without waiting for it (sync_file_range
 * SYNC_FILE_RANGE_WRITE; it may still block while the device's queue is full). */
int ubq_writeback_start(int fd);

#endif

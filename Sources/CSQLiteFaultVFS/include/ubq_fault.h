#ifndef UBQ_FAULT_H
#define UBQ_FAULT_H
/* Fault-injecting wrapper VFS "ubq-fault" for tests (fault.c): wraps the default VFS, forwards
 * every call, and fails the armed write or sync once. State is process-global. */

/* Registers "ubq-fault" once; SQLITE_OK or an SQLite error. Not thread-safe: call under a lock. */
int ubq_fault_register(void);
/* The write_nth-th xWrite / sync_nth-th xSync from now fails once with rc (0 = off). An rc of
 * SQLITE_IOERR becomes SQLITE_IOERR_WRITE / SQLITE_IOERR_FSYNC. */
void ubq_fault_arm(int write_nth, int sync_nth, int rc);
/* The nth read-write open of a main database file from now (a store's writer connection; read
 * connections open read-only) fails once with SQLITE_CANTOPEN (0 = off; ubq_fault_arm clears it). */
void ubq_fault_arm_writer_open(int nth);
/* Read-write opens of main database files so far. */
int ubq_fault_writer_open_count(void);
int ubq_fault_fired_count(void);
int ubq_fault_write_count(void);
int ubq_fault_sync_count(void);

#endif

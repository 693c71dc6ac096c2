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

#endif

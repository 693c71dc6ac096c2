/* Writeback of a file's dirty pages, for the writer's checkpoint steps (docs/storage.md rule 5,
 * "Checkpoints in steps"). sync_file_range is a GNU extension the Swift Glibc module does not
 * import, hence this file. */
#define _GNU_SOURCE
#include "ubq_walbuf.h"
#include <errno.h>
#include <fcntl.h>

int ubq_writeback_file(int fd) {
    /* WAIT_BEFORE: pages already under writeback are waited for (they may hold older data);
     * WRITE: every dirty page is submitted; WAIT_AFTER: returns once they are on the device.
     * No device cache flush and no metadata: SQLite's own fdatasync at the end of the
     * checkpoint still makes the file durable, it just finds (almost) nothing left to write. */
    int rc;
    do {
        rc = sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : errno;
}

int ubq_writeback_start(int fd) {
    int rc;
    do {
        rc = sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : errno;
}

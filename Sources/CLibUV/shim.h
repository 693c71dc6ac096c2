#ifndef UBIQUITY_CLIBUV_SHIM_H
#define UBIQUITY_CLIBUV_SHIM_H
#include <uv.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>

/* libuv 1.44 has no UV_TCP_REUSEPORT flag: set SO_REUSEPORT on the fd ourselves
   (after uv_tcp_init_ex created the socket, before bind). Returns 0 or -errno. */
static inline int ubq_set_reuseport(uv_tcp_t *handle) {
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)handle, &fd);
    if (rc != 0) return rc;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) return -1;
    return 0;
}

/* SIGPIPE must never kill the server: a peer closing mid-write gets EPIPE instead. */
static inline void ubq_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }
#endif

/* A real ubiquityd for the tests: started on 127.0.0.1 with its own data directory, like
 * tests/python/ubiq_harness.py does — it prints `ubiquityd listening on 127.0.0.1:PORT` once ready. */
#ifndef UBQ_TEST_SERVER_H
#define UBQ_TEST_SERVER_H

#include <sys/types.h>

#include "ubiquity.h"

typedef struct {
    pid_t pid;
    int port;
    char address[64];
    char data_dir[512];
    char log_path[600];
    /* An API key of the server's default account, made at start with the operator key the server
     * writes into its data directory (docs/accounts.md), as tests/python/ubiq_harness.py does. */
    char api_key[256];
    /* The write end of the server's stdin, held and never written: the server runs with
     * --exit-on-stdin-eof, so when this process dies, however it dies, the kernel closes the pipe
     * and the server drains and exits (docs/testing.md). -1 when no server runs. */
    int stdin_fd;
} test_server;

/* Starts $UBIQUITYD on `port` (0: any free port) with `data_dir` (created). 0 on success. */
int test_server_start(test_server *s, const char *data_dir, int port);
/* The same with more flags (a NULL-terminated list), e.g. {"--idle-timeout-ms", "200", NULL}. */
int test_server_start_with(test_server *s, const char *data_dir, int port, const char *const *flags);
/* The same for a server started with TLS flags (--tls-cert …): the API key is made over TLS with
 * `tls` (borrowed for the call). */
int test_server_start_tls(test_server *s, const char *data_dir, const char *const *flags, const ubq_tls_options *tls);
/* The operator key the server wrote to its data directory, into key[size]. 0 on success. */
int test_server_operator_key(const test_server *s, char *key, size_t size);
/* SIGTERM, then waits for the exit; the exit status (0 for a clean drain). */
int test_server_stop(test_server *s);
/* SIGKILL (a crash: nothing drains), then waits for the exit. */
void test_server_kill(test_server *s);

#endif

/*
 * The client scenario suite (issue 20) against a real ubiquityd on 127.0.0.1: stores, fetches,
 * a save, a conflict under each merge policy, pinned fetches, a lost save answer retried once,
 * typed errors, and the change feed (order, resume after a server restart, HISTORY_EXPIRED hook).
 * The scenarios are in scenarios_*.c; this is the runner.
 *
 *   UBIQUITYD=.build/debug/ubiquityd build/test_scenarios WORKDIR [TEST-NAME…]
 *   UBIQUITYD=… build/test_scenarios WORKDIR --serve PROGRAM [ARGS…]   (runs PROGRAM … ADDRESS API-KEY)
 *
 * One server serves the tests (each on its own store); tests that restart or stop a server start
 * their own.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "server.h"

static const scenario *const groups[] = {store_scenarios, context_scenarios, relationship_scenarios, call_scenarios, feed_scenarios,
                                          keyvalue_scenarios, auth_scenarios, maintenance_scenarios,
                                          tls_scenarios, lifecycle_scenarios, acknowledge_scenarios,
                                          account_scenarios};

/* --serve: run a program (the walkthrough) against a fresh server, with the server's address and
 * an API key as its last two arguments; its exit status is ours. */
static int serve(char **argv) {
    test_server t;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/serve", workdir);
    if (test_server_start(&t, dir, 0) != 0) return 1;
    int n = 0;
    while (argv[n]) n++;
    char **args = ubq__xcalloc((size_t)n + 3, sizeof *args);
    for (int i = 0; i < n; i++) args[i] = argv[i];
    args[n] = t.address;
    args[n + 1] = t.api_key;
    pid_t pid = fork();
    if (pid == 0) { execv(args[0], args); _exit(127); }
    int status = 1;
    waitpid(pid, &status, 0);
    free(args);
    int stopped = test_server_stop(&t);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && stopped == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s WORKDIR [TEST…] | WORKDIR --serve PROGRAM [ARGS…]\n", argv[0]); return 2; }
    workdir = argv[1];
    if (argc >= 4 && strcmp(argv[2], "--serve") == 0) return serve(argv + 3);
    test_server t;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/shared", workdir);
    if (test_server_start(&t, dir, 0) != 0) return 1;
    ubq_client *c = NULL;
    shared_server = &t;
    ubq_error *err = ubq_connect(t.address, SIGNED_IN(&t), &c);
    if (err) { fprintf(stderr, "connect: %s\n", err->message); ubq_error_free(err); return 1; }
    int run = 0, failed = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        for (const scenario *sc = groups[g]; sc->name; sc++) {
            bool selected = argc == 2;
            for (int a = 2; a < argc; a++) selected |= strcmp(argv[a], sc->name) == 0;
            if (!selected) continue;
            int before = failed_checks;
            sc->fn(c);
            run++;
            bool ok = failed_checks == before;
            failed += !ok;
            printf("%s %s\n", ok ? "PASS" : "FAIL", sc->name);
            fflush(stdout);
        }
    }
    ubq_client_free(c);
    int stopped = test_server_stop(&t);
    if (stopped != 0) { fprintf(stderr, "the shared server exited %d (see %s)\n", stopped, t.log_path); failed++; }
    printf("test_scenarios: %d run, %d failed\n", run, failed);
    return failed ? 1 : 0;
}

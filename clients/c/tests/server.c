#define _POSIX_C_SOURCE 200809L
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Bounded: a server that does not say it listens within this is a failed test, not a hang. */
#define START_TIMEOUT_MS 30000

int test_server_start(test_server *s, const char *data_dir, int port) {
    return test_server_start_with(s, data_dir, port, NULL);
}

/* Whether this ubiquityd has `--auth` (bearer-token authentication, on by default). This client
 * does not sign in yet (README "Authentication"), so such a server runs with `--auth off`, which
 * it allows on 127.0.0.1: every call then acts for the default account. */
static int has_auth_flag(const char *bin) {
    static int known = -1;
    if (known >= 0) return known;
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", bin);
    FILE *help = popen(cmd, "r");
    known = 0;
    if (!help) return known;
    char line[512];
    while (fgets(line, sizeof line, help)) known |= strstr(line, "--auth <") != NULL;
    pclose(help);
    return known;
}

int test_server_start_with(test_server *s, const char *data_dir, int port, const char *const *flags) {
    const char *bin = getenv("UBIQUITYD");
    if (!bin || !*bin) { fprintf(stderr, "UBIQUITYD is not set (path of the ubiquityd to test)\n"); return -1; }
    memset(s, 0, sizeof *s);
    snprintf(s->data_dir, sizeof s->data_dir, "%s", data_dir);
    snprintf(s->log_path, sizeof s->log_path, "%s.stderr.log", data_dir);
    mkdir(data_dir, 0700);
    int out[2];
    if (pipe(out) != 0) return -1;
    char port_arg[16];
    snprintf(port_arg, sizeof port_arg, "%d", port);
    int auth = has_auth_flag(bin);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(out[1], 1);
        int log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (log >= 0) dup2(log, 2);
        close(out[0]);
        const char *argv[32] = {bin, "--host", "127.0.0.1", "--port", port_arg, "--data-dir", data_dir,
                                "--log-level", "info"};
        int n = 9;
        if (auth) { argv[n++] = "--auth"; argv[n++] = "off"; }
        for (int i = 0; flags && flags[i] && n < 31; i++) argv[n++] = flags[i];
        argv[n] = NULL;
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    s->pid = pid;
    char line[256];
    size_t len = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = START_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        ssize_t n = read(out[0], line + len, sizeof line - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
        line[len] = 0;
        char *nl = strchr(line, '\n');
        if (nl && sscanf(line, "ubiquityd listening on 127.0.0.1:%d", &s->port) == 1) {
            /* Later stdout is not read: the server prints nothing more there. */
            close(out[0]);
            snprintf(s->address, sizeof s->address, "127.0.0.1:%d", s->port);
            return 0;
        }
        if (nl || len == sizeof line - 1) break;
    }
    close(out[0]);
    fprintf(stderr, "ubiquityd did not start (see %s)\n", s->log_path);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return -1;
}

int test_server_stop(test_server *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int status = 0;
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {}
    s->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define _GNU_SOURCE  /* pipe2 */
#include "server.h"

#include "ubiquity.h"

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

int test_server_operator_key(const test_server *s, char *key, size_t size) {
    char path[700];
    snprintf(path, sizeof path, "%s/operator.key", s->data_dir);
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "no operator key at %s\n", path); return -1; }
    if (!fgets(key, (int)size, f)) key[0] = 0;
    fclose(f);
    key[strcspn(key, "\r\n")] = 0;
    return key[0] ? 0 : -1;
}

/* CreateApiKey for the default account, authorised by the operator key. */
static int make_api_key(test_server *s, const ubq_tls_options *tls) {
    char key[256] = {0};
    if (test_server_operator_key(s, key, sizeof key) != 0) return -1;
    ubq_client *operator = NULL;
    ubq_error *err = ubq_connect(s->address, &(ubq_client_options){.bearer_token = key, .tls = tls}, &operator);
    Ubiquity__V1__CreateApiKeyResponse *resp = NULL;
    if (!err) err = ubq_create_api_key(operator, "default", &(ubq_api_key_options){.label = "c-tests"}, &resp);
    if (!err) snprintf(s->api_key, sizeof s->api_key, "%s", resp->secret);
    if (err) fprintf(stderr, "CreateApiKey: %s\n", err->message);
    int rc = err ? -1 : 0;
    ubq_error_free(err);
    ubq_message_free(resp);
    ubq_client_free(operator);
    return rc;
}

int test_server_start(test_server *s, const char *data_dir, int port) {
    return test_server_start_with(s, data_dir, port, NULL);
}

static int start(test_server *s, const char *data_dir, int port, const char *const *flags,
                 const ubq_tls_options *tls);

int test_server_start_with(test_server *s, const char *data_dir, int port, const char *const *flags) {
    return start(s, data_dir, port, flags, NULL);
}

int test_server_start_tls(test_server *s, const char *data_dir, const char *const *flags, const ubq_tls_options *tls) {
    return start(s, data_dir, 0, flags, tls);
}

static int start(test_server *s, const char *data_dir, int port, const char *const *flags,
                 const ubq_tls_options *tls) {
    const char *bin = getenv("UBIQUITYD");
    if (!bin || !*bin) { fprintf(stderr, "UBIQUITYD is not set (path of the ubiquityd to test)\n"); return -1; }
    memset(s, 0, sizeof *s);
    snprintf(s->data_dir, sizeof s->data_dir, "%s", data_dir);
    snprintf(s->log_path, sizeof s->log_path, "%s.stderr.log", data_dir);
    mkdir(data_dir, 0700);
    s->stdin_fd = -1;
    int out[2], in[2];
    if (pipe(out) != 0) return -1;
    /* Close-on-exec: a later server or program this process starts must not hold this server's
     * stdin open, or the server would outlive a killed test run. */
    if (pipe2(in, O_CLOEXEC) != 0) { close(out[0]); close(out[1]); return -1; }
    char port_arg[16];
    snprintf(port_arg, sizeof port_arg, "%d", port);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* A session of its own: a Ctrl-C or a signal to the test's process group does not reach
         * it; it ends when its stdin closes (or test_server_stop). */
        setsid();
        dup2(in[0], 0);
        dup2(out[1], 1);
        int log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (log >= 0) dup2(log, 2);
        close(out[0]);
        const char *argv[32] = {bin, "--host", "127.0.0.1", "--port", port_arg, "--data-dir", data_dir,
                                "--log-level", "info", "--exit-on-stdin-eof"};
        int n = 10;
        for (int i = 0; flags && flags[i] && n < 31; i++) argv[n++] = flags[i];
        argv[n] = NULL;
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    s->stdin_fd = in[1];
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
            if (make_api_key(s, tls) == 0) return 0;
            test_server_kill(s);
            return -1;
        }
        if (nl || len == sizeof line - 1) break;
    }
    close(out[0]);
    fprintf(stderr, "ubiquityd did not start (see %s)\n", s->log_path);
    test_server_kill(s);
    return -1;
}

int test_server_stop(test_server *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int status = 0;
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {}
    s->pid = 0;
    close(s->stdin_fd);
    s->stdin_fd = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void test_server_kill(test_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    s->pid = 0;
    if (s->stdin_fd >= 0) close(s->stdin_fd);
    s->stdin_fd = -1;
}

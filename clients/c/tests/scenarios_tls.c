/* TLS: the client against ubiquityd with --tls-cert/--tls-key (and --tls-client-ca), with a CA and
 * certificates made at test time with the openssl CLI, as tests/python/tls_material.py does:
 * calls and a feed over TLS, an untrusted server, a wrong name, plaintext against TLS, client
 * certificates required and verified, unreadable files. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixtures.h"
#include "server.h"

typedef struct { char path[16][700]; } pki;
static char pki_dir[600];   /* apart from the paths: snprintf may not read and write one object */
enum { CA_CRT, CA_KEY, OTHER_CRT, OTHER_KEY, SERVER_CRT, SERVER_KEY, CLIENT_CRT, CLIENT_KEY };

static int sh(const char *cmd) {
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "  failed (%d): %s\n", rc, cmd);
    return rc;
}

static int make_ca(pki *p, const char *name, int crt) {
    char cmd[2400];
    snprintf(p->path[crt], sizeof p->path[crt], "%s/%s.crt", pki_dir, name);
    snprintf(p->path[crt + 1], sizeof p->path[crt + 1], "%s/%s.key", pki_dir, name);
    snprintf(cmd, sizeof cmd, "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout %s -out %s -days 2 -subj /CN=%s -addext basicConstraints=critical,CA:TRUE "
             "-addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null",
             p->path[crt + 1], p->path[crt], name);
    return sh(cmd);
}

/* A leaf signed by the CA: a server's for localhost and 127.0.0.1, or a client's. */
static int make_leaf(pki *p, const char *name, int crt, bool server) {
    char cmd[4000], ext[700], csr[700];
    snprintf(p->path[crt], sizeof p->path[crt], "%s/%s.crt", pki_dir, name);
    snprintf(p->path[crt + 1], sizeof p->path[crt + 1], "%s/%s.key", pki_dir, name);
    snprintf(ext, sizeof ext, "%s/%s.ext", pki_dir, name);
    snprintf(csr, sizeof csr, "%s/%s.csr", pki_dir, name);
    FILE *f = fopen(ext, "w");
    if (!f) return -1;
    fprintf(f, "basicConstraints=CA:FALSE\nextendedKeyUsage=%s\n%s", server ? "serverAuth" : "clientAuth",
            server ? "subjectAltName=DNS:localhost,IP:127.0.0.1\n" : "");
    fclose(f);
    snprintf(cmd, sizeof cmd, "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s "
             "-out %s -subj /CN=%s 2>/dev/null && openssl x509 -req -in %s -CA %s -CAkey %s -CAcreateserial "
             "-out %s -days 2 -extfile %s 2>/dev/null",
             p->path[crt + 1], csr, name, csr, p->path[CA_CRT], p->path[CA_KEY], p->path[crt], ext);
    return sh(cmd);
}

static int make_pki(pki *p) {
    snprintf(pki_dir, sizeof pki_dir, "%s/pki", workdir);
    mkdir(pki_dir, 0700);
    return make_ca(p, "ca", CA_CRT) || make_ca(p, "other-ca", OTHER_CRT) ||
           make_leaf(p, "server", SERVER_CRT, true) || make_leaf(p, "client", CLIENT_CRT, false);
}

/* A PKI and a server with its certificate (and `extra` flags); false when either fails. */
static bool start_tls_server(pki *p, test_server *t, const char *name, const char *extra_flag,
                             const ubq_tls_options *tls) {
    char dir[700];
    if (make_pki(p) != 0) return false;
    const char *flags[] = {"--tls-cert", p->path[SERVER_CRT], "--tls-key", p->path[SERVER_KEY],
                           extra_flag ? extra_flag : NULL, p->path[CA_CRT], NULL};
    snprintf(dir, sizeof dir, "%s/%s", workdir, name);
    return test_server_start_tls(t, dir, flags, tls) == 0;
}

static ubq_feed_action stop_at_transaction(ubq_feed *f, const Ubiquity__V1__SubscribeResponse *ev, void *user) {
    (void)f;
    int64_t *generation = user;
    if (ev->event_case != UBIQUITY__V1__SUBSCRIBE_RESPONSE__EVENT_TRANSACTIONS) return UBQ_FEED_CONTINUE;
    *generation = ev->transactions->transactions[0]->generation;
    return UBQ_FEED_STOP;
}

/* A call that must fail UNAVAILABLE with `why` in its message. */
static void check_refused(test_server *t, const ubq_tls_options *tls, const char *why) {
    ubq_client *c = NULL;
    ubq_error *err = ubq_connect(t->address, &(ubq_client_options){.api_key = t->api_key, .device_id = "c-tests",
                                                                   .tls = tls, .timeout_ms = 5000}, &c);
    CHECK(err && err->code == UBQ_UNAVAILABLE && c == NULL);
    if (err && why && !strstr(err->message, why)) fprintf(stderr, "  unexpected message: %s\n", err->message);
    CHECK(err && (!why || strstr(err->message, why)));
    ubq_error_free(err);
    ubq_client_free(c);
}

static void test_calls_and_a_feed_over_tls(ubq_client *unused) {
    (void)unused;
    pki p;
    test_server t = {0};
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_feed *feed = NULL;
    char *ann = NULL;
    ubq_tls_options tls = {.ca_file = p.path[CA_CRT]};
    if (!start_tls_server(&p, &t, "tls", NULL, &tls)) { failed_checks++; return; }

    OK(ubq_connect(t.address, &(ubq_client_options){.api_key = t.api_key, .device_id = "c-tests", .tls = &tls}, &c));
    OK(new_store(c, "tls", &s));
    OK(ubq_feed_new(s, &(ubq_feed_options){.start_oldest = true}, &feed));   /* on its own TLS connection */
    OK(add_person(s, "Ann", 30, NULL, -1, &ann));
    CHECK(age_at(s, ann, NULL) == 30);
    int64_t generation = 0;
    OK(ubq_feed_run(feed, stop_at_transaction, &generation));
    CHECK(generation == 1);
    /* "localhost" is on the certificate as well; a name that is not fails verification. */
    ubq_client *by_name = NULL;
    OK(ubq_connect(t.address, &(ubq_client_options){.api_key = t.api_key, .device_id = "c-tests",
                   .tls = &(ubq_tls_options){.ca_file = p.path[CA_CRT], .server_name = "localhost"}}, &by_name));
    ubq_client_free(by_name);

    check_refused(&t, &(ubq_tls_options){.ca_file = p.path[OTHER_CRT]}, "not trusted");
    check_refused(&t, &(ubq_tls_options){.ca_file = p.path[CA_CRT], .server_name = "wrong.example"}, "not trusted");
    check_refused(&t, NULL, NULL);   /* plaintext HTTP/2 against the TLS port */

    ubq_client *bad = NULL;
    ubq_error *err = ubq_connect(t.address, &(ubq_client_options){.tls = &(ubq_tls_options){
                                     .ca_file = "/nonexistent/ca.crt"}}, &bad);
    CHECK(err && err->code == UBQ_INVALID_ARGUMENT && strstr(err->message, "/nonexistent/ca.crt") && !bad);
    ubq_error_free(err);
    err = ubq_connect(t.address, &(ubq_client_options){.tls = &(ubq_tls_options){
                          .ca_file = p.path[CA_CRT], .cert_file = p.path[CLIENT_CRT]}}, &bad);
    CHECK(err && err->code == UBQ_INVALID_ARGUMENT && !bad);
    ubq_error_free(err);
    err = ubq_connect(t.address, &(ubq_client_options){.tls = &(ubq_tls_options){
                          .ca_file = p.path[CA_CRT], .cert_file = p.path[CLIENT_CRT], .key_file = p.path[SERVER_KEY]}}, &bad);
    CHECK(err && err->code == UBQ_INVALID_ARGUMENT && strstr(err->message, "client key") && !bad);
    ubq_error_free(err);
done:
    free(ann);
    ubq_feed_free(feed);
    ubq_store_free(s);
    ubq_client_free(c);
    CHECK(test_server_stop(&t) == 0);
}

static void test_client_certificate_required_by_the_server(ubq_client *unused) {
    (void)unused;
    pki p;
    test_server t = {0};
    ubq_client *c = NULL;
    ubq_store *s = NULL;
    ubq_tls_options tls = {.ca_file = p.path[CA_CRT], .cert_file = p.path[CLIENT_CRT], .key_file = p.path[CLIENT_KEY]};
    if (!start_tls_server(&p, &t, "mtls", "--tls-client-ca", &tls)) { failed_checks++; return; }
    OK(ubq_connect(t.address, &(ubq_client_options){.api_key = t.api_key, .device_id = "c-tests", .tls = &tls}, &c));
    OK(new_store(c, "mtls", &s));
    check_refused(&t, &(ubq_tls_options){.ca_file = p.path[CA_CRT]}, NULL);   /* no client certificate */
done:
    ubq_store_free(s);
    ubq_client_free(c);
    CHECK(test_server_stop(&t) == 0);
}

const scenario tls_scenarios[] = {
#define T(f) {#f, f}
    T(test_calls_and_a_feed_over_tls),
    T(test_client_certificate_required_by_the_server),
#undef T
    {NULL, NULL},
};

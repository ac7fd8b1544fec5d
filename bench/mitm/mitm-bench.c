/* SPDX-License-Identifier: Apache-2.0 */
/* TLS inspection against a direct TLS connection to the same upstream, in
 * one run: bulk throughput (one GET of BYTES on one connection) and the
 * latency of a small request on a new connection (TCP, TLS handshake,
 * GET, response), through an egress session whose hook marks every
 * connection SHK_EGRESS_INSPECT, with the leaf already cached. Targets:
 * >= 0.7x direct throughput, < 1 ms added median latency.
 *
 * The upstream is a TLS server of this program on loopback (a CA and a
 * leaf made here, P-256), one connection at a time, keep-alive. The
 * client is OpenSSL with the same settings both ways.
 *   bench-mitm DIR [BYTES [REQUESTS]]   (DIR: scratch, 256 MiB per round, 2000) */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shinken/egress.h"

static const char *dir;
static SSL_CTX *srv_ctx;
static int srv_fd;
static uint16_t srv_port;
static char big[1 << 16];

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
  fprintf(stderr, "bench-mitm: %s\n", what);
  ERR_print_errors_fp(stderr);
  exit(1);
}

static X509 *cert_for(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, bool ca)
{
  X509 *x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), ca ? 1 : 2);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                             (const unsigned char *)cn, -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
  const char *exts[][2] = { { "basicConstraints", ca ? "critical,CA:TRUE" : "CA:FALSE" },
                            { "subjectAltName", ca ? NULL : "DNS:bench.test" } };
  for (int i = 0; i < 2; i++) {
    if (!exts[i][1])
      continue;
    X509_EXTENSION *e = X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1]);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
  }
  if (!X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()))
    die("cannot sign a certificate");
  return x;
}

/* The upstream: "GET /bulk" answers BYTES, anything else 16 bytes. */
static unsigned long long bulk_bytes;

static void serve_one(int fd)
{
  SSL *ssl = SSL_new(srv_ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1)
    goto out;
  char buf[16384];
  size_t len = 0;
  for (;;) {
    int n = SSL_read(ssl, buf + len, (int)(sizeof buf - len - 1));
    if (n <= 0)
      break;
    len += (size_t)n;
    buf[len] = '\0';
    char *end;
    while ((end = strstr(buf, "\r\n\r\n"))) {
      bool bulk = !strncmp(buf, "GET /bulk ", 10);
      char head[128];
      unsigned long long body = bulk ? bulk_bytes : 16;
      int hl = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n\r\n", body);
      if (SSL_write(ssl, head, hl) != hl)
        goto out;
      while (body) {
        int k = body < sizeof big ? (int)body : (int)sizeof big;
        if (SSL_write(ssl, big, k) != k)
          goto out;
        body -= (unsigned long long)k;
      }
      size_t used = (size_t)(end + 4 - buf);
      memmove(buf, buf + used, len - used);
      len -= used;
      buf[len] = '\0';
    }
  }
out:
  SSL_shutdown(ssl);
  SSL_free(ssl);
  close(fd);
}

static void *server_main(void *arg)
{
  for (;;) {
    int fd = accept(srv_fd, NULL, NULL);
    if (fd < 0)
      continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    serve_one(fd);
  }
  return NULL;
}

static shk_egress_verdict hook(void *data, const shk_egress_request *req, uint64_t *tag,
                               const char **rule)
{
  if (req->flags)
    *req->flags = SHK_EGRESS_INSPECT;
  return SHK_EGRESS_ALLOW;
}

static SSL_CTX *client_ctx(const char *cafile)
{
  SSL_CTX *c = SSL_CTX_new(TLS_client_method());
  if (!c || SSL_CTX_load_verify_locations(c, cafile, NULL) != 1)
    die("cannot load a CA file");
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  return c;
}

/* A connected socket to the upstream: direct (TCP) or through the proxy's
 * http.sock (CONNECT). */
static int dial(const char *proxy_dir)
{
  if (!proxy_dir) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(srv_port) };
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0)
      die("cannot connect to the upstream");
    return fd;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  snprintf(sun.sun_path, sizeof sun.sun_path, "%s/http.sock", proxy_dir);
  if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0)
    die("cannot connect to the proxy");
  char req[128];
  int n = snprintf(req, sizeof req, "CONNECT bench.test:%u HTTP/1.1\r\nHost: bench.test:%u\r\n\r\n",
                   srv_port, srv_port);
  if (write(fd, req, (size_t)n) != n)
    die("cannot write CONNECT");
  char resp[256];
  size_t len = 0;
  while (len < 4 || memcmp(resp + len - 4, "\r\n\r\n", 4)) {
    if (read(fd, resp + len, 1) != 1 || ++len == sizeof resp)
      die("no answer to CONNECT");
  }
  if (strncmp(resp, "HTTP/1.1 200", 12))
    die("CONNECT refused");
  return fd;
}

/* One GET on SSL: reads the head and then exactly Content-Length bytes. */
static unsigned long long get(SSL *ssl, const char *path)
{
  char req[128];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: bench.test:%u\r\n\r\n", path, srv_port);
  if (SSL_write(ssl, req, n) != n)
    die("cannot send a request");
  static char buf[1 << 16];
  size_t len = 0;
  char *end = NULL;
  while (!end) {
    int k = SSL_read(ssl, buf + len, (int)(sizeof buf - len - 1));
    if (k <= 0)
      die("the response ended early");
    len += (size_t)k;
    buf[len] = '\0';
    end = strstr(buf, "\r\n\r\n");
  }
  char *cl = strstr(buf, "Content-Length: ");
  unsigned long long want = cl ? strtoull(cl + 16, NULL, 10) : 0, got = len - (size_t)(end + 4 - buf);
  while (got < want) {
    int k = SSL_read(ssl, buf, sizeof buf);
    if (k <= 0)
      die("the body ended early");
    got += (unsigned long long)k;
  }
  return got;
}

static SSL *connect_tls(SSL_CTX *ctx, const char *proxy_dir, int *fdp)
{
  int fd = dial(proxy_dir);
  SSL *ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "bench.test");
  SSL_set1_host(ssl, "bench.test");
  if (SSL_connect(ssl) != 1)
    die(proxy_dir ? "the TLS handshake with the proxy failed" : "the TLS handshake failed");
  *fdp = fd;
  return ssl;
}

static void end_tls(SSL *ssl, int fd)
{
  SSL_free(ssl);
  close(fd);
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double bulk(SSL_CTX *ctx, const char *proxy_dir)
{
  int fd;
  SSL *ssl = connect_tls(ctx, proxy_dir, &fd);
  double t0 = now_s();
  unsigned long long got = get(ssl, "/bulk");
  double t = now_s() - t0;
  end_tls(ssl, fd);
  return (double)got / t / 1e6;
}

/* Direct and inspected alternate, one request each at a time, so that a
 * change in the machine's load falls on both alike. */
static void latency(SSL_CTX *direct, SSL_CTX *inspected, const char *proxy_dir, int n,
                    double *d50, double *d99, double *i50, double *i99)
{
  double *dv = malloc(sizeof *dv * (size_t)n), *iv = malloc(sizeof *iv * (size_t)n);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 2; k++) {
      double t0 = now_s();
      int fd;
      SSL *ssl = connect_tls(k ? inspected : direct, k ? proxy_dir : NULL, &fd);
      get(ssl, "/small");
      (k ? iv : dv)[i] = (now_s() - t0) * 1e6;
      end_tls(ssl, fd);
    }
  }
  qsort(dv, (size_t)n, sizeof *dv, cmp);
  qsort(iv, (size_t)n, sizeof *iv, cmp);
  *d50 = dv[n / 2];
  *d99 = dv[n * 99 / 100];
  *i50 = iv[n / 2];
  *i99 = iv[n * 99 / 100];
  free(dv);
  free(iv);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench-mitm DIR [BYTES [REQUESTS]]\n");
    return 2;
  }
  dir = argv[1];
  bulk_bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : 256ull << 20;
  int n = argc > 3 ? atoi(argv[3]) : 2000;
  memset(big, 'x', sizeof big);

  EVP_PKEY *cakey = EVP_EC_gen("P-256"), *key = EVP_EC_gen("P-256");
  X509 *ca = cert_for(cakey, "bench CA", NULL, NULL, true);
  X509 *leaf = cert_for(key, "bench.test", ca, cakey, false);
  char capath[4096], cfgpath[4096], cadir[4096];
  snprintf(capath, sizeof capath, "%s/upstream-ca.pem", dir);
  snprintf(cfgpath, sizeof cfgpath, "%s/proxy.json", dir);
  snprintf(cadir, sizeof cadir, "%s/ca", dir);
  FILE *f = fopen(capath, "w");
  if (!f)
    die("cannot write the CA file");
  PEM_write_X509(f, ca);
  fclose(f);
  srv_ctx = SSL_CTX_new(TLS_server_method());
  SSL_CTX_use_certificate(srv_ctx, leaf);
  SSL_CTX_use_PrivateKey(srv_ctx, key);
  SSL_CTX_set_session_cache_mode(srv_ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(srv_ctx, SSL_OP_NO_TICKET);

  srv_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET };
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t sl = sizeof sin;
  if (bind(srv_fd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(srv_fd, 64) < 0 ||
      getsockname(srv_fd, (struct sockaddr *)&sin, &sl) < 0)
    die("cannot listen");
  srv_port = ntohs(sin.sin_port);
  pthread_t t;
  pthread_create(&t, NULL, server_main, NULL);

  f = fopen(cfgpath, "w");
  fprintf(f, "{\"allow_private_cidrs\":[\"127.0.0.1/32\"],\"hosts\":{\"bench.test\":[\"127.0.0.1\"]}}\n");
  fclose(f);
  shk_egress_session_opts o = { .name = "bench", .config_path = cfgpath, .hook = hook,
                                .ca_dir = cadir, .upstream_ca = capath };
  shk_egress_session *s;
  shk_error err;
  if (shk_egress_session_open(&o, &s, &err) < 0) {
    fprintf(stderr, "bench-mitm: %s\n", err.message);
    return 1;
  }
  char bundle[4096];
  snprintf(bundle, sizeof bundle, "%s/%s", shk_egress_session_dir(s), SHK_EGRESS_CA_BUNDLE);
  SSL_CTX *direct = client_ctx(capath), *inspected = client_ctx(bundle);
  const char *pd = shk_egress_session_dir(s);

  /* A warm-up, which also puts the leaf in the cache. */
  double w[4];
  latency(direct, inspected, pd, 20, &w[0], &w[1], &w[2], &w[3]);
  /* Bulk: ROUNDS transfers of each, alternating; the ratio of the medians. */
  enum { ROUNDS = 5 };
  double bd[ROUNDS], bi[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    bd[r] = bulk(direct, NULL);
    bi[r] = bulk(inspected, pd);
  }
  qsort(bd, ROUNDS, sizeof *bd, cmp);
  qsort(bi, ROUNDS, sizeof *bi, cmp);
  double d50, d99, i50, i99;
  latency(direct, inspected, pd, n, &d50, &d99, &i50, &i99);
  printf("bulk throughput (%d alternating GETs of %llu bytes, medians): direct %.0f MB/s, "
         "inspected %.0f MB/s: %.2fx (target >= 0.7x)\n",
         ROUNDS, bulk_bytes, bd[ROUNDS / 2], bi[ROUNDS / 2], bi[ROUNDS / 2] / bd[ROUNDS / 2]);
  printf("new connection + handshake + small GET (%d of each, alternating, leaf cached): direct "
         "p50 %.0f us p99 %.0f us; inspected p50 %.0f us p99 %.0f us; added p50 %.0f us "
         "(target < 1000 us)\n",
         n, d50, d99, i50, i99, i50 - d50);
  shk_egress_session_close(s);
  return 0;
}

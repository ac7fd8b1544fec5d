/* SPDX-License-Identifier: Apache-2.0 */
/* The inspecting proxy's certificate authority: one per manager, kept in a
 * directory of its state (ca.pem: the private key and the self-signed
 * certificate, mode 0600, in a 0700 directory), created on first use; and
 * the leaf certificates it mints for the names a session's inspected
 * connections go to, cached (bounded, least recently used out) so that a
 * new connection to a name seen before costs no signature. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Leaves live a day: long enough for any session's connection, short
 * enough that a leaf copied out of a sandbox is soon worthless. They are
 * re-minted once half of that has gone. */
#define LEAF_SECONDS (24 * 3600)
#define LEAF_REUSE_SECONDS (12 * 3600)
#define CA_DAYS 3650

struct leaf {
  char host[SHK_HOST_MAX + 1];
  X509 *cert;
  time_t minted;
  uint64_t used; /* the cache's clock at its last use */
};

struct shk__eg_ca {
  EVP_PKEY *key;      /* the CA's */
  X509 *cert;         /* the CA's */
  EVP_PKEY *leaf_key; /* one key for every leaf of this process's CA object */
  char *cert_pem;
  char *dir;          /* where ca.pem is, and the trust files built from it */
  struct leaf *leaves;
  size_t n_leaves, cap;
  uint64_t clock;
  unsigned long minted; /* leaves signed so far (for the tests) */
};

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
  if (!ext)
    return -1;
  int r = X509_add_ext(cert, ext, -1) ? 0 : -1;
  X509_EXTENSION_free(ext);
  return r;
}

static int random_serial(X509 *cert)
{
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1)
    return -1;
  b[0] &= 0x7f; /* positive */
  BIGNUM *bn = BN_bin2bn(b, sizeof b, NULL);
  ASN1_INTEGER *ai = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
  int r = ai && X509_set_serialNumber(cert, ai) ? 0 : -1;
  ASN1_INTEGER_free(ai);
  BN_free(bn);
  return r;
}

/* A certificate of KEY named CN, valid from an hour ago (clocks differ) for
 * SECONDS, issued by ISSUER (NULL: by itself); the caller signs it. */
static X509 *new_cert(EVP_PKEY *key, const char *cn, long seconds, X509 *issuer)
{
  X509 *x = X509_new();
  if (!x)
    return NULL;
  X509_NAME *name = X509_get_subject_name(x);
  if (!X509_set_version(x, 2) || random_serial(x) < 0 ||
      !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
      !X509_gmtime_adj(X509_getm_notAfter(x), seconds) || !X509_set_pubkey(x, key) ||
      !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) ||
      !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name)) {
    X509_free(x);
    return NULL;
  }
  return x;
}

static EVP_PKEY *new_key(void)
{
  /* P-256: every TLS client accepts it, and signing with it is cheap. */
  return EVP_EC_gen("P-256");
}

static X509 *make_ca_cert(EVP_PKEY *key)
{
  char cn[128], host[64] = "";
  gethostname(host, sizeof host - 1);
  snprintf(cn, sizeof cn, "Shinken inspection CA (%s uid %u)", host[0] ? host : "localhost",
           (unsigned)getuid());
  X509 *x = new_cert(key, cn, (long)CA_DAYS * 86400, NULL);
  /* A CA that can sign leaves and nothing below them (pathlen 0). */
  if (!x || add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
      add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
      add_ext(x, x, NID_subject_key_identifier, "hash") < 0 ||
      !X509_sign(x, key, EVP_sha256())) {
    X509_free(x);
    return NULL;
  }
  return x;
}

/* Writes the new CA to DIR/ca.pem. The file is made under a temporary name
 * with mode 0600 from the first moment and then linked into place, so a
 * second manager starting at the same time either wins or reads the
 * winner's whole file: link() fails with EEXIST rather than replace it. */
static int write_ca(int dfd, EVP_PKEY *key, X509 *cert, shk_error *err, const char *dir)
{
  char tmp[64];
  snprintf(tmp, sizeof tmp, ".ca.%ld.tmp", (long)getpid());
  unlinkat(dfd, tmp, 0);
  int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return shk__error_set(err, -errno, "%s: cannot create the inspection CA: %s", dir,
                          strerror(errno));
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlinkat(dfd, tmp, 0);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  bool ok = PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) && PEM_write_X509(f, cert);
  ok = fflush(f) == 0 && fsync(fd) == 0 && ok;
  fclose(f);
  int r = 0;
  if (!ok)
    r = shk__error_set(err, -EIO, "%s: cannot write the inspection CA", dir);
  else if (linkat(dfd, tmp, dfd, "ca.pem", 0) < 0)
    r = errno == EEXIST ? 1 : shk__error_set(err, -errno, "%s: cannot create the inspection CA: %s",
                                              dir, strerror(errno));
  unlinkat(dfd, tmp, 0);
  return r;
}

/* Reads DIR/ca.pem. Why the checks: the key signs certificates every
 * sandbox of this user trusts, so a file another user could have written
 * or read is not used (its owner must be us, its mode 0600 or stricter). */
static int read_ca(int dfd, const char *dir, EVP_PKEY **key, X509 **cert, shk_error *err)
{
  int fd = openat(dfd, "ca.pem", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return errno == ENOENT ? 1
                           : shk__error_set(err, -errno, "%s/ca.pem: %s", dir, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != shk__self_uid() ||
      (st.st_mode & 077)) {
    close(fd);
    return shk__error_set(err, -EPERM,
                          "%s/ca.pem: the inspection CA must be a regular file of this user with "
                          "mode 0600",
                          dir);
  }
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  *key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
  *cert = *key ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
  fclose(f);
  if (!*key || !*cert || X509_check_private_key(*cert, *key) != 1) {
    EVP_PKEY_free(*key);
    X509_free(*cert);
    *key = NULL;
    *cert = NULL;
    return shk__error_set(err, -EINVAL,
                          "%s/ca.pem: not a private key followed by its certificate; remove the "
                          "file to have a new CA made",
                          dir);
  }
  return 0;
}

/* Makes DIR (and its missing parents) 0700. */
static int make_dir(const char *dir, shk_error *err)
{
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
    return shk__error_set(err, -ENAMETOOLONG, "%s: the path is too long", dir);
  for (char *s = p + 1;; s++) {
    if (*s == '/' || !*s) {
      char c = *s;
      *s = '\0';
      if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return shk__error_set(err, -errno, "%s: cannot create the directory: %s", p,
                              strerror(errno));
      *s = c;
      if (!c)
        break;
    }
  }
  return 0;
}

int shk__eg_ca_open(const char *dir, shk__eg_ca **out, shk_error *err)
{
  *out = NULL;
  int r = make_dir(dir, err);
  if (r < 0)
    return r;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return shk__error_set(err, -errno, "%s: %s", dir, strerror(errno));
  struct stat st;
  /* Why: the directory's owner could replace ca.pem under us. */
  if (fstat(dfd, &st) < 0 || st.st_uid != shk__self_uid() || (st.st_mode & 022)) {
    close(dfd);
    return shk__error_set(err, -EPERM,
                          "%s: the inspection CA's directory must belong to this user and be "
                          "writable by nobody else",
                          dir);
  }
  EVP_PKEY *key = NULL;
  X509 *cert = NULL;
  for (int attempt = 0; attempt < 2 && !key; attempt++) {
    r = read_ca(dfd, dir, &key, &cert, err);
    if (r < 0)
      break;
    if (r == 0)
      break;
    key = new_key();
    cert = key ? make_ca_cert(key) : NULL;
    if (!cert) {
      r = shk__error_set(err, -ENOMEM, "cannot make the inspection CA's key and certificate");
      break;
    }
    r = write_ca(dfd, key, cert, err, dir);
    if (r != 0) {
      /* Another manager made it first (1): read that one. */
      EVP_PKEY_free(key);
      X509_free(cert);
      key = NULL;
      cert = NULL;
      if (r < 0)
        break;
    }
  }
  close(dfd);
  if (!key) {
    if (r >= 0)
      r = shk__error_set(err, -EIO, "%s: cannot read or create the inspection CA", dir);
    return r;
  }
  shk__eg_ca *ca = calloc(1, sizeof *ca);
  BIO *bio = BIO_new(BIO_s_mem());
  EVP_PKEY *leaf_key = new_key();
  char *pem = NULL;
  if (ca && bio && leaf_key && PEM_write_bio_X509(bio, cert)) {
    char *data;
    long n = BIO_get_mem_data(bio, &data);
    pem = n > 0 ? strndup(data, (size_t)n) : NULL;
  }
  BIO_free(bio);
  if (!pem) {
    free(ca);
    EVP_PKEY_free(leaf_key);
    EVP_PKEY_free(key);
    X509_free(cert);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  ca->key = key;
  ca->cert = cert;
  ca->leaf_key = leaf_key;
  ca->cert_pem = pem;
  if (!(ca->dir = strdup(dir))) {
    shk__eg_ca_free(ca);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  *out = ca;
  return 0;
}

const char *shk__eg_ca_pem(const shk__eg_ca *ca)
{
  return ca->cert_pem;
}

X509 *shk__eg_ca_cert(const shk__eg_ca *ca)
{
  return ca->cert;
}

EVP_PKEY *shk__eg_ca_leaf_key(const shk__eg_ca *ca)
{
  return ca->leaf_key;
}

unsigned long shk__eg_ca_minted(const shk__eg_ca *ca)
{
  return ca->minted;
}

static X509 *mint(shk__eg_ca *ca, const shk_host *host)
{
  /* The CN is informational (and at most 64 bytes); clients match the
   * subjectAltName, which names exactly the granted host. */
  char cn[65];
  size_t cl = strnlen(host->text, sizeof cn - 1);
  memcpy(cn, host->text, cl);
  cn[cl] = '\0';
  X509 *x = new_cert(ca->leaf_key, cn, LEAF_SECONDS, ca->cert);
  char san[SHK_HOST_MAX + 8];
  snprintf(san, sizeof san, "%s:%s", host->kind == SHK_HOST_NAME ? "DNS" : "IP", host->text);
  if (!x || add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
      add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
      add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
      add_ext(x, ca->cert, NID_subject_alt_name, san) < 0 ||
      add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
      !X509_sign(x, ca->key, EVP_sha256())) {
    X509_free(x);
    return NULL;
  }
  ca->minted++;
  return x;
}

X509 *shk__eg_ca_leaf(shk__eg_ca *ca, const shk_host *host)
{
  time_t now = time(NULL);
  struct leaf *slot = NULL;
  for (size_t i = 0; i < ca->n_leaves; i++)
    if (!strcmp(ca->leaves[i].host, host->text)) {
      slot = &ca->leaves[i];
      break;
    }
  if (slot && now - slot->minted < LEAF_REUSE_SECONDS) {
    slot->used = ++ca->clock;
    return slot->cert;
  }
  X509 *x = mint(ca, host);
  if (!x)
    return NULL;
  if (!slot && ca->n_leaves < SHK__EG_LEAF_CACHE) {
    if (ca->n_leaves == ca->cap) {
      size_t cap = ca->cap ? ca->cap * 2 : 16;
      struct leaf *l = realloc(ca->leaves, cap * sizeof *l);
      if (!l) {
        X509_free(x);
        return NULL;
      }
      ca->leaves = l;
      ca->cap = cap;
    }
    slot = &ca->leaves[ca->n_leaves++];
    slot->cert = NULL;
  } else if (!slot) {
    /* Full: the least recently used leaf goes. A connection that uses it
     * holds a reference of its own (SSL_use_certificate). */
    slot = &ca->leaves[0];
    for (size_t i = 1; i < ca->n_leaves; i++)
      if (ca->leaves[i].used < slot->used)
        slot = &ca->leaves[i];
  }
  X509_free(slot->cert);
  snprintf(slot->host, sizeof slot->host, "%s", host->text);
  slot->cert = x;
  slot->minted = now;
  slot->used = ++ca->clock;
  return x;
}

size_t shk__eg_ca_cached(const shk__eg_ca *ca)
{
  return ca->n_leaves;
}

void shk__eg_ca_free(shk__eg_ca *ca)
{
  if (!ca)
    return;
  for (size_t i = 0; i < ca->n_leaves; i++)
    X509_free(ca->leaves[i].cert);
  free(ca->leaves);
  EVP_PKEY_free(ca->key);
  EVP_PKEY_free(ca->leaf_key);
  X509_free(ca->cert);
  free(ca->cert_pem);
  free(ca->dir);
  free(ca);
}

/* Java's attribute that makes a certificate bag of a PKCS#12 store a
 * trusted entry (Java 9 and later read certificate-only stores only with
 * it): its value is the extended key usage the certificate is trusted
 * for, anyExtendedKeyUsage for every purpose, as keytool writes it. */
#define JDK_TRUSTED_KEY_USAGE "2.16.840.1.113894.746875.1.1"

int shk__eg_java_store_write(const char *bundle, const char *out, shk_error *err)
{
  int r = -EIO;
  STACK_OF(PKCS12_SAFEBAG) *bags = sk_PKCS12_SAFEBAG_new_null();
  STACK_OF(PKCS7) *safes = sk_PKCS7_new_null();
  PKCS12 *p12 = NULL;
  BIO *in = BIO_new_file(bundle, "r"), *o = NULL;
  if (!bags || !safes) {
    r = shk__error_set(err, -ENOMEM, "out of memory");
    goto done;
  }
  if (!in) {
    r = shk__error_set(err, -EIO, "cannot read %s", bundle);
    goto done;
  }
  X509 *x;
  int n = 0;
  while ((x = PEM_read_bio_X509(in, NULL, NULL, NULL))) {
    PKCS12_SAFEBAG *bag = PKCS12_SAFEBAG_create_cert(x);
    /* Java names each entry by its friendly name; a bag without one
     * gets a generated alias, and a name of our own keeps them apart. */
    char alias[32];
    snprintf(alias, sizeof alias, "shinken-%d", n);
    bool ok = bag && PKCS12_add_friendlyname_asc(bag, alias, -1) &&
              PKCS12_add1_attr_by_txt(bag, JDK_TRUSTED_KEY_USAGE, V_ASN1_OBJECT,
                                      (const unsigned char *)OBJ_nid2obj(NID_anyExtendedKeyUsage),
                                      -1) &&
              sk_PKCS12_SAFEBAG_push(bags, bag) > 0;
    X509_free(x);
    if (!ok) {
      PKCS12_SAFEBAG_free(bag);
      r = shk__error_set(err, -ENOMEM, "cannot build the Java trust store");
      goto done;
    }
    n++;
  }
  ERR_clear_error(); /* the end of the file reads as a PEM error */
  if (n == 0) {
    r = shk__error_set(err, -EINVAL, "%s holds no certificate", bundle);
    goto done;
  }
  /* The certificates go unencrypted (they are public); the MAC, which
   * Java checks when it is given a password, is keyed with the
   * well-known one of Java's own store. */
  PKCS7 *p7 = PKCS12_pack_p7data(bags);
  if (!p7 || sk_PKCS7_push(safes, p7) <= 0) {
    PKCS7_free(p7);
    r = shk__error_set(err, -ENOMEM, "cannot build the Java trust store");
    goto done;
  }
  p12 = PKCS12_add_safes(safes, 0);
  if (!p12 || !PKCS12_set_mac(p12, SHK_EGRESS_JAVA_STORE_PASSWORD, -1, NULL, 0,
                              PKCS12_DEFAULT_ITER, EVP_sha256())) {
    r = shk__error_set(err, -ENOMEM, "cannot build the Java trust store");
    goto done;
  }
  int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    r = shk__error_set(err, -errno, "cannot write %s: %s", out, strerror(errno));
    goto done;
  }
  o = BIO_new_fd(fd, BIO_CLOSE);
  if (!o) {
    close(fd);
    unlink(out);
    r = shk__error_set(err, -ENOMEM, "out of memory");
    goto done;
  }
  if (i2d_PKCS12_bio(o, p12) != 1 || BIO_flush(o) != 1) {
    unlink(out);
    r = shk__error_set(err, -EIO, "cannot write %s", out);
    goto done;
  }
  r = 0;
done:
  BIO_free(o);
  BIO_free(in);
  PKCS12_free(p12);
  sk_PKCS7_pop_free(safes, PKCS7_free);
  sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
  return r;
}

/* ------------------------------------------------------------------------
 * The trust files a sandbox is given
 */

/* Copies FROM (opened beneath DFD) to TO, a new 0644 file. */
static int copy_file(int dfd, const char *from, const char *to)
{
  int in = openat(dfd, from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0)
    return -errno;
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) {
    int e = -errno;
    close(in);
    return e;
  }
  char buf[65536];
  ssize_t n;
  int r = 0;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) {
      r = -EIO;
      break;
    }
  if (n < 0)
    r = -errno;
  close(in);
  if (close(out) < 0 && !r)
    r = -EIO;
  if (r)
    unlink(to);
  return r;
}

/* Writes PATH (new): the system's bundle, then the CA's certificate. */
static int write_bundle(const shk__eg_ca *ca, const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return -errno;
  bool ok = true;
  int sys = open(SHK_EGRESS_SYSTEM_BUNDLE, O_RDONLY | O_CLOEXEC);
  char buf[65536];
  ssize_t n;
  while (sys >= 0 && ok && (n = read(sys, buf, sizeof buf)) > 0)
    ok = write(fd, buf, (size_t)n) == n;
  if (sys >= 0)
    close(sys);
  size_t pl = strlen(ca->cert_pem);
  ok = ok && write(fd, "\n", 1) == 1 && write(fd, ca->cert_pem, pl) == (ssize_t)pl;
  if (close(fd) < 0 || !ok) {
    unlink(path);
    return -EIO;
  }
  return 0;
}

/* The name the trust files built from this CA and the system's bundle as
 * it is now are kept under: a new bundle (a package update) or a new CA
 * gives a new name, so a stale file is never handed out. */
static void trust_stamp(const shk__eg_ca *ca, char *out, size_t len)
{
  struct stat st;
  if (stat(SHK_EGRESS_SYSTEM_BUNDLE, &st) < 0)
    memset(&st, 0, sizeof st);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdl = 0;
  if (!X509_digest(ca->cert, EVP_sha256(), md, &mdl) || mdl < 8)
    memset(md, 0, 8);
  snprintf(out, len, "trust-%02x%02x%02x%02x%02x%02x%02x%02x-%lx-%lx-%llx-%llx.%09ld", md[0], md[1], md[2],
           md[3], md[4], md[5], md[6], md[7], (unsigned long)st.st_dev, (unsigned long)st.st_ino,
           (unsigned long long)st.st_size, (unsigned long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* Builds the trust files of STAMP in the CA's directory DFD: each written
 * under a name of this process's, then renamed, so that another manager
 * sharing the directory sees a whole file or none. */
static int build_trust(const shk__eg_ca *ca, int dfd, const char *stamp, shk_error *err)
{
  char tmp_crt[PATH_MAX], tmp_p12[PATH_MAX], crt[PATH_MAX], p12[PATH_MAX];
  snprintf(tmp_crt, sizeof tmp_crt, "%s/.%s.%ld.crt", ca->dir, stamp, (long)getpid());
  snprintf(tmp_p12, sizeof tmp_p12, "%s/.%s.%ld.p12", ca->dir, stamp, (long)getpid());
  snprintf(crt, sizeof crt, "%s/%s.crt", ca->dir, stamp);
  snprintf(p12, sizeof p12, "%s/%s.p12", ca->dir, stamp);
  unlink(tmp_crt);
  unlink(tmp_p12);
  int r = write_bundle(ca, tmp_crt);
  if (r < 0)
    return shk__error_set(err, r, "cannot write %s: %s", tmp_crt, strerror(-r));
  r = shk__eg_java_store_write(tmp_crt, tmp_p12, err);
  /* The store first: a bundle found without its store is built again. */
  if (r == 0 && (rename(tmp_p12, p12) < 0 || rename(tmp_crt, crt) < 0))
    r = shk__error_set(err, -errno, "cannot keep the trust files in %s: %s", ca->dir, strerror(errno));
  unlink(tmp_crt);
  unlink(tmp_p12);
  if (r < 0)
    return r;
  /* The files of an older bundle or CA are of no more use. */
  int fd = dup(dfd);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d && fd >= 0)
    close(fd);
  size_t sl = strlen(stamp);
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, "trust-", 6) && strncmp(e->d_name, stamp, sl))
      unlinkat(dfd, e->d_name, 0);
  if (d)
    closedir(d);
  return 0;
}

int shk__eg_ca_trust_files(const shk__eg_ca *ca, const char *dir, shk_error *err)
{
  char stamp[160], name[176], to[PATH_MAX + 32];
  trust_stamp(ca, stamp, sizeof stamp);
  int dfd = open(ca->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return shk__error_set(err, -errno, "%s: %s", ca->dir, strerror(errno));
  snprintf(name, sizeof name, "%s.crt", stamp);
  struct stat st;
  int r = 0;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    r = build_trust(ca, dfd, stamp, err);
  for (int i = 0; r == 0 && i < 2; i++) {
    snprintf(name, sizeof name, "%s.%s", stamp, i ? "p12" : "crt");
    snprintf(to, sizeof to, "%s/%s", dir, i ? SHK_EGRESS_JAVA_STORE : SHK_EGRESS_CA_BUNDLE);
    if ((r = copy_file(dfd, name, to)) < 0)
      shk__error_set(err, r, "cannot write %s: %s", to, strerror(-r));
  }
  close(dfd);
  return r;
}

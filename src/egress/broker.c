/* SPDX-License-Identifier: Apache-2.0 */
/* The secret broker: the encrypted store, sentinels and the header
 * rewriter (see shinken/broker.h; the file format is in docs/broker.md).
 *
 * Where the secrets are: the store's plaintext (every record, values
 * included) is one region of locked, undumpable memory, and each secret's
 * fields point into it. A change builds a new region and wipes the old
 * one. Nothing else holds a value, except the header list the rewriter
 * hands the proxy for one request. */
#include "shinken/broker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/common.h"

static const char magic[8] = { 'S', 'H', 'K', 'S', 'E', 'C', '1', '\n' };
#define NONCE_LEN 12
#define TAG_LEN 16
#define STORE_FILE "secrets"
#define KEY_FILE "secrets.key"
#define MAX_SECRETS 1024
#define MAX_STORE (MAX_SECRETS * (SHK_BROKER_VALUE_MAX + 1024))

struct shk_broker_store {
  char *dir;
  bool can_save;
  unsigned char *plain; /* locked: the records, values included */
  size_t plain_len, plain_cap;
  shk_broker_secret *secrets;
  size_t n;
};

/* ---- locked memory ---- */

static size_t page_round(size_t len)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (len + pg - 1) / pg * pg;
}

void *shk_broker_secure_alloc(size_t len)
{
  size_t n = page_round(len ? len : 1);
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  /* Why: a secret must never reach swap nor a core dump of the manager.
   * Failing to lock or to exclude the pages is a refusal, not a warning:
   * a secret in pageable memory is a secret that may be written out.
   * The system call itself, not the C library's mlock: a sanitizer's
   * interceptor turns mlock into a no-op that reports success. */
  if (madvise(p, n, MADV_DONTDUMP) || syscall(SYS_mlock, p, n)) {
    int e = errno;
    munmap(p, n);
    errno = e;
    return NULL;
  }
  return p;
}

void shk_broker_secure_free(void *p, size_t len)
{
  if (!p)
    return;
  size_t n = page_round(len ? len : 1);
  OPENSSL_cleanse(p, n);
  syscall(SYS_munlock, p, n);
  munmap(p, n);
}

/* ---- validation ---- */

static bool valid_name(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > SHK_BROKER_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-' && c != ':')))
      return false;
  }
  return true;
}

static bool valid_env(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > 128 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

/* An HTTP field name (RFC 9110 token). */
static bool valid_field_name(const char *s, size_t n)
{
  if (n == 0 || n > 128)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!strchr("!#$%&'*+-.^_`|~", s[i]) && !((s[i] >= 'a' && s[i] <= 'z') ||
                                               (s[i] >= 'A' && s[i] <= 'Z') ||
                                               (s[i] >= '0' && s[i] <= '9')))
      return false;
  return true;
}

/* Visible ASCII and spaces: nothing that could end a header or start a
 * new one. */
static bool field_text(const char *s, size_t n, bool spaces)
{
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < (spaces ? 0x20 : 0x21) || (unsigned char)s[i] > 0x7e)
      return false;
  return true;
}

static bool alnum_byte(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The length of the prefix a sentinel keeps: up to the last '_' or '-'
 * in the first 12 bytes, and never more than half the value. */
static size_t sentinel_prefix(const char *v, size_t n)
{
  size_t p = 0;
  for (size_t i = 0; i < n && i < 12; i++)
    if (v[i] == '_' || v[i] == '-')
      p = i + 1;
  return p * 2 > n ? 0 : p;
}

/* Why 12: a sentinel replaces each letter and digit after the prefix by
 * one of its class; with at least 12 of them the chance that it equals the
 * secret is at most 10^-12, and the rewriter would still never send it to
 * a wrong host. */
#define MIN_RANDOM_BYTES 12

static const char *check_value(const char *v, size_t n)
{
  if (n == 0)
    return "the secret's value is empty";
  if (n > SHK_BROKER_VALUE_MAX)
    return "the secret's value is longer than 4096 bytes";
  if (!field_text(v, n, false))
    return "the secret's value holds a space, a control character or a non-ASCII byte";
  size_t alnum = 0;
  for (size_t i = sentinel_prefix(v, n); i < n; i++)
    alnum += alnum_byte(v[i]);
  if (alnum < MIN_RANDOM_BYTES)
    return "the secret's value has fewer than 12 letters and digits after its prefix, too few for a "
           "sentinel that cannot be mistaken for it";
  return NULL;
}

/* ---- records ----
 * One record: flags (1 byte: bit 0 allow_plain_http), then six fields,
 * each a 2-byte big-endian length and its bytes: name, host, header name,
 * header template, env ("" for none), value. Each of the first five is
 * followed in memory by a NUL the file does not hold: records are parsed
 * into a copy with room for them. */

static int put_field(unsigned char *buf, size_t *off, const char *s, size_t n)
{
  buf[(*off)++] = (unsigned char)(n >> 8);
  buf[(*off)++] = (unsigned char)n;
  memcpy(buf + *off, s, n);
  *off += n;
  return 0;
}

static size_t record_size(const shk_broker_secret *s)
{
  return 1 + 12 + strlen(s->name) + strlen(s->host) + strlen(s->header_name) +
         strlen(s->header_tmpl) + (s->env ? strlen(s->env) : 0) + s->value_len;
}

static void put_record(unsigned char *buf, size_t *off, const shk_broker_secret *s)
{
  buf[(*off)++] = s->allow_plain_http ? 1 : 0;
  put_field(buf, off, s->name, strlen(s->name));
  put_field(buf, off, s->host, strlen(s->host));
  put_field(buf, off, s->header_name, strlen(s->header_name));
  put_field(buf, off, s->header_tmpl, strlen(s->header_tmpl));
  put_field(buf, off, s->env ? s->env : "", s->env ? strlen(s->env) : 0);
  put_field(buf, off, s->value, s->value_len);
}

/* Parses the records of PLAIN (LEN bytes, in a region with room for one
 * NUL per field) in place into secrets. The region is rewritten: each
 * field moves so that a NUL can follow it. */
static int parse_records(shk_broker_store *st, const unsigned char *file, size_t len, shk_error *err)
{
  size_t cap = len + 6 * (len / 13 + 1) + 1;
  unsigned char *plain = shk_broker_secure_alloc(cap);
  if (!plain)
    return shk__error_set(err, -errno, "cannot lock memory for the secrets (%s): raise RLIMIT_MEMLOCK",
                          strerror(errno));
  shk_broker_secret *v = NULL;
  size_t n = 0, in = 0, outp = 0;
  int r = 0;
  while (in < len && r == 0) {
    if (n >= MAX_SECRETS) {
      r = shk__error_set(err, -EINVAL, "the secret store holds more than %d secrets", MAX_SECRETS);
      break;
    }
    shk_broker_secret s = { .allow_plain_http = file[in++] & 1 };
    const char **fields[6] = { &s.name, &s.host, &s.header_name, &s.header_tmpl, &s.env, &s.value };
    for (int f = 0; f < 6 && r == 0; f++) {
      if (len - in < 2) {
        r = shk__error_set(err, -EINVAL, "the secret store is truncated");
        break;
      }
      size_t fl = ((size_t)file[in] << 8) | file[in + 1];
      in += 2;
      if (len - in < fl || outp + fl + 1 > cap) {
        r = shk__error_set(err, -EINVAL, "the secret store is truncated");
        break;
      }
      memcpy(plain + outp, file + in, fl);
      plain[outp + fl] = 0;
      *fields[f] = (const char *)plain + outp;
      if (f == 5)
        s.value_len = fl;
      in += fl;
      outp += fl + 1;
    }
    if (r)
      break;
    if (!s.env[0])
      s.env = NULL;
    if (shk_host_pattern_parse(s.host, strlen(s.host), 0, &s.pattern, NULL) ||
        !valid_name(s.name)) {
      r = shk__error_set(err, -EINVAL, "the secret store holds a record that does not parse");
      break;
    }
    shk_broker_secret *nv = shk__reallocarray(v, n + 1, sizeof *v);
    if (!nv) {
      r = shk__error_nomem(err);
      break;
    }
    v = nv;
    v[n++] = s;
  }
  if (r) {
    free(v);
    shk_broker_secure_free(plain, cap);
    return r;
  }
  shk_broker_secure_free(st->plain, st->plain_cap);
  free(st->secrets);
  st->plain = plain;
  st->plain_len = outp;
  st->plain_cap = cap;
  st->secrets = v;
  st->n = n;
  return 0;
}

/* ---- files ---- */

int shk_broker_default_dir(char *buf, size_t len, shk_error *err)
{
  int n;
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  if (shk__self_uid() == 0 && !(state && state[0] == '/'))
    n = snprintf(buf, len, "/var/lib/shinken/broker");
  else if (state && state[0] == '/')
    n = snprintf(buf, len, "%s/shinken/broker", state);
  else if (home && home[0] == '/')
    n = snprintf(buf, len, "%s/.local/state/shinken/broker", home);
  else
    return shk__error_set(err, -ENOENT, "neither XDG_STATE_HOME nor HOME is set: name the secret "
                                        "store's directory");
  if (n < 0 || (size_t)n >= len)
    return shk__error_set(err, -EINVAL, "the secret store's path is too long");
  return 0;
}

static int make_dirs(const char *dir, shk_error *err)
{
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
    return shk__error_set(err, -ENAMETOOLONG, "the secret store's path is too long");
  for (char *p = path + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(path, 0700) && errno != EEXIST)
      return shk__error_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0700) && errno != EEXIST)
    return shk__error_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
  return 0;
}

/* Opens NAME in DIR for reading and checks what the store relies on. Why:
 * a key or store another user can read (or replace) is not a secret store;
 * it is refused rather than used. */
static int open_private(const char *dir, const char *name, int *fd_out, shk_error *err)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? -ENOENT
                           : shk__error_set(err, -errno, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != shk__self_uid() ||
      (sb.st_mode & 0077)) {
    close(fd);
    return shk__error_set(err, -EPERM, "%s must be a regular file of yours with mode 0600", path);
  }
  *fd_out = fd;
  return 0;
}

static int read_all(int fd, unsigned char *buf, size_t cap, size_t *len)
{
  size_t n = 0;
  for (;;) {
    if (n == cap)
      return -EFBIG;
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    if (r == 0)
      break;
    n += (size_t)r;
  }
  *len = n;
  return 0;
}

static int load_key(const char *dir, bool make, unsigned char key[32], shk_error *err)
{
  int fd;
  int r = open_private(dir, KEY_FILE, &fd, err);
  if (r == -ENOENT && make) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, KEY_FILE);
    if (getrandom(key, 32, 0) != 32)
      return shk__error_set(err, -EIO, "cannot draw a random key: %s", strerror(errno));
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      return shk__error_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
    bool ok = write(fd, key, 32) == 32 && fsync(fd) == 0;
    close(fd);
    if (!ok) {
      unlink(path);
      return shk__error_set(err, -EIO, "cannot write %s", path);
    }
    return 0;
  }
  if (r)
    return r == -ENOENT ? shk__error_set(err, -ENOENT, "the secret store's key %s/%s is missing", dir,
                                         KEY_FILE)
                        : r;
  size_t n = 0;
  unsigned char buf[33];
  r = read_all(fd, buf, sizeof buf, &n);
  close(fd);
  if (r == 0 && n == 32)
    memcpy(key, buf, 32);
  OPENSSL_cleanse(buf, sizeof buf);
  if (r || n != 32)
    return shk__error_set(err, -EINVAL, "the secret store's key %s/%s is not 32 bytes", dir, KEY_FILE);
  return 0;
}

/* ChaCha20-Poly1305 of IN into OUT (ENC) or back; LEN bytes of payload. */
static int aead(bool enc, const unsigned char key[32], const unsigned char nonce[NONCE_LEN],
                const unsigned char *in, size_t len, unsigned char *out, unsigned char tag[TAG_LEN])
{
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int ok = c != NULL, l = 0;
  ok = ok && EVP_CipherInit_ex(c, EVP_chacha20_poly1305(), NULL, NULL, NULL, enc);
  ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_IVLEN, NONCE_LEN, NULL);
  ok = ok && EVP_CipherInit_ex(c, NULL, NULL, key, nonce, enc);
  /* The magic is authenticated too: a file of another format or version
   * does not decrypt as this one. */
  ok = ok && EVP_CipherUpdate(c, NULL, &l, (const unsigned char *)magic, sizeof magic);
  ok = ok && (len == 0 || EVP_CipherUpdate(c, out, &l, in, (int)len));
  if (!enc)
    ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, tag);
  ok = ok && EVP_CipherFinal_ex(c, out + len, &l);
  if (enc)
    ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, tag);
  EVP_CIPHER_CTX_free(c);
  return ok ? 0 : -EBADMSG;
}

int shk_broker_store_open(const char *dir, bool create, shk_broker_store **out, shk_error *err)
{
  *out = NULL;
  struct stat sb;
  bool exists = stat(dir, &sb) == 0;
  if (!exists && !create) {
    shk_broker_store *st = shk__calloc(1, sizeof *st);
    if (!st || !(st->dir = shk__strdup(dir))) {
      free(st);
      return shk__error_nomem(err);
    }
    *out = st;
    return 0;
  }
  int r = exists ? 0 : make_dirs(dir, err);
  if (r)
    return r;
  shk_broker_store *st = shk__calloc(1, sizeof *st);
  if (!st || !(st->dir = shk__strdup(dir))) {
    free(st);
    return shk__error_nomem(err);
  }
  st->can_save = true;
  int fd;
  r = open_private(dir, STORE_FILE, &fd, err);
  if (r == -ENOENT) {
    *out = st;
    return 0;
  }
  if (r) {
    shk_broker_store_free(st);
    return r;
  }
  /* The file is read into locked memory too: once decrypted it holds the
   * values, and decryption is in place. */
  size_t cap = MAX_STORE + sizeof magic + NONCE_LEN + TAG_LEN + 1, n = 0;
  if (fstat(fd, &sb) == 0 && (size_t)sb.st_size < cap)
    cap = (size_t)sb.st_size + 1;
  unsigned char *file = shk_broker_secure_alloc(cap);
  unsigned char key[32];
  if (!file) {
    r = shk__error_set(err, -errno, "cannot lock memory for the secrets (%s): raise RLIMIT_MEMLOCK",
                       strerror(errno));
  } else if ((r = read_all(fd, file, cap, &n))) {
    r = shk__error_set(err, r, "cannot read %s/%s: %s", dir, STORE_FILE, strerror(-r));
  } else if (n < sizeof magic + NONCE_LEN + TAG_LEN || memcmp(file, magic, sizeof magic)) {
    r = shk__error_set(err, -EINVAL, "%s/%s is not a secret store", dir, STORE_FILE);
  } else if ((r = load_key(dir, false, key, err)) == 0) {
    size_t body = n - sizeof magic - NONCE_LEN - TAG_LEN;
    unsigned char *ct = file + sizeof magic + NONCE_LEN;
    if (aead(false, key, file + sizeof magic, ct, body, ct, ct + body))
      r = shk__error_set(err, -EBADMSG, "%s/%s does not decrypt with its key: it was changed or the "
                                        "key is not its own", dir, STORE_FILE);
    else
      r = parse_records(st, ct, body, err);
  }
  OPENSSL_cleanse(key, sizeof key);
  close(fd);
  shk_broker_secure_free(file, cap);
  if (r) {
    shk_broker_store_free(st);
    return r;
  }
  *out = st;
  return 0;
}

void shk_broker_store_free(shk_broker_store *st)
{
  if (!st)
    return;
  shk_broker_secure_free(st->plain, st->plain_cap);
  free(st->secrets);
  free(st->dir);
  free(st);
}

size_t shk_broker_store_count(const shk_broker_store *st)
{
  return st ? st->n : 0;
}

const shk_broker_secret *shk_broker_store_get(const shk_broker_store *st, size_t i)
{
  return st && i < st->n ? &st->secrets[i] : NULL;
}

const shk_broker_secret *shk_broker_store_find(const shk_broker_store *st, const char *name)
{
  for (size_t i = 0; st && name && i < st->n; i++)
    if (!strcmp(st->secrets[i].name, name))
      return &st->secrets[i];
  return NULL;
}

/* Serializes every secret but SKIP (may be NULL) and EXTRA (may be NULL)
 * into a new locked buffer, then parses it back as the store's state. */
static int rebuild(shk_broker_store *st, const char *skip, const shk_broker_secret *extra,
                   shk_error *err)
{
  size_t len = extra ? record_size(extra) : 0;
  for (size_t i = 0; i < st->n; i++)
    len += record_size(&st->secrets[i]);
  unsigned char *buf = shk_broker_secure_alloc(len);
  if (!buf)
    return shk__error_set(err, -errno, "cannot lock memory for the secrets (%s): raise RLIMIT_MEMLOCK",
                          strerror(errno));
  size_t off = 0;
  for (size_t i = 0; i < st->n; i++)
    if (!skip || strcmp(st->secrets[i].name, skip))
      put_record(buf, &off, &st->secrets[i]);
  if (extra)
    put_record(buf, &off, extra);
  int r = parse_records(st, buf, off, err);
  shk_broker_secure_free(buf, len);
  return r;
}

int shk_broker_store_add(shk_broker_store *st, const shk_broker_spec *spec, const char *value,
                         size_t value_len, bool replace, shk_error *err)
{
  if (!spec->name || !valid_name(spec->name))
    return shk__error_set(err, -EINVAL, "a secret's name is 1 to 64 letters, digits, '_', '.', ':' or "
                                        "'-', beginning with a letter or digit");
  if (shk_broker_store_find(st, spec->name) && !replace)
    return shk__error_set(err, -EEXIST, "there is already a secret named %s (rm it first)", spec->name);
  shk_broker_secret s = { .name = spec->name, .env = spec->env && spec->env[0] ? spec->env : NULL,
                          .allow_plain_http = spec->allow_plain_http, .value = value,
                          .value_len = value_len };
  shk_error perr;
  if (!spec->host || shk_host_pattern_parse(spec->host, strlen(spec->host), 0, &s.pattern, &perr))
    return shk__error_set(err, -EINVAL, "--host: %s", spec->host ? perr.message : "is required");
  char host[SHK_HOST_PATTERN_TEXT_MAX];
  shk_host_pattern_format(&s.pattern, host);
  s.host = host;
  const char *h = spec->header ? spec->header : "Authorization: Bearer {}";
  const char *colon = strchr(h, ':');
  if (!colon || !valid_field_name(h, (size_t)(colon - h)))
    return shk__error_set(err, -EINVAL, "--header must be 'Name: value with {}', with a field name "
                                        "of letters, digits and -");
  char hname[129];
  snprintf(hname, sizeof hname, "%.*s", (int)(colon - h), h);
  const char *tmpl = colon + 1;
  while (*tmpl == ' ' || *tmpl == '\t')
    tmpl++;
  const char *place = strstr(tmpl, "{}");
  if (!place || strstr(place + 2, "{}") || !field_text(tmpl, strlen(tmpl), true) ||
      strlen(tmpl) > 256)
    return shk__error_set(err, -EINVAL, "--header's value must hold '{}' exactly once, where the "
                                        "secret goes, and only visible ASCII and spaces");
  s.header_name = hname;
  s.header_tmpl = tmpl;
  if (s.env && !valid_env(s.env))
    return shk__error_set(err, -EINVAL, "--env must name a variable: letters, digits and '_', not "
                                        "beginning with a digit");
  const char *bad = check_value(value, value_len);
  if (bad)
    return shk__error_set(err, -EINVAL, "%s", bad);
  /* The name may be the one being replaced: the rebuild copies spec's
   * strings before it drops the old record. */
  char name[SHK_BROKER_NAME_MAX + 1];
  snprintf(name, sizeof name, "%s", spec->name);
  s.name = name;
  return rebuild(st, shk_broker_store_find(st, name) ? name : NULL, &s, err);
}

int shk_broker_store_rm(shk_broker_store *st, const char *name, shk_error *err)
{
  if (!shk_broker_store_find(st, name))
    return shk__error_set(err, -ENOENT, "there is no secret named %s", name ? name : "");
  char copy[SHK_BROKER_NAME_MAX + 1];
  snprintf(copy, sizeof copy, "%s", name);
  return rebuild(st, copy, NULL, err);
}

int shk_broker_store_save(shk_broker_store *st, shk_error *err)
{
  if (!st->can_save)
    return shk__error_set(err, -ENOENT, "the secret store's directory %s does not exist", st->dir);
  unsigned char key[32];
  int r = load_key(st->dir, true, key, err);
  if (r)
    return r;
  size_t body = 0;
  for (size_t i = 0; i < st->n; i++)
    body += record_size(&st->secrets[i]);
  size_t len = sizeof magic + NONCE_LEN + body + TAG_LEN;
  unsigned char *buf = shk_broker_secure_alloc(len);
  if (!buf) {
    OPENSSL_cleanse(key, sizeof key);
    return shk__error_set(err, -errno, "cannot lock memory for the secrets (%s)", strerror(errno));
  }
  memcpy(buf, magic, sizeof magic);
  size_t off = sizeof magic + NONCE_LEN;
  for (size_t i = 0; i < st->n; i++)
    put_record(buf, &off, &st->secrets[i]);
  unsigned char *ct = buf + sizeof magic + NONCE_LEN;
  /* A fresh random nonce per save: with a 96-bit nonce the chance of a
   * repeat under one key is negligible for any number of saves a person
   * makes. */
  if (getrandom(buf + sizeof magic, NONCE_LEN, 0) != NONCE_LEN)
    r = shk__error_set(err, -EIO, "cannot draw a random nonce");
  else if (aead(true, key, buf + sizeof magic, ct, body, ct, ct + body))
    r = shk__error_set(err, -EIO, "cannot encrypt the secret store");
  OPENSSL_cleanse(key, sizeof key);
  char tmp[4096], path[4096];
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", st->dir, STORE_FILE);
  snprintf(path, sizeof path, "%s/%s", st->dir, STORE_FILE);
  int fd = -1;
  if (r == 0) {
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      r = shk__error_set(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
  }
  if (r == 0) {
    size_t done = 0;
    while (done < len && r == 0) {
      ssize_t w = write(fd, buf + done, len - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        r = shk__error_set(err, -EIO, "cannot write %s: %s", tmp, strerror(errno));
      else
        done += (size_t)w;
    }
    if (r == 0 && fsync(fd))
      r = shk__error_set(err, -EIO, "cannot write %s: %s", tmp, strerror(errno));
    close(fd);
    if (r == 0 && rename(tmp, path))
      r = shk__error_set(err, -errno, "cannot replace %s: %s", path, strerror(errno));
    if (r)
      unlink(tmp);
  }
  shk_broker_secure_free(buf, len);
  return r;
}

/* ---- sentinels ---- */

int shk_broker_sentinel(const shk_broker_secret *s, const uint8_t key[SHK_BROKER_KEY_LEN], char *out,
                        size_t out_len)
{
  if (out_len < s->value_len + 1 || check_value(s->value, s->value_len))
    return -EINVAL;
  size_t prefix = sentinel_prefix(s->value, s->value_len);
  memcpy(out, s->value, prefix);
  /* Why HMAC over the name and a counter, not over the value: the sentinel
   * must tell nothing about the secret beyond its shape, and must differ
   * between sessions (the key is per session) so one session's sentinel is
   * worthless in another. */
  unsigned char block[32];
  size_t used = sizeof block;
  uint32_t counter = 0;
  for (size_t i = prefix; i < s->value_len; i++) {
    char c = s->value[i];
    if (!alnum_byte(c)) {
      out[i] = c;
      continue;
    }
    if (used == sizeof block) {
      unsigned char msg[SHK_BROKER_NAME_MAX + 4];
      size_t nl = strlen(s->name);
      memcpy(msg, s->name, nl);
      for (int k = 0; k < 4; k++)
        msg[nl + (size_t)k] = (unsigned char)(counter >> (8 * k));
      counter++;
      unsigned int bl = 0;
      if (!HMAC(EVP_sha256(), key, SHK_BROKER_KEY_LEN, msg, nl + 4, block, &bl))
        return -EIO;
      used = 0;
    }
    unsigned b = block[used++];
    out[i] = c >= '0' && c <= '9' ? (char)('0' + b % 10)
           : c >= 'a' && c <= 'z' ? (char)('a' + b % 26)
                                  : (char)('A' + b % 26);
  }
  out[s->value_len] = 0;
  return 0;
}

/* ---- the rewriter ---- */

static bool name_is(const shk_egress_header *h, const char *name)
{
  size_t n = strlen(name);
  return h->name_len == n && !strncasecmp(h->name, name, n);
}

static const char *find_bytes(const char *hay, size_t hn, const char *needle, size_t nn)
{
  if (nn == 0 || hn < nn)
    return NULL;
  return memmem(hay, hn, needle, nn);
}

static int hex_digit(char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  c = (char)(c | 0x20);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Whether the request target holds NEEDLE, as sent or once its %XX
 * escapes are decoded: an escaped letter is the same letter to the
 * server, so escaping must not carry a sentinel past the check. */
static bool target_holds(const char *t, size_t tn, const char *needle, size_t nn)
{
  if (find_bytes(t, tn, needle, nn))
    return true;
  if (!memchr(t, '%', tn))
    return false;
  char stack[512], *d = tn <= sizeof stack ? stack : malloc(tn);
  if (!d)
    return true; /* fail closed: an unchecked target is refused */
  size_t n = 0;
  for (size_t i = 0; i < tn; i++) {
    int hi, lo;
    if (t[i] == '%' && i + 2 < tn && (hi = hex_digit(t[i + 1])) >= 0 &&
        (lo = hex_digit(t[i + 2])) >= 0) {
      d[n++] = (char)(hi << 4 | lo);
      i += 2;
    } else {
      d[n++] = t[i];
    }
  }
  bool hit = find_bytes(d, n, needle, nn) != NULL;
  if (d != stack)
    free(d);
  return hit;
}

/* Whether H leaves the request: the client's own Authorization always
 * (the credential on an injected request is the broker's alone), and the
 * header of each secret injected into it. */
static bool dropped(const shk_egress_header *h, const shk_broker_use *uses, size_t n_uses,
                    const bool *inject)
{
  if (name_is(h, "Authorization"))
    return true;
  for (size_t u = 0; u < n_uses; u++)
    if (inject[u] && name_is(h, uses[u].secret->header_name))
      return true;
  return false;
}

/* The header list's value with every sentinel of a use in INJECT replaced
 * by its secret, written to DST (NULL: only measured). */
static size_t replaced(const shk_egress_header *h, const shk_broker_use *uses, size_t n_uses,
                       const bool *inject, char *dst)
{
  size_t out = 0, i = 0;
  while (i < h->value_len) {
    bool done = false;
    for (size_t u = 0; u < n_uses && !done; u++) {
      const shk_broker_use *x = &uses[u];
      if (!inject[u] || !x->sentinel || h->value_len - i < x->sentinel_len ||
          memcmp(h->value + i, x->sentinel, x->sentinel_len))
        continue;
      if (dst)
        memcpy(dst + out, x->secret->value, x->secret->value_len);
      out += x->secret->value_len;
      i += x->sentinel_len;
      done = true;
    }
    if (!done) {
      if (dst)
        dst[out] = h->value[i];
      out++;
      i++;
    }
  }
  return out;
}

int shk_broker_rewrite(const shk_broker_use *uses, size_t n_uses, const shk_egress_http_request *req,
                       shk_egress_header **out, size_t *n_out, const char **reason,
                       const shk_broker_use **hit, bool *injected)
{
  *out = NULL;
  *n_out = 0;
  if (hit)
    *hit = NULL;
  shk_host host;
  bool host_ok = req->host && !shk_host_parse(req->host, strlen(req->host), &host, NULL, NULL);
  bool stack[16], *inject = n_uses <= 16 ? stack : calloc(n_uses, sizeof *inject);
  if (!inject)
    return -ENOMEM;
  size_t n_inject = 0;
  int r = 0;
  for (size_t u = 0; u < n_uses; u++) {
    const shk_broker_use *x = &uses[u];
    inject[u] = x->live && host_ok && shk_host_pattern_matches(&x->secret->pattern, &host, req->port);
    n_inject += inject[u];
    /* Why refused rather than passed: a sentinel on its way to a host its
     * secret is not bound to is a workload trying to learn which host
     * accepts it, or a token-shaped string headed where it should not; it
     * is never replaced (that would send the secret there) and never sent
     * on as is (that would tell the host the sentinel). */
    for (size_t i = 0; x->sentinel && i < req->n_headers && !r; i++) {
      const shk_egress_header *h = &req->headers[i];
      /* In a field name a sentinel is never replaced: refused on any host. */
      bool in_name = find_bytes(h->name, h->name_len, x->sentinel, x->sentinel_len) != NULL;
      if (in_name || (!inject[u] && find_bytes(h->value, h->value_len, x->sentinel, x->sentinel_len))) {
        r = -EACCES;
        *reason = "broker-sentinel-refused";
        if (hit)
          *hit = x;
      }
    }
    /* Why: the request line is as good a way out as a header (a query
     * string carries a token as well), and the target is never rewritten,
     * so a sentinel there headed for a host its secret is not bound to is
     * refused the same way. On the secret's own host it goes as sent. */
    if (!r && x->sentinel && !inject[u] && req->target &&
        target_holds(req->target, req->target_len, x->sentinel, x->sentinel_len)) {
      r = -EACCES;
      *reason = "broker-sentinel-refused";
      if (hit)
        *hit = x;
    }
    /* Why: a revoked credential on its own host closes the connection
     * rather than let the request go without it: the workload learns at
     * once that the authority is gone, and nothing it sends afterwards on
     * that connection is taken for brokered. */
    if (!r && x->revoked && host_ok && shk_host_pattern_matches(&x->secret->pattern, &host, req->port)) {
      r = -ECONNABORTED;
      *reason = "broker-revoked";
      if (hit)
        *hit = x;
    }
    /* Why: over plain HTTP the secret would cross the network in the
     * clear; only an operator may opt a secret in. */
    if (!r && inject[u] && !req->tls && !x->secret->allow_plain_http) {
      r = -EACCES;
      *reason = "broker-plain-http";
      if (hit)
        *hit = x;
    }
    if (r)
      break;
  }
  if (r || n_inject == 0) {
    if (inject != stack)
      free(inject);
    return r;
  }
  /* Measure, then build one block: the header array, then the bytes. */
  size_t count = 0, bytes = 0;
  for (size_t i = 0; i < req->n_headers; i++) {
    const shk_egress_header *h = &req->headers[i];
    if (dropped(h, uses, n_uses, inject))
      continue;
    count++;
    bytes += h->name_len + 1 + replaced(h, uses, n_uses, inject, NULL) + 1;
  }
  for (size_t u = 0; u < n_uses; u++) {
    if (!inject[u])
      continue;
    const shk_broker_secret *s = uses[u].secret;
    count++;
    bytes += strlen(s->header_name) + 1 + strlen(s->header_tmpl) - 2 + s->value_len + 1;
  }
  shk_egress_header *hs = malloc(count * sizeof *hs + bytes);
  if (!hs) {
    if (inject != stack)
      free(inject);
    return -ENOMEM;
  }
  char *p = (char *)(hs + count);
  size_t k = 0;
  for (size_t i = 0; i < req->n_headers; i++) {
    const shk_egress_header *h = &req->headers[i];
    if (dropped(h, uses, n_uses, inject))
      continue;
    hs[k].name = p;
    hs[k].name_len = h->name_len;
    memcpy(p, h->name, h->name_len);
    p += h->name_len;
    *p++ = 0;
    hs[k].value = p;
    hs[k].value_len = replaced(h, uses, n_uses, inject, p);
    p += hs[k].value_len;
    *p++ = 0;
    k++;
  }
  for (size_t u = 0; u < n_uses; u++) {
    if (!inject[u])
      continue;
    const shk_broker_secret *s = uses[u].secret;
    size_t nl = strlen(s->header_name);
    hs[k].name = p;
    hs[k].name_len = nl;
    memcpy(p, s->header_name, nl);
    p += nl;
    *p++ = 0;
    const char *place = strstr(s->header_tmpl, "{}");
    size_t before = (size_t)(place - s->header_tmpl), after = strlen(place + 2);
    hs[k].value = p;
    memcpy(p, s->header_tmpl, before);
    memcpy(p + before, s->value, s->value_len);
    memcpy(p + before + s->value_len, place + 2, after);
    hs[k].value_len = before + s->value_len + after;
    p += hs[k].value_len;
    *p++ = 0;
    k++;
  }
  if (injected)
    for (size_t u = 0; u < n_uses; u++)
      injected[u] = inject[u];
  if (inject != stack)
    free(inject);
  *out = hs;
  *n_out = count;
  return 0;
}

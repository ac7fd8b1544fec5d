/* SPDX-License-Identifier: Apache-2.0 */
/* Signed notes (C2SP signed-note) and the checkpoints they carry (C2SP
 * tlog-checkpoint), with Ed25519 keys in the note key formats: a verifier
 * key NAME+KEYID+BASE64(0x01||PUBLIC) and a signer key
 * PRIVATE+KEY+NAME+KEYID+BASE64(0x01||SEED). */
#include "audit/audit-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/common.h"

#define EM_DASH "\xe2\x80\x94"
#define NOTE_MAX 65536

/* ------------------------------------------------------------------------
 * Base64
 */
static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t shk__b64_encode(const unsigned char *p, size_t n, char *out)
{
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    out[o++] = b64[v >> 18 & 63];
    out[o++] = b64[v >> 12 & 63];
    out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? b64[v & 63] : '=';
  }
  out[o] = '\0';
  return o;
}

static int b64val(char c)
{
  const char *p = c ? strchr(b64, c) : NULL;
  return p ? (int)(p - b64) : -1;
}

long shk__b64_decode(const char *s, size_t n, unsigned char *out, size_t cap)
{
  if (n % 4)
    return -EINVAL;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int pad = (s[i + 3] == '=') + (s[i + 2] == '=');
    if ((pad && i + 4 != n) || (s[i + 2] == '=' && s[i + 3] != '='))
      return -EINVAL;
    int v[4];
    for (int k = 0; k < 4 - pad; k++)
      if ((v[k] = b64val(s[i + k])) < 0)
        return -EINVAL;
    for (int k = 4 - pad; k < 4; k++)
      v[k] = 0;
    unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
    /* The bits padding leaves over must be zero: one text per value. */
    if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
      return -EINVAL;
    if (o + 3 - (size_t)pad > cap)
      return -EINVAL;
    out[o++] = (unsigned char)(w >> 16);
    if (pad < 2)
      out[o++] = (unsigned char)(w >> 8);
    if (pad < 1)
      out[o++] = (unsigned char)w;
  }
  return (long)o;
}

/* ------------------------------------------------------------------------
 * Keys
 */
uint32_t shk__note_key_id(const char *name, const unsigned char pub[32])
{
  size_t n = strlen(name);
  unsigned char buf[256 + 2 + 32];
  if (n > 255)
    return 0;
  memcpy(buf, name, n);
  buf[n] = '\n';
  buf[n + 1] = 0x01;
  memcpy(buf + n + 2, pub, 32);
  shk__hash h;
  shk__sha256(buf, n + 2 + 32, h);
  return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
}

bool shk__note_name_ok(const char *name, size_t n)
{
  if (n == 0 || n > 255 || !shk__audit_utf8_valid(name, n))
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c <= 0x20 || c == '+' || c == 0x7f)
      return false;
    /* Unicode spaces: U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
     * U+202F, U+205F, U+3000. */
    if (c == 0xc2 && i + 1 < n && (unsigned char)name[i + 1] == 0xa0)
      return false;
    if (c == 0xe1 && i + 2 < n && !memcmp(name + i, "\xe1\x9a\x80", 3))
      return false;
    if (c == 0xe2 && i + 2 < n && (unsigned char)name[i + 1] == 0x80) {
      unsigned char d = (unsigned char)name[i + 2];
      if (d <= 0x8a || d == 0xa8 || d == 0xa9 || d == 0xaf)
        return false;
    }
    if (c == 0xe2 && i + 2 < n && !memcmp(name + i, "\xe2\x81\x9f", 3))
      return false;
    if (c == 0xe3 && i + 2 < n && !memcmp(name + i, "\xe3\x80\x80", 3))
      return false;
  }
  return true;
}

/* Derives the public key of an Ed25519 seed. */
static int pub_of(const unsigned char seed[32], unsigned char pub[32])
{
  EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
  size_t n = 32;
  int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &n) == 1 && n == 32;
  EVP_PKEY_free(k);
  return ok ? 0 : -EIO;
}

int shk__note_key_parse(const char *text, size_t n, shk__note_key *k, shk_error *err)
{
  memset(k, 0, sizeof *k);
  while (n && (text[n - 1] == '\n'))
    n--;
  bool priv = n >= 12 && !memcmp(text, "PRIVATE+KEY+", 12);
  const char *p = text + (priv ? 12 : 0), *end = text + n;
  const char *plus1 = memchr(p, '+', (size_t)(end - p));
  const char *plus2 = plus1 ? memchr(plus1 + 1, '+', (size_t)(end - plus1 - 1)) : NULL;
  if (!plus2 || plus2 - plus1 != 9)
    return shk__error_set(err, -EINVAL, "a key is NAME+KEYID+BASE64 (KEYID 8 hex digits)");
  size_t nl = (size_t)(plus1 - p);
  if (!shk__note_name_ok(p, nl))
    return shk__error_set(err, -EINVAL, "the key's name is empty or has a space or '+'");
  memcpy(k->name, p, nl);
  k->name[nl] = '\0';
  uint32_t id = 0;
  for (int i = 1; i <= 8; i++) {
    char c = plus1[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0)
      return shk__error_set(err, -EINVAL, "the key ID is not 8 lower-case hex digits");
    id = id << 4 | (uint32_t)v;
  }
  unsigned char raw[33];
  long r = shk__b64_decode(plus2 + 1, (size_t)(end - plus2 - 1), raw, sizeof raw);
  if (r != 33 || raw[0] != 0x01)
    return shk__error_set(err, -EINVAL, "the key is not an Ed25519 key (0x01 and 32 bytes)");
  if (priv) {
    memcpy(k->seed, raw + 1, 32);
    k->has_seed = true;
    if (pub_of(k->seed, k->pub) < 0)
      return shk__error_set(err, -EIO, "OpenSSL cannot load the Ed25519 key");
  } else {
    memcpy(k->pub, raw + 1, 32);
  }
  k->id = shk__note_key_id(k->name, k->pub);
  if (k->id != id)
    return shk__error_set(err, -EINVAL, "the key ID %08x does not match the key (%08x)", id,
                          k->id);
  return 0;
}

static int format_key(const shk__note_key *k, bool priv, char **out)
{
  unsigned char raw[33];
  raw[0] = 0x01;
  memcpy(raw + 1, priv ? k->seed : k->pub, 32);
  char b[64];
  shk__b64_encode(raw, 33, b);
  if (asprintf(out, "%s%s+%08x+%s", priv ? "PRIVATE+KEY+" : "", k->name, k->id, b) < 0) {
    *out = NULL;
    return -ENOMEM;
  }
  return 0;
}

int shk__note_key_verifier(const shk__note_key *k, char **out)
{
  return format_key(k, false, out);
}

int shk__note_key_generate(const char *name, shk__note_key *k, shk_error *err)
{
  memset(k, 0, sizeof *k);
  if (!shk__note_name_ok(name, strlen(name)))
    return shk__error_set(err, -EINVAL, "the log's origin '%s' is not a valid key name", name);
  snprintf(k->name, sizeof k->name, "%s", name);
  if (RAND_priv_bytes(k->seed, 32) != 1 || pub_of(k->seed, k->pub) < 0)
    return shk__error_set(err, -EIO, "OpenSSL cannot generate an Ed25519 key");
  k->has_seed = true;
  k->id = shk__note_key_id(k->name, k->pub);
  return 0;
}

/* Reads the signing key. Safe because the file is opened without
 * following a symbolic link and refused unless it is a regular file that
 * only its owner can read, so a key others could have read (or swapped
 * underneath) never signs. */
int shk__note_key_load(const char *path, shk__note_key *k, shk_error *err)
{
  shk_autoclose int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return shk__error_set(err, -errno, "cannot open the signing key %s: %s", path,
                          strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return shk__error_set(err, -EINVAL, "the signing key %s is not a regular file", path);
  if (st.st_mode & 077)
    return shk__error_set(err, -EACCES,
                          "the signing key %s can be read by others (mode %o; it must be 0600)",
                          path, (unsigned)(st.st_mode & 0777));
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n < 0)
    return shk__error_set(err, -EIO, "cannot read the signing key %s: %s", path, strerror(errno));
  int r = shk__note_key_parse(buf, (size_t)n, k, err);
  explicit_bzero(buf, sizeof buf);
  if (r == 0 && !k->has_seed)
    r = shk__error_set(err, -EINVAL, "%s holds a verifier key, not a signing key", path);
  if (r < 0 && err)
    snprintf(err->file, sizeof err->file, "%s", path);
  return r;
}

/* Writes a new signing key. Safe because O_EXCL and O_NOFOLLOW create a new
 * file of mode 0600 (never one an attacker prepared), and the key is on disk
 * (fsync) before any checkpoint is signed with it. */
int shk__note_key_save(const char *path, const shk__note_key *k, shk_error *err)
{
  char *text = NULL;
  if (format_key(k, true, &text) < 0)
    return -ENOMEM;
  /* Written whole under a name of its own, then linked into place: a
   * reader (another run waiting for the user's key) never sees a key file
   * half written, and link() fails like O_EXCL when the key exists. */
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.new.%d", path, (int)getpid());
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  int r = 0;
  if (fd < 0) {
    r = shk__error_set(err, -errno, "cannot create the signing key %s: %s", path,
                       strerror(errno));
  } else {
    size_t n = strlen(text);
    text[n] = '\0';
    if (write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1 || fsync(fd) < 0)
      r = shk__error_set(err, -EIO, "cannot write the signing key %s: %s", path, strerror(errno));
    close(fd);
    if (r == 0 && link(tmp, path) < 0)
      r = shk__error_set(err, -errno, "cannot create the signing key %s: %s", path,
                         strerror(errno));
    unlink(tmp);
  }
  explicit_bzero(text, strlen(text));
  free(text);
  return r;
}

/* ------------------------------------------------------------------------
 * Notes
 */
int shk__note_sign(const shk__note_key *k, const char *text, size_t n, shk__abuf *out,
                   shk_error *err)
{
  if (!k->has_seed || n == 0 || text[n - 1] != '\n')
    return shk__error_set(err, -EINVAL, "a note's text must end in a newline");
  EVP_PKEY *pk = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, k->seed, 32);
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  unsigned char sig[4 + 64];
  size_t slen = 64;
  int ok = pk && c && EVP_DigestSignInit(c, NULL, NULL, NULL, pk) == 1 &&
           EVP_DigestSign(c, sig + 4, &slen, (const unsigned char *)text, n) == 1 && slen == 64;
  EVP_MD_CTX_free(c);
  EVP_PKEY_free(pk);
  if (!ok)
    return shk__error_set(err, -EIO, "OpenSSL cannot sign with Ed25519");
  sig[0] = (unsigned char)(k->id >> 24);
  sig[1] = (unsigned char)(k->id >> 16);
  sig[2] = (unsigned char)(k->id >> 8);
  sig[3] = (unsigned char)k->id;
  char b[96];
  shk__b64_encode(sig, sizeof sig, b);
  int r = shk__abuf_add(out, text, n);
  if (r == 0)
    r = shk__abuf_str(out, "\n" EM_DASH " ");
  if (r == 0)
    r = shk__abuf_str(out, k->name);
  if (r == 0)
    r = shk__abuf_str(out, " ");
  if (r == 0)
    r = shk__abuf_str(out, b);
  return r ? r : shk__abuf_str(out, "\n");
}

static bool ed25519_ok(const unsigned char pub[32], const char *msg, size_t n,
                       const unsigned char sig[64])
{
  EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  bool ok = pk && c && EVP_DigestVerifyInit(c, NULL, NULL, NULL, pk) == 1 &&
            EVP_DigestVerify(c, sig, 64, (const unsigned char *)msg, n) == 1;
  EVP_MD_CTX_free(c);
  EVP_PKEY_free(pk);
  return ok;
}

int shk__checkpoint_text(const char *origin, uint64_t size, const shk__hash root, shk__abuf *out)
{
  char b[48], num[24];
  shk__b64_encode(root, SHK__HASH, b);
  snprintf(num, sizeof num, "%llu", (unsigned long long)size);
  int r = shk__abuf_str(out, origin);
  if (r == 0)
    r = shk__abuf_str(out, "\n");
  if (r == 0)
    r = shk__abuf_str(out, num);
  if (r == 0)
    r = shk__abuf_str(out, "\n");
  if (r == 0)
    r = shk__abuf_str(out, b);
  return r ? r : shk__abuf_str(out, "\n");
}

/* One line of the note: s[*at..) up to the next newline (excluded). */
static bool line(const char *s, size_t n, size_t *at, const char **l, size_t *len)
{
  if (*at >= n)
    return false;
  const char *nl = memchr(s + *at, '\n', n - *at);
  if (!nl)
    return false;
  *l = s + *at;
  *len = (size_t)(nl - *l);
  *at = (size_t)(nl - s) + 1;
  return true;
}

int shk__note_open(const char *note, size_t n, const shk__note_key *k, size_t *text_len,
                   shk_error *err)
{
  if (n > NOTE_MAX)
    return shk__error_set(err, -EINVAL, "the note is larger than %d bytes", NOTE_MAX);
  if (!shk__audit_utf8_valid(note, n))
    return shk__error_set(err, -EINVAL, "the note is not UTF-8");
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)note[i] < 0x20 && note[i] != '\n')
      return shk__error_set(err, -EINVAL, "the note has a control character at byte %zu", i);
  if (n == 0 || note[n - 1] != '\n')
    return shk__error_set(err, -EINVAL, "the note does not end in a newline");
  /* The text ends at the last blank line. */
  size_t split = 0;
  for (size_t i = n - 1; i-- > 0;)
    if (note[i] == '\n' && note[i + 1] == '\n') {
      split = i + 1;
      break;
    }
  if (split == 0)
    return shk__error_set(err, -EINVAL, "the note has no text, or no blank line before its "
                                        "signatures");
  *text_len = split;

  /* The signatures: those by other keys are ignored; one by k must be
   * there and hold, and a failing one by k rejects the note. */
  size_t at = split + 1, len;
  const char *l;
  bool good = false;
  unsigned count = 0;
  if (at >= n)
    return shk__error_set(err, -EINVAL, "the note has no signature");
  while (at < n) {
    if (!line(note, n, &at, &l, &len) || len < 5 || memcmp(l, EM_DASH " ", 4))
      return shk__error_set(err, -EINVAL, "a signature line does not start with an em dash");
    if (++count > 100)
      return shk__error_set(err, -EINVAL, "the note has more than 100 signatures");
    const char *name = l + 4, *sp = memchr(name, ' ', len - 4);
    if (!sp || !shk__note_name_ok(name, (size_t)(sp - name)))
      return shk__error_set(err, -EINVAL, "a signature line's key name is malformed");
    unsigned char sig[4 + 4096];
    long sl = shk__b64_decode(sp + 1, len - (size_t)(sp + 1 - l), sig, sizeof sig);
    if (sl < 5)
      return shk__error_set(err, -EINVAL, "a signature is not base64 of a key ID and a signature");
    uint32_t id = (uint32_t)sig[0] << 24 | (uint32_t)sig[1] << 16 | (uint32_t)sig[2] << 8 | sig[3];
    size_t nl = (size_t)(sp - name);
    if (!k || id != k->id || nl != strlen(k->name) || memcmp(name, k->name, nl))
      continue;
    if (sl != 4 + 64 || !ed25519_ok(k->pub, note, split, sig + 4))
      return shk__error_set(err, -EACCES, "the signature by %s does not verify", k->name);
    good = true;
  }
  if (k && !good)
    return shk__error_set(err, -EACCES, "the note has no signature by the key %s+%08x", k->name,
                          k->id);
  return 0;
}

int shk__checkpoint_open(const char *note, size_t n, const shk__note_key *k,
                         shk__checkpoint *cp, shk_error *err)
{
  memset(cp, 0, sizeof *cp);
  size_t split;
  int r = shk__note_open(note, n, k, &split, err);
  if (r < 0)
    return r;
  cp->text_len = split;
  size_t at = 0, len;
  const char *l;
  if (!line(note, split, &at, &l, &len) || len == 0 || len >= sizeof cp->origin)
    return shk__error_set(err, -EINVAL, "the checkpoint's first line (origin) is empty or too long");
  memcpy(cp->origin, l, len);
  if (!line(note, split, &at, &l, &len) || len == 0 || len > 20 || (l[0] == '0' && len > 1))
    return shk__error_set(err, -EINVAL, "the checkpoint's second line is not a tree size");
  uint64_t size = 0;
  for (size_t i = 0; i < len; i++) {
    if (l[i] < '0' || l[i] > '9' || size > (UINT64_MAX - 9) / 10)
      return shk__error_set(err, -EINVAL, "the checkpoint's second line is not a tree size");
    size = size * 10 + (uint64_t)(l[i] - '0');
  }
  cp->size = size;
  if (!line(note, split, &at, &l, &len) ||
      shk__b64_decode(l, len, cp->root, sizeof cp->root) != SHK__HASH)
    return shk__error_set(err, -EINVAL, "the checkpoint's third line is not a base64 SHA-256 hash");
  while (line(note, split, &at, &l, &len))
    if (len == 0)
      return shk__error_set(err, -EINVAL, "the checkpoint has an empty extension line");
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The RFC 6962 Merkle tree: leaf hash SHA-256(0x00 || entry), node hash
 * SHA-256(0x01 || left || right), the split at the largest power of two
 * smaller than the size; audit paths and consistency proofs as in RFC 6962
 * section 2.1, checked with the algorithms of RFC 9162 section 2.1. */
#include "audit/audit-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <openssl/evp.h>

#include "common/common.h"

/* SHA-256 through one digest fetched once: OpenSSL 3's one-shot SHA256()
 * fetches the algorithm (under a lock) on every call, which the writer
 * would pay twice per event. The fetched digest lives as long as the
 * process. A failure gives a hash of zeros, which matches nothing real, so
 * verification fails closed. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static void sha256_two(const void *a, size_t na, const void *b, size_t nb, shk__hash out)
{
  pthread_once(&sha256_once, sha256_fetch);
  EVP_MD_CTX *c = EVP_MD_CTX_new();
  unsigned len = 0;
  if (!sha256_md || !c || !EVP_DigestInit_ex2(c, sha256_md, NULL) ||
      !EVP_DigestUpdate(c, a, na) || (nb && !EVP_DigestUpdate(c, b, nb)) ||
      !EVP_DigestFinal_ex(c, out, &len))
    memset(out, 0, SHK__HASH);
  EVP_MD_CTX_free(c);
}

void shk__sha256(const void *p, size_t n, shk__hash out)
{
  sha256_two(p, n, NULL, 0, out);
}

void shk__mt_leaf(const void *entry, size_t n, shk__hash out)
{
  static const unsigned char zero = 0;
  sha256_two(&zero, 1, entry, n, out);
}

void shk__mt_node(const shk__hash l, const shk__hash r, shk__hash out)
{
  unsigned char b[1 + 2 * SHK__HASH];
  b[0] = 1;
  memcpy(b + 1, l, SHK__HASH);
  memcpy(b + 1 + SHK__HASH, r, SHK__HASH);
  sha256_two(b, sizeof b, NULL, 0, out);
}

/* ------------------------------------------------------------------------
 * Compact range
 */
void shk__mt_compact_append(shk__mt_compact *c, const shk__hash leaf)
{
  shk__hash h;
  memcpy(h, leaf, SHK__HASH);
  /* Each trailing one bit of the old size is a perfect subtree of the same
   * height as the one being carried: merge them. */
  for (uint64_t s = c->size; s & 1; s >>= 1)
    shk__mt_node(c->h[--c->n], h, h);
  memcpy(c->h[c->n++], h, SHK__HASH);
  c->size++;
}

void shk__mt_compact_root(const shk__mt_compact *c, shk__hash out)
{
  if (c->n == 0) {
    shk__sha256("", 0, out);
    return;
  }
  shk__hash r;
  memcpy(r, c->h[c->n - 1], SHK__HASH);
  for (unsigned i = c->n - 1; i-- > 0;)
    shk__mt_node(c->h[i], r, r);
  memcpy(out, r, SHK__HASH);
}

/* ------------------------------------------------------------------------
 * Whole tree
 */
int shk__mt_tree_append(shk__mt_tree *t, const shk__hash leaf)
{
  /* Level k holds floor(size / 2^k) nodes, so cap0 >> k is its room. */
  if (t->size == t->cap0) {
    uint64_t ncap = t->cap0 ? t->cap0 * 2 : 1024;
    for (unsigned k = 0; k < 64 && (ncap >> k) > 0; k++) {
      shk__hash *p = realloc(t->level[k], (size_t)((ncap >> k) + 1) * SHK__HASH);
      if (!p)
        return -ENOMEM;
      t->level[k] = p;
    }
    t->cap0 = ncap;
  }
  uint64_t idx = t->size;
  unsigned lv = 0;
  memcpy(t->level[0][idx], leaf, SHK__HASH);
  /* A right child completes its parent, and so on up. */
  while (idx & 1) {
    idx >>= 1;
    lv++;
    shk__mt_node(t->level[lv - 1][2 * idx], t->level[lv - 1][2 * idx + 1], t->level[lv][idx]);
  }
  t->size++;
  if (lv + 1 > t->levels)
    t->levels = lv + 1;
  return 0;
}

void shk__mt_tree_free(shk__mt_tree *t)
{
  for (unsigned i = 0; i < 64; i++)
    free(t->level[i]);
  memset(t, 0, sizeof *t);
}

static uint64_t split(uint64_t n) /* the largest power of two < n, n >= 2 */
{
  uint64_t k = 1;
  while (k << 1 < n)
    k <<= 1;
  return k;
}

/* MTH(D[a:b]). Every range the RFC 6962 recursion reaches is either a
 * perfect subtree aligned on its size (a lookup) or splits into one and a
 * smaller range, so this costs O(log n). */
static void mth(const shk__mt_tree *t, uint64_t a, uint64_t b, shk__hash out)
{
  uint64_t n = b - a;
  if (n == 0) {
    shk__sha256("", 0, out);
    return;
  }
  if ((n & (n - 1)) == 0 && a % n == 0) {
    unsigned lv = (unsigned)__builtin_ctzll(n);
    memcpy(out, t->level[lv][a >> lv], SHK__HASH);
    return;
  }
  uint64_t k = split(n);
  shk__hash l, r;
  mth(t, a, a + k, l);
  mth(t, a + k, b, r);
  shk__mt_node(l, r, out);
}

void shk__mt_tree_root(const shk__mt_tree *t, uint64_t size, shk__hash out)
{
  mth(t, 0, size <= t->size ? size : t->size, out);
}

typedef struct plist {
  shk__hash *p;
  size_t n;
  int err;
} plist;

static void push(plist *l, const shk__mt_tree *t, uint64_t a, uint64_t b)
{
  if (l->err)
    return;
  shk__hash *np = realloc(l->p, (l->n + 1) * SHK__HASH);
  if (!np) {
    l->err = -ENOMEM;
    return;
  }
  l->p = np;
  mth(t, a, b, l->p[l->n++]);
}

/* PATH(m, D[a:b]), leaf to root. */
static void path(plist *l, const shk__mt_tree *t, uint64_t m, uint64_t a, uint64_t b)
{
  if (b - a <= 1)
    return;
  uint64_t k = split(b - a);
  if (m < k) {
    path(l, t, m, a, a + k);
    push(l, t, a + k, b);
  } else {
    path(l, t, m - k, a + k, b);
    push(l, t, a, a + k);
  }
}

/* SUBPROOF(m, D[a:b], whole). */
static void subproof(plist *l, const shk__mt_tree *t, uint64_t m, uint64_t a, uint64_t b,
                     bool whole)
{
  uint64_t n = b - a;
  if (m == n) {
    if (!whole)
      push(l, t, a, b);
    return;
  }
  uint64_t k = split(n);
  if (m <= k) {
    subproof(l, t, m, a, a + k, whole);
    push(l, t, a + k, b);
  } else {
    subproof(l, t, m - k, a + k, b, false);
    push(l, t, a, a + k);
  }
}

int shk__mt_tree_inclusion(const shk__mt_tree *t, uint64_t index, uint64_t size,
                           shk__hash **out, size_t *n)
{
  if (size > t->size || index >= size)
    return -EINVAL;
  plist l = { 0 };
  path(&l, t, index, 0, size);
  if (l.err) {
    free(l.p);
    return l.err;
  }
  *out = l.p;
  *n = l.n;
  return 0;
}

int shk__mt_tree_consistency(const shk__mt_tree *t, uint64_t m, uint64_t size, shk__hash **out,
                             size_t *n)
{
  if (size > t->size || m > size)
    return -EINVAL;
  plist l = { 0 };
  if (m > 0 && m < size)
    subproof(&l, t, m, 0, size, true);
  if (l.err) {
    free(l.p);
    return l.err;
  }
  *out = l.p;
  *n = l.n;
  return 0;
}

/* ------------------------------------------------------------------------
 * Verification (RFC 9162)
 */
bool shk__mt_verify_inclusion(uint64_t index, uint64_t size, const shk__hash leaf,
                              const shk__hash *p, size_t n, const shk__hash root)
{
  if (index >= size)
    return false;
  uint64_t fn = index, sn = size - 1;
  shk__hash r;
  memcpy(r, leaf, SHK__HASH);
  for (size_t i = 0; i < n; i++) {
    if (sn == 0)
      return false;
    if ((fn & 1) || fn == sn) {
      shk__mt_node(p[i], r, r);
      while (!(fn & 1) && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      shk__mt_node(r, p[i], r);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && memcmp(r, root, SHK__HASH) == 0;
}

bool shk__mt_verify_consistency(uint64_t size1, uint64_t size2, const shk__hash root1,
                                const shk__hash root2, const shk__hash *proof, size_t n)
{
  if (size1 > size2)
    return false;
  /* Equal sizes: the same tree, proven by an empty proof. Every tree
   * extends the empty one. */
  if (size1 == size2)
    return n == 0 && memcmp(root1, root2, SHK__HASH) == 0;
  if (size1 == 0)
    return n == 0;
  if (n == 0)
    return false;
  const shk__hash *c = proof;
  size_t cn = n;
  shk__hash fr, sr;
  bool pow2 = (size1 & (size1 - 1)) == 0;
  uint64_t fn = size1 - 1, sn = size2 - 1;
  while (fn & 1) {
    fn >>= 1;
    sn >>= 1;
  }
  /* A first tree that is a power of two is itself a node of the second:
   * its root starts the walk (RFC 9162 prepends it to the path). */
  if (pow2) {
    memcpy(fr, root1, SHK__HASH);
    memcpy(sr, root1, SHK__HASH);
  } else {
    memcpy(fr, c[0], SHK__HASH);
    memcpy(sr, c[0], SHK__HASH);
    c++;
    cn--;
  }
  for (size_t i = 0; i < cn; i++) {
    if (sn == 0)
      return false;
    if ((fn & 1) || fn == sn) {
      shk__mt_node(c[i], fr, fr);
      shk__mt_node(c[i], sr, sr);
      while (!(fn & 1) && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      shk__mt_node(sr, c[i], sr);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && memcmp(fr, root1, SHK__HASH) == 0 && memcmp(sr, root2, SHK__HASH) == 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The handle table: issue, attenuate, revoke, and the check at the moment
 * of use.
 *
 * Why this is safe:
 * - A handle id is 256 bits from getrandom(2). Nothing in it is derived
 *   from the session, the class or a counter, so it cannot be guessed or
 *   forged, and ids are compared in constant time.
 * - Revoking flips one atomic flag on the handle (O(1), no allocation, no
 *   lock other than the table's read lock to find it). A use walks the
 *   handle's ancestry and fails if any ancestor is revoked, used up or
 *   expired, so a revoked handle takes every handle derived from it along
 *   (the membrane) without visiting them. Ancestry is bounded by MAX_DEPTH.
 * - A child's scope is checked to be a subset of its parent's when it is
 *   made; a child never expires later than its parent. */
#include "shinken/cap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/common.h"

#define MAX_DEPTH 32

typedef struct handle {
  uint8_t id[SHK_CAP_ID_BYTES];
  struct handle *parent;
  struct handle *next_in_bucket;
  char *session;
  shk_cap_scope scope;
  shk_cap_lifecycle lifecycle;
  int64_t expires_ms;
  int depth;
  atomic_bool revoked;
  atomic_bool used;        /* a once handle after its one use */
} handle;

struct shk_cap_table {
  pthread_rwlock_t lock;
  handle **buckets;
  size_t n_buckets, count;
};

int shk_cap_table_new(shk_cap_table **out)
{
  *out = NULL;
  shk_cap_table *t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->n_buckets = 256;
  t->buckets = calloc(t->n_buckets, sizeof(handle *));
  if (!t->buckets || pthread_rwlock_init(&t->lock, NULL)) {
    free(t->buckets);
    free(t);
    return -ENOMEM;
  }
  *out = t;
  return 0;
}

static void handle_free(handle *h)
{
  shk_cap_scope_clear(&h->scope);
  free(h->session);
  free(h);
}

void shk_cap_table_free(shk_cap_table *t)
{
  if (!t)
    return;
  for (size_t i = 0; i < t->n_buckets; i++)
    for (handle *h = t->buckets[i], *n; h; h = n) {
      n = h->next_in_bucket;
      handle_free(h);
    }
  free(t->buckets);
  pthread_rwlock_destroy(&t->lock);
  free(t);
}

/* The id is uniformly random, so its first bytes are a good hash. */
static size_t bucket_of(const shk_cap_table *t, const uint8_t *id)
{
  uint64_t h;
  memcpy(&h, id, sizeof h);
  return (size_t)(h & (t->n_buckets - 1));
}

static bool ct_equal(const uint8_t *a, const uint8_t *b)
{
  uint8_t d = 0;
  for (size_t i = 0; i < SHK_CAP_ID_BYTES; i++)
    d |= a[i] ^ b[i];
  return d == 0;
}

static int hex_to_id(const char *hex, uint8_t *id)
{
  if (!hex || strlen(hex) != SHK_CAP_ID_BYTES * 2)
    return -ENOENT;
  for (size_t i = 0; i < SHK_CAP_ID_BYTES; i++) {
    unsigned v = 0;
    for (int k = 0; k < 2; k++) {
      char c = hex[2 * i + (size_t)k];
      unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
      if (d == 16)
        return -ENOENT;
      v = v * 16 + d;
    }
    id[i] = (uint8_t)v;
  }
  return 0;
}

static void id_to_hex(const uint8_t *id, char *hex)
{
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < SHK_CAP_ID_BYTES; i++) {
    hex[2 * i] = digits[id[i] >> 4];
    hex[2 * i + 1] = digits[id[i] & 15];
  }
  hex[SHK_CAP_ID_BYTES * 2] = '\0';
}

/* Caller holds the lock (read or write). */
static handle *find(const shk_cap_table *t, const char *hex)
{
  uint8_t id[SHK_CAP_ID_BYTES];
  if (hex_to_id(hex, id))
    return NULL;
  for (handle *h = t->buckets[bucket_of(t, id)]; h; h = h->next_in_bucket)
    if (ct_equal(h->id, id))
      return h;
  return NULL;
}

/* Doubles the buckets. Out of memory leaves them as they are: the table
 * still works, with longer chains. */
static void grow(shk_cap_table *t)
{
  size_t nb = t->n_buckets * 2;
  handle **b = calloc(nb, sizeof(handle *));
  if (!b)
    return;
  for (size_t i = 0; i < t->n_buckets; i++)
    for (handle *h = t->buckets[i], *n; h; h = n) {
      n = h->next_in_bucket;
      uint64_t x;
      memcpy(&x, h->id, sizeof x);
      h->next_in_bucket = b[x & (nb - 1)];
      b[x & (nb - 1)] = h;
    }
  free(t->buckets);
  t->buckets = b;
  t->n_buckets = nb;
}

/* A deep copy of the scope: -ENOMEM leaves nothing half-copied. */
static int scope_copy(shk_cap_scope *dst, const shk_cap_scope *src)
{
  return shk_cap_scope_copy(dst, src);
}

/* A new handle of `session` with a copy of `scope`, not yet in the table. */
static int handle_new(const char *session, const shk_cap_scope *scope, handle **out)
{
  handle *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  h->session = strdup(session);
  int r = h->session ? scope_copy(&h->scope, scope) : -ENOMEM;
  if (r) {
    free(h->session);
    free(h);
    return r;
  }
  *out = h;
  return 0;
}

/* Caller holds the write lock. */
static int insert(shk_cap_table *t, handle *h, char *id_out)
{
  for (;;) {
    if (getrandom(h->id, sizeof h->id, 0) != (ssize_t)sizeof h->id)
      return -EIO;
    char hex[SHK_CAP_ID_HEX];
    id_to_hex(h->id, hex);
    if (!find(t, hex))
      break;
  }
  if (t->count + 1 > t->n_buckets)
    grow(t);
  size_t b = bucket_of(t, h->id);
  h->next_in_bucket = t->buckets[b];
  t->buckets[b] = h;
  t->count++;
  id_to_hex(h->id, id_out);
  return 0;
}

int shk_cap_issue(shk_cap_table *t, const char *session, const shk_cap_scope *scope,
                  shk_cap_lifecycle lc, int64_t expires_ms, char id_out[SHK_CAP_ID_HEX])
{
  if (!session || !*session || strlen(session) >= sizeof(((shk_cap_info *)0)->session) ||
      expires_ms < 0)
    return -EINVAL;
  handle *h;
  int r = handle_new(session, scope, &h);
  if (r)
    return r;
  h->lifecycle = lc;
  h->expires_ms = expires_ms;
  pthread_rwlock_wrlock(&t->lock);
  r = insert(t, h, id_out);
  pthread_rwlock_unlock(&t->lock);
  if (r)
    handle_free(h);
  return r;
}

int shk_cap_attenuate(shk_cap_table *t, const char *parent_id, const shk_cap_scope *scope,
                      int64_t expires_ms, char id_out[SHK_CAP_ID_HEX], shk_error *err)
{
  if (expires_ms < 0)
    return shk__error_set(err, -EINVAL, "the expiry must not be negative");
  pthread_rwlock_wrlock(&t->lock);
  int r = 0;
  handle *h, *p = find(t, parent_id);
  if (!p) {
    r = shk__error_set(err, -ENOENT, "no such handle");
    goto out;
  }
  if (atomic_load(&p->revoked) || atomic_load(&p->used)) {
    r = shk__error_set(err, -EACCES, "the parent handle is no longer live");
    goto out;
  }
  if (p->depth + 1 >= MAX_DEPTH) {
    r = shk__error_set(err, -EPERM, "handles may be derived at most %d deep", MAX_DEPTH - 1);
    goto out;
  }
  shk_error serr;
  if (!shk_cap_scope_subset(scope, &p->scope, &serr)) {
    r = shk__error_set(err, -EPERM, "%s", serr.message);
    goto out;
  }
  if ((r = handle_new(p->session, scope, &h))) {
    shk__error_set(err, r, "could not copy the scope: %s", shk_strerror(r));
    goto out;
  }
  h->parent = p;
  h->depth = p->depth + 1;
  /* A child is never a standing grant and never outlives its parent. */
  h->lifecycle = p->lifecycle == SHK_CAP_ONCE ? SHK_CAP_ONCE : SHK_CAP_SESSION;
  h->expires_ms = expires_ms;
  if (p->expires_ms && (!h->expires_ms || h->expires_ms > p->expires_ms))
    h->expires_ms = p->expires_ms;
  r = insert(t, h, id_out);
  if (r) {
    handle_free(h);
    shk__error_set(err, r, "no randomness for the handle id");
  }
out:
  pthread_rwlock_unlock(&t->lock);
  return r;
}

int shk_cap_revoke(shk_cap_table *t, const char *id)
{
  pthread_rwlock_rdlock(&t->lock);
  handle *h = find(t, id);
  if (h)
    atomic_store(&h->revoked, true);
  pthread_rwlock_unlock(&t->lock);
  return h ? 0 : -ENOENT;
}

void shk_cap_revoke_session(shk_cap_table *t, const char *session)
{
  pthread_rwlock_rdlock(&t->lock);
  for (size_t i = 0; i < t->n_buckets; i++)
    for (handle *h = t->buckets[i]; h; h = h->next_in_bucket)
      if (!strcmp(h->session, session))
        atomic_store(&h->revoked, true);
  pthread_rwlock_unlock(&t->lock);
}

/* Caller holds the lock. The membrane: a handle is live only while it and
 * every handle it derives from are live. */
static bool chain_live(const handle *h, int64_t now_ms)
{
  for (; h; h = h->parent) {
    if (atomic_load(&h->revoked) || atomic_load(&h->used))
      return false;
    if (h->expires_ms && now_ms >= h->expires_ms)
      return false;
  }
  return true;
}

static int use_or_check(shk_cap_table *t, const char *id, int64_t now_ms, bool consume)
{
  pthread_rwlock_rdlock(&t->lock);
  int r = -ENOENT;
  handle *h = find(t, id);
  if (h) {
    r = chain_live(h, now_ms) ? 0 : -EACCES;
    /* A once handle is consumed by exactly one use, even under races: the
     * exchange lets only one caller see it unused. Its ancestors that are
     * once handles are consumed with it. */
    if (r == 0 && consume)
      for (handle *a = h; a; a = a->parent)
        if (a->lifecycle == SHK_CAP_ONCE && atomic_exchange(&a->used, true) && a == h)
          r = -EACCES;
  }
  pthread_rwlock_unlock(&t->lock);
  return r;
}

int shk_cap_use(shk_cap_table *t, const char *id, int64_t now_ms)
{
  return use_or_check(t, id, now_ms, true);
}

int shk_cap_check(shk_cap_table *t, const char *id, int64_t now_ms)
{
  return use_or_check(t, id, now_ms, false);
}

void shk_cap_foreach(shk_cap_table *t, const char *session,
                     void (*fn)(const shk_cap_info *info, void *ud), void *ud)
{
  pthread_rwlock_rdlock(&t->lock);
  for (size_t i = 0; i < t->n_buckets; i++)
    for (handle *h = t->buckets[i]; h; h = h->next_in_bucket) {
      if (session && strcmp(session, h->session))
        continue;
      shk_cap_info info;
      memset(&info, 0, sizeof info);
      id_to_hex(h->id, info.id);
      if (h->parent)
        id_to_hex(h->parent->id, info.parent);
      snprintf(info.session, sizeof info.session, "%s", h->session);
      info.lifecycle = h->lifecycle;
      info.expires_ms = h->expires_ms;
      info.revoked = !chain_live(h, 0);
      info.scope = &h->scope;
      fn(&info, ud);
    }
  pthread_rwlock_unlock(&t->lock);
}

const shk_cap_scope *shk_cap_scope_of(shk_cap_table *t, const char *id)
{
  pthread_rwlock_rdlock(&t->lock);
  handle *h = find(t, id);
  pthread_rwlock_unlock(&t->lock);
  return h ? &h->scope : NULL;
}

int shk_cap_lifecycle_of(shk_cap_table *t, const char *id, shk_cap_lifecycle *out)
{
  pthread_rwlock_rdlock(&t->lock);
  handle *h = find(t, id);
  if (h)
    *out = h->lifecycle;
  pthread_rwlock_unlock(&t->lock);
  return h ? 0 : -ENOENT;
}

bool shk_cap_is_revoked(shk_cap_table *t, const char *id)
{
  pthread_rwlock_rdlock(&t->lock);
  handle *h = find(t, id);
  bool revoked = !h;
  for (; h && !revoked; h = h->parent)
    revoked = atomic_load(&h->revoked);
  pthread_rwlock_unlock(&t->lock);
  return revoked;
}

int shk_cap_remove(shk_cap_table *t, const char *id)
{
  uint8_t raw[SHK_CAP_ID_BYTES];
  if (hex_to_id(id, raw))
    return -ENOENT;
  pthread_rwlock_wrlock(&t->lock);
  int r = -ENOENT;
  handle **pp = &t->buckets[bucket_of(t, raw)];
  for (; *pp; pp = &(*pp)->next_in_bucket)
    if (ct_equal((*pp)->id, raw))
      break;
  handle *h = *pp;
  if (h) {
    r = 0;
    for (size_t i = 0; i < t->n_buckets && !r; i++)
      for (handle *c = t->buckets[i]; c && !r; c = c->next_in_bucket)
        if (c->parent == h)
          r = -EBUSY;
  }
  if (h && !r) {
    *pp = h->next_in_bucket;
    t->count--;
    handle_free(h);
  }
  pthread_rwlock_unlock(&t->lock);
  return r;
}

/* Why this is safe: a handle's parent is always of the same session
 * (shk_cap_attenuate copies the parent's), so removing every handle of one
 * session leaves no handle whose parent pointer dangles. */
size_t shk_cap_remove_session(shk_cap_table *t, const char *session)
{
  size_t n = 0;
  handle *dead = NULL;
  pthread_rwlock_wrlock(&t->lock);
  for (size_t i = 0; i < t->n_buckets; i++)
    for (handle **pp = &t->buckets[i]; *pp;) {
      handle *h = *pp;
      if (strcmp(h->session, session)) {
        pp = &h->next_in_bucket;
        continue;
      }
      *pp = h->next_in_bucket;
      h->next_in_bucket = dead;
      dead = h;
      n++;
    }
  t->count -= n;
  pthread_rwlock_unlock(&t->lock);
  for (handle *h = dead, *next; h; h = next) {
    next = h->next_in_bucket;
    handle_free(h);
  }
  return n;
}

size_t shk_cap_count(shk_cap_table *t)
{
  pthread_rwlock_rdlock(&t->lock);
  size_t n = t->count;
  pthread_rwlock_unlock(&t->lock);
  return n;
}

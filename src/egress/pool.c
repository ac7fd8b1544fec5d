/* SPDX-License-Identifier: Apache-2.0 */
/* The DNS stub's pool of synthetic addresses. A lookup is answered with an
 * address that means "this name, in this session" and nothing else: it is
 * never routed (the workload's network namespace holds loopback only, so
 * the only way to use it is through the proxy, which maps it back), and no
 * lookup leaves the proxy to produce it. The real addresses are resolved
 * later, only when a connection the policy admits is dialed.
 *
 * Each name gets one index; the index is both an IPv4 address in
 * 198.18.0.0/15 and an IPv6 address in fd53:686b:6e00::/64, so A and AAAA
 * answers of one name lead back to it. The pool is bounded: past CAP names
 * the least recently used one is forgotten (a connection to its address is
 * then refused as unknown). Indexes are handed out round robin over the
 * whole range, which is more than twice as large as the largest pool, so an
 * address is not handed out again for another name until long after its
 * answer's TTL: a client that cached an address does not reach another
 * name with it. Pure: no I/O, no global state. */
#include "egress/egress-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 198.18.0.0/15: 2^17 addresses; index 0 (198.18.0.0) and the last one
 * (198.19.255.255) are never handed out. */
#define RANGE_BITS 17
#define RANGE_SIZE (1u << RANGE_BITS)

static const uint8_t v6_prefix[8] = { 0xfd, 0x53, 0x68, 0x6b, 0x6e, 0x00, 0x00, 0x00 };

struct entry {
  struct entry *lru_prev, *lru_next; /* most recent at the head */
  struct entry *by_name, *by_index;  /* hash chains */
  uint32_t index;
  char name[SHK_HOST_MAX + 1];
};

struct shk__dns_pool {
  unsigned cap, n;
  uint32_t next_index;
  uint64_t seed;
  size_t mask; /* buckets - 1 */
  struct entry **names, **indexes;
  struct entry *head, *tail;
  /* One bit per index in use, so that the round robin can skip a live
   * entry without a lookup. */
  uint8_t used[RANGE_SIZE / 8];
};

static size_t hash_name(const shk__dns_pool *p, const char *s)
{
  /* FNV-1a over the name, started from a per-pool random seed and mixed at
   * the end, so that a workload cannot pick names that share a chain. */
  uint64_t h = 0xcbf29ce484222325ull ^ p->seed;
  for (; *s; s++) {
    h ^= (uint8_t)*s;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return (size_t)h & p->mask;
}

shk__dns_pool *shk__dns_pool_new(unsigned cap, uint64_t seed)
{
  if (cap < 1 || cap > SHK__DNS_POOL_MAX)
    return NULL;
  shk__dns_pool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  size_t buckets = 16;
  while (buckets < cap)
    buckets *= 2;
  p->cap = cap;
  p->seed = seed;
  p->mask = buckets - 1;
  p->next_index = 1 + (uint32_t)(seed % (RANGE_SIZE - 2));
  p->names = calloc(buckets, sizeof *p->names);
  p->indexes = calloc(buckets, sizeof *p->indexes);
  if (!p->names || !p->indexes) {
    shk__dns_pool_free(p);
    return NULL;
  }
  return p;
}

void shk__dns_pool_free(shk__dns_pool *p)
{
  if (!p)
    return;
  for (struct entry *e = p->head, *next; e; e = next) {
    next = e->lru_next;
    free(e);
  }
  free(p->names);
  free(p->indexes);
  free(p);
}

static void lru_unlink(shk__dns_pool *p, struct entry *e)
{
  if (e->lru_prev)
    e->lru_prev->lru_next = e->lru_next;
  else
    p->head = e->lru_next;
  if (e->lru_next)
    e->lru_next->lru_prev = e->lru_prev;
  else
    p->tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
}

static void lru_push(shk__dns_pool *p, struct entry *e)
{
  e->lru_next = p->head;
  if (p->head)
    p->head->lru_prev = e;
  p->head = e;
  if (!p->tail)
    p->tail = e;
}

static void touch(shk__dns_pool *p, struct entry *e)
{
  if (p->head != e) {
    lru_unlink(p, e);
    lru_push(p, e);
  }
}

static void chain_remove(struct entry **slot, struct entry *e, bool by_name)
{
  for (; *slot; slot = by_name ? &(*slot)->by_name : &(*slot)->by_index)
    if (*slot == e) {
      *slot = by_name ? e->by_name : e->by_index;
      return;
    }
}

static struct entry *find_name(const shk__dns_pool *p, const char *name)
{
  for (struct entry *e = p->names[hash_name(p, name)]; e; e = e->by_name)
    if (!strcmp(e->name, name))
      return e;
  return NULL;
}

static struct entry *find_index(const shk__dns_pool *p, uint32_t index)
{
  for (struct entry *e = p->indexes[index & p->mask]; e; e = e->by_index)
    if (e->index == index)
      return e;
  return NULL;
}

int shk__dns_pool_get(shk__dns_pool *p, const char *name, uint32_t *index)
{
  size_t len = strlen(name);
  if (len == 0 || len > SHK_HOST_MAX)
    return -EINVAL;
  struct entry *e = find_name(p, name);
  if (e) {
    touch(p, e);
    *index = e->index;
    return 0;
  }
  if (p->n == p->cap) {
    /* Full: the least recently used name is forgotten, and its entry
     * serves the new one. */
    e = p->tail;
    lru_unlink(p, e);
    chain_remove(&p->names[hash_name(p, e->name)], e, true);
    chain_remove(&p->indexes[e->index & p->mask], e, false);
    p->used[e->index / 8] &= (uint8_t)~(1u << (e->index % 8));
    p->n--;
  } else if (!(e = malloc(sizeof *e))) {
    return -ENOMEM;
  }
  memset(e, 0, sizeof *e);
  memcpy(e->name, name, len + 1);
  /* The next free index after the last one handed out. At most cap of the
   * range's 2^17 - 2 indexes are in use, so this ends within cap + 1
   * steps. */
  uint32_t i = p->next_index;
  while (p->used[i / 8] & (1u << (i % 8)))
    i = i + 1 >= RANGE_SIZE - 1 ? 1 : i + 1;
  e->index = i;
  p->next_index = i + 1 >= RANGE_SIZE - 1 ? 1 : i + 1;
  p->used[i / 8] |= (uint8_t)(1u << (i % 8));
  size_t hn = hash_name(p, name);
  e->by_name = p->names[hn];
  p->names[hn] = e;
  e->by_index = p->indexes[i & p->mask];
  p->indexes[i & p->mask] = e;
  lru_push(p, e);
  p->n++;
  *index = i;
  return 0;
}

const char *shk__dns_pool_name(shk__dns_pool *p, uint32_t index)
{
  struct entry *e = find_index(p, index);
  if (!e)
    return NULL;
  touch(p, e);
  return e->name;
}

unsigned shk__dns_pool_size(const shk__dns_pool *p)
{
  return p->n;
}

void shk__dns_pool_address(uint32_t index, int family, shk_ip *out)
{
  memset(out, 0, sizeof *out);
  out->family = family;
  if (family == 4) {
    uint32_t a = (198u << 24 | 18u << 16) + index;
    out->b[0] = (uint8_t)(a >> 24);
    out->b[1] = (uint8_t)(a >> 16);
    out->b[2] = (uint8_t)(a >> 8);
    out->b[3] = (uint8_t)a;
  } else {
    memcpy(out->b, v6_prefix, sizeof v6_prefix);
    out->b[12] = (uint8_t)(index >> 24);
    out->b[13] = (uint8_t)(index >> 16);
    out->b[14] = (uint8_t)(index >> 8);
    out->b[15] = (uint8_t)index;
  }
}

bool shk__dns_pool_index(const shk_ip *ip, uint32_t *index)
{
  /* Every address of both ranges is the pool's: one that was never handed
   * out (or was forgotten) is unknown, never an ordinary destination. */
  uint32_t i;
  if (ip->family == 4) {
    if (ip->b[0] != 198 || (ip->b[1] & 0xfe) != 18)
      return false;
    i = (uint32_t)(ip->b[1] & 1) << 16 | (uint32_t)ip->b[2] << 8 | ip->b[3];
  } else if (ip->family == 6) {
    static const uint8_t zero[4];
    if (memcmp(ip->b, v6_prefix, sizeof v6_prefix))
      return false;
    uint32_t hi = (uint32_t)ip->b[12] << 24 | (uint32_t)ip->b[13] << 16;
    i = hi | (uint32_t)ip->b[14] << 8 | ip->b[15];
    /* Inside the /64 but never handed out: index 0 names nothing. */
    if (i >= RANGE_SIZE || memcmp(ip->b + 8, zero, 4))
      i = 0;
  } else {
    return false;
  }
  *index = i;
  return true;
}

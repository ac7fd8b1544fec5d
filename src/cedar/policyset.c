/* SPDX-License-Identifier: Apache-2.0 */
/* The policy set: policies, templates and template links in order, with
 * NUL-terminated ids ready for responses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"

static uint64_t anchor_key(shk__var var, uint64_t uid_hash)
{
  return uid_hash ^ ((uint64_t)(var + 1) * 0x9E3779B97F4A7C15ULL);
}

/* The slot of `key`: its anchor, or the empty slot where it belongs. */
static shk__anchor *anchor_slot(shk__anchor *slots, size_t mask, uint64_t key)
{
  size_t i = key & mask;
  while (slots[i].pols && slots[i].key != key)
    i = (i + 1) & mask;
  return &slots[i];
}

/* Anchors are found by their key alone, with no compare of entity ids:
 * uids whose keys collide share one anchor, so a lookup yields a superset
 * of the policies anchored at its uid, and shk__eval_policy checks every
 * candidate's whole scope. A collision can thus only add a candidate,
 * never lose one, and the hot path touches no id strings. */
static const shk__anchor *anchor_find(const shk_cedar_policy_set *ps, shk__var var,
                                      uint64_t uid_hash)
{
  const shk__anchor *an = anchor_slot(ps->anchors, ps->mask, anchor_key(var, uid_hash));
  return an->pols ? an : NULL;
}

/* Makes room for `room` more policies in the anchor of (var, u), creating
 * it (empty) when it is new, so that anchor_push cannot fail. An anchor
 * left empty by a link that failed later only costs its slot. */
static void anchor_reserve(shk_cedar_policy_set *ps, shk__var var, const shk__uid *u, uint32_t room)
{
  uint64_t key = anchor_key(var, shk__uid_hash(u));
  if (!ps->anchors || (ps->n_anchors + 1) * 2 > ps->mask + 1) {
    size_t old_size = ps->anchors ? ps->mask + 1 : 0;
    size_t size = old_size ? old_size * 2 : 64;
    shk__anchor *old = ps->anchors;
    shk__anchor *grown = shk__ucalloc(size, sizeof *grown);
    for (size_t k = 0; k < old_size; k++)
      if (old[k].pols)
        *anchor_slot(grown, size - 1, old[k].key) = old[k];
    ps->anchors = grown;
    ps->mask = size - 1;
    free(old);
  }
  shk__anchor *an = anchor_slot(ps->anchors, ps->mask, key);
  if (!an->pols) {
    an->pols = shk__urealloc(NULL, 4, sizeof *an->pols);
    an->key = key;
    an->n = 0;
    an->cap = 4;
    ps->n_anchors++;
  }
  if (an->n + room > an->cap) {
    uint32_t cap = an->n + room > 2 * an->cap ? an->n + room : 2 * an->cap;
    an->pols = shk__urealloc(an->pols, cap, sizeof *an->pols);
    an->cap = cap;
  }
}

static void anchor_push(shk_cedar_policy_set *ps, shk__var var, const shk__uid *u, uint32_t pol)
{
  shk__anchor *an = anchor_slot(ps->anchors, ps->mask, anchor_key(var, shk__uid_hash(u)));
  if (ALWAYS(an->pols && an->n < an->cap))
    an->pols[an->n++] = pol;
}

static bool anchorable(const shk__scope *sc)
{
  return !sc->slot && (sc->kind == SHK__SC_EQ || sc->kind == SHK__SC_IN || sc->kind == SHK__SC_IS_IN);
}

/* Puts policy `p` (index i) in the index. With `reserve`, only makes the
 * room for it (which may unwind on out of memory), so that the call without
 * it, which commits, cannot fail. */
static void index_policy(shk_cedar_policy_set *ps, const shk__policy *p, uint32_t i, bool reserve)
{
  if (p->is_template)
    return;
  const shk__scope *sc = anchorable(&p->principal) ? &p->principal
                         : anchorable(&p->resource) ? &p->resource
                         : anchorable(&p->action)   ? &p->action
                                                    : NULL;
  shk__var var = sc == &p->principal ? SHK__VAR_PRINCIPAL
                 : sc == &p->resource ? SHK__VAR_RESOURCE
                                      : SHK__VAR_ACTION;
  if (sc) {
    if (reserve)
      anchor_reserve(ps, var, &sc->uid, 1);
    else
      anchor_push(ps, var, &sc->uid, i);
  } else if (p->action.kind == SHK__SC_IN_LIST) {
    /* An empty list never matches, so such a policy needs no entry. A uid
     * listed twice reserves twice the room it needs, which is harmless. */
    for (size_t k = 0; k < p->action.n_uids; k++) {
      if (reserve)
        anchor_reserve(ps, SHK__VAR_ACTION, &p->action.uids[k], (uint32_t)p->action.n_uids);
      else
        anchor_push(ps, SHK__VAR_ACTION, &p->action.uids[k], i);
    }
  } else if (reserve) {
    if (ps->n_always == ps->cap_always) {
      size_t cap = ps->cap_always ? ps->cap_always * 2 : 4;
      ps->always = shk__urealloc(ps->always, cap, sizeof *ps->always);
      ps->cap_always = cap;
    }
  } else if (ALWAYS(ps->n_always < ps->cap_always)) {
    ps->always[ps->n_always++] = i;
  }
}

static void collect(const uint32_t *pols, uint32_t n, shk__cands *c)
{
  if (c->n + n > c->cap) {
    uint32_t cap = c->n + n > 2 * c->cap ? c->n + n : 2 * c->cap;
    c->v = shk__urealloc(c->v, cap, sizeof *c->v);
    c->cap = cap;
  }
  if (n)
    memcpy(c->v + c->n, pols, n * sizeof *pols);
  c->n += n;
}
static int cmp_u32(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Puts the candidates in policy order, each once. They are the union of a
 * few ascending lists, so a short run is sorted by insertion; the work is
 * that of the candidates, whatever the size of the set. */
static void sort_unique(shk__cands *c)
{
  if (c->n > 64) {
    qsort(c->v, c->n, sizeof *c->v, cmp_u32);
  } else {
    for (uint32_t i = 1; i < c->n; i++) {
      uint32_t x = c->v[i], j = i;
      for (; j && c->v[j - 1] > x; j--)
        c->v[j] = c->v[j - 1];
      c->v[j] = x;
    }
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < c->n; i++)
    if (!k || c->v[k - 1] != c->v[i])
      c->v[k++] = c->v[i];
  c->n = k;
}

void shk__policy_set_candidates(const shk_cedar_policy_set *ps, const shk__eval *ev,
                                shk__cands *c)
{
  c->n = 0;
  collect(ps->always, (uint32_t)ps->n_always, c);
  const shk_cedar_entities *es = ev->es;
  for (int v = SHK__VAR_PRINCIPAL; ps->n_anchors && v <= SHK__VAR_RESOURCE; v++) {
    const shk__entity *e = ev->var_ent[v];
    const shk__anchor *an = anchor_find(ps, (shk__var)v, ev->var_hash[v]);
    if (an)
      collect(an->pols, an->n, c);
    for (uint32_t k = 0; e && k < e->n_anc; k++) {
      const shk__entity *a = &es->ents[e->anc[k]];
      if ((an = anchor_find(ps, (shk__var)v, a->hash)))
        collect(an->pols, an->n, c);
      /* A leaf lists its parents only; theirs hold the rest. */
      for (uint32_t j = 0; e->anc_direct && j < a->n_anc; j++) {
        const shk__entity *g = &es->ents[a->anc[j]];
        if ((an = anchor_find(ps, (shk__var)v, g->hash)))
          collect(an->pols, an->n, c);
      }
    }
  }
  sort_unique(c);
}

/* Policy ids are looked up on every link (the template, and that the new
 * id is free), so they are hashed. */
static uint64_t id_hash(const char *id)
{
  shk__uid u = { { "", 0 }, { id, strlen(id) } };
  return shk__uid_hash(&u);
}

static int64_t id_find(const shk_cedar_policy_set *ps, const char *id)
{
  if (!ps->id_table)
    return -1;
  for (size_t i = id_hash(id) & ps->id_mask;; i = (i + 1) & ps->id_mask) {
    uint32_t x = ps->id_table[i];
    if (!x)
      return -1;
    if (strcmp(ps->ids[x - 1], id) == 0)
      return x - 1;
  }
}

static void id_insert(uint32_t *table, size_t mask, const char *id, uint32_t k)
{
  size_t i = id_hash(id) & mask;
  while (table[i])
    i = (i + 1) & mask;
  table[i] = k + 1;
}

/* Makes room in the id table for one more policy. */
static void id_reserve(shk_cedar_policy_set *ps)
{
  if (ps->id_table && (ps->n + 1) * 2 <= ps->id_mask + 1)
    return;
  size_t size = ps->id_table ? (ps->id_mask + 1) * 2 : 64;
  uint32_t *table = shk__ucalloc(size, sizeof *table);
  for (uint32_t i = 0; i < ps->n; i++)
    id_insert(table, size - 1, ps->ids[i], i);
  free(ps->id_table);
  ps->id_table = table;
  ps->id_mask = size - 1;
}

const shk__value *shk__folded(const shk__folds *f, const shk__expr *call)
{
  if (!f || !f->n)
    return NULL;
  for (size_t i = ((uintptr_t)call >> 4) & f->mask;; i = (i + 1) & f->mask) {
    if (f->slots[i].call == call)
      return &f->slots[i].value;
    if (!f->slots[i].call)
      return NULL;
  }
}

static void fold_insert(shk__folds *f, const shk__expr *call, shk__value v)
{
  size_t i = ((uintptr_t)call >> 4) & f->mask;
  while (f->slots[i].call)
    i = (i + 1) & f->mask;
  f->slots[i] = (shk__fold){ call, v };
}

/* Computes, once, each extension constructor applied to a string literal.
 * A literal the constructor refuses is left alone, so that the error still
 * arises where the policy is evaluated. */
static void fold(shk_cedar_policy_set *ps, const shk__expr *e)
{
  if (!e)
    return;
  fold(ps, e->a);
  fold(ps, e->b);
  fold(ps, e->c);
  for (size_t i = 0; i < e->n_items; i++)
    fold(ps, e->items[i]);
  shk__value v;
  shk__eval_error err;
  /* A link shares its template's conditions: each node is folded once. */
  if (e->kind != SHK__E_CALL || !shk__fn_is_constructor(e->fn) || e->n_items != 1 ||
      e->items[0]->kind != SHK__E_STRING || shk__folded(&ps->folds, e))
    return;
  shk__value arg = { .kind = SHK__V_STRING, .s = e->items[0]->s };
  if (shk__call_ext(e->fn, &arg, 1, ps->arena, &v, &err) < 0)
    return;
  shk__folds *f = &ps->folds;
  if ((f->n + 1) * 2 > (f->slots ? f->mask + 1 : 0)) {
    size_t size = f->slots ? (f->mask + 1) * 2 : 64;
    shk__fold *old = f->slots;
    size_t old_size = f->slots ? f->mask + 1 : 0;
    shk__fold *grown = shk__ucalloc(size, sizeof *grown);
    f->slots = grown;
    f->mask = size - 1;
    for (size_t i = 0; i < old_size; i++)
      if (old[i].call)
        fold_insert(f, old[i].call, old[i].value);
    free(old);
  }
  fold_insert(f, e, v);
  f->n++;
}

/* Adds a policy to the set. Everything that can run out of memory (and
 * unwind) is done first, and leaves the set as it was but for spare room
 * and folded constants; then the policy is committed by steps that cannot
 * fail. So a link that runs out of memory leaves no half-added policy
 * that the index would miss. */
static void append(shk_cedar_policy_set *ps, shk__policy *p)
{
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 16;
    ps->pols = shk__urealloc(ps->pols, cap, sizeof *ps->pols);
    ps->ids = shk__urealloc(ps->ids, cap, sizeof *ps->ids);
    ps->hashes = shk__urealloc(ps->hashes, cap, sizeof *ps->hashes);
    ps->cap = cap;
  }
  shk__scope_hash h = {
    .principal = shk__uid_hash(&p->principal.uid),
    .action = shk__uid_hash(&p->action.uid),
    .resource = shk__uid_hash(&p->resource.uid),
    .action_list = shk__arena_alloc(ps->arena, (p->action.n_uids ? p->action.n_uids : 1) *
                                                   sizeof *h.action_list),
  };
  for (size_t k = 0; k < p->action.n_uids; k++)
    h.action_list[k] = shk__uid_hash(&p->action.uids[k]);
  const char *id = shk__arena_strndup(ps->arena, p->id.p, p->id.n);
  id_reserve(ps);
  /* A folded constant of a policy that never joins the set is only
   * unused: its key is a node of that policy, which no other has. */
  for (size_t i = 0; !p->is_template && i < p->n_conds; i++)
    fold(ps, p->conds[i].body);
  uint32_t k = (uint32_t)ps->n;
  index_policy(ps, p, k, true);

  ps->pols[k] = p;
  ps->ids[k] = id;
  ps->hashes[k] = h;
  id_insert(ps->id_table, ps->id_mask, id, k);
  ps->n++;
  index_policy(ps, p, k, false);
}

static shk_cedar_policy_set *set_new(void)
{
  shk_cedar_policy_set *ps = shk__calloc(1, sizeof *ps);
  if (ps && !(ps->arena = shk__arena_new())) {
    free(ps);
    ps = NULL;
  }
  return ps;
}

typedef struct parse_job {
  shk_cedar_policy_set *ps;
  const char *text;
  size_t len;
  shk_error *err;
} parse_job;

static int parse_all(void *ctx)
{
  parse_job *j = ctx;
  shk__policy **pols;
  size_t n;
  int r = shk__parse_policies(j->ps->arena, j->text, j->len, &pols, &n, j->err);
  for (size_t i = 0; r == 0 && i < n; i++)
    append(j->ps, pols[i]);
  return r;
}

int shk_cedar_policy_set_parse(const char *text, size_t len, shk_cedar_policy_set **out,
                               shk_error *err)
{
  *out = NULL;
  shk_cedar_policy_set *ps = set_new();
  if (!ps)
    return shk__error_nomem(err);
  parse_job j = { ps, text, len, err };
  int r = shk__oom_guard(parse_all, &j, err);
  if (r < 0) {
    shk_cedar_policy_set_free(ps);
    return r;
  }
  *out = ps;
  return 0;
}

void shk_cedar_policy_set_free(shk_cedar_policy_set *ps)
{
  if (!ps)
    return;
  for (size_t i = 0; ps->anchors && i <= ps->mask; i++)
    free(ps->anchors[i].pols);
  free(ps->anchors);
  free(ps->always);
  free(ps->pols);
  free(ps->ids);
  free(ps->hashes);
  free(ps->id_table);
  free(ps->folds.slots);
  shk__arena_free(ps->arena);
  free(ps);
}

size_t shk_cedar_policy_set_count(const shk_cedar_policy_set *ps)
{
  return ps->n;
}

shk__policy *const *shk__policy_set_policies(const shk_cedar_policy_set *ps, size_t *n)
{
  *n = ps->n;
  return ps->pols;
}

typedef struct link_job {
  shk_cedar_policy_set *ps;
  const char *template_id, *new_id, *principal, *resource;
  shk_error *err;
} link_job;

static int link_policy(void *ctx)
{
  link_job *j = ctx;
  shk_cedar_policy_set *ps = j->ps;
  if (id_find(ps, j->new_id) >= 0)
    return shk__cedar_fail(j->err, "a policy with this id already exists: %.200s", j->new_id);
  int64_t t = id_find(ps, j->template_id);
  const shk__policy *tmpl = t >= 0 ? ps->pols[t] : NULL;
  if (!tmpl || !tmpl->is_template)
    return shk__cedar_fail(j->err, "no template with this id: %.200s", j->template_id);
  shk__uid pu, ru;
  int r;
  if (j->principal &&
      (r = shk__parse_entity_ref(ps->arena, j->principal, strlen(j->principal), &pu, j->err)) < 0)
    return r;
  if (j->resource &&
      (r = shk__parse_entity_ref(ps->arena, j->resource, strlen(j->resource), &ru, j->err)) < 0)
    return r;
  shk__str id = { shk__arena_strndup(ps->arena, j->new_id, strlen(j->new_id)), strlen(j->new_id) };
  shk__policy *linked;
  r = shk__link_template(ps->arena, tmpl, id, j->principal ? &pu : NULL,
                         j->resource ? &ru : NULL, &linked, j->err);
  if (r < 0)
    return r;
  append(ps, linked);
  return 0;
}

int shk_cedar_policy_set_link(shk_cedar_policy_set *ps, const char *template_id,
                              const char *new_id, const char *principal,
                              const char *resource, shk_error *err)
{
  link_job j = { ps, template_id, new_id, principal, resource, err };
  return shk__oom_guard(link_policy, &j, err);
}

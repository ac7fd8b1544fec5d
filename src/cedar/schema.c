/* SPDX-License-Identifier: Apache-2.0 */
/* Schemas: both source forms are parsed into the unresolved shk__sch, then
 * resolved here into the shk__schema the engine uses, with the reference's
 * name-resolution rules (RFC 24 and RFC 70 of Cedar): a name written in
 * namespace NS means NS::name if that is declared, else the name in the
 * empty namespace, else the built-in type (Bool, Long, String and the
 * extension types, also reachable as __cedar::name); common types win over
 * entity types; a declaration in a namespace may not shadow one in the empty
 * namespace. Common types are inlined, records sorted, and lookups are hash
 * tables, so resolving is linear in the size of the schema. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-parse-internal.h"

/* ---------------------------------------------------------------- hash map */

/* Open addressing from a pair of strings (a type and an id, or a name and
 * nothing) to an index. */
typedef struct hentry {
  shk__str a, b;
  uint32_t val;
  bool used;
} hentry;

typedef struct hmap {
  hentry *e;
  size_t cap; /* a power of two, at least twice the entries */
} hmap;

static uint64_t hash2(shk__str a, shk__str b)
{
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < a.n; i++)
    h = (h ^ (unsigned char)a.p[i]) * 1099511628211ULL;
  h = (h ^ 0xff) * 1099511628211ULL;
  for (size_t i = 0; i < b.n; i++)
    h = (h ^ (unsigned char)b.p[i]) * 1099511628211ULL;
  return h ^ (h >> 29);
}

static void hmap_init(shk__arena *ar, hmap *m, size_t n)
{
  size_t cap = 8;
  while (cap < 2 * n + 2)
    cap *= 2;
  m->cap = cap;
  m->e = shk__arena_calloc(ar, cap * sizeof(*m->e));
}

static hentry *hmap_slot(const hmap *m, shk__str a, shk__str b)
{
  size_t mask = m->cap - 1;
  for (size_t i = hash2(a, b) & mask;; i = (i + 1) & mask) {
    hentry *e = &m->e[i];
    if (!e->used || (shk__str_eq(e->a, a) && shk__str_eq(e->b, b)))
      return e;
  }
}

static const hentry *hmap_get(const hmap *m, shk__str a, shk__str b)
{
  if (!m->cap)
    return NULL;
  const hentry *e = hmap_slot(m, a, b);
  return e->used ? e : NULL;
}

/* Inserts; false when the key was already there. */
static bool hmap_put(hmap *m, shk__str a, shk__str b, uint32_t val)
{
  hentry *e = hmap_slot(m, a, b);
  if (e->used)
    return false;
  *e = (hentry){ a, b, val, true };
  return true;
}

/* ---------------------------------------------------------------- resolution */

typedef struct schema_priv {
  hmap etypes;       /* name -> index in etypes */
  hmap actions;      /* (type, id) -> index in actions */
  hmap action_types; /* "NS::Action" -> 1 */
} schema_priv;

typedef struct resolver {
  shk__arena *a;
  shk__sch *sc;
  shk__schema *out;
  shk_error *err;
  jmp_buf fail;
  hmap ent, com;
  const hmap *action_types; /* "NS::Action" names, which are entity types too */
  shk__str *ent_fq, *com_fq, *act_type;
  shk__type **com_done;
  uint8_t *com_state; /* 0 not yet, 1 resolving, 2 done */
  shk__type *t_bool, *t_long, *t_string;
  unsigned depth;
} resolver;

#define NONE SHK__STR_LIT("")

__attribute__((noreturn, format(printf, 3, 4))) static void rfail(resolver *r, shk__loc loc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  shk__error_vat(r->err, -EINVAL, NULL, loc.line, loc.col, fmt, ap);
  va_end(ap);
  longjmp(r->fail, 1);
}

static shk__str join(shk__arena *a, shk__str ns, shk__str name)
{
  if (!ns.n)
    return name;
  char *p = shk__arena_alloc(a, ns.n + 2 + name.n + 1);
  memcpy(p, ns.p, ns.n);
  memcpy(p + ns.n, "::", 2);
  memcpy(p + ns.n + 2, name.p, name.n);
  p[ns.n + 2 + name.n] = '\0';
  return (shk__str){ p, ns.n + 2 + name.n };
}

static bool qualified(shk__str s)
{
  return memchr(s.p, ':', s.n) != NULL;
}

static const char *const ext_names[] = { "ipaddr", "decimal", "datetime", "duration" };

static shk__type *builtin(resolver *r, shk__str name)
{
  if (shk__str_eq(name, SHK__STR_LIT("Bool")))
    return r->t_bool;
  if (shk__str_eq(name, SHK__STR_LIT("Long")))
    return r->t_long;
  if (shk__str_eq(name, SHK__STR_LIT("String")))
    return r->t_string;
  for (size_t i = 0; i < 4; i++) {
    if (name.n == strlen(ext_names[i]) && memcmp(name.p, ext_names[i], name.n) == 0) {
      shk__type *t = shk__arena_calloc(r->a, sizeof(*t));
      t->kind = SHK__T_EXT;
      t->name = (shk__str){ ext_names[i], name.n };
      return t;
    }
  }
  return NULL;
}

static shk__type *resolve(resolver *r, const shk__st *st, shk__str ns);

static shk__type *resolve_common(resolver *r, uint32_t i)
{
  if (r->com_state[i] == 2)
    return r->com_done[i];
  const shk__st_common *c = &r->sc->commons[i];
  if (r->com_state[i] == 1)
    rfail(r, c->loc, "cycle in common type references containing `%.*s`", (int)r->com_fq[i].n, r->com_fq[i].p);
  r->com_state[i] = 1;
  shk__type *t = resolve(r, c->type, c->ns);
  r->com_state[i] = 2;
  r->com_done[i] = t;
  return t;
}

static shk__type *entity_type(resolver *r, shk__str fq)
{
  shk__type *t = shk__arena_calloc(r->a, sizeof(*t));
  t->kind = SHK__T_ENTITY;
  t->name = fq;
  return t;
}

/* What a name may denote where it is written. */
enum {
  LK_COMMON = 1, /* a common type, or a built-in type */
  LK_ENTITY = 2, /* a declared entity type */
  LK_ACTION = 4, /* an action entity type ("NS::Action"), valid in types */
};

/* Looks a name up among the kinds in `what`, trying NS::name and then name
 * for an unqualified name, common types first; NULL when it is none of them. */
static shk__type *lookup_type(resolver *r, shk__str name, shk__str ns, unsigned what)
{
  shk__str cand[2];
  size_t nc = 0;
  if (qualified(name)) {
    cand[nc++] = name;
  } else {
    if (ns.n)
      cand[nc++] = join(r->a, ns, name);
    cand[nc++] = name;
  }
  for (size_t i = 0; i < nc; i++) {
    const hentry *e;
    if ((what & LK_COMMON) && (e = hmap_get(&r->com, cand[i], NONE)))
      return resolve_common(r, e->val);
    if ((what & LK_ENTITY) && (e = hmap_get(&r->ent, cand[i], NONE)))
      return entity_type(r, r->ent_fq[e->val]);
    if ((what & LK_ACTION) && (e = hmap_get(r->action_types, cand[i], NONE)))
      return entity_type(r, e->a);
  }
  if (!(what & LK_COMMON))
    return NULL;
  if (!qualified(name))
    return builtin(r, name);
  if (name.n > 9 && memcmp(name.p, "__cedar::", 9) == 0 && !qualified((shk__str){ name.p + 9, name.n - 9 }))
    return builtin(r, (shk__str){ name.p + 9, name.n - 9 });
  return NULL;
}

/* An entity type name as written in namespace ns, fully qualified. */
static shk__str resolve_etype_name(resolver *r, shk__str name, shk__str ns, shk__loc loc)
{
  shk__type *t = lookup_type(r, name, ns, LK_ENTITY);
  if (!t)
    rfail(r, loc, "failed to resolve type: %.*s", (int)name.n, name.p);
  return t->name;
}

/* An attribute with its written position, so sorting keeps the order of
 * repeated names. */
typedef struct pos_attr {
  shk__attr_type at;
  size_t pos;
} pos_attr;

static int cmp_pos_attr(const void *x, const void *y)
{
  const pos_attr *a = x, *b = y;
  int c = shk__str_cmp(a->at.name, b->at.name);
  return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static shk__type *resolve(resolver *r, const shk__st *st, shk__str ns)
{
  if (++r->depth > 1000)
    rfail(r, st->loc, "type nested too deeply");
  shk__type *t = NULL;
  switch (st->kind) {
  case SHK__ST_BOOL:
    t = r->t_bool;
    break;
  case SHK__ST_LONG:
    t = r->t_long;
    break;
  case SHK__ST_STRING:
    t = r->t_string;
    break;
  case SHK__ST_SET:
    t = shk__arena_calloc(r->a, sizeof(*t));
    t->kind = SHK__T_SET;
    t->elem = resolve(r, st->elem, ns);
    break;
  case SHK__ST_RECORD: {
    t = shk__arena_calloc(r->a, sizeof(*t));
    t->kind = SHK__T_RECORD;
    size_t n = st->n_attrs;
    pos_attr *v = shk__arena_alloc(r->a, (n ? n : 1) * sizeof(*v));
    for (size_t i = 0; i < n; i++)
      v[i] = (pos_attr){ { st->attrs[i].name, NULL, st->attrs[i].required }, i };
    qsort(v, n, sizeof(*v), cmp_pos_attr);
    /* A repeated attribute keeps its last declaration, as the reference's
     * map does, and only that one is resolved (the reference never looks at
     * the types it dropped). */
    t->attrs = shk__arena_alloc(r->a, (n ? n : 1) * sizeof(*t->attrs));
    size_t *from = shk__arena_alloc(r->a, (n ? n : 1) * sizeof(*from));
    for (size_t i = 0; i < n; i++) {
      if (t->n_attrs && shk__str_eq(t->attrs[t->n_attrs - 1].name, v[i].at.name))
        t->n_attrs--;
      from[t->n_attrs] = v[i].pos;
      t->attrs[t->n_attrs++] = v[i].at;
    }
    for (size_t i = 0; i < t->n_attrs; i++)
      t->attrs[i].type = resolve(r, st->attrs[from[i]].type, ns);
    break;
  }
  case SHK__ST_REF:
  case SHK__ST_COMMON:
    t = lookup_type(r, st->name, ns, st->kind == SHK__ST_REF ? LK_COMMON | LK_ENTITY | LK_ACTION : LK_COMMON);
    if (!t)
      rfail(r, st->loc, "failed to resolve type: %.*s", (int)st->name.n, st->name.p);
    break;
  case SHK__ST_ENTITY:
    t = lookup_type(r, st->name, ns, LK_ENTITY | LK_ACTION);
    if (!t)
      rfail(r, st->loc, "failed to resolve type: %.*s", (int)st->name.n, st->name.p);
    break;
  case SHK__ST_EXT:
    t = qualified(st->name) ? NULL : builtin(r, st->name);
    if (!t || t->kind != SHK__T_EXT)
      rfail(r, st->loc, "unknown extension type `%.*s`", (int)st->name.n, st->name.p);
    break;
  }
  r->depth--;
  return t;
}

static bool reserved_common_name(shk__str s)
{
  static const char *const names[] = { "Bool", "Boolean", "Entity", "EntityOrCommon", "Extension",
                                       "Long", "Record", "Set", "String" };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (s.n == strlen(names[i]) && memcmp(s.p, names[i], s.n) == 0)
      return true;
  return false;
}

/* Declares every name, refusing duplicates, reserved names and shadowing. */
static void declare(resolver *r)
{
  shk__sch *sc = r->sc;
  hmap nsm;
  hmap_init(r->a, &nsm, sc->n_namespaces);
  for (size_t i = 0; i < sc->n_namespaces; i++)
    if (!hmap_put(&nsm, sc->namespaces[i].name, NONE, 0))
      rfail(r, sc->namespaces[i].loc, "duplicate namespace id: `%.*s`", (int)sc->namespaces[i].name.n,
            sc->namespaces[i].name.p);

  hmap_init(r->a, &r->ent, sc->n_etypes);
  r->ent_fq = shk__arena_alloc(r->a, (sc->n_etypes + 1) * sizeof(*r->ent_fq));
  for (size_t i = 0; i < sc->n_etypes; i++) {
    const shk__st_etype *e = &sc->etypes[i];
    if (shk__str_eq(e->name, SHK__STR_LIT("__cedar")))
      rfail(r, e->loc, "use of the reserved `__cedar` namespace");
    r->ent_fq[i] = join(r->a, e->ns, e->name);
    if (shk__str_eq(e->name, SHK__STR_LIT("Action")))
      rfail(r, e->loc, "entity type `%.*s` declared in `entityTypes` list", (int)r->ent_fq[i].n, r->ent_fq[i].p);
    if (!hmap_put(&r->ent, r->ent_fq[i], NONE, (uint32_t)i))
      rfail(r, e->loc, "`%.*s` is declared twice", (int)r->ent_fq[i].n, r->ent_fq[i].p);
  }
  hmap_init(r->a, &r->com, sc->n_commons);
  r->com_fq = shk__arena_alloc(r->a, (sc->n_commons + 1) * sizeof(*r->com_fq));
  r->com_done = shk__arena_calloc(r->a, (sc->n_commons + 1) * sizeof(*r->com_done));
  r->com_state = shk__arena_calloc(r->a, sc->n_commons + 1);
  for (size_t i = 0; i < sc->n_commons; i++) {
    const shk__st_common *c = &sc->commons[i];
    if (shk__str_eq(c->name, SHK__STR_LIT("__cedar")))
      rfail(r, c->loc, "use of the reserved `__cedar` namespace");
    if (reserved_common_name(c->name))
      rfail(r, c->loc, "this uses a reserved schema keyword: `%.*s`", (int)c->name.n, c->name.p);
    r->com_fq[i] = join(r->a, c->ns, c->name);
    if (!hmap_put(&r->com, r->com_fq[i], NONE, (uint32_t)i))
      rfail(r, c->loc, "`%.*s` is declared twice", (int)r->com_fq[i].n, r->com_fq[i].p);
  }
  /* A type declared in a namespace may not shadow one of the empty
   * namespace with the same basename. */
  for (size_t i = 0; i < sc->n_etypes; i++) {
    const shk__st_etype *e = &sc->etypes[i];
    if (e->ns.n && (hmap_get(&r->ent, e->name, NONE) || hmap_get(&r->com, e->name, NONE)))
      rfail(r, e->loc, "definition of `%.*s` illegally shadows the existing definition of `%.*s`",
            (int)r->ent_fq[i].n, r->ent_fq[i].p, (int)e->name.n, e->name.p);
  }
  for (size_t i = 0; i < sc->n_commons; i++) {
    const shk__st_common *c = &sc->commons[i];
    if (c->ns.n && (hmap_get(&r->ent, c->name, NONE) || hmap_get(&r->com, c->name, NONE)))
      rfail(r, c->loc, "definition of `%.*s` illegally shadows the existing definition of `%.*s`",
            (int)r->com_fq[i].n, r->com_fq[i].p, (int)c->name.n, c->name.p);
  }
}

static void declare_actions(resolver *r, schema_priv *priv)
{
  shk__sch *sc = r->sc;
  hmap_init(r->a, &priv->actions, sc->n_actions);
  hmap_init(r->a, &priv->action_types, sc->n_actions);
  r->action_types = &priv->action_types;
  r->act_type = shk__arena_alloc(r->a, (sc->n_actions + 1) * sizeof(*r->act_type));
  for (size_t i = 0; i < sc->n_actions; i++) {
    const shk__st_action *ac = &sc->actions[i];
    r->act_type[i] = join(r->a, ac->ns, SHK__STR_LIT("Action"));
    hmap_put(&priv->action_types, r->act_type[i], NONE, 1);
    if (!hmap_put(&priv->actions, r->act_type[i], ac->name, (uint32_t)i))
      rfail(r, ac->loc, "`%.*s` is declared twice", (int)ac->name.n, ac->name.p);
  }
  for (size_t i = 0; i < sc->n_actions; i++) {
    const shk__st_action *ac = &sc->actions[i];
    if (ac->ns.n && hmap_get(&priv->actions, SHK__STR_LIT("Action"), ac->name))
      rfail(r, ac->loc, "definition of `%.*s::\"%.*s\"` illegally shadows the existing definition of `Action::\"%.*s\"`",
            (int)r->act_type[i].n, r->act_type[i].p, (int)ac->name.n, ac->name.p, (int)ac->name.n, ac->name.p);
  }
}

/* Finds the action a memberOf entry names: the declaring namespace's
 * Action when no type is written; an unqualified type is looked up in the
 * declaring namespace first, then in the empty one. */
static const hentry *find_parent(resolver *r, const schema_priv *priv, const shk__st_action *ac,
                                 const shk__st_aref *ref)
{
  if (!ref->type.n)
    return hmap_get(&priv->actions, join(r->a, ac->ns, SHK__STR_LIT("Action")), ref->id);
  if (qualified(ref->type) || !ac->ns.n)
    return hmap_get(&priv->actions, ref->type, ref->id);
  const hentry *e = hmap_get(&priv->actions, join(r->a, ac->ns, ref->type), ref->id);
  return e ? e : hmap_get(&priv->actions, ref->type, ref->id);
}

/* Depth-first search for a cycle in the action hierarchy; iterative so a
 * long chain cannot exhaust the stack. */
static void check_action_cycles(resolver *r, const uint32_t *const *parents, const size_t *n_parents, size_t n)
{
  uint8_t *state = shk__arena_calloc(r->a, n + 1);
  uint32_t *stack = shk__arena_alloc(r->a, (n + 1) * sizeof(*stack));
  size_t *next_edge = shk__arena_calloc(r->a, (n + 1) * sizeof(*next_edge));
  for (size_t root = 0; root < n; root++) {
    if (state[root])
      continue;
    size_t sp = 0;
    stack[sp++] = (uint32_t)root;
    state[root] = 1;
    while (sp) {
      uint32_t v = stack[sp - 1];
      if (next_edge[v] < n_parents[v]) {
        uint32_t w = parents[v][next_edge[v]++];
        if (state[w] == 1) {
          const shk__action *ac = &r->out->actions[w];
          rfail(r, r->sc->actions[w].loc, "cycle in action hierarchy containing `%.*s::\"%.*s\"`",
                (int)ac->uid.type.n, ac->uid.type.p, (int)ac->uid.id.n, ac->uid.id.p);
        }
        if (!state[w]) {
          state[w] = 1;
          stack[sp++] = w;
        }
      } else {
        state[v] = 2;
        sp--;
      }
    }
  }
}

static void resolve_all(resolver *r, schema_priv *priv)
{
  shk__sch *sc = r->sc;
  shk__schema *out = r->out;
  declare(r);
  declare_actions(r, priv);

  out->n_etypes = sc->n_etypes;
  out->etypes = shk__arena_calloc(r->a, (sc->n_etypes + 1) * sizeof(*out->etypes));
  for (size_t i = 0; i < sc->n_commons; i++)
    resolve_common(r, (uint32_t)i);
  for (size_t i = 0; i < sc->n_etypes; i++) {
    const shk__st_etype *e = &sc->etypes[i];
    shk__entity_type *o = &out->etypes[i];
    o->name = r->ent_fq[i];
    o->loc = e->loc;
    o->n_member_of = e->n_member_of;
    o->member_of = shk__arena_alloc(r->a, (e->n_member_of + 1) * sizeof(*o->member_of));
    for (size_t k = 0; k < e->n_member_of; k++)
      o->member_of[k] = resolve_etype_name(r, e->member_of[k], e->ns, e->loc);
    if (e->shape) {
      o->shape = resolve(r, e->shape, e->ns);
      if (o->shape->kind != SHK__T_RECORD)
        rfail(r, e->loc, "Shape for entity type %.*s is declared with a type other than `Record`", (int)o->name.n,
              o->name.p);
    } else {
      o->shape = shk__arena_calloc(r->a, sizeof(*o->shape));
      o->shape->kind = SHK__T_RECORD;
    }
    o->tags = e->tags ? resolve(r, e->tags, e->ns) : NULL;
    o->is_enum = e->is_enum;
    o->enum_ids = e->enum_ids;
    o->n_enum_ids = e->n_enum_ids;
  }

  out->n_actions = sc->n_actions;
  out->actions = shk__arena_calloc(r->a, (sc->n_actions + 1) * sizeof(*out->actions));
  uint32_t **parents = shk__arena_alloc(r->a, (sc->n_actions + 1) * sizeof(*parents));
  size_t *n_parents = shk__arena_alloc(r->a, (sc->n_actions + 1) * sizeof(*n_parents));
  for (size_t i = 0; i < sc->n_actions; i++) {
    const shk__st_action *ac = &sc->actions[i];
    shk__action *o = &out->actions[i];
    o->uid = (shk__uid){ r->act_type[i], ac->name };
    o->loc = ac->loc;
    o->n_member_of = ac->n_member_of;
    o->member_of = shk__arena_alloc(r->a, (ac->n_member_of + 1) * sizeof(*o->member_of));
    parents[i] = shk__arena_alloc(r->a, (ac->n_member_of + 1) * sizeof(**parents));
    n_parents[i] = ac->n_member_of;
    for (size_t k = 0; k < ac->n_member_of; k++) {
      const shk__st_aref *ref = &ac->member_of[k];
      const hentry *e = find_parent(r, priv, ac, ref);
      if (!e) {
        shk__str ty = ref->type.n ? ref->type : r->act_type[i];
        rfail(r, ac->loc, "undeclared action: %.*s::\"%.*s\"", (int)ty.n, ty.p, (int)ref->id.n, ref->id.p);
      }
      o->member_of[k] = (shk__uid){ e->a, e->b };
      parents[i][k] = e->val;
    }
    o->has_applies_to = ac->has_applies_to;
    o->n_principals = ac->n_principals;
    o->principals = shk__arena_alloc(r->a, (ac->n_principals + 1) * sizeof(*o->principals));
    for (size_t k = 0; k < ac->n_principals; k++)
      o->principals[k] = resolve_etype_name(r, ac->principals[k], ac->ns, ac->loc);
    o->n_resources = ac->n_resources;
    o->resources = shk__arena_alloc(r->a, (ac->n_resources + 1) * sizeof(*o->resources));
    for (size_t k = 0; k < ac->n_resources; k++)
      o->resources[k] = resolve_etype_name(r, ac->resources[k], ac->ns, ac->loc);
    if (ac->context) {
      o->context = resolve(r, ac->context, ac->ns);
      if (o->context->kind != SHK__T_RECORD)
        rfail(r, ac->loc, "Context for action %.*s::\"%.*s\" is declared with a type other than `Record`",
              (int)o->uid.type.n, o->uid.type.p, (int)o->uid.id.n, o->uid.id.p);
    } else {
      o->context = shk__arena_calloc(r->a, sizeof(*o->context));
      o->context->kind = SHK__T_RECORD;
    }
  }
  check_action_cycles(r, (const uint32_t *const *)parents, n_parents, sc->n_actions);

  hmap_init(r->a, &priv->etypes, out->n_etypes);
  for (size_t i = 0; i < out->n_etypes; i++)
    hmap_put(&priv->etypes, out->etypes[i].name, NONE, (uint32_t)i);
}

typedef struct schema_job {
  shk__arena *a;
  const char *text;
  size_t len;
  shk_cedar_schema_format fmt;
  shk_error *err;
  shk__sch sc;
  resolver r;
  shk_cedar_schema *s;
} schema_job;

static int build(void *ctx)
{
  schema_job *j = ctx;
  shk__arena *a = j->a;
  j->sc = (shk__sch){ .a = a };
  int rc = j->fmt == SHK_CEDAR_SCHEMA_JSON ? shk__schema_json_parse(&j->sc, j->text, j->len, j->err)
                                           : shk__schema_text_parse(&j->sc, j->text, j->len, j->err);
  if (rc < 0)
    return rc;
  shk_cedar_schema *s = shk__arena_calloc(a, sizeof(*s));
  schema_priv *priv = shk__arena_calloc(a, sizeof(*priv));
  s->s.arena = a;
  s->s.priv = priv;
  j->r = (resolver){ .a = a, .sc = &j->sc, .out = &s->s, .err = j->err };
  /* The three primitive types are shared by every use. */
  shk__type *prims = shk__arena_calloc(a, 3 * sizeof(*prims));
  prims[0].kind = SHK__T_BOOL;
  prims[1].kind = SHK__T_LONG;
  prims[2].kind = SHK__T_STRING;
  j->r.t_bool = &prims[0];
  j->r.t_long = &prims[1];
  j->r.t_string = &prims[2];
  if (setjmp(j->r.fail))
    return -EINVAL;
  resolve_all(&j->r, priv);
  j->s = s;
  return 0;
}

int shk_cedar_schema_parse(const char *text, size_t len, shk_cedar_schema_format fmt, shk_cedar_schema **out,
                           shk_error *err)
{
  *out = NULL;
  if (err)
    *err = (shk_error){ 0 };
  schema_job j = { .a = shk__arena_new(), .text = text, .len = len, .fmt = fmt, .err = err };
  if (!j.a)
    return shk__error_nomem(err);
  int rc = shk__oom_guard(build, &j, err);
  if (rc < 0) {
    shk__arena_free(j.a);
    return rc;
  }
  *out = j.s;
  return 0;
}

void shk_cedar_schema_free(shk_cedar_schema *s)
{
  if (s)
    shk__arena_free(s->s.arena);
}

const shk__entity_type *shk__schema_entity_type(const shk__schema *s, shk__str name)
{
  const schema_priv *priv = s->priv;
  const hentry *e = hmap_get(&priv->etypes, name, NONE);
  return e ? &s->etypes[e->val] : NULL;
}

bool shk__schema_enum_member(const shk__schema *s, const shk__uid *u)
{
  const shk__entity_type *et = shk__schema_entity_type(s, u->type);
  if (!et || !et->is_enum)
    return true;
  for (size_t i = 0; i < et->n_enum_ids; i++)
    if (shk__str_eq(et->enum_ids[i], u->id))
      return true;
  return false;
}

const shk__action *shk__schema_action(const shk__schema *s, shk__uid uid)
{
  const schema_priv *priv = s->priv;
  const hentry *e = hmap_get(&priv->actions, uid.type, uid.id);
  return e ? &s->actions[e->val] : NULL;
}

bool shk__schema_is_action_type(const shk__schema *s, shk__str name)
{
  const schema_priv *priv = s->priv;
  return hmap_get(&priv->action_types, name, NONE) != NULL;
}

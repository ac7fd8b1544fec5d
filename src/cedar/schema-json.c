/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON schema form: jansson's tree to the unresolved shk__sch. As in
 * the reference, an unknown field or a repeated key is an error, and every
 * name is checked; schema.c then resolves names as for the text form. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "cedar/cedar-parse-internal.h"

/* The parser's state. The JSON trees are freed by shk__schema_json_parse,
 * after a syntax error and after an out-of-memory unwind alike. */
typedef struct jparser {
  shk__sch *sc;
  shk__arena *a;
  shk_error *err;
  jmp_buf fail;
  unsigned depth;
  const char *text;
  size_t len;
  json_t *root;
  json_t *empty; /* {}, standing in for [] (see struct_value) */
} jparser;

__attribute__((noreturn, format(printf, 2, 3))) static void jfail(jparser *p, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  shk__error_vat(p->err, -EINVAL, NULL, 0, 0, fmt, ap);
  va_end(ap);
  longjmp(p->fail, 1);
}

static shk__str jstr(jparser *p, const json_t *v, const char *what)
{
  if (!json_is_string(v))
    jfail(p, "%s must be a string", what);
  return shk__json_str(p->a, (json_t *)v);
}

/* An object key, decoded the way shk__json_load encoded it (NUL is allowed
 * in names). */
static shk__str key_str(jparser *p, const char *key)
{
  return shk__json_decode(p->a, key, strlen(key));
}

/* Identifier syntax, reserved words allowed (annotation keys). */
static bool any_ident(const char *s)
{
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
    return false;
  for (s++; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

/* Refuses any key of `obj` not in the NULL-terminated list `allowed`. */
static void only_keys(jparser *p, const json_t *obj, const char *what, const char *const *allowed)
{
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)obj, k, v) {
    bool ok = false;
    for (size_t i = 0; allowed[i]; i++)
      ok = ok || strcmp(k, allowed[i]) == 0;
    if (!ok)
      jfail(p, "unknown field `%s` in %s", k, what);
  }
}

static const json_t *need_object(jparser *p, const json_t *v, const char *what)
{
  if (!json_is_object(v))
    jfail(p, "%s must be a JSON object", what);
  return v;
}

/* The value of an entity type or an action. The reference's JSON reader
 * (serde) also takes a struct as an array of its fields in order; the empty
 * array, which is the only such form seen in practice, means {} here, and
 * any other array is refused. */
static json_t *struct_value(jparser *p, json_t *v, const char *what)
{
  if (json_is_array(v) && json_array_size(v) == 0) {
    if (!p->empty && !(p->empty = json_object()))
      shk__oom_unwind();
    return p->empty;
  }
  need_object(p, v, what);
  return v;
}

static void check_annotations(jparser *p, const json_t *v)
{
  if (!v)
    return;
  need_object(p, v, "annotations");
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    if (!any_ident(k))
      jfail(p, "invalid annotation key `%s`", k);
    if (!json_is_string(x) && !json_is_null(x))
      jfail(p, "annotation `%s` must be a string", k);
  }
}

/* A type or entity name: Ident {"::" Ident}, __cedar allowed only where the
 * built-in types are meant (the resolver decides). */
static shk__str type_name(jparser *p, const json_t *v, const char *what)
{
  shk__str s = jstr(p, v, what);
  bool ok = shk__is_valid_name(s.p, s.n);
  if (!ok && s.n > 9 && memcmp(s.p, "__cedar::", 9) == 0)
    ok = shk__is_valid_name(s.p + 9, s.n - 9);
  if (!ok)
    jfail(p, "invalid name `%.*s` in %s", (int)s.n, s.p, what);
  return s;
}

/* Where a type object appears: an attribute's type may say "required", and
 * it and a common type's definition may carry annotations. */
typedef enum jpos { J_NESTED, J_ATTR, J_COMMON } jpos;

static shk__st *jtype(jparser *p, const json_t *v, jpos pos, bool *required);

static shk__st *new_type(jparser *p, shk__st_kind k)
{
  shk__st *t = shk__arena_calloc(p->a, sizeof(*t));
  t->kind = k;
  return t;
}

static shk__st *record(jparser *p, const json_t *v)
{
  shk__st *t = new_type(p, SHK__ST_RECORD);
  const json_t *add = json_object_get(v, "additionalAttributes");
  if (add && !json_is_false(add)) {
    if (!json_is_true(add))
      jfail(p, "additionalAttributes must be a boolean");
    jfail(p, "records with additionalAttributes are not supported");
  }
  const json_t *attrs = json_object_get(v, "attributes");
  if (!attrs)
    jfail(p, "missing field `attributes` in a Record type");
  need_object(p, attrs, "attributes");
  t->n_attrs = json_object_size(attrs);
  t->attrs = shk__arena_calloc(p->a, (t->n_attrs ? t->n_attrs : 1) * sizeof(*t->attrs));
  size_t i = 0;
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)attrs, k, x) {
    t->attrs[i].name = key_str(p, k);
    t->attrs[i].type = jtype(p, x, J_ATTR, &t->attrs[i].required);
    i++;
  }
  return t;
}

/* One type object, at position `pos`; *required gets "required" (true by
 * default) for an attribute. */
static shk__st *jtype(jparser *p, const json_t *v, jpos pos, bool *required)
{
  if (++p->depth > 200)
    jfail(p, "type nested too deeply");
  need_object(p, v, "a type");
  const json_t *ty = json_object_get(v, "type");
  if (!ty)
    jfail(p, "a type needs a `type` field");
  shk__str kind = jstr(p, ty, "`type`");
  if (required) {
    const json_t *rq = json_object_get(v, "required");
    if (rq && !json_is_boolean(rq))
      jfail(p, "`required` must be a boolean");
    *required = !rq || json_is_true(rq);
  }
  shk__st *t;
  const char *const *keys;
  static const char *const k_plain[] = { "type", "required", "annotations", NULL };
  static const char *const k_set[] = { "type", "element", "required", "annotations", NULL };
  static const char *const k_rec[] = { "type", "attributes", "additionalAttributes", "required", "annotations", NULL };
  static const char *const k_named[] = { "type", "name", "required", "annotations", NULL };
  if (shk__str_eq(kind, SHK__STR_LIT("String")) || shk__str_eq(kind, SHK__STR_LIT("Long")) ||
      shk__str_eq(kind, SHK__STR_LIT("Boolean"))) {
    t = new_type(p, kind.p[0] == 'S' ? SHK__ST_STRING : kind.p[0] == 'L' ? SHK__ST_LONG : SHK__ST_BOOL);
    keys = k_plain;
  } else if (shk__str_eq(kind, SHK__STR_LIT("Set"))) {
    const json_t *el = json_object_get(v, "element");
    if (!el)
      jfail(p, "missing field `element` in a Set type");
    t = new_type(p, SHK__ST_SET);
    t->elem = jtype(p, el, J_NESTED, NULL);
    keys = k_set;
  } else if (shk__str_eq(kind, SHK__STR_LIT("Record"))) {
    t = record(p, v);
    keys = k_rec;
  } else if (shk__str_eq(kind, SHK__STR_LIT("Entity")) || shk__str_eq(kind, SHK__STR_LIT("EntityOrCommon")) ||
             shk__str_eq(kind, SHK__STR_LIT("Extension"))) {
    const json_t *nm = json_object_get(v, "name");
    if (!nm)
      jfail(p, "missing field `name` in a %.*s type", (int)kind.n, kind.p);
    t = new_type(p, kind.p[1] == 'x' ? SHK__ST_EXT : kind.n == 6 ? SHK__ST_ENTITY : SHK__ST_REF);
    t->name = type_name(p, nm, "a type name");
    keys = k_named;
  } else {
    /* Any other name is a common type (or a built-in reached by name). */
    if (!shk__is_valid_name(kind.p, kind.n) &&
        !(kind.n > 9 && memcmp(kind.p, "__cedar::", 9) == 0 && shk__is_valid_name(kind.p + 9, kind.n - 9)))
      jfail(p, "invalid type `%.*s`", (int)kind.n, kind.p);
    t = new_type(p, SHK__ST_COMMON);
    t->name = kind;
    keys = k_plain;
  }
  only_keys(p, v, pos == J_ATTR ? "an attribute type" : "a type", keys);
  if (pos != J_ATTR && json_object_get(v, "required"))
    jfail(p, "unknown field `required` in a type");
  if (pos == J_NESTED && json_object_get(v, "annotations"))
    jfail(p, "unknown field `annotations` in a type");
  check_annotations(p, json_object_get(v, "annotations"));
  p->depth--;
  return t;
}

static bool is_reserved_ident(shk__str s)
{
  return !shk__is_valid_name(s.p, s.n) || memchr(s.p, ':', s.n) != NULL;
}

static shk__str *name_list(jparser *p, const json_t *v, const char *what, size_t *n)
{
  if (!json_is_array(v))
    jfail(p, "%s must be an array", what);
  *n = json_array_size(v);
  shk__str *out = shk__arena_alloc(p->a, (*n ? *n : 1) * sizeof(*out));
  for (size_t i = 0; i < *n; i++)
    out[i] = type_name(p, json_array_get(v, i), what);
  return out;
}

static void entity_types(jparser *p, shk__str ns, const json_t *v)
{
  need_object(p, v, "entityTypes");
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    shk__str name = key_str(p, k);
    if (is_reserved_ident(name))
      jfail(p, "invalid entity type name `%s`", k);
    x = struct_value(p, x, "an entity type");
    shk__st_etype *e = SHK__PUSH(p->a, p->sc->etypes, p->sc->n_etypes, p->sc->cap_etypes);
    *e = (shk__st_etype){ .ns = ns, .name = name };
    check_annotations(p, json_object_get(x, "annotations"));
    const json_t *en = json_object_get(x, "enum");
    if (en) {
      static const char *const ekeys[] = { "enum", "annotations", NULL };
      only_keys(p, x, "an enum entity type", ekeys);
      if (!json_is_array(en) || json_array_size(en) == 0)
        jfail(p, "`enum` of entity type `%s` must be a non-empty array of strings", k);
      e->is_enum = true;
      e->n_enum_ids = json_array_size(en);
      e->enum_ids = shk__arena_alloc(p->a, e->n_enum_ids * sizeof(*e->enum_ids));
      for (size_t i = 0; i < e->n_enum_ids; i++)
        e->enum_ids[i] = jstr(p, json_array_get(en, i), "an enum choice");
      continue;
    }
    static const char *const keys[] = { "memberOfTypes", "shape", "tags", "annotations", NULL };
    only_keys(p, x, "an entity type", keys);
    const json_t *m = json_object_get(x, "memberOfTypes");
    if (m)
      e->member_of = name_list(p, m, "memberOfTypes", &e->n_member_of);
    const json_t *sh = json_object_get(x, "shape");
    if (sh)
      e->shape = jtype(p, sh, J_NESTED, NULL);
    const json_t *tg = json_object_get(x, "tags");
    if (tg)
      e->tags = jtype(p, tg, J_NESTED, NULL);
  }
}

static void actions(jparser *p, shk__str ns, const json_t *v)
{
  need_object(p, v, "actions");
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    x = struct_value(p, x, "an action");
    static const char *const keys[] = { "memberOf", "appliesTo", "attributes", "annotations", NULL };
    only_keys(p, x, "an action", keys);
    check_annotations(p, json_object_get(x, "annotations"));
    shk__st_action *ac = SHK__PUSH(p->a, p->sc->actions, p->sc->n_actions, p->sc->cap_actions);
    *ac = (shk__st_action){ .ns = ns, .name = key_str(p, k) };
    const json_t *attrs = json_object_get(x, "attributes");
    if (attrs && !json_is_null(attrs))
      jfail(p, "unsupported feature used in schema: action declared with attributes: [%s]", k);
    const json_t *m = json_object_get(x, "memberOf");
    if (m && !json_is_null(m)) {
      if (!json_is_array(m))
        jfail(p, "memberOf must be an array");
      ac->n_member_of = json_array_size(m);
      ac->member_of = shk__arena_calloc(p->a, (ac->n_member_of ? ac->n_member_of : 1) * sizeof(*ac->member_of));
      for (size_t i = 0; i < ac->n_member_of; i++) {
        const json_t *ref = need_object(p, json_array_get(m, i), "a memberOf entry");
        static const char *const rkeys[] = { "id", "type", NULL };
        only_keys(p, ref, "a memberOf entry", rkeys);
        const json_t *id = json_object_get(ref, "id");
        if (!id)
          jfail(p, "missing field `id` in a memberOf entry");
        ac->member_of[i].id = jstr(p, id, "`id`");
        const json_t *ty = json_object_get(ref, "type");
        if (ty && !json_is_null(ty))
          ac->member_of[i].type = type_name(p, ty, "`type`");
      }
    }
    const json_t *ap = json_object_get(x, "appliesTo");
    if (ap && !json_is_null(ap)) {
      need_object(p, ap, "appliesTo");
      static const char *const akeys[] = { "principalTypes", "resourceTypes", "context", NULL };
      only_keys(p, ap, "appliesTo", akeys);
      const json_t *pt = json_object_get(ap, "principalTypes");
      const json_t *rt = json_object_get(ap, "resourceTypes");
      if (!pt)
        jfail(p, "missing field `principalTypes`");
      if (!rt)
        jfail(p, "missing field `resourceTypes`");
      ac->has_applies_to = true;
      ac->principals = name_list(p, pt, "principalTypes", &ac->n_principals);
      ac->resources = name_list(p, rt, "resourceTypes", &ac->n_resources);
      const json_t *cx = json_object_get(ap, "context");
      if (cx)
        ac->context = jtype(p, cx, J_NESTED, NULL);
    }
  }
}

static void common_types(jparser *p, shk__str ns, const json_t *v)
{
  need_object(p, v, "commonTypes");
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    shk__str name = key_str(p, k);
    if (is_reserved_ident(name))
      jfail(p, "invalid common type name `%s`", k);
    shk__st_common *c = SHK__PUSH(p->a, p->sc->commons, p->sc->n_commons, p->sc->cap_commons);
    *c = (shk__st_common){ .ns = ns, .name = name, .type = jtype(p, x, J_COMMON, NULL) };
  }
}

static void parse_root(jparser *p, const json_t *root)
{
  need_object(p, root, "a JSON schema");
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)root, k, x) {
    shk__str ns = key_str(p, k);
    if (ns.n) {
      if (!shk__is_valid_name(ns.p, ns.n))
        jfail(p, "invalid namespace `%s`", k);
      for (const char *s = k; (s = strstr(s, "__cedar")); s += 7)
        if ((s == k || s[-1] == ':') && (s[7] == '\0' || s[7] == ':'))
          jfail(p, "use of the reserved `__cedar` namespace");
      shk__st_ns *d = SHK__PUSH(p->a, p->sc->namespaces, p->sc->n_namespaces, p->sc->cap_namespaces);
      *d = (shk__st_ns){ ns, { 0, 0 } };
    }
    need_object(p, x, "a namespace");
    static const char *const keys[] = { "commonTypes", "entityTypes", "actions", "annotations", NULL };
    only_keys(p, x, "a namespace", keys);
    const json_t *an = json_object_get(x, "annotations");
    check_annotations(p, an);
    if (!ns.n && an && json_object_size(an))
      jfail(p, "annotations are not allowed on the empty namespace");
    const json_t *et = json_object_get(x, "entityTypes");
    const json_t *ac = json_object_get(x, "actions");
    if (!et)
      jfail(p, "missing field `entityTypes` in namespace `%s`", k);
    if (!ac)
      jfail(p, "missing field `actions` in namespace `%s`", k);
    const json_t *ct = json_object_get(x, "commonTypes");
    if (ct)
      common_types(p, ns, ct);
    entity_types(p, ns, et);
    actions(p, ns, ac);
  }
}

static int parse(void *ctx)
{
  jparser *p = ctx;
  if (!(p->root = shk__json_load(p->text, p->len, "JSON schema", p->err)))
    return -EINVAL;
  if (setjmp(p->fail))
    return -EINVAL;
  parse_root(p, p->root);
  return 0;
}

int shk__schema_json_parse(shk__sch *sc, const char *text, size_t len, shk_error *err)
{
  jparser p = { .sc = sc, .a = sc->a, .err = err, .text = text ? text : "", .len = text ? len : 0 };
  int r = shk__oom_guard(parse, &p, err);
  json_decref(p.empty);
  json_decref(p.root);
  return r;
}

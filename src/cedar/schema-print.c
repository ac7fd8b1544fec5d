/* SPDX-License-Identifier: Apache-2.0 */
/* A schema written back out, as JSON or as .cedarschema text, from its
 * resolved form: every name fully qualified, common types inlined. The
 * result declares the same entity types and actions with the same types;
 * what only served to write it (common type names, comments) is not kept.
 * Out of memory makes either writer return NULL (see est.c for the JSON
 * builders, src/common for the text buffer). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-format-internal.h"
#include "common/common.h"

/* "A::B::T" -> namespace "A::B" (length) and basename "T". */
static size_t ns_len(shk__str name)
{
  for (size_t i = name.n; i >= 2; i--)
    if (name.p[i - 1] == ':' && name.p[i - 2] == ':')
      return i - 2;
  return 0;
}

static shk__str base(shk__str name)
{
  size_t n = ns_len(name);
  return n ? (shk__str){ name.p + n + 2, name.n - n - 2 } : name;
}

static json_t *jstr(shk__str s)
{
  return json_stringn(s.p ? s.p : "", s.n);
}

/* ------------------------------------------------------------ JSON */

static json_t *type_json(const shk__type *t)
{
  switch (t->kind) {
  case SHK__T_BOOL: return json_pack("{s:s}", "type", "Boolean");
  case SHK__T_LONG: return json_pack("{s:s}", "type", "Long");
  case SHK__T_STRING: return json_pack("{s:s}", "type", "String");
  case SHK__T_SET: return json_pack("{s:s, s:o}", "type", "Set", "element", type_json(t->elem));
  case SHK__T_ENTITY: return json_pack("{s:s, s:o}", "type", "Entity", "name", jstr(t->name));
  case SHK__T_EXT: return json_pack("{s:s, s:o}", "type", "Extension", "name", jstr(t->name));
  case SHK__T_RECORD: {
    json_t *attrs = json_object();
    for (size_t i = 0; i < t->n_attrs && attrs; i++) {
      json_t *a = type_json(t->attrs[i].type);
      if (!t->attrs[i].required)
        a = shk__json_put(a, "required", strlen("required"), json_false());
      attrs = shk__json_put(attrs, t->attrs[i].name.p, t->attrs[i].name.n, a);
    }
    return json_pack("{s:s, s:o}", "type", "Record", "attributes", attrs);
  }
  }
  return json_null();
}

/* Puts O under key K (N bytes) in the SECTION ("entityTypes" or
 * "actions") of the namespace of NAME in ROOT, making the namespace when
 * it is new. False when out of memory; O is taken either way. */
static bool add(json_t *root, shk__str name, const char *section, const char *k, size_t n, json_t *o)
{
  char *key = shk__strndup(name.p, ns_len(name));
  json_t *ns = key ? json_object_get(root, key) : NULL;
  if (key && !ns) {
    ns = json_pack("{s:{}, s:{}}", "entityTypes", "actions");
    if (!ns || json_object_set_new(root, key, ns) < 0)
      ns = NULL;
  }
  free(key);
  json_t *sec = ns ? json_object_get(ns, section) : NULL;
  if (!sec || !o) {
    json_decref(o);
    return false;
  }
  return json_object_setn_new_nocheck(sec, k, n, o) == 0;
}

static json_t *names_json(const shk__str *v, size_t n)
{
  json_t *a = json_array();
  for (size_t k = 0; k < n && a; k++)
    a = shk__json_push(a, jstr(v[k]));
  return a;
}

char *shk_cedar_schema_to_json(const shk_cedar_schema *schema)
{
  const shk__schema *s = &schema->s;
  json_t *root = json_object();
  bool ok = root != NULL;
  for (size_t i = 0; i < s->n_etypes && ok; i++) {
    const shk__entity_type *et = &s->etypes[i];
    json_t *o = json_object();
    if (et->is_enum) {
      o = shk__json_put(o, "enum", strlen("enum"), names_json(et->enum_ids, et->n_enum_ids));
    } else {
      o = shk__json_put(o, "memberOfTypes", strlen("memberOfTypes"), names_json(et->member_of, et->n_member_of));
      o = shk__json_put(o, "shape", strlen("shape"), type_json(et->shape));
      if (et->tags)
        o = shk__json_put(o, "tags", strlen("tags"), type_json(et->tags));
    }
    shk__str b = base(et->name);
    ok = add(root, et->name, "entityTypes", b.p, b.n, o);
  }
  for (size_t i = 0; i < s->n_actions && ok; i++) {
    const shk__action *ac = &s->actions[i];
    json_t *mo = json_array();
    for (size_t k = 0; k < ac->n_member_of && mo; k++)
      mo = shk__json_push(mo, json_pack("{s:o, s:o}", "id", jstr(ac->member_of[k].id), "type",
                                        jstr(ac->member_of[k].type)));
    json_t *o = shk__json_put(json_object(), "memberOf", strlen("memberOf"), mo);
    if (ac->has_applies_to)
      o = shk__json_put(o, "appliesTo", strlen("appliesTo"),
                        json_pack("{s:o, s:o, s:o}", "principalTypes", names_json(ac->principals, ac->n_principals),
                                  "resourceTypes", names_json(ac->resources, ac->n_resources), "context",
                                  type_json(ac->context)));
    ok = add(root, ac->uid.type, "actions", ac->uid.id.p, ac->uid.id.n, o);
  }
  char *text = ok ? shk__json_dumps(root) : NULL;
  json_decref(root);
  return text;
}

/* ------------------------------------------------------------ text */

static void text_name(shk__buf *b, shk__str n)
{
  /* A qualified name is absolute; an unqualified one names the empty
   * namespace. */
  shk__buf_put(b, n.p, n.n);
}

static void text_type(shk__buf *b, const shk__type *t, int indent)
{
  switch (t->kind) {
  /* Built-in types by their reserved names, so that an entity or common
   * type called Long, String or Bool cannot capture them. */
  case SHK__T_BOOL: shk__buf_puts(b, "__cedar::Bool"); return;
  case SHK__T_LONG: shk__buf_puts(b, "__cedar::Long"); return;
  case SHK__T_STRING: shk__buf_puts(b, "__cedar::String"); return;
  case SHK__T_SET:
    shk__buf_puts(b, "Set<");
    text_type(b, t->elem, indent);
    shk__buf_puts(b, ">");
    return;
  case SHK__T_ENTITY: case SHK__T_EXT:
    if (t->kind == SHK__T_EXT)
      shk__buf_puts(b, "__cedar::");
    text_name(b, t->name);
    return;
  case SHK__T_RECORD:
    if (!t->n_attrs) {
      shk__buf_puts(b, "{}");
      return;
    }
    shk__buf_puts(b, "{\n");
    for (size_t i = 0; i < t->n_attrs; i++) {
      shk__buf_printf(b, "%*s", indent + 2, "");
      shk__buf_quote(b, t->attrs[i].name.p, t->attrs[i].name.n, false);
      shk__buf_puts(b, t->attrs[i].required ? ": " : "?: ");
      text_type(b, t->attrs[i].type, indent + 2);
      shk__buf_puts(b, ",\n");
    }
    shk__buf_printf(b, "%*s}", indent, "");
    return;
  }
}

static void text_names(shk__buf *b, const shk__str *v, size_t n)
{
  shk__buf_puts(b, "[");
  for (size_t i = 0; i < n; i++) {
    if (i)
      shk__buf_puts(b, ", ");
    text_name(b, v[i]);
  }
  shk__buf_puts(b, "]");
}

char *shk_cedar_schema_to_text(const shk_cedar_schema *schema)
{
  const shk__schema *s = &schema->s;
  shk__buf b = { 0 };
  /* One namespace block per distinct namespace, in order of appearance. */
  size_t total = s->n_etypes + s->n_actions;
  shk__str *seen = shk__calloc(total + 1, sizeof *seen);
  if (!seen)
    return NULL;
  size_t n_seen = 0;
  for (size_t i = 0; i < total; i++) {
    shk__str name = i < s->n_etypes ? s->etypes[i].name : s->actions[i - s->n_etypes].uid.type;
    shk__str ns = { name.p, ns_len(name) };
    bool dup = false;
    for (size_t k = 0; k < n_seen && !dup; k++)
      dup = shk__str_eq(seen[k], ns);
    if (!dup)
      seen[n_seen++] = ns;
  }
  for (size_t k = 0; k < n_seen; k++) {
    shk__str ns = seen[k];
    int ind = ns.n ? 2 : 0;
    if (ns.n) {
      shk__buf_puts(&b, "namespace ");
      shk__buf_put(&b, ns.p, ns.n);
      shk__buf_puts(&b, " {\n");
    }
    for (size_t i = 0; i < s->n_etypes; i++) {
      const shk__entity_type *et = &s->etypes[i];
      if (ns_len(et->name) != ns.n || (ns.n && memcmp(et->name.p, ns.p, ns.n)))
        continue;
      shk__str bn = base(et->name);
      shk__buf_printf(&b, "%*sentity ", ind, "");
      shk__buf_put(&b, bn.p, bn.n);
      if (et->is_enum) {
        shk__buf_puts(&b, " enum [");
        for (size_t j = 0; j < et->n_enum_ids; j++) {
          if (j)
            shk__buf_puts(&b, ", ");
          shk__buf_quote(&b, et->enum_ids[j].p, et->enum_ids[j].n, false);
        }
        shk__buf_puts(&b, "];\n");
        continue;
      }
      if (et->n_member_of) {
        shk__buf_puts(&b, " in ");
        text_names(&b, et->member_of, et->n_member_of);
      }
      shk__buf_puts(&b, " = ");
      text_type(&b, et->shape, ind);
      if (et->tags) {
        shk__buf_puts(&b, " tags ");
        text_type(&b, et->tags, ind);
      }
      shk__buf_puts(&b, ";\n");
    }
    for (size_t i = 0; i < s->n_actions; i++) {
      const shk__action *ac = &s->actions[i];
      if (ns_len(ac->uid.type) != ns.n || (ns.n && memcmp(ac->uid.type.p, ns.p, ns.n)))
        continue;
      shk__buf_printf(&b, "%*saction ", ind, "");
      shk__buf_quote(&b, ac->uid.id.p, ac->uid.id.n, false);
      if (ac->n_member_of) {
        shk__buf_puts(&b, " in [");
        for (size_t j = 0; j < ac->n_member_of; j++) {
          if (j)
            shk__buf_puts(&b, ", ");
          shk__buf_uid(&b, ac->member_of[j]);
        }
        shk__buf_puts(&b, "]");
      }
      if (ac->has_applies_to) {
        shk__buf_puts(&b, " appliesTo {\n");
        shk__buf_printf(&b, "%*sprincipal: ", ind + 2, "");
        text_names(&b, ac->principals, ac->n_principals);
        shk__buf_printf(&b, ",\n%*sresource: ", ind + 2, "");
        text_names(&b, ac->resources, ac->n_resources);
        shk__buf_printf(&b, ",\n%*scontext: ", ind + 2, "");
        text_type(&b, ac->context, ind + 2);
        shk__buf_printf(&b, "\n%*s}", ind, "");
      }
      shk__buf_puts(&b, ";\n");
    }
    if (ns.n)
      shk__buf_puts(&b, "}\n");
  }
  free(seen);
  return shk__buf_take(&b);
}

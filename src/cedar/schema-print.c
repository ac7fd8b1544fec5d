/* A schema written back out, as JSON or as .cedarschema text, from its
 * resolved form: every name fully qualified, common types inlined. The
 * result declares the same entity types and actions with the same types;
 * what only served to write it (common type names, comments) is not kept. */
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
    for (size_t i = 0; i < t->n_attrs; i++) {
      json_t *a = type_json(t->attrs[i].type);
      if (!t->attrs[i].required)
        json_object_set_new(a, "required", json_false());
      json_object_setn_new_nocheck(attrs, t->attrs[i].name.p, t->attrs[i].name.n, a);
    }
    return json_pack("{s:s, s:o}", "type", "Record", "attributes", attrs);
  }
  }
  return json_null();
}

static json_t *namespace_obj(json_t *root, shk__str name)
{
  size_t n = ns_len(name);
  char *key = strndup(name.p, n);
  json_t *ns = json_object_get(root, key);
  if (!ns) {
    ns = json_pack("{s:{}, s:{}}", "entityTypes", "actions");
    json_object_set_new(root, key, ns);
  }
  free(key);
  return ns;
}

char *shk_cedar_schema_to_json(const shk_cedar_schema *schema)
{
  const shk__schema *s = &schema->s;
  json_t *root = json_object();
  for (size_t i = 0; i < s->n_etypes; i++) {
    const shk__entity_type *et = &s->etypes[i];
    json_t *o = json_object();
    if (et->is_enum) {
      json_t *ids = json_array();
      for (size_t k = 0; k < et->n_enum_ids; k++)
        json_array_append_new(ids, jstr(et->enum_ids[k]));
      json_object_set_new(o, "enum", ids);
    } else {
      json_t *mo = json_array();
      for (size_t k = 0; k < et->n_member_of; k++)
        json_array_append_new(mo, jstr(et->member_of[k]));
      json_object_set_new(o, "memberOfTypes", mo);
      json_object_set_new(o, "shape", type_json(et->shape));
      if (et->tags)
        json_object_set_new(o, "tags", type_json(et->tags));
    }
    shk__str b = base(et->name);
    json_object_setn_new_nocheck(json_object_get(namespace_obj(root, et->name), "entityTypes"), b.p, b.n, o);
  }
  for (size_t i = 0; i < s->n_actions; i++) {
    const shk__action *ac = &s->actions[i];
    json_t *o = json_object();
    json_t *mo = json_array();
    for (size_t k = 0; k < ac->n_member_of; k++)
      json_array_append_new(mo, json_pack("{s:o, s:o}", "id", jstr(ac->member_of[k].id), "type",
                                          jstr(ac->member_of[k].type)));
    json_object_set_new(o, "memberOf", mo);
    if (ac->has_applies_to) {
      json_t *pt = json_array(), *rt = json_array();
      for (size_t k = 0; k < ac->n_principals; k++)
        json_array_append_new(pt, jstr(ac->principals[k]));
      for (size_t k = 0; k < ac->n_resources; k++)
        json_array_append_new(rt, jstr(ac->resources[k]));
      json_object_set_new(o, "appliesTo", json_pack("{s:o, s:o, s:o}", "principalTypes", pt, "resourceTypes",
                                                    rt, "context", type_json(ac->context)));
    }
    json_object_setn_new_nocheck(json_object_get(namespace_obj(root, ac->uid.type), "actions"), ac->uid.id.p,
                                 ac->uid.id.n, o);
  }
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!text)
    shk__die(1, "out of memory");
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
  shk__buf_puts(&b, "");
  /* One namespace block per distinct namespace, in order of appearance. */
  size_t total = s->n_etypes + s->n_actions;
  shk__str *seen = shk__xcalloc(total + 1, sizeof *seen);
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
  return b.p;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The entity store and the JSON forms of values.
 *
 * Entities are parsed once: their attributes become values in the store's
 * arena, entity references in them stay uids, and the transitive closure of
 * the parent relation is computed here, so that `in` during a decision is a
 * hash lookup plus a binary search. Untrusted JSON never reaches the
 * evaluator: anything that does not conform is an error here, naming the
 * entity and attribute. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"

/* Whether TEXT is JSON that jansson's parser accepts as to its syntax (an
 * array or an object at the top, jansson's tokens), read without
 * allocating. jansson reports some of its own allocation failures as
 * syntax errors (a token it could not store is "invalid"), so a syntax
 * error in a text that has none was running out of memory. The semantic
 * refusals (a duplicate key, a number too large, nesting too deep, bad
 * UTF-8) have codes of their own and are not asked about here. */
static bool json_wellformed(const char *text, size_t len)
{
  enum { MAX_DEPTH = 2048 };
  unsigned char in_object[MAX_DEPTH / 8] = { 0 };
  const unsigned char *s = (const unsigned char *)text, *end = s + len;
  size_t depth = 0;
  bool want_value = true, want_key = false;
#define WS() while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++
#define OBJ(d) ((in_object[(d) / 8] >> ((d) % 8)) & 1)
  WS();
  if (s == end || (*s != '[' && *s != '{'))
    return false;
  for (;;) {
    WS();
    if (s == end)
      return false;
    if (want_value || want_key) {
      if (want_value && (*s == '[' || *s == '{')) {
        if (depth == MAX_DEPTH)
          return false;
        in_object[depth / 8] = (unsigned char)((in_object[depth / 8] & ~(1u << (depth % 8))) |
                                               ((*s == '{') << (depth % 8)));
        depth++;
        bool obj = *s++ == '{';
        WS();
        if (s < end && *s == (obj ? '}' : ']')) {
          s++;
          depth--;
          want_value = want_key = false;
        } else {
          want_value = !obj;
          want_key = obj;
        }
        continue;
      }
      if (*s == '"') {
        for (s++;; s++) {
          if (s == end || *s < 0x20)
            return false;
          if (*s == '"')
            break;
          if (*s != '\\')
            continue;
          if (++s == end)
            return false;
          if (*s != 'u') {
            if (!strchr("\"\\/bfnrt", *s) || !*s)
              return false;
            continue;
          }
          /* \uXXXX, a high surrogate only with a low one after it. */
          unsigned v = 0;
          for (int k = 0; k < 4; k++) {
            if (++s == end || shk__hex_value(*s) < 0)
              return false;
            v = v * 16 + (unsigned)shk__hex_value(*s);
          }
          if (v >= 0xDC00 && v <= 0xDFFF)
            return false;
          if (v >= 0xD800 && v <= 0xDBFF) {
            if (end - s < 7 || s[1] != '\\' || s[2] != 'u')
              return false;
            unsigned lo = 0;
            for (int k = 3; k < 7; k++) {
              if (shk__hex_value(s[k]) < 0)
                return false;
              lo = lo * 16 + (unsigned)shk__hex_value(s[k]);
            }
            if (lo < 0xDC00 || lo > 0xDFFF)
              return false;
            s += 6;
          }
        }
        s++;
        if (want_key) {
          WS();
          if (s == end || *s++ != ':')
            return false;
          want_key = false;
          want_value = true;
          continue;
        }
      } else if (want_key) {
        return false;
      } else if (*s == '-' || (*s >= '0' && *s <= '9')) {
        if (*s == '-' && ++s == end)
          return false;
        if (*s == '0') {
          s++;
          if (s < end && *s >= '0' && *s <= '9')
            return false;
        } else if (*s >= '1' && *s <= '9') {
          while (s < end && *s >= '0' && *s <= '9')
            s++;
        } else {
          return false;
        }
        if (s < end && *s == '.') {
          if (++s == end || *s < '0' || *s > '9')
            return false;
          while (s < end && *s >= '0' && *s <= '9')
            s++;
        }
        if (s < end && (*s == 'e' || *s == 'E')) {
          if (++s < end && (*s == '+' || *s == '-'))
            s++;
          if (s == end || *s < '0' || *s > '9')
            return false;
          while (s < end && *s >= '0' && *s <= '9')
            s++;
        }
      } else {
        /* jansson reads a run of letters as one word. */
        const unsigned char *w = s;
        while (s < end && ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
          s++;
        size_t n = (size_t)(s - w);
        if (!((n == 4 && !memcmp(w, "true", 4)) || (n == 5 && !memcmp(w, "false", 5)) ||
              (n == 4 && !memcmp(w, "null", 4))))
          return false;
      }
      want_value = false;
      continue;
    }
    /* After a value: a comma, or the end of its container. */
    if (!depth)
      return false;
    bool obj = OBJ(depth - 1);
    if (*s == ',') {
      s++;
      want_value = !obj;
      want_key = obj;
    } else if (*s == (obj ? '}' : ']')) {
      s++;
      if (--depth == 0) {
        WS();
        return s == end;
      }
    } else {
      return false;
    }
  }
#undef WS
#undef OBJ
}

/* jansson refuses NUL in object keys, which Cedar allows (attribute and tag
 * names are any string). So before parsing, the escapes \u0000 and \u0001
 * become \u0001 followed by '0' or by \u0001, and every string read back
 * from the tree is decoded. U+0001 can only be written as an escape (JSON
 * forbids raw control characters in strings), so the mapping is exact.
 * Under a guard: out of memory unwinds. */
json_t *shk__json_load(const char *text, size_t len, const char *what, shk_error *err)
{
  char *copy = NULL;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] != '\\' || i + 1 >= len) {
      if (copy)
        copy[n++] = text[i];
      continue;
    }
    bool low = i + 5 < len && text[i + 1] == 'u' && memcmp(text + i + 2, "000", 3) == 0 &&
               (text[i + 5] == '0' || text[i + 5] == '1');
    if (low) {
      if (!copy) {
        /* Each 6-byte escape grows to 12 bytes at most. */
        copy = shk__umalloc(len * 2 + 1);
        memcpy(copy, text, i);
        n = i;
      }
      memcpy(copy + n, text[i + 5] == '0' ? "\\u00010" : "\\u0001\\u0001",
             text[i + 5] == '0' ? 7 : 12);
      n += text[i + 5] == '0' ? 7 : 12;
      i += 5;
      continue;
    }
    /* Copy the escape's two bytes so that an escaped backslash is not
     * taken for the start of another escape. */
    if (copy) {
      copy[n++] = text[i];
      copy[n++] = text[i + 1];
    }
    i++;
  }
  json_error_t jerr;
  json_t *root = json_loadb(copy ? copy : text, copy ? n : len,
                            JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
  /* jansson says out of memory with its code, or with no error text when
   * its own set-up fails, or as a syntax error where it could not store a
   * token (see json_wellformed). */
  enum json_error_code code = root ? json_error_unknown : json_error_code(&jerr);
  if (!root && (code == json_error_out_of_memory || !jerr.text[0] ||
                ((code == json_error_invalid_syntax || code == json_error_premature_end_of_input ||
                  code == json_error_end_of_input_expected || code == json_error_unknown) &&
                 json_wellformed(copy ? copy : text, copy ? n : len)))) {
    free(copy);
    shk__oom_unwind();
  }
  free(copy);
  if (!root)
    shk__error_at(err, -EINVAL, NULL, jerr.line > 0 ? (unsigned)jerr.line : 0,
                  jerr.column > 0 ? (unsigned)jerr.column : 0, "%s: %s", what, jerr.text);
  return root;
}

shk__str shk__json_decode(shk__arena *a, const char *p, size_t n)
{
  char *s = shk__arena_strndup(a, p, n);
  if (!memchr(s, 1, n))
    return (shk__str){ s, n };
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == 1 && i + 1 < n) {
      s[k++] = s[i + 1] == '0' ? '\0' : 1;
      i++;
    } else {
      s[k++] = s[i];
    }
  }
  s[k] = '\0';
  return (shk__str){ s, k };
}

shk__str shk__json_str(shk__arena *a, json_t *j)
{
  return shk__json_decode(a, json_string_value(j), json_string_length(j));
}

static const char *json_kind_name(json_t *j)
{
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a floating-point number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  case JSON_NULL: return "null";
  }
  return "?";
}

/* ---------------------------------------------------------------- uids */

static int type_and_id(shk__arena *a, json_t *o, shk__uid *out, const char *what,
                       shk_error *err)
{
  json_t *t = json_object_get(o, "type"), *id = json_object_get(o, "id");
  if (!json_is_string(t) || !json_is_string(id))
    return shk__cedar_fail(err, "%s: an entity reference needs string \"type\" and \"id\"", what);
  if (!shk__is_valid_name(json_string_value(t), json_string_length(t)))
    return shk__cedar_fail(err, "%s: \"%.80s\" is not a valid entity type name", what, json_string_value(t));
  out->type = shk__json_str(a, t);
  out->id = shk__json_str(a, id);
  return 0;
}

int shk__json_to_uid(shk__arena *a, json_t *j, shk__uid *out, const char *what,
                     shk_error *err)
{
  if (!json_is_object(j))
    return shk__cedar_fail(err, "%s: expected an entity reference, got %s", what, json_kind_name(j));
  json_t *esc = json_object_get(j, "__entity");
  if (esc) {
    if (json_object_size(j) != 1 || !json_is_object(esc))
      return shk__cedar_fail(err, "%s: malformed __entity escape", what);
    return type_and_id(a, esc, out, what, err);
  }
  if (json_object_get(j, "__expr"))
    return shk__cedar_fail(err, "%s: the __expr escape is no longer supported", what);
  return type_and_id(a, j, out, what, err);
}

/* ---------------------------------------------------------------- values */

static int to_value(shk__arena *a, json_t *j, const shk__schema *schema, const shk__type *type,
                    const char *what, shk__value *out, shk_error *err);

static int extn_call(shk__arena *a, json_t *fn, json_t *arg, json_t *args, const char *what,
                     shk__value *out, shk_error *err)
{
  if (!json_is_string(fn))
    return shk__cedar_fail(err, "%s: __extn needs a string \"fn\"", what);
  shk__str name = { json_string_value(fn), json_string_length(fn) };
  int f = shk__ext_fn_lookup(name);
  if (f < 0)
    return shk__cedar_fail(err, "%s: unknown extension function \"%.*s\"", what, Q(name));
  if (!arg == !args)
    return shk__cedar_fail(err, "%s: __extn needs exactly one of \"arg\" and \"args\"", what);
  size_t n = args ? json_array_size(args) : 1;
  if (args && !json_is_array(args))
    return shk__cedar_fail(err, "%s: __extn \"args\" must be an array", what);
  shk__value *vals = shk__arena_alloc(a, (n ? n : 1) * sizeof *vals);
  for (size_t i = 0; i < n; i++) {
    int r = to_value(a, args ? json_array_get(args, i) : arg, NULL, NULL, what, &vals[i], err);
    if (r < 0)
      return r;
  }
  shk__eval_error e;
  if (shk__call_ext((shk__fn)f, vals, n, a, out, &e) < 0)
    return shk__cedar_fail(err, "%s: %s", what, e.msg);
  return 0;
}

static int extn_escape(shk__arena *a, json_t *body, const char *what, shk__value *out,
                       shk_error *err)
{
  if (!json_is_object(body))
    return shk__cedar_fail(err, "%s: malformed __extn escape", what);
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v)
    if (strcmp(k, "fn") && strcmp(k, "arg") && strcmp(k, "args"))
      return shk__cedar_fail(err, "%s: unexpected key \"%.80s\" in __extn escape", what, k);
  return extn_call(a, json_object_get(body, "fn"), json_object_get(body, "arg"),
                   json_object_get(body, "args"), what, out, err);
}

static int record_from_object(shk__arena *a, json_t *j, const shk__schema *schema,
                              const char *what, shk__value *out, shk_error *err);

/* Untyped parsing: the JSON decides the Cedar type, and the escapes mark
 * entities and extension values. */
static int untyped(shk__arena *a, json_t *j, const shk__schema *schema, const char *what,
                   shk__value *out, shk_error *err)
{
  switch (json_typeof(j)) {
  case JSON_TRUE:
  case JSON_FALSE:
    out->kind = SHK__V_BOOL;
    out->b = json_is_true(j);
    return 0;
  case JSON_INTEGER:
    out->kind = SHK__V_LONG;
    out->l = json_integer_value(j);
    return 0;
  case JSON_REAL:
    return shk__cedar_fail(err, "%s: floating-point numbers are not Cedar values", what);
  case JSON_NULL:
    return shk__cedar_fail(err, "%s: null is not a Cedar value", what);
  case JSON_STRING:
    out->kind = SHK__V_STRING;
    out->s = shk__json_str(a, j);
    return 0;
  case JSON_ARRAY: {
    size_t n = json_array_size(j);
    shk__value *items = shk__arena_alloc(a, (n ? n : 1) * sizeof *items);
    for (size_t i = 0; i < n; i++) {
      int r = untyped(a, json_array_get(j, i), schema, what, &items[i], err);
      if (r < 0)
        return r;
    }
    out->kind = SHK__V_SET;
    out->set = shk__set_make(a, items, n);
    return 0;
  }
  case JSON_OBJECT: {
    if (json_object_get(j, "__entity")) {
      shk__uid *u = shk__arena_alloc(a, sizeof *u);
      int r = shk__json_to_uid(a, j, u, what, err);
      if (r < 0)
        return r;
      out->kind = SHK__V_ENTITY;
      out->uid = u;
      return 0;
    }
    json_t *ext = json_object_get(j, "__extn");
    if (ext) {
      if (json_object_size(j) != 1)
        return shk__cedar_fail(err, "%s: malformed __extn escape", what);
      return extn_escape(a, ext, what, out, err);
    }
    if (json_object_get(j, "__expr"))
      return shk__cedar_fail(err, "%s: the __expr escape is no longer supported", what);
    return record_from_object(a, j, schema, what, out, err);
  }
  }
  return shk__cedar_fail(err, "%s: unsupported JSON value", what);
}

/* An object's members with their keys decoded, sorted by key. */
typedef struct jpair {
  shk__str key;
  json_t *val;
} jpair;

static int pair_cmp(const void *x, const void *y)
{
  return shk__str_cmp(((const jpair *)x)->key, ((const jpair *)y)->key);
}

static jpair *object_pairs(shk__arena *a, json_t *j, size_t *n)
{
  *n = json_object_size(j);
  jpair *ps = shk__arena_alloc(a, (*n ? *n : 1) * sizeof *ps);
  size_t i = 0;
  const char *k;
  json_t *v;
  json_object_foreach(j, k, v)
    ps[i++] = (jpair){ shk__json_decode(a, k, strlen(k)), v };
  qsort(ps, *n, sizeof *ps, pair_cmp);
  return ps;
}

/* A record whose every value has type `elem` (NULL: untyped), as records
 * without a schema and entity tags are. `what` plus the key names each
 * value in messages. */
static int uniform_record(shk__arena *a, json_t *j, const shk__schema *schema,
                          const shk__type *elem, const char *what, shk__record *out,
                          shk_error *err)
{
  size_t n;
  jpair *ps = object_pairs(a, j, &n);
  shk__str *keys = shk__arena_alloc(a, (n ? n : 1) * sizeof *keys);
  shk__value *vals = shk__arena_alloc(a, (n ? n : 1) * sizeof *vals);
  for (size_t i = 0; i < n; i++) {
    char sub[384];
    snprintf(sub, sizeof sub, "%s \"%.*s\"", what, Q(ps[i].key));
    keys[i] = ps[i].key;
    int r = to_value(a, ps[i].val, schema, elem, sub, &vals[i], err);
    if (r < 0)
      return r;
  }
  *out = (shk__record){ n, keys, vals };
  return 0;
}

static int record_from_object(shk__arena *a, json_t *j, const shk__schema *schema,
                              const char *what, shk__value *out, shk_error *err)
{
  shk__record *rec = shk__arena_alloc(a, sizeof *rec);
  char sub[300];
  snprintf(sub, sizeof sub, "%s, attribute", what);
  int r = uniform_record(a, j, schema, NULL, sub, rec, err);
  out->kind = SHK__V_RECORD;
  out->rec = rec;
  return r;
}

static shk__vkind ext_kind(shk__str name, shk__fn *ctor)
{
  if (shk__str_eq(name, SHK__STR_LIT("ipaddr")))
    return *ctor = SHK__FN_IP, SHK__V_IP;
  if (shk__str_eq(name, SHK__STR_LIT("decimal")))
    return *ctor = SHK__FN_DECIMAL, SHK__V_DECIMAL;
  if (shk__str_eq(name, SHK__STR_LIT("datetime")))
    return *ctor = SHK__FN_DATETIME, SHK__V_DATETIME;
  return *ctor = SHK__FN_DURATION, SHK__V_DURATION;
}

static void type_name(const shk__type *t, char *buf, size_t n)
{
  switch (t->kind) {
  case SHK__T_BOOL: snprintf(buf, n, "Bool"); return;
  case SHK__T_LONG: snprintf(buf, n, "Long"); return;
  case SHK__T_STRING: snprintf(buf, n, "String"); return;
  case SHK__T_SET: snprintf(buf, n, "Set"); return;
  case SHK__T_RECORD: snprintf(buf, n, "a record"); return;
  case SHK__T_ENTITY:
  case SHK__T_EXT: snprintf(buf, n, "%.*s", Q(t->name)); return;
  }
}

static int mismatch(const shk__type *t, const shk__value *v, const char *what,
                    shk_error *err)
{
  char tn[128];
  type_name(t, tn, sizeof tn);
  if (v->kind == SHK__V_ENTITY)
    return shk__cedar_fail(err, "%s: expected %s, got an entity of type %.*s", what, tn, Q(v->uid->type));
  return shk__cedar_fail(err, "%s: expected %s, got a %s", what, tn, shk__vkind_name(v->kind));
}

static int typed_record(shk__arena *a, json_t *j, const shk__schema *schema, const shk__type *t,
                        const char *what, shk__value *out, shk_error *err)
{
  /* Only declared attributes may appear, and every required one must. */
  size_t np;
  jpair *ps = object_pairs(a, j, &np);
  for (size_t k = 0; k < np; k++) {
    bool known = false;
    for (size_t i = 0; i < t->n_attrs && !known; i++)
      known = shk__str_eq(t->attrs[i].name, ps[k].key);
    if (!known)
      return shk__cedar_fail(err, "%s: attribute \"%.*s\" is not declared in the schema", what,
                   Q(ps[k].key));
  }
  shk__str *keys = shk__arena_alloc(a, (t->n_attrs ? t->n_attrs : 1) * sizeof *keys);
  shk__value *vals = shk__arena_alloc(a, (t->n_attrs ? t->n_attrs : 1) * sizeof *vals);
  size_t n = 0;
  for (size_t i = 0; i < t->n_attrs; i++) {
    const shk__attr_type *at = &t->attrs[i];
    json_t *jv = NULL;
    for (size_t k = 0; k < np && !jv; k++)
      if (shk__str_eq(ps[k].key, at->name))
        jv = ps[k].val;
    if (!jv) {
      if (at->required)
        return shk__cedar_fail(err, "%s: required attribute \"%.*s\" is missing", what, Q(at->name));
      continue;
    }
    char sub[384];
    snprintf(sub, sizeof sub, "%s, attribute \"%.*s\"", what, Q(at->name));
    int r = to_value(a, jv, schema, at->type, sub, &vals[n], err);
    if (r < 0)
      return r;
    keys[n++] = at->name;
  }
  shk__record *rec = shk__arena_alloc(a, sizeof *rec);
  *rec = (shk__record){ n, keys, vals };
  out->kind = SHK__V_RECORD;
  out->rec = rec;
  return 0;
}

static int to_value(shk__arena *a, json_t *j, const shk__schema *schema, const shk__type *t,
                    const char *what, shk__value *out, shk_error *err)
{
  if (!t)
    return untyped(a, j, schema, what, out, err);
  int r;
  switch (t->kind) {
  case SHK__T_ENTITY: {
    /* The __entity escape may be left out where the schema expects an
     * entity. */
    shk__uid *u = shk__arena_alloc(a, sizeof *u);
    if ((r = shk__json_to_uid(a, j, u, what, err)) < 0)
      return r;
    out->kind = SHK__V_ENTITY;
    out->uid = u;
    if (!schema)
      return 0;
    if (!shk__str_eq(u->type, t->name))
      return mismatch(t, out, what, err);
    if (!shk__schema_enum_member(schema, u))
      return shk__cedar_fail(err, "%s: \"%.*s\" is not a member of the enumerated type %.*s", what, Q(u->id),
                   Q(u->type));
    return 0;
  }
  case SHK__T_EXT: {
    /* Three forms: the __extn escape, the escape's body alone, or just
     * the constructor's argument. */
    shk__fn ctor;
    shk__vkind want = ext_kind(t->name, &ctor);
    if (json_is_object(j) && json_object_get(j, "__extn") && json_object_size(j) == 1)
      r = extn_escape(a, json_object_get(j, "__extn"), what, out, err);
    else if (json_is_object(j) && json_object_get(j, "fn"))
      r = extn_escape(a, j, what, out, err);
    else {
      shk__value arg;
      shk__eval_error e;
      if ((r = untyped(a, j, schema, what, &arg, err)) < 0)
        return r;
      r = shk__call_ext(ctor, &arg, 1, a, out, &e) < 0 ? shk__cedar_fail(err, "%s: %s", what, e.msg) : 0;
    }
    if (r < 0)
      return r;
    return !schema || out->kind == want ? 0 : mismatch(t, out, what, err);
  }
  case SHK__T_SET: {
    if (!json_is_array(j)) {
      if ((r = untyped(a, j, schema, what, out, err)) < 0)
        return r;
      return mismatch(t, out, what, err);
    }
    size_t n = json_array_size(j);
    shk__value *items = shk__arena_alloc(a, (n ? n : 1) * sizeof *items);
    for (size_t i = 0; i < n; i++)
      if ((r = to_value(a, json_array_get(j, i), schema, t->elem, what, &items[i], err)) < 0)
        return r;
    out->kind = SHK__V_SET;
    out->set = shk__set_make(a, items, n);
    return 0;
  }
  case SHK__T_RECORD:
    if (!json_is_object(j) || json_object_get(j, "__entity") || json_object_get(j, "__extn")) {
      if ((r = untyped(a, j, schema, what, out, err)) < 0)
        return r;
      return mismatch(t, out, what, err);
    }
    return typed_record(a, j, schema, t, what, out, err);
  case SHK__T_BOOL:
  case SHK__T_LONG:
  case SHK__T_STRING:
    if ((r = untyped(a, j, schema, what, out, err)) < 0)
      return r;
    if (schema && out->kind != (t->kind == SHK__T_BOOL ? SHK__V_BOOL
                      : t->kind == SHK__T_LONG ? SHK__V_LONG : SHK__V_STRING))
      return mismatch(t, out, what, err);
    return 0;
  }
  return shk__cedar_fail(err, "%s: unsupported schema type", what);
}

int shk__json_to_value(shk__arena *a, json_t *j, const shk__schema *schema, const shk__type *type,
                       const char *what, shk__value *out, shk_error *err)
{
  return to_value(a, j, schema, type, what, out, err);
}

bool shk__value_has_type(const shk__schema *schema, const shk__value *v, const shk__type *t)
{
  switch (t->kind) {
  case SHK__T_BOOL: return v->kind == SHK__V_BOOL;
  case SHK__T_LONG: return v->kind == SHK__V_LONG;
  case SHK__T_STRING: return v->kind == SHK__V_STRING;
  case SHK__T_ENTITY:
    return v->kind == SHK__V_ENTITY && shk__str_eq(v->uid->type, t->name) && shk__schema_enum_member(schema, v->uid);
  case SHK__T_EXT: {
    shk__fn ctor;
    return v->kind == ext_kind(t->name, &ctor);
  }
  case SHK__T_SET:
    if (v->kind != SHK__V_SET)
      return false;
    for (size_t i = 0; i < v->set->n; i++)
      if (!shk__value_has_type(schema, &v->set->items[i], t->elem))
        return false;
    return true;
  case SHK__T_RECORD: {
    if (v->kind != SHK__V_RECORD)
      return false;
    size_t seen = 0;
    for (size_t i = 0; i < t->n_attrs; i++) {
      const shk__value *av = shk__record_get(v->rec, t->attrs[i].name);
      if (!av) {
        if (t->attrs[i].required)
          return false;
        continue;
      }
      seen++;
      if (!shk__value_has_type(schema, av, t->attrs[i].type))
        return false;
    }
    return seen == v->rec->n;
  }
  }
  return false;
}

/* ---------------------------------------------------------------- the store */

/* Mixes 8 bytes at a time: uids are hashed on every lookup, so this is
 * on the decision path. */
static uint64_t mix(uint64_t h, uint64_t x)
{
  h ^= x;
  h *= 0x9E3779B97F4A7C15ULL;
  return h ^ (h >> 32);
}

static uint64_t hash_bytes(uint64_t h, shk__str s)
{
  size_t i = 0;
  for (; i + 8 <= s.n; i += 8) {
    uint64_t x;
    memcpy(&x, s.p + i, 8);
    h = mix(h, x);
  }
  uint64_t tail = 0;
  if (i < s.n)
    memcpy(&tail, s.p + i, s.n - i);
  return mix(h, tail ^ ((uint64_t)s.n << 56));
}

uint64_t shk__uid_hash(const shk__uid *u)
{
  return hash_bytes(hash_bytes(0x243F6A8885A308D3ULL, u->type), u->id);
}

static int64_t slot_of(const shk_cedar_entities *es, const shk__uid *u, uint64_t h)
{
  if (!es->table)
    return -1;
  for (size_t i = h & es->mask;; i = (i + 1) & es->mask) {
    uint32_t x = es->table[i];
    if (!x)
      return -1;
    const shk__entity *e = &es->ents[x - 1];
    if (e->hash == h && shk__uid_eq(e->uid, *u))
      return x - 1;
  }
}

const shk__entity *shk__entities_find(const shk_cedar_entities *es, const shk__uid *u, uint64_t h)
{
  int64_t i = slot_of(es, u, h);
  return i >= 0 && es->ents[i].present ? &es->ents[i] : NULL;
}

static bool anc_has(const shk__entity *e, uint32_t x)
{
  size_t lo = 0, hi = e->n_anc;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (e->anc[mid] == x)
      return true;
    if (e->anc[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

bool shk__entities_in(const shk_cedar_entities *es, const shk__entity *ea, const shk__uid *a,
                      uint64_t ha, const shk__uid *b, uint64_t hb)
{
  if (ha == hb && shk__uid_eq(*a, *b))
    return true;
  if (!ea || !ea->n_anc)
    return false;
  int64_t ib = slot_of(es, b, hb);
  if (ib < 0)
    return false;
  if (anc_has(ea, (uint32_t)ib))
    return true;
  /* Parents of a leaf hold their full closure. */
  for (uint32_t k = 0; ea->anc_direct && k < ea->n_anc; k++)
    if (anc_has(&es->ents[ea->anc[k]], (uint32_t)ib))
      return true;
  return false;
}

/* Load-time state, under a guard: the JSON tree, the direct parents of each
 * node by index, and working vectors. An unwind leaves everything here for
 * shk_cedar_entities_parse to free. Lists of a fixed size go to `tmp`, an
 * arena freed with the loader. */
typedef struct loader {
  shk_cedar_entities *es;
  const char *json;
  size_t len;
  shk_error *err;
  json_t *root;
  shk__arena *tmp;
  size_t cap;
  uint32_t **parents;    /* each in tmp */
  uint32_t *n_parents;
  const shk__schema *schema;
  uint32_t *actions;     /* action entities given in the data */
  uint32_t n_actions, cap_actions;
  uint32_t *want;        /* check_actions: an action's declared ancestors */
  uint32_t n_want, cap_want;
  const shk__entity_type **seen; /* ancestor_type_ok: types visited */
  size_t cap_seen;
  uint32_t *buf;         /* closure: one node's ancestors before sorting */
  size_t cap_buf;
} loader;

static void table_grow(shk_cedar_entities *es)
{
  size_t size = es->table ? (es->mask + 1) * 2 : 1024;
  uint32_t *table = shk__ucalloc(size, sizeof *table);
  free(es->table);
  es->table = table;
  es->mask = size - 1;
  for (size_t k = 0; k < es->n; k++) {
    size_t i = es->ents[k].hash & es->mask;
    while (es->table[i])
      i = (i + 1) & es->mask;
    es->table[i] = (uint32_t)k + 1;
  }
}

/* The index of the node for `u`, adding an absent node when it is new. */
static uint32_t intern(loader *L, const shk__uid *u)
{
  shk_cedar_entities *es = L->es;
  uint64_t h = shk__uid_hash(u);
  int64_t found = slot_of(es, u, h);
  if (found >= 0)
    return (uint32_t)found;
  if (es->n == L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 256;
    es->ents = shk__urealloc(es->ents, cap, sizeof *es->ents);
    L->parents = shk__urealloc(L->parents, cap, sizeof *L->parents);
    L->n_parents = shk__urealloc(L->n_parents, cap, sizeof *L->n_parents);
    L->cap = cap;
  }
  if (!es->table || (es->n + 1) * 2 > es->mask + 1)
    table_grow(es);
  uint32_t k = (uint32_t)es->n++;
  es->ents[k] = (shk__entity){ .uid = *u, .hash = h, .attrs = shk__empty_record,
                               .tags = shk__empty_record };
  L->parents[k] = NULL;
  L->n_parents[k] = 0;
  size_t i = h & es->mask;
  while (es->table[i])
    i = (i + 1) & es->mask;
  es->table[i] = k + 1;
  return k;
}

static bool type_in(shk__str t, const shk__str *list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (shk__str_eq(list[i], t))
      return true;
  return false;
}

/* May an entity of type `et` have an ancestor of type `t`? Any type
 * reachable through memberOf may be given as a parent directly, as the
 * reference allows (data often lists the whole closure). */
static bool ancestor_type_ok(loader *L, const shk__entity_type *et, shk__str t)
{
  const shk__schema *s = L->schema;
  if (type_in(t, et->member_of, et->n_member_of))
    return true;
  if (!L->cap_seen) {
    L->seen = shk__urealloc(NULL, 8, sizeof *L->seen);
    L->cap_seen = 8;
  }
  const shk__entity_type **seen = L->seen;
  size_t n = 1;
  seen[0] = et;
  bool ok = false;
  for (size_t i = 0; i < n && !ok; i++) {
    for (size_t m = 0; m < seen[i]->n_member_of && !ok; m++) {
      const shk__entity_type *up = shk__schema_entity_type(s, seen[i]->member_of[m]);
      bool dup = !up;
      for (size_t k = 0; k < n && !dup; k++)
        dup = seen[k] == up;
      if (dup)
        continue;
      ok = type_in(t, up->member_of, up->n_member_of);
      if (n == L->cap_seen) {
        L->seen = seen = shk__urealloc(seen, 2 * L->cap_seen, sizeof *seen);
        L->cap_seen *= 2;
      }
      seen[n++] = up;
    }
  }
  return ok;
}

static int load_tags(loader *L, json_t *j, const shk__type *elem, const char *what,
                     shk__record *out, shk_error *err)
{
  if (!json_is_object(j))
    return shk__cedar_fail(err, "%s: expected an object, got %s", what, json_kind_name(j));
  if (!elem && L->schema && json_object_size(j))
    return shk__cedar_fail(err, "%s: the entity's type declares no tags", what);
  return uniform_record(L->es->arena, j, L->schema, elem, what, out, err);
}

static bool same_record(const shk__record *a, const shk__record *b)
{
  shk__value x = { .kind = SHK__V_RECORD, .rec = a }, y = { .kind = SHK__V_RECORD, .rec = b };
  return shk__value_eq(&x, &y);
}

static int u32_cmp(const void *x, const void *y)
{
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return a < b ? -1 : a > b;
}

static bool same_parents(uint32_t *a, uint32_t na, uint32_t *b, uint32_t nb)
{
  if (na != nb)
    return false;
  if (na == 0)
    return true;
  qsort(a, na, sizeof *a, u32_cmp);
  qsort(b, nb, sizeof *b, u32_cmp);
  return memcmp(a, b, na * sizeof *a) == 0;
}

/* One entity of the data. Everything is read before the entity joins the
 * store, because an entity given twice is accepted when both copies are
 * the same (as the reference does) and is an error otherwise. */
static int load_entity(loader *L, json_t *item, size_t pos, shk_error *err)
{
  shk_cedar_entities *es = L->es;
  char what[256];
  snprintf(what, sizeof what, "entity #%zu", pos);
  if (!json_is_object(item))
    return shk__cedar_fail(err, "%s: expected an object, got %s", what, json_kind_name(item));
  const char *k;
  json_t *v;
  json_object_foreach(item, k, v)
    if (strcmp(k, "uid") && strcmp(k, "attrs") && strcmp(k, "parents") && strcmp(k, "tags"))
      return shk__cedar_fail(err, "%s: unexpected key \"%.80s\"", what, k);
  json_t *juid = json_object_get(item, "uid"), *jattrs = json_object_get(item, "attrs");
  json_t *jparents = json_object_get(item, "parents"), *jtags = json_object_get(item, "tags");
  if (!juid || !jattrs || !jparents)
    return shk__cedar_fail(err, "%s: missing \"%s\"", what, !juid ? "uid" : !jattrs ? "attrs" : "parents");
  shk__uid uid;
  int r = shk__json_to_uid(es->arena, juid, &uid, what, err);
  if (r < 0)
    return r;
  snprintf(what, sizeof what, "entity %.*s::\"%.*s\"", Q(uid.type), Q(uid.id));

  const shk__entity_type *et = NULL;
  const shk__action *act = NULL;
  if (L->schema) {
    if (shk__schema_is_action_type(L->schema, uid.type)) {
      act = shk__schema_action(L->schema, uid);
      if (!act)
        return shk__cedar_fail(err, "%s: action is not declared in the schema", what);
    } else {
      et = shk__schema_entity_type(L->schema, uid.type);
      if (!et)
        return shk__cedar_fail(err, "%s: entity type %.*s is not declared in the schema", what, Q(uid.type));
      if (!shk__schema_enum_member(L->schema, &uid))
        return shk__cedar_fail(err, "%s: id is not a member of the enumerated type", what);
    }
  }

  if (!json_is_object(jattrs))
    return shk__cedar_fail(err, "%s: \"attrs\" must be an object, got %s", what, json_kind_name(jattrs));
  if (act && json_object_size(jattrs))
    return shk__cedar_fail(err, "%s: action entities have no attributes", what);
  shk__value attrs;
  if ((r = to_value(es->arena, jattrs, L->schema, et ? et->shape : NULL, what, &attrs, err)) < 0)
    return r;
  shk__record tags = shk__empty_record;
  if (jtags) {
    char sub[300];
    snprintf(sub, sizeof sub, "%s, tag", what);
    if ((r = load_tags(L, jtags, et ? et->tags : NULL, sub, &tags, err)) < 0)
      return r;
  }
  if (!json_is_array(jparents))
    return shk__cedar_fail(err, "%s: \"parents\" must be an array", what);
  size_t np = json_array_size(jparents);
  uint32_t *ps = np ? shk__arena_alloc(L->tmp, np * sizeof *ps) : NULL;
  for (size_t i = 0; i < np; i++) {
    shk__uid pu;
    char sub[300];
    snprintf(sub, sizeof sub, "%s, parent", what);
    if ((r = shk__json_to_uid(es->arena, json_array_get(jparents, i), &pu, sub, err)) < 0)
      return r;
    /* An action's parents are checked against the schema once the
     * closure is known (data may list ancestors, not just parents). */
    if (et && !ancestor_type_ok(L, et, pu.type))
      return shk__cedar_fail(err, "%s: parent %.*s::\"%.*s\" is not allowed by the schema", what,
                   Q(pu.type), Q(pu.id));
    ps[i] = intern(L, &pu);
  }

  uint32_t k_ent = intern(L, &uid);
  shk__entity *e = &es->ents[k_ent];
  if (e->present) {
    bool same = same_record(&e->attrs, attrs.rec) && same_record(&e->tags, &tags) &&
                same_parents(L->parents[k_ent], L->n_parents[k_ent], ps, (uint32_t)np);
    return same ? 0 : shk__cedar_fail(err, "%s: given twice, differently", what);
  }
  e->present = true;
  e->attrs = *attrs.rec;
  e->tags = tags;
  if (act)
    shk__upush_u32(&L->actions, &L->n_actions, &L->cap_actions, k_ent);
  L->parents[k_ent] = ps;
  L->n_parents[k_ent] = (uint32_t)np;
  return 0;
}

/* The schema's actions are entities too, with the declared parents. */
static void add_schema_actions(loader *L)
{
  for (size_t i = 0; i < L->schema->n_actions; i++) {
    const shk__action *act = &L->schema->actions[i];
    uint32_t k = intern(L, &act->uid);
    uint32_t *ps = act->n_member_of ? shk__arena_alloc(L->tmp, act->n_member_of * sizeof *ps) : NULL;
    for (size_t m = 0; m < act->n_member_of; m++)
      ps[m] = intern(L, &act->member_of[m]);
    /* Given in the data: check_actions compares the two. */
    if (L->es->ents[k].present)
      continue;
    L->es->ents[k].present = true;
    L->parents[k] = ps;
    L->n_parents[k] = (uint32_t)act->n_member_of;
  }
}

/* An action entity in the data must have exactly the ancestors that the
 * schema declares for it. */
static int check_actions(loader *L, shk_error *err)
{
  shk_cedar_entities *es = L->es;
  int r = 0;
  for (size_t i = 0; i < L->n_actions && r == 0; i++) {
    const shk__entity *e = &es->ents[L->actions[i]];
    /* The schema's closure, by a worklist over member_of. */
    L->n_want = 0;
    const shk__action *act = shk__schema_action(L->schema, e->uid);
    for (size_t m = 0; act && m < act->n_member_of; m++)
      shk__upush_u32(&L->want, &L->n_want, &L->cap_want,
                     (uint32_t)slot_of(es, &act->member_of[m], shk__uid_hash(&act->member_of[m])));
    for (uint32_t w = 0; w < L->n_want; w++) {
      const shk__action *up = shk__schema_action(L->schema, es->ents[L->want[w]].uid);
      for (size_t m = 0; up && m < up->n_member_of; m++) {
        uint32_t x = (uint32_t)slot_of(es, &up->member_of[m], shk__uid_hash(&up->member_of[m]));
        bool seen = false;
        for (uint32_t k = 0; k < L->n_want && !seen; k++)
          seen = L->want[k] == x;
        if (!seen)
          shk__upush_u32(&L->want, &L->n_want, &L->cap_want, x);
      }
    }
    const uint32_t *want = L->want, n_want = L->n_want;
    bool same = true;
    for (uint32_t k = 0; k < n_want && same; k++)
      same = anc_has(e, want[k]) ||
             (e->anc_direct && shk__entities_in(es, e, &e->uid, e->hash, &es->ents[want[k]].uid,
                                                es->ents[want[k]].hash));
    /* Every ancestor in the data is declared too. */
    for (uint32_t k = 0; k < e->n_anc && same; k++) {
      bool found = false;
      for (uint32_t w = 0; w < n_want && !found; w++)
        found = want[w] == e->anc[k];
      same = found;
    }
    for (uint32_t k = 0; e->anc_direct && k < e->n_anc && same; k++) {
      const shk__entity *p = &es->ents[e->anc[k]];
      for (uint32_t j = 0; j < p->n_anc && same; j++) {
        bool found = false;
        for (uint32_t w = 0; w < n_want && !found; w++)
          found = want[w] == p->anc[j];
        same = found;
      }
    }
    if (!same)
      r = shk__cedar_fail(err, "entity %.*s::\"%.*s\": ancestors differ from the action's declaration in the schema",
                Q(e->uid.type), Q(e->uid.id));
  }
  return r;
}


/* Computes every node's ancestor set, parents before children, with an
 * explicit stack so that a deep hierarchy cannot overflow the C stack. A
 * cycle is an error, as in the reference. */
static int closure(loader *L, shk_error *err)
{
  shk_cedar_entities *es = L->es;
  size_t n = es->n;
  uint8_t *state = shk__arena_calloc(L->tmp, n ? n : 1); /* 0 new, 1 on the stack, 2 done */
  uint32_t *stack = shk__arena_alloc(L->tmp, (n ? n : 1) * sizeof *stack);
  uint32_t *next = shk__arena_calloc(L->tmp, (n ? n : 1) * sizeof *next); /* next parent to visit */
  size_t sp = 0;
  if (!L->buf) {
    L->buf = shk__urealloc(NULL, 64, sizeof *L->buf);
    L->cap_buf = 64;
  }
  uint32_t *buf = L->buf;
  const shk__entity none = { .n_anc = 0 };
  bool *is_parent = shk__arena_calloc(L->tmp, (n ? n : 1) * sizeof *is_parent);
  for (size_t x = 0; x < n; x++)
    for (uint32_t i = 0; i < L->n_parents[x]; i++)
      is_parent[L->parents[x][i]] = true;
  int r = 0;
  for (size_t root = 0; root < n && r == 0; root++) {
    if (state[root])
      continue;
    stack[sp++] = (uint32_t)root;
    state[root] = 1;
    while (sp) {
      uint32_t x = stack[sp - 1];
      if (next[x] < L->n_parents[x]) {
        uint32_t p = L->parents[x][next[x]++];
        if (state[p] == 1) {
          r = shk__cedar_fail(err, "entity %.*s::\"%.*s\" is its own ancestor: the parents form a cycle",
                    Q(es->ents[p].uid.type), Q(es->ents[p].uid.id));
          break;
        }
        if (state[p] == 0) {
          state[p] = 1;
          stack[sp++] = p;
        }
        continue;
      }
      size_t m = 0;
      bool direct = !is_parent[x];
      for (uint32_t i = 0; i < L->n_parents[x]; i++) {
        const shk__entity *pe = direct ? &none : &es->ents[L->parents[x][i]];
        if (m + 1 + pe->n_anc > L->cap_buf) {
          size_t cap = L->cap_buf;
          while (m + 1 + pe->n_anc > cap)
            cap *= 2;
          L->buf = buf = shk__urealloc(buf, cap, sizeof *buf);
          L->cap_buf = cap;
        }
        buf[m++] = L->parents[x][i];
        if (pe->n_anc)
          memcpy(buf + m, pe->anc, pe->n_anc * sizeof *buf);
        m += pe->n_anc;
      }
      if (m) {
        qsort(buf, m, sizeof *buf, u32_cmp);
        size_t u = 1;
        for (size_t i = 1; i < m; i++)
          if (buf[i] != buf[u - 1])
            buf[u++] = buf[i];
        uint32_t *anc = shk__arena_alloc(es->arena, u * sizeof *anc);
        memcpy(anc, buf, u * sizeof *anc);
        es->ents[x].anc = anc;
        es->ents[x].n_anc = (uint32_t)u;
        es->ents[x].anc_direct = direct;
      }
      state[x] = 2;
      sp--;
    }
  }
  return r;
}

static int load_all(void *ctx)
{
  loader *L = ctx;
  if (!(L->root = shk__json_load(L->json, L->len, "entities JSON", L->err)))
    return -EINVAL;
  int r = 0;
  if (!json_is_array(L->root))
    r = shk__cedar_fail(L->err, "entities JSON: expected an array of entities, got %s",
                        json_kind_name(L->root));
  for (size_t i = 0; r == 0 && i < json_array_size(L->root); i++)
    r = load_entity(L, json_array_get(L->root, i), i, L->err);
  if (r == 0 && L->schema)
    add_schema_actions(L);
  if (r == 0)
    r = closure(L, L->err);
  if (r == 0 && L->n_actions)
    r = check_actions(L, L->err);
  return r;
}

int shk_cedar_entities_parse(const char *json, size_t len, const shk_cedar_schema *schema,
                             shk_cedar_entities **out, shk_error *err)
{
  *out = NULL;
  shk_cedar_entities *es = shk__calloc(1, sizeof *es);
  loader L = { .es = es, .json = json, .len = len, .err = err,
               .schema = schema ? &schema->s : NULL, .tmp = shk__arena_new() };
  int r;
  if (!es || !(es->arena = shk__arena_new()) || !L.tmp)
    r = shk__error_nomem(err);
  else
    r = shk__oom_guard(load_all, &L, err);
  json_decref(L.root);
  shk__arena_free(L.tmp);
  free(L.parents);
  free(L.n_parents);
  free(L.actions);
  free(L.want);
  free(L.seen);
  free(L.buf);
  if (r < 0) {
    shk_cedar_entities_free(es);
    return r;
  }
  *out = es;
  return 0;
}

void shk_cedar_entities_free(shk_cedar_entities *es)
{
  if (!es)
    return;
  free(es->ents);
  free(es->table);
  shk__arena_free(es->arena);
  free(es);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The human-readable schema form (.cedarschema): text to the unresolved
 * shk__sch, by recursive descent over the reference grammar
 * (cedar_schema/grammar.lalrpop) with its conversion checks. Names are
 * resolved afterwards by schema.c, the same way for both schema forms. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-parse-internal.h"

typedef struct sparser {
  shk__sch *sc;
  shk__cursor c;
  shk__arena *a;
  unsigned depth;
  shk__str ns; /* the namespace being declared ("" at top level) */
} sparser;

#define MAX_TYPE_DEPTH 200

/* The current token is the identifier `word` (schema keywords are
 * identifiers everywhere else). */
static bool sat_word(sparser *p, const char *word)
{
  size_t n = strlen(word);
  return p->c.t.kind == SHK__TK_IDENT && p->c.t.n == n && memcmp(p->c.t.p, word, n) == 0;
}

static shk__str tok_copy(sparser *p)
{
  return (shk__str){ shk__arena_strndup(p->a, p->c.t.p, p->c.t.n), p->c.t.n };
}

/* An identifier that is not reserved (Ident in the reference grammar). */
static shk__str ident(sparser *p)
{
  if (!shk__cur_at(&p->c, SHK__TK_IDENT))
    shk__cur_unexpected(&p->c);
  if (shk__ident_reserved(p->c.t.p, p->c.t.n))
    shk__cur_fail(&p->c, p->c.t.loc, "`%.*s` is a reserved identifier", (int)p->c.t.n, p->c.t.p);
  shk__str s = tok_copy(p);
  shk__cur_next(&p->c);
  return s;
}

static shk__str string_lit(sparser *p)
{
  if (!shk__cur_at(&p->c, SHK__TK_STRING))
    shk__cur_unexpected(&p->c);
  shk__str out;
  const char *why;
  if (shk__unescape(p->a, p->c.t.p, p->c.t.n, &out, NULL, NULL, &why) < 0)
    shk__cur_fail(&p->c, p->c.t.loc, "invalid string literal: %s", why);
  shk__cur_next(&p->c);
  return out;
}

/* Path := Ident {"::" Ident}, normalized to "A::B". With `stop_at_string`,
 * a "::" followed by a string ends the path and is left for the caller
 * (QualName); *qualified then says whether that happened. */
static shk__str path(sparser *p, bool stop_at_string, bool *string_follows)
{
  shk__path out = { 0 };
  if (string_follows)
    *string_follows = false;
  for (;;) {
    shk__str s = ident(p);
    shk__path_add(p->a, &out, s);
    if (!shk__cur_accept(&p->c, SHK__TK_COLONCOLON))
      break;
    if (stop_at_string && shk__cur_at(&p->c, SHK__TK_STRING)) {
      *string_follows = true;
      break;
    }
  }
  return (shk__str){ out.p, out.n };
}

static int cmp_key(const void *x, const void *y)
{
  return shk__str_cmp(*(const shk__str *)x, *(const shk__str *)y);
}

/* Annotation*: checked (unique keys, valid strings) and dropped, as the
 * resolved schema does not keep them. */
static void annotations(sparser *p)
{
  shk__str *keys = NULL;
  size_t n = 0, cap = 0;
  shk__loc loc = p->c.t.loc;
  while (shk__cur_accept(&p->c, SHK__TK_AT)) {
    if (!shk__cur_at(&p->c, SHK__TK_IDENT))
      shk__cur_unexpected(&p->c);
    *SHK__PUSH(p->a, keys, n, cap) = (shk__str){ p->c.t.p, p->c.t.n };
    shk__cur_next(&p->c);
    if (shk__cur_accept(&p->c, SHK__TK_LPAREN)) {
      string_lit(p);
      shk__cur_expect(&p->c, SHK__TK_RPAREN);
    }
  }
  if (n > 1) {
    qsort(keys, n, sizeof(*keys), cmp_key);
    for (size_t i = 1; i < n; i++)
      if (shk__str_eq(keys[i - 1], keys[i]))
        shk__cur_fail(&p->c, loc, "duplicate annotations: `%.*s`", (int)keys[i].n, keys[i].p);
  }
}

static shk__st *type(sparser *p);

static shk__st *new_type(sparser *p, shk__st_kind k, shk__loc loc)
{
  shk__st *t = shk__arena_calloc(p->a, sizeof(*t));
  t->kind = k;
  t->loc = loc;
  return t;
}

/* '{' [AttrDecls] '}' with the opening brace current. */
static shk__st *record(sparser *p)
{
  shk__st *t = new_type(p, SHK__ST_RECORD, p->c.t.loc);
  shk__cur_expect(&p->c, SHK__TK_LBRACE);
  size_t cap = 0;
  while (!shk__cur_at(&p->c, SHK__TK_RBRACE)) {
    annotations(p);
    shk__st_attr *at = SHK__PUSH(p->a, t->attrs, t->n_attrs, cap);
    at->loc = p->c.t.loc;
    at->name = shk__cur_at(&p->c, SHK__TK_STRING) ? string_lit(p) : ident(p);
    at->required = !shk__cur_accept(&p->c, SHK__TK_QUESTION);
    shk__cur_expect(&p->c, SHK__TK_COLON);
    at->type = type(p);
    if (!shk__cur_accept(&p->c, SHK__TK_COMMA))
      break;
  }
  shk__cur_expect(&p->c, SHK__TK_RBRACE);
  return t;
}

static shk__st *type(sparser *p)
{
  if (++p->depth > MAX_TYPE_DEPTH)
    shk__cur_fail(&p->c, p->c.t.loc, "type nested too deeply (more than %d levels)", MAX_TYPE_DEPTH);
  shk__st *t;
  shk__loc loc = p->c.t.loc;
  if (shk__cur_at(&p->c, SHK__TK_LBRACE)) {
    t = record(p);
  } else if (sat_word(p, "Set")) {
    /* `Set` is also a plain identifier; whether `<` follows decides, and
     * white space may come between. */
    shk__lexer save = p->c.lx;
    shk__tok st = p->c.t;
    shk__cur_next(&p->c);
    if (shk__cur_at(&p->c, SHK__TK_LT)) {
      shk__cur_next(&p->c);
      t = new_type(p, SHK__ST_SET, loc);
      t->elem = type(p);
      shk__cur_expect(&p->c, SHK__TK_GT);
    } else {
      p->c.lx = save;
      p->c.t = st;
      t = new_type(p, SHK__ST_REF, loc);
      t->name = path(p, false, NULL);
    }
  } else {
    t = new_type(p, SHK__ST_REF, loc);
    t->name = path(p, false, NULL);
  }
  p->depth--;
  return t;
}

/* EntTypes := Path | '[' [Path {',' Path}] ']' (no trailing comma). */
static shk__str *ent_types(sparser *p, size_t *n)
{
  shk__str *v = NULL;
  size_t cap = 0;
  *n = 0;
  if (!shk__cur_accept(&p->c, SHK__TK_LBRACKET)) {
    v = shk__arena_alloc(p->a, sizeof(*v));
    v[0] = path(p, false, NULL);
    *n = 1;
    return v;
  }
  if (shk__cur_accept(&p->c, SHK__TK_RBRACKET))
    return v;
  do
    *SHK__PUSH(p->a, v, *n, cap) = path(p, false, NULL);
  while (shk__cur_accept(&p->c, SHK__TK_COMMA));
  shk__cur_expect(&p->c, SHK__TK_RBRACKET);
  return v;
}

static bool is_cedar_reserved(shk__str s)
{
  return shk__str_eq(s, SHK__STR_LIT("__cedar"));
}

static void entity_decl(sparser *p, shk__loc loc)
{
  shk__str *names = NULL;
  shk__loc *locs = NULL;
  size_t n = 0, cap = 0, nl = 0, lcap = 0;
  do {
    *SHK__PUSH(p->a, locs, nl, lcap) = p->c.t.loc;
    *SHK__PUSH(p->a, names, n, cap) = ident(p);
  } while (shk__cur_accept(&p->c, SHK__TK_COMMA));
  shk__st_etype proto = { .ns = p->ns, .loc = loc };
  bool has_in = false;
  if (sat_word(p, "in")) {
    shk__cur_next(&p->c);
    has_in = true;
    proto.member_of = ent_types(p, &proto.n_member_of);
  }
  if (!has_in && sat_word(p, "enum")) {
    shk__cur_next(&p->c);
    shk__cur_expect(&p->c, SHK__TK_LBRACKET);
    proto.is_enum = true;
    size_t ecap = 0;
    do
      *SHK__PUSH(p->a, proto.enum_ids, proto.n_enum_ids, ecap) = string_lit(p);
    while (shk__cur_accept(&p->c, SHK__TK_COMMA));
    shk__cur_expect(&p->c, SHK__TK_RBRACKET);
  } else {
    bool eq = shk__cur_accept(&p->c, SHK__TK_EQ);
    if (eq || shk__cur_at(&p->c, SHK__TK_LBRACE))
      proto.shape = record(p);
    if (sat_word(p, "tags")) {
      shk__cur_next(&p->c);
      proto.tags = type(p);
    }
  }
  shk__cur_expect(&p->c, SHK__TK_SEMI);
  for (size_t i = 0; i < n; i++) {
    if (is_cedar_reserved(names[i]))
      shk__cur_fail(&p->c, locs[i], "use of the reserved `__cedar` namespace");
    shk__st_etype *e = SHK__PUSH(p->a, p->sc->etypes, p->sc->n_etypes, p->sc->cap_etypes);
    *e = proto;
    e->name = names[i];
    e->loc = locs[i];
  }
}

/* QualName := Path '::' STR | Name. */
static shk__st_aref qual_name(sparser *p)
{
  shk__st_aref r = { 0 };
  if (shk__cur_at(&p->c, SHK__TK_STRING)) {
    r.id = string_lit(p);
    return r;
  }
  bool str;
  shk__loc loc = p->c.t.loc;
  shk__str pth = path(p, true, &str);
  if (str) {
    r.type = pth;
    r.id = string_lit(p);
    return r;
  }
  if (memchr(pth.p, ':', pth.n))
    shk__cur_fail(&p->c, loc, "expected an action name or a qualified action reference, found `%.*s`",
                  (int)pth.n, pth.p);
  r.id = pth;
  return r;
}

static void action_decl(sparser *p, shk__loc loc)
{
  shk__str *names = NULL;
  shk__loc *locs = NULL;
  size_t n = 0, cap = 0, nl = 0, lcap = 0;
  do {
    *SHK__PUSH(p->a, locs, nl, lcap) = p->c.t.loc;
    *SHK__PUSH(p->a, names, n, cap) = shk__cur_at(&p->c, SHK__TK_STRING) ? string_lit(p) : ident(p);
  } while (shk__cur_accept(&p->c, SHK__TK_COMMA));
  shk__st_action proto = { .ns = p->ns, .loc = loc };
  if (sat_word(p, "in")) {
    shk__cur_next(&p->c);
    size_t mcap = 0;
    if (shk__cur_accept(&p->c, SHK__TK_LBRACKET)) {
      do
        *SHK__PUSH(p->a, proto.member_of, proto.n_member_of, mcap) = qual_name(p);
      while (shk__cur_accept(&p->c, SHK__TK_COMMA));
      shk__cur_expect(&p->c, SHK__TK_RBRACKET);
    } else {
      *SHK__PUSH(p->a, proto.member_of, proto.n_member_of, mcap) = qual_name(p);
    }
  }
  if (sat_word(p, "appliesTo")) {
    shk__cur_next(&p->c);
    shk__cur_expect(&p->c, SHK__TK_LBRACE);
    proto.has_applies_to = true;
    bool seen_p = false, seen_r = false, seen_c = false;
    do {
      shk__loc dloc = p->c.t.loc;
      if (sat_word(p, "principal") || sat_word(p, "resource")) {
        bool is_p = p->c.t.p[0] == 'p';
        shk__cur_next(&p->c);
        shk__cur_expect(&p->c, SHK__TK_COLON);
        size_t k;
        shk__str *v = ent_types(p, &k);
        if (is_p ? seen_p : seen_r)
          shk__cur_fail(&p->c, dloc, "duplicate `%s` declaration in action `%.*s`",
                        is_p ? "principal" : "resource", (int)names[0].n, names[0].p);
        if (k == 0)
          shk__cur_fail(&p->c, dloc, "for action `%.*s`, `%s` is `[]`, which is invalid", (int)names[0].n,
                        names[0].p, is_p ? "principal" : "resource");
        if (is_p) {
          seen_p = true;
          proto.principals = v;
          proto.n_principals = k;
        } else {
          seen_r = true;
          proto.resources = v;
          proto.n_resources = k;
        }
      } else if (sat_word(p, "context")) {
        shk__cur_next(&p->c);
        shk__cur_expect(&p->c, SHK__TK_COLON);
        if (seen_c)
          shk__cur_fail(&p->c, dloc, "duplicate `context` declaration in action `%.*s`", (int)names[0].n,
                        names[0].p);
        seen_c = true;
        if (shk__cur_at(&p->c, SHK__TK_LBRACE)) {
          proto.context = record(p);
        } else {
          proto.context = new_type(p, SHK__ST_COMMON, p->c.t.loc);
          proto.context->name = path(p, false, NULL);
        }
      } else {
        shk__cur_unexpected(&p->c);
      }
    } while (shk__cur_accept(&p->c, SHK__TK_COMMA) && !shk__cur_at(&p->c, SHK__TK_RBRACE));
    shk__cur_expect(&p->c, SHK__TK_RBRACE);
    if (!seen_p || !seen_r)
      shk__cur_fail(&p->c, loc, "missing `%s` declaration for `%.*s`", !seen_p ? "principal" : "resource",
                    (int)names[0].n, names[0].p);
  }
  if (sat_word(p, "attributes")) {
    shk__cur_next(&p->c);
    shk__cur_expect(&p->c, SHK__TK_LBRACE);
    shk__cur_expect(&p->c, SHK__TK_RBRACE);
  }
  shk__cur_expect(&p->c, SHK__TK_SEMI);
  for (size_t i = 0; i < n; i++) {
    shk__st_action *ac = SHK__PUSH(p->a, p->sc->actions, p->sc->n_actions, p->sc->cap_actions);
    *ac = proto;
    ac->name = names[i];
    ac->loc = locs[i];
  }
}

static void type_decl(sparser *p)
{
  shk__loc loc = p->c.t.loc;
  shk__str name = ident(p);
  shk__cur_expect(&p->c, SHK__TK_EQ);
  shk__st *t = type(p);
  shk__cur_expect(&p->c, SHK__TK_SEMI);
  shk__st_common *c = SHK__PUSH(p->a, p->sc->commons, p->sc->n_commons, p->sc->cap_commons);
  *c = (shk__st_common){ .ns = p->ns, .name = name, .type = t, .loc = loc };
}

/* Decl := Entity | Action | TypeDecl, annotations already read. */
static void decl(sparser *p)
{
  shk__loc loc = p->c.t.loc;
  if (sat_word(p, "entity")) {
    shk__cur_next(&p->c);
    entity_decl(p, loc);
  } else if (sat_word(p, "action")) {
    shk__cur_next(&p->c);
    action_decl(p, loc);
  } else if (sat_word(p, "type")) {
    shk__cur_next(&p->c);
    type_decl(p);
  } else {
    shk__cur_unexpected(&p->c);
  }
}

int shk__schema_text_parse(shk__sch *sc, const char *text, size_t len, shk_error *err)
{
  sparser p = { .sc = sc, .c.err = err, .a = sc->a, .ns = SHK__STR_LIT("") };
  if (!shk__utf8_valid(text, len)) {
    shk__error_set(err, -EINVAL, "the schema is not valid UTF-8");
    return -EINVAL;
  }
  shk__lexer_init(&p.c.lx, text, len, true);
  if (setjmp(p.c.fail))
    return -EINVAL;
  shk__cur_next(&p.c);
  while (!shk__cur_at(&p.c, SHK__TK_EOF)) {
    annotations(&p);
    if (!sat_word(&p, "namespace")) {
      decl(&p);
      continue;
    }
    shk__cur_next(&p.c);
    shk__loc loc = p.c.t.loc;
    p.ns = path(&p, false, NULL);
    /* The __cedar namespace is the reference's own. */
    for (size_t i = 0; i + 7 <= p.ns.n; i++)
      if ((i == 0 || p.ns.p[i - 1] == ':') && memcmp(p.ns.p + i, "__cedar", 7) == 0 &&
          (i + 7 == p.ns.n || p.ns.p[i + 7] == ':'))
        shk__cur_fail(&p.c, loc, "use of the reserved `__cedar` namespace");
    shk__st_ns *nsd = SHK__PUSH(sc->a, sc->namespaces, sc->n_namespaces, sc->cap_namespaces);
    *nsd = (shk__st_ns){ p.ns, loc };
    shk__cur_expect(&p.c, SHK__TK_LBRACE);
    while (!shk__cur_at(&p.c, SHK__TK_RBRACE)) {
      annotations(&p);
      decl(&p);
    }
    shk__cur_next(&p.c);
    p.ns = SHK__STR_LIT("");
  }
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the Cedar policy lexer and parser (src/cedar/lexer.c,
 * parser.c). Which inputs parse and which are refused was checked against
 * the reference engine (cedar-wasm 4.13); the error positions are ours. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cedar/cedar-internal.h"
#include "common/common.h"

#define W "permit(principal, action, resource) when { "

/* The tests' own large buffers: a failed allocation fails the test. */
static void *must_malloc(size_t n)
{
  void *p = malloc(n);
  assert_non_null(p);
  return p;
}

static int parse(shk__arena *a, const char *text, shk__policy ***ps, size_t *n, shk_error *err)
{
  return shk__parse_policies(a, text, strlen(text), ps, n, err);
}

/* Accepted by the reference. */
static const char *const good[] = {
  "",
  "// only a comment",
  "permit(principal, action, resource);",
  "permit(principal,action,resource,);",
  "forbid(principal,action,resource) unless { true } when { false };",
  "permit(principal in Group::\"a\", action == Action::\"view\", resource in Folder::\"x\");",
  "permit(principal is User, action, resource is Doc in Folder::\"x\");",
  "permit(principal is User in Group::\"x\", action in [Action::\"a\", NS::Action::\"b\"], resource);",
  "permit(principal == (User::\"a\"), action in [], resource);",
  "permit(principal == ?principal, action, resource in ?resource);",
  "permit(principal is User in ?principal, action, resource);",
  "@id(\"x\") @then @principal @if(\"y\") @__cedar(\"z\") permit(principal, action, resource);",
  W "principal has a.b.c };",
  W "principal has principal };",
  W "{principal: 1, \"if\": 2, a: 3,} == {} };",
  W "principal[\"a\"][\"b\"] == principal.a.b };",
  W "-9223372036854775808 == --9223372036854775808 };",
  W "!!!!true && - 1 == -1 && 1 - - 1 == 2 };",
  W "if principal then if 1 then 2 else 3 else 4 };",
  W "(if true then 1 else 2) == 1 };",
  W "ip(\"a\", \"b\") == ip() };",
  W "principal.isIpv4(1) && [1,2,].containsAll([1]) && [].containsAny([]) };",
  W "principal.hasTag(\"a\") && principal.getTag(\"a\") && principal.isEmpty() };",
  W "decimal(\"1.0\").lessThan(decimal(\"2.0\")) };",
  W "datetime(\"2024-01-01\").offset(duration(\"1h\")).toDate() };",
  W "principal is principal && principal is A::B::C };",
  W "principal::\"a\" == principal };",
  W "principal like \"\\*a*\" && \"\\u{1_F600}\\u{10FFFF}\\x7f\\0\\n\\r\\t\\\\\\'\\\"\" == \"\" };",
  W "principal\xc2\xa0==\xe2\x80\xa8principal };",
  W "\"\xc3\xa9\" == \"\\u{e9}\" };",
};

struct bad {
  const char *text;
  unsigned line, col; /* 0: not checked */
  const char *msg;    /* a part of the message */
};

/* Refused by the reference. */
static const struct bad bad[] = {
  { "permit(principal, action, resource)", 1, 36, "unexpected token" },
  { "permit(principal,action);", 1, 24, "missing the `resource`" },
  { "permit(resource,action,principal);", 1, 8, "where the variable `principal`" },
  { "permit(principal,action,resource,context);", 1, 34, "extra element" },
  { "allow(principal, action, resource);", 1, 1, "not a valid policy effect" },
  { "permit(principal: User,action,resource);", 1, 17, "`:`" },
  { "permit(principal,action,resource) when {};", 1, 35, "cannot be empty" },
  { "permit(principal,action,resource) where { true };", 1, 35, "not a valid policy condition" },
  { "@a(\"x\") @a(\"y\") permit(principal,action,resource);", 1, 9, "duplicate annotation" },
  { "@a() permit(principal,action,resource);", 1, 4, "unexpected token" },
  { "permit(principal is User == User::\"a\",action,resource);", 1, 26, "`is` cannot be used together" },
  { "permit(principal in ?resource,action,resource);", 1, 21, "?resource instead of ?principal" },
  { "permit(principal == ?foo,action,resource);", 1, 21, "not a valid template slot" },
  { "permit(principal,action in ?resource,resource);", 1, 28, "template slot" },
  { "permit(principal,action == [Action::\"a\"],resource);", 1, 28, "found set of entity uids" },
  { "permit(principal,action in A::\"a\",resource);", 1, 28, "type `Action`" },
  { "permit(principal,action is Action,resource);", 1, 25, "action scope" },
  { "permit(principal in [User::\"a\"],action,resource);", 1, 21, "set of entity uids" },
  { "\n\n  " W "?principal == principal };", 3, 46, "template slot" },
  { W "1 < 2 < 3 };", 1, 50, "multiple relational operators" },
  { W "1 / 2 };", 1, 46, "division" },
  { W "1 % 2 };", 1, 46, "remainder" },
  { W "1 = 2 };", 1, 46, "'=' is not a valid operator" },
  { W "\"a\" like (\"x\") };", 1, 54, "pattern literal" },
  { W "{(\"a\"): 1} == {} };", 1, 46, "invalid attribute name" },
  { W "principal has (\"a\") };", 1, 58, "unexpected token" },
  { W "principal[(\"a\")] == 1 };", 1, 55, "string literal" },
  { W "principal has true };", 1, 58, "reserved" },
  { W "principal has a.then };", 1, 60, "reserved" },
  { W "principal has a::b };", 1, 58, "namespace" },
  { W "principal.if == 1 };", 1, 54, "reserved" },
  { W "{is: 1} == {} };", 1, 45, "reserved" },
  { W "{if: 1} };", 1, 45, "reserved" },
  { W "then::\"a\" == principal };", 1, 44, "reserved" },
  { W "__cedar::\"a\" == principal };", 1, 44, "__cedar" },
  { W "principal.__cedar };", 1, 54, "__cedar" },
  { W "principal.contains() };", 1, 54, "exactly 1 argument" },
  { W "principal.isEmpty(1) };", 1, 54, "exactly 0 arguments" },
  { W "isIpv4(ip(\"a\")) };", 1, 44, "is a method, not a function" },
  { W "principal.ip() };", 1, 54, "is a function, not a method" },
  { W "principal.foo() };", 1, 54, "not a valid method" },
  { W "foo() };", 1, 44, "not a valid function" },
  { W "principal(1) == \"\" };", 1, 44, "not a valid function call" },
  { W "x == \"\" };", 1, 44, "invalid variable" },
  { W "A::B == \"\" };", 1, 44, "invalid variable" },
  { W "User::{a: 1} };", 1, 44, "invalid entity literal" },
  { W "{a: 1, \"a\": 2} };", 1, 44, "duplicate key" },
  { W "9223372036854775808 == 1 };", 1, 44, "too large" },
  { W "-(9223372036854775808) == 1 };", 1, 46, "too large" },
  { W "-9223372036854775809 == 1 };", 1, 45, "too large" },
  { W "18446744073709551616 == 1 };", 1, 44, "integer parse error" },
  { W "!!!!!true };", 1, 44, "too many occurrences of `!`" },
  { W "-----1 == 1 };", 1, 44, "too many occurrences of `-`" },
  { W "!-1 };", 1, 45, "unexpected token" },
  { W "1 + if true then 1 else 2 };", 1, 48, "unexpected token" },
  { W "\"a\" like \"b\" like \"c\" };", 1, 57, "unexpected token" },
  { W "principal is User::\"a\" };", 1, 57, "entity type name" },
  { W "principal in User::\"a\" has b };", 1, 67, "unexpected token" },
  { W "[,] };", 1, 45, "unexpected token" },
  { W "\"\\q\" == \"\" };", 1, 44, "invalid escape" },
  { W "\"\\u{D800}\" == \"\" };", 1, 44, "surrogate" },
  { W "\"\\u{0000001}\" == \"\" };", 1, 44, "six digits" },
  { W "\"\\u{110000}\" == \"\" };", 1, 44, "out of range" },
  { W "\"\\x80\" == \"\" };", 1, 44, "\\x7f" },
  { W "\"\\u{_1}\" == \"\" };", 1, 44, "invalid character" },
  { W "principal like \"\\q\" };", 1, 59, "invalid escape" },
  { W "\"unterminated };", 1, 44, "unterminated" },
  { W "principal\xe2\x80\x8b== principal };", 1, 53, "unexpected character" },
  { "permit(principal, action, resource) when { \"\xff\" };", 0, 0, "UTF-8" },
};

static void policies_accepted(void **state)
{
  (void)state;
  shk__arena *a = shk__arena_new();
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    shk__policy **ps;
    size_t n;
    shk_error err;
    int r = parse(a, good[i], &ps, &n, &err);
    if (r != 0)
      fail_msg("refused: %s\n  %u:%u %s", good[i], err.line, err.column, err.message);
  }
  shk__arena_free(a);
}

static void policies_refused(void **state)
{
  (void)state;
  shk__arena *a = shk__arena_new();
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    shk__policy **ps;
    size_t n;
    shk_error err;
    int r = parse(a, bad[i].text, &ps, &n, &err);
    if (r != -EINVAL)
      fail_msg("accepted: %s", bad[i].text);
    if (!strstr(err.message, bad[i].msg))
      fail_msg("%s\n  message \"%s\" lacks \"%s\"", bad[i].text, err.message, bad[i].msg);
    if (bad[i].line && (err.line != bad[i].line || err.column != bad[i].col))
      fail_msg("%s\n  at %u:%u, expected %u:%u (%s)", bad[i].text, err.line, err.column, bad[i].line, bad[i].col,
               err.message);
  }
  shk__arena_free(a);
}

/* The tree has the shape the evaluator relies on. */
static void ast_shape(void **state)
{
  (void)state;
  shk__arena *a = shk__arena_new();
  shk__policy **ps;
  size_t n;
  shk_error err;
  const char *text =
    "@advice(\"a\\tb\") @flag\n"
    "permit(principal is NS::User in Group::\"g\", action in [Action::\"r\"], resource)\n"
    "when { context has a.b && 1 + 2 * 3 == 7 || !principal.x.contains(-5) }\n"
    "unless { \"x\\u{e9}\" like \"a\\*b*\" };\n"
    "forbid(principal == ?principal, action == NS::Action::\"w\", resource is T);";
  assert_int_equal(parse(a, text, &ps, &n, &err), 0);
  assert_int_equal(n, 2);
  shk__policy *p = ps[0];
  assert_true(shk__str_eq(p->id, SHK__STR_LIT("policy0")));
  assert_false(p->is_forbid);
  assert_false(p->is_template);
  assert_int_equal(p->n_annots, 2);
  assert_true(shk__str_eq(p->annots[0].value, SHK__STR_LIT("a\tb")));
  assert_true(shk__str_eq(p->annots[1].value, SHK__STR_LIT("")));
  assert_int_equal(p->principal.kind, SHK__SC_IS_IN);
  assert_true(shk__str_eq(p->principal.is_type, SHK__STR_LIT("NS::User")));
  assert_true(shk__str_eq(p->principal.uid.type, SHK__STR_LIT("Group")));
  assert_int_equal(p->action.kind, SHK__SC_IN_LIST);
  assert_int_equal(p->action.n_uids, 1);
  assert_int_equal(p->resource.kind, SHK__SC_ANY);
  assert_int_equal(p->n_conds, 2);
  /* (has a && a has b && (1 + 2*3 == 7)) || !(...) */
  shk__expr *e = p->conds[0].body;
  assert_int_equal(e->kind, SHK__E_OR);
  shk__expr *l = e->a;
  assert_int_equal(l->kind, SHK__E_AND);
  assert_int_equal(l->a->kind, SHK__E_AND);
  assert_int_equal(l->a->a->kind, SHK__E_HAS);
  assert_true(shk__str_eq(l->a->a->s, SHK__STR_LIT("a")));
  assert_int_equal(l->a->b->kind, SHK__E_HAS);
  assert_int_equal(l->a->b->a->kind, SHK__E_GETATTR);
  shk__expr *eq = l->b;
  assert_int_equal(eq->kind, SHK__E_EQ);
  assert_int_equal(eq->a->kind, SHK__E_ADD);
  assert_int_equal(eq->a->b->kind, SHK__E_MUL);
  shk__expr *r = e->b;
  assert_int_equal(r->kind, SHK__E_NOT);
  assert_int_equal(r->a->kind, SHK__E_CALL);
  assert_int_equal(r->a->fn, SHK__FN_CONTAINS);
  assert_int_equal(r->a->n_items, 2);
  assert_int_equal(r->a->items[1]->kind, SHK__E_LONG);
  assert_int_equal(r->a->items[1]->lval, -5);
  shk__expr *lk = p->conds[1].body;
  assert_false(p->conds[1].is_when);
  assert_int_equal(lk->kind, SHK__E_LIKE);
  assert_true(shk__str_eq(lk->a->s, SHK__STR_LIT("x\xc3\xa9")));
  assert_int_equal(lk->n_pat, 4);
  assert_false(lk->pat[1].wildcard);
  assert_int_equal(lk->pat[1].byte, '*');
  assert_true(lk->pat[3].wildcard);
  assert_int_equal(p->conds[0].body->loc.line, 3);

  shk__policy *t = ps[1];
  assert_true(shk__str_eq(t->id, SHK__STR_LIT("policy1")));
  assert_true(t->is_forbid);
  assert_true(t->is_template);
  assert_true(t->principal.slot);
  assert_int_equal(t->action.kind, SHK__SC_EQ);
  assert_true(shk__str_eq(t->action.uid.type, SHK__STR_LIT("NS::Action")));
  assert_int_equal(t->resource.kind, SHK__SC_IS);

  /* Linking fills the slot and refuses a missing or extra one. */
  shk__uid alice;
  assert_int_equal(shk__parse_entity_ref(a, " NS :: User :: \"al\\u{69}ce\" ", 27, &alice, &err), 0);
  assert_true(shk__str_eq(alice.type, SHK__STR_LIT("NS::User")));
  assert_true(shk__str_eq(alice.id, SHK__STR_LIT("alice")));
  shk__policy *link;
  assert_int_equal(shk__link_template(a, t, SHK__STR_LIT("L1"), &alice, NULL, &link, &err), 0);
  assert_true(link->is_link);
  assert_false(link->is_template);
  assert_false(link->principal.slot);
  assert_true(shk__uid_eq(link->principal.uid, alice));
  assert_true(shk__str_eq(link->template_id, SHK__STR_LIT("policy1")));
  assert_true(t->principal.slot); /* the template is unchanged */
  assert_int_equal(shk__link_template(a, t, SHK__STR_LIT("L2"), NULL, NULL, &link, &err), -EINVAL);
  assert_int_equal(shk__link_template(a, t, SHK__STR_LIT("L3"), &alice, &alice, &link, &err), -EINVAL);
  assert_int_equal(shk__link_template(a, p, SHK__STR_LIT("L4"), &alice, NULL, &link, &err), -EINVAL);
  shk__arena_free(a);
}

static void entity_refs_and_names(void **state)
{
  (void)state;
  shk__arena *a = shk__arena_new();
  shk__uid u;
  shk_error err;
  static const char *const refs_bad[] = { "User", "User::", "\"a\"", "if::\"a\"", "User::\"a\" x",
                                          "User::\"\\q\"", "__cedar::\"a\"", "" };
  for (size_t i = 0; i < sizeof(refs_bad) / sizeof(refs_bad[0]); i++)
    if (shk__parse_entity_ref(a, refs_bad[i], strlen(refs_bad[i]), &u, &err) != -EINVAL)
      fail_msg("accepted entity reference: %s", refs_bad[i]);
  assert_int_equal(shk__parse_entity_ref(a, "A::B::\"\"", 8, &u, &err), 0);
  assert_int_equal(u.id.n, 0);
  /* An empty text may be NULL. */
  shk__policy **ps;
  size_t n;
  assert_int_equal(shk__parse_policies(a, NULL, 0, &ps, &n, &err), 0);
  assert_int_equal(n, 0);
  assert_int_equal(shk__parse_entity_ref(a, NULL, 0, &u, &err), -EINVAL);

  static const char *const names_ok[] = { "User", "A::B::C", "_x9", "principal", "permit" };
  static const char *const names_bad[] = { "", "A:B", "A::", "::A", "A ::B", "9a", "in", "A::if", "__cedar",
                                           "A::__cedar::B", "A-B" };
  for (size_t i = 0; i < sizeof(names_ok) / sizeof(names_ok[0]); i++)
    if (!shk__is_valid_name(names_ok[i], strlen(names_ok[i])))
      fail_msg("refused name: %s", names_ok[i]);
  for (size_t i = 0; i < sizeof(names_bad) / sizeof(names_bad[0]); i++)
    if (shk__is_valid_name(names_bad[i], strlen(names_bad[i])))
      fail_msg("accepted name: %s", names_bad[i]);
  assert_string_equal(shk__fn_name(SHK__FN_CONTAINS_ALL), "containsAll");
  assert_true(shk__fn_is_constructor(SHK__FN_DECIMAL));
  assert_false(shk__fn_is_constructor(SHK__FN_IS_IN_RANGE));
  shk__arena_free(a);
}

/* Deep nesting is refused with a message, not a crash, whether it is
 * written nested or as a long chain (which makes as deep a tree): every
 * parsed tree is at most SHK__EXPR_MAX_HEIGHT high, so the evaluator's
 * recursion is bounded. Within the bound, parsing is linear. */
static void limits(void **state)
{
  (void)state;
  shk__arena *a = shk__arena_new();
  size_t depth = 100000;
  char *deep = must_malloc(depth * 2 + 100);
  size_t k = (size_t)sprintf(deep, W);
  for (size_t i = 0; i < depth; i++)
    deep[k++] = '(';
  deep[k++] = '1';
  for (size_t i = 0; i < depth; i++)
    deep[k++] = ')';
  strcpy(deep + k, " };");
  shk__policy **ps;
  size_t n;
  shk_error err;
  assert_int_equal(parse(a, deep, &ps, &n, &err), -EINVAL);
  assert_non_null(strstr(err.message, "nested too deeply"));
  free(deep);

  static const char *const links[] = { " + 1", ".a", " && true", "[\"a\"]" };
  for (size_t l = 0; l < sizeof(links) / sizeof(links[0]); l++) {
    for (size_t terms = SHK__EXPR_MAX_HEIGHT - 10; terms <= 200000; terms += 199010) {
      size_t cap = terms * 8 + 100;
      char *flat = must_malloc(cap);
      k = (size_t)snprintf(flat, cap, W "principal");
      for (size_t i = 0; i < terms; i++)
        k += (size_t)snprintf(flat + k, cap - k, "%s", links[l]);
      snprintf(flat + k, cap - k, " == 1 };");
      int r = parse(a, flat, &ps, &n, &err);
      if (terms < SHK__EXPR_MAX_HEIGHT) {
        if (r != 0)
          fail_msg("%zu x '%s' refused: %s", terms, links[l], err.message);
        assert_true(ps[0]->conds[0].body->height <= SHK__EXPR_MAX_HEIGHT);
      } else {
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(err.message, "nested too deeply"));
      }
      free(flat);
      shk__arena_reset(a);
    }
  }
  shk__arena_free(a);
}

/* The conformance corpus: SHINKEN_CEDAR_CORPUS names an extracted
 * corpus-tests directory; otherwise the archive next to the repository is
 * extracted into a temporary directory (never into the source tree). */
static char corpus_tmp[64];

static const char *corpus_dir(char *buf, size_t n)
{
  const char *dir = getenv("SHINKEN_CEDAR_CORPUS");
  if (dir)
    return dir;
  const char *src = getenv("SHINKEN_SRCDIR");
  if (!src)
    return NULL;
  char tarball[4096];
  snprintf(tarball, sizeof tarball, "%s/../shared/cedar-conformance/corpus-tests.tar.gz", src);
  if (access(tarball, R_OK) != 0)
    return NULL;
  strcpy(corpus_tmp, "/tmp/shk-cedar-corpus-XXXXXX");
  if (!mkdtemp(corpus_tmp))
    return NULL;
  char *cmd = shk__asprintf("tar -xzf '%s' -C '%s'", tarball, corpus_tmp);
  assert_non_null(cmd);
  int rc = system(cmd);
  free(cmd);
  if (rc != 0)
    return NULL;
  snprintf(buf, n, "%s/corpus-tests", corpus_tmp);
  return buf;
}

/* Every .cedar and .cedarschema file of the corpus parses (each is used by
 * a conformance test), and each schema resolves. */
static void corpus(void **state)
{
  (void)state;
  char buf[4096];
  const char *dir = corpus_dir(buf, sizeof buf);
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) {
    if (getenv("SHINKEN_MUST_WORK"))
      fail_msg("the Cedar conformance corpus is not available (set SHINKEN_CEDAR_CORPUS)");
    skip();
  }
  size_t n_pol = 0, n_sch = 0;
  struct dirent *de;
  shk__arena *a = shk__arena_new();
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    bool pol = l > 6 && strcmp(de->d_name + l - 6, ".cedar") == 0;
    bool sch = l > 12 && strcmp(de->d_name + l - 12, ".cedarschema") == 0;
    if (!pol && !sch)
      continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    char *text;
    size_t len;
    assert_int_equal(shk__read_file(path, &text, &len), 0);
    shk_error err;
    if (pol) {
      shk__policy **ps;
      size_t n;
      if (shk__parse_policies(a, text, len, &ps, &n, &err) != 0)
        fail_msg("%s: %u:%u %s", path, err.line, err.column, err.message);
      shk__arena_reset(a);
      n_pol++;
    } else {
      shk_cedar_schema *s;
      if (shk_cedar_schema_parse(text, len, SHK_CEDAR_SCHEMA_TEXT, &s, &err) != 0)
        fail_msg("%s: %u:%u %s", path, err.line, err.column, err.message);
      shk_cedar_schema_free(s);
      n_sch++;
    }
    free(text);
  }
  closedir(d);
  shk__arena_free(a);
  if (corpus_tmp[0]) {
    char *cmd = shk__asprintf("rm -rf '%s'", corpus_tmp);
    assert_non_null(cmd);
    assert_int_equal(system(cmd), 0);
    free(cmd);
  }
  print_message("# parsed %zu corpus policy files and %zu schemas\n", n_pol, n_sch);
  assert_true(n_pol > 0 && n_sch > 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(policies_accepted), cmocka_unit_test(policies_refused),
    cmocka_unit_test(ast_shape),         cmocka_unit_test(entity_refs_and_names),
    cmocka_unit_test(limits),            cmocka_unit_test(corpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

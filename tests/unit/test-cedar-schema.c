/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the Cedar schema readers (src/cedar/schema*.c): both
 * source forms, name resolution and the lookups. The accepted and refused
 * tables were checked against the reference engine (cedar-wasm 4.13); a
 * string starting with '{' is the JSON form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-internal.h"
#include "common/common.h"

/* The tests' own large buffers: a failed allocation fails the test. */
static void *must_malloc(size_t n)
{
  void *p = malloc(n);
  assert_non_null(p);
  return p;
}

static int parse(const char *text, shk_cedar_schema **s, shk_error *err)
{
  return shk_cedar_schema_parse(text, strlen(text), text[0] == '{' ? SHK_CEDAR_SCHEMA_JSON : SHK_CEDAR_SCHEMA_TEXT, s,
                                err);
}

/* Accepted by the reference. */
static const char *const good[] = {
  "entity A; type A = Long; entity B { a: A };",
  "entity A { a: Long, a: String };",
  "entity A enum [\"a\", \"a\"];",
  "entity Long; entity B { a: Long };",
  "namespace N { action x; action y in [Action::\"x\"]; }",
  "namespace N { action y in [N2::Action::\"x\"]; } namespace N2 { action x; }",
  "action a appliesTo { principal: A, resource: A, context: C }; entity A; type C = { x: Long };",
  "entity E = { x: __cedar::ipaddr, y: ipaddr, z: __cedar::Bool };",
  "type Bool2 = Bool; entity E { x: Bool2 };",
  "entity E { \"in\": Long };",
  "entity E in [];",
  "action \"a\", b appliesTo { principal: [A], resource: A, context: {}, }; entity A;",
  "action a attributes {};",
  "entity E tags Set<Long>;",
  "entity E = {} tags String;",
  "@a(\"x\") namespace N { @b entity E { @c a: Long }; }",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"ipaddr\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Bool\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {\"principalTypes\": [], \"resourceTypes\": []}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"memberOf\": [{\"id\": \"b\"}]}, \"b\": {}}}}",
  "{\"N\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"memberOf\": [{\"id\": \"b\", \"type\": \"Action\"}]}, \"b\": {}}}}",
  "{\"N\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"memberOf\": [{\"id\": \"b\", \"type\": \"N::Action\"}]}, \"b\": {}}}}",
  "{\"N\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"Long\"}}, \"annotations\": {\"a\": \"b\"}}}",
  "namespace N { action y in [Action::\"x\"]; } action x;",
  "namespace N { action User; } entity User;",
  "namespace N { entity A { x: B }; } entity B;",
  "namespace N { entity A { x: B }; entity B; }",
  "namespace N { entity A in [B]; } entity B;",
  "namespace N { entity A; } namespace N::A { entity B; }",
  "entity A; action a appliesTo { principal: A, resource: A, context: T }; type T = { a: Long };",
  "type T = { a: Long }; entity A { b: T };",
  "namespace N { type T = { a: Long }; } entity A { b: N::T };",
  "entity A { b: ipaddr }; entity ipaddr;",
  "entity String; entity A { b: String };",
  "namespace N { entity String; entity A { b: String }; }",
  "entity A { b: Set<A>, c: {d?: Long, \"e f\": Bool} };",
  "type ipaddr = Long;",
  "type decimal = Long; entity A { a: decimal };",
  "entity Bool; entity A { a: Bool };",
  "action a in [N::Action::\"b\"]; namespace N { action b; }",
  "namespace A::B { entity C; } entity D in A::B::C;",
  "entity A in B; entity B in A;",
  "entity A, B in [C] = { a: Long } tags String; entity C;",
  "entity A = { a: Long };",
  "entity A {};",
  "entity A = {};",
  "entity A {a: Long,};",
  "entity A {a?: Long, \"b\"?: Set<Set<{c: Bool}>>};",
  "entity A {a: Set <Long>};",
  "action a;",
  "action \"\";",
  "action a, \"b c\", \"\\u{1F600}\";",
  "action a appliesTo { principal: A, resource: A, }; entity A;",
  "action a appliesTo { principal: [A, B], resource: [A] }; entity A; entity B;",
  "action a in [\"b\", c, Action::\"d\", NS::Action::\"e\"]; action b, c, d; namespace NS { action e; }",
  "action a in Action::\"b\"; action b;",
  "action \"in\";",
  "entity namespace, entity, type, action, appliesTo, principal, resource, context, attributes, tags, Set, Long2, enum;",
  "entity Long;",
  "entity String; entity Bool;",
  "type namespace = Long; type entity = Long; type type = Long; type principal = Long;",
  "type ipaddr = Long; entity A { a: ipaddr };",
  "namespace N {}",
  "namespace N::M {} namespace N::M::O { entity X; }",
  "namespace permit { entity when; }",
  "@a(\"x\")@b(\"y\") entity A;",
  "@a namespace N { } @b type T = Long;",
  "entity A; entity B in A; entity C in [A, B] { x: Set<A> };",
  "entity A in A;",
  "entity A in [A, A];",
  "namespace N { entity A in [M::B]; } namespace M { entity B; }",
  "namespace N { entity A { b: M::T }; } namespace M { type T = Long; }",
  "type T = { a: Long }; entity A { b: T, c: Set<T> };",
  "type T = A; entity A { b: T };",
  "namespace N { type T = A; entity A; } entity B { x: N::T };",
  "namespace N { type T = A; } entity A; entity B { x: N::T };",
  "{}",
  "{\"N::M\": {\"entityTypes\": {}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"memberOfTypes\": [\"A\"]}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {}, \"additionalAttributes\": false}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Long\", \"required\": false}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Long\", \"annotations\": {\"x\": \"y\"}}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Entity\", \"name\": \"A\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Extension\", \"name\": \"ipaddr\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"EntityOrCommon\", \"name\": \"Long\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Bool\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"__cedar::Bool\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"A\"}}}}}, \"actions\": {}, \"commonTypes\": {\"A\": {\"type\": \"Long\"}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"T\"}}}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"Record\", \"attributes\": {}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"EntityOrCommon\", \"name\": \"T\"}}}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"Record\", \"attributes\": {}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"tags\": {\"type\": \"String\"}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"enum\": [\"a\", \"b\"], \"annotations\": {}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"appliesTo\": null}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"memberOf\": null}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"memberOf\": []}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"attributes\": null}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"annotations\": {\"if\": \"x\"}}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"annotations\": {\"a\": null}}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"ipaddr\": {\"type\": \"Long\"}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"Long\", \"annotations\": {}}}}}",
  "{\"N\": {\"entityTypes\": {}, \"actions\": {}, \"annotations\": {\"doc\": \"x\"}}}",
};

/* Refused by the reference. */
static const char *const bad[] = {
  "namespace A {} namespace A {}",
  "entity A; entity A;",
  "namespace N { entity User; } entity User; entity B { a: N::User };",
  "namespace N { action y in [N::Action::\"x\"]; } namespace N2 { action x; }",
  "action a appliesTo { principal: [], resource: [A] }; entity A;",
  "action a appliesTo { resource: [A] }; entity A;",
  "action a appliesTo { principal: A, resource: A, context: A }; entity A;",
  "action a in a;",
  "action a in b; action b in a;",
  "type T = U; type U = T;",
  "entity __cedar;",
  "type Long = String;",
  "entity E { x: Foo };",
  "entity E { in: Long };",
  "entity E in [F,]; entity F;",
  "entity E enum [];",
  "@a @a entity E;",
  "namespace __cedar { entity E; }",
  "namespace N::__cedar { entity E; }",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Long\"}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"A\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {\"principalTypes\": [\"A\"]}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {}}}}}",
  "{\"N\": {\"entityTypes\": {\"A\": {\"foo\": 1}}, \"actions\": {}}}",
  "{\"N\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"Entity\", \"name\": \"X\"}}}}",
  "{\"N\": {\"entityTypes\": {\"E\": {\"enum\": [\"a\"], \"memberOfTypes\": []}}, \"actions\": {}}}",
  "{\"N\": {\"entityTypes\": {\"E\": {\"enum\": [\"a\"], \"shape\": {\"type\": \"Record\", \"attributes\": {}}}}, \"actions\": {}}}",
  "namespace N { action y in [Action::\"x\"]; action x; } action x;",
  "namespace N { type User = Long; } type User = String;",
  "namespace N { type User = Long; } entity User;",
  "namespace N { entity A { x: B }; } namespace B { entity C; }",
  "type T = Set<Long>; action a appliesTo { principal: A, resource: A, context: T }; entity A;",
  "type T = { a: Long }; entity A = T;",
  "entity Action; action a appliesTo { principal: Action, resource: Action };",
  "namespace N { entity A { b: __cedar::N }; }",
  "type Set = Long;",
  "type Record = Long;",
  "type Entity = Long;",
  "type Boolean = Long;",
  "action a in [N::Foo::\"b\"]; namespace N { action b; }",
  "action a in [Foo::\"b\"];",
  "action \"a\" in \"a\";",
  "action a; action \"a\";",
  "type T = T;",
  "type T = { a: T };",
  "entity A =;",
  "entity A tags;",
  "entity A in C enum [\"a\"]; entity C;",
  "entity A enum [\"a\"] tags Long;",
  "entity A enum [\"a\",];",
  "entity A enum [\"\\q\"];",
  "entity A, A;",
  "entity A {a: Long,,};",
  "entity A {,};",
  "entity A {a: Set<Long>>};",
  "entity A {a: Set};",
  "entity A {a: Set<>};",
  "entity A {a: Set<Long, String>};",
  "entity A {a: Long::String};",
  "entity A {a: __cedar::String, b: __cedar::Set<Long>};",
  "entity A {a: __cedar::Record};",
  "entity A {a: __cedar::__cedar::Long};",
  "entity A {a: __cedar};",
  "entity A {a: Boolean};",
  "entity A {a: Record};",
  "action a appliesTo {};",
  "action a appliesTo { principal: A, resource: A,, }; entity A;",
  "action a appliesTo { principal: A resource: A }; entity A;",
  "action a appliesTo { principal: A, principal: A, resource: A }; entity A;",
  "action a appliesTo { context: {}, principal: A, resource: A, context: {} }; entity A;",
  "action a appliesTo { principal: [A,], resource: [A] }; entity A;",
  "action a appliesTo { principal: X, resource: A }; entity A;",
  "action a appliesTo { principal: A, resource: A, context: {a: Long} } attributes {};",
  "action a attributes { a: Long };",
  "action a in [];",
  "action a in b::c; action b;",
  "action a in Action::b;",
  "action a in [Action::\"b\",]; action b;",
  "action in;",
  "action if;",
  "entity if;",
  "entity then;",
  "entity is;",
  "entity has;",
  "entity like;",
  "entity true;",
  "entity else;",
  "entity in;",
  "type T = Long;;",
  ";",
  "namespace {}",
  "namespace N { namespace M {} }",
  "namespace if {}",
  "namespace A::if {}",
  "@a(\"\\q\") entity A;",
  "@a() entity A;",
  "entity A { @a @a b: Long };",
  "namespace N { @doc(\"x\") }",
  "entity A { b: Long } // trailing comment",
  "/* block comment */ entity A;",
  "[]",
  "{\"\": {}}",
  "{\"\": {\"entityTypes\": {}}}",
  "{\"\": {\"actions\": {}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}, \"foo\": 1}}",
  "{\"N::\": {\"entityTypes\": {}, \"actions\": {}}}",
  "{\" N\": {\"entityTypes\": {}, \"actions\": {}}}",
  "{\"if\": {\"entityTypes\": {}, \"actions\": {}}}",
  "{\"__cedar\": {\"entityTypes\": {}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A::B\": {}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"if\": {}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"memberOfTypes\": [\"B\"]}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"memberOfTypes\": \"A\"}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"memberOfTypes\": null}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": null}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\"}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {}, \"additionalAttributes\": true}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Long\", \"required\": \"no\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Long\", \"foo\": 1}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Set\", \"element\": {\"type\": \"Long\", \"required\": true}}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Set\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Entity\", \"name\": \"__cedar::Long\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Extension\", \"name\": \"foo\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Extension\", \"name\": \"__cedar::ipaddr\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"EntityOrCommon\", \"name\": \"Boolean\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Long\", \"name\": \"x\"}}}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Entity\", \"name\": \"A\"}}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"enum\": []}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"enum\": [1]}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {\"A\": {\"enum\": \"a\"}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"memberOf\": [{\"id\": \"a\"}]}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"memberOf\": [{\"id\": \"b\", \"type\": \"Foo\"}]}, \"b\": {}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"memberOf\": [{\"id\": \"b\", \"extra\": 1}]}, \"b\": {}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"attributes\": {}}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"attributes\": {\"x\": 1}}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"annotations\": {\"a::b\": \"x\"}}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {\"a\": {\"annotations\": {\"a\": 1}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {\"principalTypes\": [\"A\"], \"resourceTypes\": [\"A\"], \"context\": {\"type\": \"Long\"}}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {\"principalTypes\": [\"A\"], \"resourceTypes\": [\"A\"], \"context\": {\"type\": \"Record\", \"attributes\": {}}, \"x\": 1}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {\"principalTypes\": null, \"resourceTypes\": [\"A\"]}}}}}",
  "{\"\": {\"entityTypes\": {\"A\": {}}, \"actions\": {\"a\": {\"appliesTo\": {\"principalTypes\": [\"B\"], \"resourceTypes\": [\"A\"]}}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"Long\": {\"type\": \"Long\"}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"Long\", \"required\": false}}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}, \"commonTypes\": {\"T\": {\"type\": \"U\"}, \"U\": {\"type\": \"T\"}}}}",
  "===",
  "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"a\": {\"type\": \"Set\", \"element\": {\"type\": \"Set\", \"element\": {\"type\": \"A\"}}}}}}}, \"actions\": {}}}",
};

/* Refused by us where the reference's behaviour cannot be observed the same
 * way: JSON objects with a repeated key (fail closed). */
static const char *const bad_ours[] = {
  "{\"\": {\"entityTypes\": {\"A\": {}, \"A\": {}}, \"actions\": {}}}",
  "{\"\": {\"entityTypes\": {}, \"actions\": {}}, \"\": {\"entityTypes\": {}, \"actions\": {}}}",
  "entity A { a: \"\xff\" };",
};

static void schemas_accepted(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    shk_cedar_schema *s;
    shk_error err;
    if (parse(good[i], &s, &err) != 0)
      fail_msg("refused: %s\n  %u:%u %s", good[i], err.line, err.column, err.message);
    shk_cedar_schema_free(s);
  }
}

static void schemas_refused(void **state)
{
  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    shk_cedar_schema *s = (shk_cedar_schema *)1;
    shk_error err;
    if (parse(bad[i], &s, &err) != -EINVAL)
      fail_msg("accepted: %s", bad[i]);
    assert_null(s);
    assert_true(err.message[0] != '\0');
  }
  for (size_t i = 0; i < sizeof(bad_ours) / sizeof(bad_ours[0]); i++) {
    shk_cedar_schema *s;
    shk_error err;
    if (parse(bad_ours[i], &s, &err) != -EINVAL)
      fail_msg("accepted: %s", bad_ours[i]);
  }
}

/* Syntax errors point at the offending token. */
static void error_positions(void **state)
{
  (void)state;
  static const struct {
    const char *text;
    unsigned line, col;
    const char *msg;
  } cases[] = {
    { "entity A;\nentity B in [A,];", 2, 16, "unexpected token `]`" },
    { "namespace N {\n  entity E { in: Long };\n}", 2, 14, "reserved" },
    { "entity E {\n  a: Set<Long>>\n};", 2, 15, "unexpected token `>`" },
    { "action a appliesTo {\n  principal: [],\n  resource: [A] };\nentity A;", 2, 3, "`[]`" },
    { "@a @a entity E;", 1, 1, "duplicate annotations" },
    { "entity E enum [\"\\q\"];", 1, 16, "invalid escape" },
    { "entity E { a: \"unterminated };", 1, 15, "unterminated" },
    { "{\"\": {\"entityTypes\": {}, \"actions\": {}", 1, 38, "JSON" },
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    shk_cedar_schema *s;
    shk_error err;
    assert_int_equal(parse(cases[i].text, &s, &err), -EINVAL);
    if (!strstr(err.message, cases[i].msg) || err.line != cases[i].line || err.column != cases[i].col)
      fail_msg("%s\n  got %u:%u %s, expected %u:%u %s", cases[i].text, err.line, err.column, err.message,
               cases[i].line, cases[i].col, cases[i].msg);
  }
}

/* The attribute `name` of a record type; a missing one fails the test
 * here, so callers never see NULL. */
static const shk__attr_type *attr(const shk__type *rec, const char *name)
{
  for (size_t i = 0; i < rec->n_attrs; i++)
    if (rec->attrs[i].name.n == strlen(name) && memcmp(rec->attrs[i].name.p, name, rec->attrs[i].name.n) == 0)
      return &rec->attrs[i];
  fail_msg("no attribute '%s'", name);
  abort(); /* not reached: cmocka's failure does not return */
}

static shk__str S(const char *s)
{
  return (shk__str){ s, strlen(s) };
}

static const char TEXT[] =
  "type Top = { z: Long, a: String };\n"
  "entity Ext;\n"
  "namespace NS {\n"
  "  type Addr = { port?: Long, ip: ipaddr, when: __cedar::datetime, top: Top, ext: Ext };\n"
  "  type Ctx = Addr;\n"
  "  entity Group in [Group];\n"
  "  entity User, Admin in [Group, Other::Team] = { name: String, addr: Addr, \"b c\"?: Set<User> } tags Set<String>;\n"
  "  entity Long;\n"
  "  entity Color enum [\"red\", \"blue\"];\n"
  "  action view, \"edit\" in [Action::\"all\", Other::Action::\"root\"]\n"
  "    appliesTo { principal: [User, Admin], resource: Group, context: Ctx };\n"
  "  action all;\n"
  "  entity T { l: Long, s: String };\n"
  "}\n"
  "namespace Other { entity Team; action root; }\n";

static const char JSON[] =
  "{\"\": {\"commonTypes\": {\"Top\": {\"type\": \"Record\", \"attributes\": {\"z\": {\"type\": \"Long\"},"
  "   \"a\": {\"type\": \"String\"}}}}, \"entityTypes\": {\"Ext\": {}}, \"actions\": {}},"
  " \"NS\": {\"commonTypes\": {"
  "   \"Addr\": {\"type\": \"Record\", \"attributes\": {\"port\": {\"type\": \"Long\", \"required\": false},"
  "     \"ip\": {\"type\": \"Extension\", \"name\": \"ipaddr\"}, \"when\": {\"type\": \"__cedar::datetime\"},"
  "     \"top\": {\"type\": \"Top\"}, \"ext\": {\"type\": \"Entity\", \"name\": \"Ext\"}}},"
  "   \"Ctx\": {\"type\": \"Addr\"}},"
  "  \"entityTypes\": {\"Group\": {\"memberOfTypes\": [\"Group\"]},"
  "   \"User\": {\"memberOfTypes\": [\"Group\", \"Other::Team\"], \"shape\": {\"type\": \"Record\", \"attributes\": {"
  "     \"name\": {\"type\": \"String\"}, \"addr\": {\"type\": \"EntityOrCommon\", \"name\": \"Addr\"},"
  "     \"b c\": {\"type\": \"Set\", \"element\": {\"type\": \"Entity\", \"name\": \"User\"}, \"required\": false}}},"
  "     \"tags\": {\"type\": \"Set\", \"element\": {\"type\": \"String\"}}},"
  "   \"Admin\": {\"memberOfTypes\": [\"Group\", \"Other::Team\"], \"shape\": {\"type\": \"Record\", \"attributes\": {"
  "     \"name\": {\"type\": \"String\"}, \"addr\": {\"type\": \"EntityOrCommon\", \"name\": \"Addr\"},"
  "     \"b c\": {\"type\": \"Set\", \"element\": {\"type\": \"Entity\", \"name\": \"User\"}, \"required\": false}}},"
  "     \"tags\": {\"type\": \"Set\", \"element\": {\"type\": \"String\"}}},"
  "   \"Long\": {}, \"Color\": {\"enum\": [\"red\", \"blue\"]},"
  "   \"T\": {\"shape\": {\"type\": \"Record\", \"attributes\": {\"l\": {\"type\": \"EntityOrCommon\", \"name\": \"Long\"},"
  "     \"s\": {\"type\": \"EntityOrCommon\", \"name\": \"String\"}}}}},"
  "  \"actions\": {\"view\": {\"memberOf\": [{\"id\": \"all\"}, {\"id\": \"root\", \"type\": \"Other::Action\"}],"
  "     \"appliesTo\": {\"principalTypes\": [\"User\", \"Admin\"], \"resourceTypes\": [\"Group\"], \"context\": {\"type\": \"Ctx\"}}},"
  "   \"edit\": {\"memberOf\": [{\"id\": \"all\", \"type\": \"Action\"}, {\"id\": \"root\", \"type\": \"Other::Action\"}],"
  "     \"appliesTo\": {\"principalTypes\": [\"User\", \"Admin\"], \"resourceTypes\": [\"Group\"], \"context\": {\"type\": \"Ctx\"}}},"
  "   \"all\": {}}},"
  " \"Other\": {\"entityTypes\": {\"Team\": {}}, \"actions\": {\"root\": {}}}}";

/* The resolved form: qualified names, common types inlined, records sorted,
 * built-ins and shadowing resolved as the reference does. */
static void check_resolved(const shk_cedar_schema *schema)
{
  const shk__schema *s = &schema->s;
  assert_int_equal(s->n_etypes, 8);
  assert_int_equal(s->n_actions, 4);
  const shk__entity_type *user = shk__schema_entity_type(s, S("NS::User"));
  assert_non_null(user);
  assert_int_equal(user->n_member_of, 2);
  assert_true(shk__str_eq(user->member_of[0], S("NS::Group")));
  assert_true(shk__str_eq(user->member_of[1], S("Other::Team")));
  assert_non_null(user->tags);
  assert_int_equal(user->tags->kind, SHK__T_SET);
  assert_int_equal(user->tags->elem->kind, SHK__T_STRING);
  const shk__type *shape = user->shape;
  assert_int_equal(shape->kind, SHK__T_RECORD);
  assert_int_equal(shape->n_attrs, 3);
  for (size_t i = 1; i < shape->n_attrs; i++)
    assert_true(shk__str_cmp(shape->attrs[i - 1].name, shape->attrs[i].name) < 0);
  const shk__attr_type *bc = attr(shape, "b c");
  assert_non_null(bc);
  assert_false(bc->required);
  assert_int_equal(bc->type->elem->kind, SHK__T_ENTITY);
  assert_true(shk__str_eq(bc->type->elem->name, S("NS::User")));
  const shk__type *addr = attr(shape, "addr")->type;
  assert_int_equal(addr->kind, SHK__T_RECORD);
  assert_false(attr(addr, "port")->required);
  assert_int_equal(attr(addr, "ip")->type->kind, SHK__T_EXT);
  assert_true(shk__str_eq(attr(addr, "ip")->type->name, S("ipaddr")));
  assert_true(shk__str_eq(attr(addr, "when")->type->name, S("datetime")));
  assert_int_equal(attr(addr, "top")->type->kind, SHK__T_RECORD);
  assert_true(shk__str_eq(attr(addr, "ext")->type->name, S("Ext")));
  assert_non_null(shk__schema_entity_type(s, S("NS::Admin")));
  assert_null(shk__schema_entity_type(s, S("User")));
  assert_null(shk__schema_entity_type(s, S("NS::Addr")));
  /* `Long` in NS names the entity type NS::Long, `String` the built-in. */
  const shk__type *t = shk__schema_entity_type(s, S("NS::T"))->shape;
  assert_int_equal(attr(t, "l")->type->kind, SHK__T_ENTITY);
  assert_true(shk__str_eq(attr(t, "l")->type->name, S("NS::Long")));
  assert_int_equal(attr(t, "s")->type->kind, SHK__T_STRING);
  const shk__entity_type *color = shk__schema_entity_type(s, S("NS::Color"));
  assert_true(color->is_enum);
  assert_int_equal(color->n_enum_ids, 2);
  assert_int_equal(color->shape->n_attrs, 0);

  shk__uid view = { S("NS::Action"), S("view") };
  const shk__action *a = shk__schema_action(s, view);
  assert_non_null(a);
  assert_true(a->has_applies_to);
  assert_int_equal(a->n_member_of, 2);
  assert_true(shk__str_eq(a->member_of[0].type, S("NS::Action")));
  assert_true(shk__str_eq(a->member_of[0].id, S("all")));
  assert_true(shk__str_eq(a->member_of[1].type, S("Other::Action")));
  assert_int_equal(a->n_principals, 2);
  assert_true(shk__str_eq(a->resources[0], S("NS::Group")));
  assert_int_equal(a->context->kind, SHK__T_RECORD);
  assert_non_null(attr(a->context, "ip"));
  assert_non_null(shk__schema_action(s, (shk__uid){ S("NS::Action"), S("edit") }));
  assert_null(shk__schema_action(s, (shk__uid){ S("Action"), S("view") }));
  const shk__action *all = shk__schema_action(s, (shk__uid){ S("NS::Action"), S("all") });
  assert_false(all->has_applies_to);
  assert_int_equal(all->context->kind, SHK__T_RECORD);
  assert_true(shk__schema_is_action_type(s, S("NS::Action")));
  assert_true(shk__schema_is_action_type(s, S("Other::Action")));
  assert_false(shk__schema_is_action_type(s, S("Action")));
  assert_false(shk__schema_is_action_type(s, S("NS::User")));
}

static void resolution(void **state)
{
  (void)state;
  shk_cedar_schema *s;
  shk_error err;
  if (shk_cedar_schema_parse(TEXT, strlen(TEXT), SHK_CEDAR_SCHEMA_TEXT, &s, &err) != 0)
    fail_msg("%u:%u %s", err.line, err.column, err.message);
  check_resolved(s);
  shk_cedar_schema_free(s);
  if (shk_cedar_schema_parse(JSON, strlen(JSON), SHK_CEDAR_SCHEMA_JSON, &s, &err) != 0)
    fail_msg("%u:%u %s", err.line, err.column, err.message);
  check_resolved(s);
  shk_cedar_schema_free(s);
  shk_cedar_schema_free(NULL);
  /* An empty text may be NULL: an empty schema, or a JSON syntax error. */
  assert_int_equal(shk_cedar_schema_parse(NULL, 0, SHK_CEDAR_SCHEMA_TEXT, &s, &err), 0);
  assert_int_equal(s->s.n_etypes + s->s.n_actions, 0);
  shk_cedar_schema_free(s);
  assert_int_equal(shk_cedar_schema_parse(NULL, 0, SHK_CEDAR_SCHEMA_JSON, &s, &err), -EINVAL);
}

/* NUL may appear in names (attribute names, action ids) in both forms. */
static void nul_in_names(void **state)
{
  (void)state;
  static const char text[] = "entity A { \"a\\0b\": Long };\naction \"x\\0\";";
  static const char json[] = "{\"\": {\"entityTypes\": {\"A\": {\"shape\": {\"type\": \"Record\", \"attributes\":"
                             " {\"a\\u0000b\": {\"type\": \"Long\"}}}}}, \"actions\": {\"x\\u0000\": {}}}}";
  const char *src[] = { text, json };
  for (int i = 0; i < 2; i++) {
    shk_cedar_schema *s;
    shk_error err;
    if (parse(src[i], &s, &err) != 0)
      fail_msg("%s: %s", src[i], err.message);
    const shk__type *shape = shk__schema_entity_type(&s->s, S("A"))->shape;
    assert_int_equal(shape->attrs[0].name.n, 3);
    assert_memory_equal(shape->attrs[0].name.p, "a\0b", 3);
    assert_non_null(shk__schema_action(&s->s, (shk__uid){ S("Action"), { "x\0", 2 } }));
    shk_cedar_schema_free(s);
  }
}

/* Large inputs resolve in linear time: many entity types and actions, and
 * a chain of common types (whose depth the resolver bounds at 1000, to keep
 * its recursion off the end of the stack). */
static void scale(void **state)
{
  (void)state;
  size_t n = 20000;
  char *text = must_malloc(n * 100 + 100);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += (size_t)sprintf(text + k, "type T%zu = %s%zu;\nentity E%zu in [E%zu];\n", i, i + 1 < 500 ? "T" : "E",
                         i + 1, i, (i + 1) % n);
  k += (size_t)sprintf(text + k, "entity E%zu;\n", n);
  for (size_t i = 0; i < n; i++)
    k += (size_t)sprintf(text + k, "action a%zu in a%zu;\n", i, i + 1);
  size_t last = k;
  k += (size_t)sprintf(text + k, "action a%zu;\n", n);
  shk_cedar_schema *s;
  shk_error err;
  if (shk_cedar_schema_parse(text, k, SHK_CEDAR_SCHEMA_TEXT, &s, &err) != 0)
    fail_msg("%s", err.message);
  assert_int_equal(s->s.n_actions, n + 1);
  shk_cedar_schema_free(s);
  /* Closing the action chain into a cycle is refused. */
  k = last + (size_t)sprintf(text + last, "action a%zu in a0;\n", n);
  assert_int_equal(shk_cedar_schema_parse(text, k, SHK_CEDAR_SCHEMA_TEXT, &s, &err), -EINVAL);
  assert_non_null(strstr(err.message, "cycle in action hierarchy"));
  free(text);
  /* A chain deeper than the bound is refused with a message. */
  text = must_malloc(2000 * 32);
  k = 0;
  for (size_t i = 0; i < 1500; i++)
    k += (size_t)sprintf(text + k, "type T%zu = T%zu;\n", i, i + 1);
  k += (size_t)sprintf(text + k, "type T1500 = Long;\n");
  assert_int_equal(shk_cedar_schema_parse(text, k, SHK_CEDAR_SCHEMA_TEXT, &s, &err), -EINVAL);
  assert_non_null(strstr(err.message, "too deeply"));
  free(text);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(schemas_accepted), cmocka_unit_test(schemas_refused), cmocka_unit_test(error_positions),
    cmocka_unit_test(resolution),       cmocka_unit_test(nul_in_names),    cmocka_unit_test(scale),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

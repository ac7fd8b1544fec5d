/* SPDX-License-Identifier: Apache-2.0 */
/* The Cedar front end's own internals: the lexer shared by the policy parser
 * and the .cedarschema parser, string unescaping and error helpers. Nothing
 * outside lexer.c, parser.c and schema*.c uses this file. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cedar/cedar-internal.h"

typedef enum shk__tk {
  SHK__TK_EOF,
  SHK__TK_IDENT,
  SHK__TK_NUMBER,
  SHK__TK_STRING, /* text between the quotes, escapes not yet decoded */
  SHK__TK_SLOT,   /* ?name (policy text only) */
  SHK__TK_AT,
  SHK__TK_DOT,
  SHK__TK_COMMA,
  SHK__TK_SEMI,
  SHK__TK_COLON,
  SHK__TK_COLONCOLON,
  SHK__TK_LPAREN,
  SHK__TK_RPAREN,
  SHK__TK_LBRACE,
  SHK__TK_RBRACE,
  SHK__TK_LBRACKET,
  SHK__TK_RBRACKET,
  SHK__TK_EQEQ,
  SHK__TK_NE,
  SHK__TK_LT,
  SHK__TK_LE,
  SHK__TK_GE,
  SHK__TK_GT,
  SHK__TK_OROR,
  SHK__TK_ANDAND,
  SHK__TK_PLUS,
  SHK__TK_MINUS,
  SHK__TK_STAR,
  SHK__TK_SLASH,
  SHK__TK_PERCENT,
  SHK__TK_BANG,
  SHK__TK_EQ,
  SHK__TK_QUESTION, /* schema text only: `a?: T` */
  SHK__TK_ERROR,    /* a byte no token starts with, or an unterminated string */
} shk__tk;

/* Keywords of the policy grammar. Identifiers that spell one still are
 * identifiers in many places (attribute names, annotation keys, schema
 * names); the parser decides. */
typedef enum shk__kw {
  SHK__KW_NONE,
  SHK__KW_TRUE,
  SHK__KW_FALSE,
  SHK__KW_IF,
  SHK__KW_THEN,
  SHK__KW_ELSE,
  SHK__KW_IN,
  SHK__KW_IS,
  SHK__KW_HAS,
  SHK__KW_LIKE,
  SHK__KW_PERMIT,
  SHK__KW_FORBID,
  SHK__KW_WHEN,
  SHK__KW_UNLESS,
  SHK__KW_PRINCIPAL,
  SHK__KW_ACTION,
  SHK__KW_RESOURCE,
  SHK__KW_CONTEXT,
} shk__kw;

typedef struct shk__tok {
  shk__tk kind;
  shk__kw kw;      /* IDENT only */
  const char *p;   /* the token's text (STRING: without the quotes) */
  size_t n;
  shk__loc loc;
} shk__tok;

typedef struct shk__lexer {
  const char *text;
  size_t len, pos;
  uint32_t line;
  size_t line_start;  /* byte offset of the current line */
  uint32_t line_cont; /* UTF-8 continuation bytes seen on the current line */
  bool schema;        /* lex `?` alone, no slots */
  const char *error;  /* why the last ERROR token is one */
} shk__lexer;

void shk__lexer_init(shk__lexer *lx, const char *text, size_t len, bool schema);
/* Reads the next token; a single pass over the text, no allocation. */
void shk__lex(shk__lexer *lx, shk__tok *t);

/* True when the whole text is valid UTF-8 (the reference reads only UTF-8). */
bool shk__utf8_valid(const char *s, size_t n);

/* Decodes a string literal's escapes with the reference's rules (Rust's
 * string escapes). With `pat` non-NULL, decodes a `like` pattern instead,
 * where \* is a literal star and a bare * is the wildcard; the elements go
 * to *pat and *n_pat. Returns 0, or -EINVAL with a message in `why`. */
int shk__unescape(shk__arena *a, const char *s, size_t n, shk__str *out,
                  shk__pat **pat, size_t *n_pat, const char **why);

/* True for identifiers that cannot name anything in the reference (true,
 * false, if, then, else, in, is, has, like). */
bool shk__ident_reserved(const char *p, size_t n);

/* Names a token for messages: "`foo`", "end of input". Uses buf. */
const char *shk__tok_describe(const shk__tok *t, char *buf, size_t n);

/* How a token kind is written in messages ("`;`", "a string"). */
const char *shk__tk_spelling(shk__tk k);

/* Where both recursive-descent parsers (policies, .cedarschema) stand: the
 * lexer, its current token, where an error is written, and where it
 * unwinds to. The unwinding leaks nothing: both parsers allocate only in
 * their arena. */
typedef struct shk__cursor {
  shk__lexer lx;
  shk__tok t;
  shk_error *err;
  jmp_buf fail;
} shk__cursor;

/* Writes the message at LOC and unwinds to the cursor's setjmp. */
__attribute__((noreturn, format(printf, 3, 4))) void shk__cur_fail(shk__cursor *c, shk__loc loc,
                                                                    const char *fmt, ...);
/* Fails on the current token: the lexer's reason for an ERROR token, else
 * "unexpected token ...". */
__attribute__((noreturn)) void shk__cur_unexpected(shk__cursor *c);
/* Takes a token of kind K or fails, naming K. */
void shk__cur_expect(shk__cursor *c, shk__tk k);

static inline void shk__cur_next(shk__cursor *c)
{
  shk__lex(&c->lx, &c->t);
}

static inline bool shk__cur_at(const shk__cursor *c, shk__tk k)
{
  return c->t.kind == k;
}

/* Takes a token of kind K if it is the current one. */
static inline bool shk__cur_accept(shk__cursor *c, shk__tk k)
{
  if (c->t.kind != k)
    return false;
  shk__cur_next(c);
  return true;
}

/* A growable array in an arena: doubles, so the total copy cost is linear. */
void *shk__grow(shk__arena *a, void *p, size_t n, size_t *cap, size_t elem);
#define SHK__PUSH(a, arr, n, cap)                                              \
  ((n) == (cap) ? (void)((arr) = shk__grow((a), (arr), (n), &(cap), sizeof(*(arr)))) : (void)0, \
   &(arr)[(n)++])

/* A name path normalized to "A::B" as its parts are read, whatever the
 * spacing around the "::" was; NUL-terminated, in the arena. */
typedef struct shk__path {
  char *p;
  size_t n, cap;
} shk__path;
/* Appends PART, after "::" unless the path is still empty. */
void shk__path_add(shk__arena *a, shk__path *path, shk__str part);

/* ---------------------------------------------------------------- schemas */

/* The schema as written, before names are resolved. Both schema parsers
 * fill one; schema.c resolves it into the shk__schema the engine uses. */
typedef enum shk__st_kind {
  SHK__ST_REF,    /* a name that may be a common type, an entity type or a
                     built-in (.cedarschema names, JSON "EntityOrCommon", and
                     JSON {"type": "X"} for a non-built-in X) */
  SHK__ST_COMMON, /* JSON {"type": "X"}: common type or a built-in of that name */
  SHK__ST_ENTITY, /* JSON {"type": "Entity", "name": ...} */
  SHK__ST_EXT,    /* JSON {"type": "Extension", "name": ...} */
  SHK__ST_BOOL,
  SHK__ST_LONG,
  SHK__ST_STRING,
  SHK__ST_SET,
  SHK__ST_RECORD,
} shk__st_kind;

typedef struct shk__st shk__st;
typedef struct shk__st_attr {
  shk__str name;
  shk__st *type;
  bool required;
  shk__loc loc;
} shk__st_attr;

struct shk__st {
  shk__st_kind kind;
  shk__str name;        /* REF, COMMON, ENTITY, EXT: as written ("A::B") */
  shk__st *elem;        /* SET */
  shk__st_attr *attrs;  /* RECORD, in written order */
  size_t n_attrs;
  shk__loc loc;
};

typedef struct shk__st_etype {
  shk__str ns, name;    /* name is the basename */
  shk__str *member_of;  /* as written */
  size_t n_member_of;
  shk__st *shape;       /* NULL: empty record */
  shk__st *tags;        /* NULL: no tags */
  bool is_enum;
  shk__str *enum_ids;
  size_t n_enum_ids;
  shk__loc loc;
} shk__st_etype;

typedef struct shk__st_common {
  shk__str ns, name;
  shk__st *type;
  shk__loc loc;
} shk__st_common;

typedef struct shk__st_aref {
  shk__str type;        /* as written; empty: the declaring namespace's Action */
  shk__str id;
} shk__st_aref;

typedef struct shk__st_action {
  shk__str ns, name;
  shk__st_aref *member_of;
  size_t n_member_of;
  bool has_applies_to;
  shk__str *principals, *resources; /* as written */
  size_t n_principals, n_resources;
  shk__st *context;     /* NULL: empty record */
  shk__loc loc;
} shk__st_action;

/* A namespace declared by name (the text form may not repeat one). */
typedef struct shk__st_ns {
  shk__str name;
  shk__loc loc;
} shk__st_ns;

typedef struct shk__sch shk__sch;
struct shk__sch {
  shk__arena *a;
  shk__st_ns *namespaces;
  size_t n_namespaces, cap_namespaces;
  shk__st_etype *etypes;
  size_t n_etypes, cap_etypes;
  shk__st_common *commons;
  size_t n_commons, cap_commons;
  shk__st_action *actions;
  size_t n_actions, cap_actions;
};

/* Schema parsers: each fills `sc` (allocating in sc->a) or returns -EINVAL
 * with err set. */
int shk__schema_text_parse(shk__sch *sc, const char *text, size_t len, shk_error *err);
int shk__schema_json_parse(shk__sch *sc, const char *text, size_t len, shk_error *err);

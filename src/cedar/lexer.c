/* SPDX-License-Identifier: Apache-2.0 */
/* The lexer shared by the policy parser and the .cedarschema parser, and the
 * string-escape rules of the reference (Rust's, with \* added for `like`
 * patterns). One pass over the text; tokens point into it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cedar/cedar-parse-internal.h"

void shk__lexer_init(shk__lexer *lx, const char *text, size_t len, bool schema)
{
  /* An empty text may come as NULL; token pointers are offsets into it. */
  *lx = (shk__lexer){ .text = text ? text : "", .len = text ? len : 0, .line = 1, .schema = schema };
}

static inline bool is_ident_start(unsigned char c)
{
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool is_ident_char(unsigned char c)
{
  return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* Length of the Unicode White_Space character at s (non-ASCII ones only), or
 * 0. The reference skips `\s`, which is Unicode-aware. */
static size_t unicode_space(const unsigned char *s, size_t left)
{
  if (left >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0))
    return 2;
  if (left < 3)
    return 0;
  if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80)
    return 3;
  if (s[0] == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
    return 3;
  if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F)
    return 3;
  if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80)
    return 3;
  return 0;
}

static inline void newline(shk__lexer *lx, size_t next)
{
  lx->line++;
  lx->line_start = next;
  lx->line_cont = 0;
}

/* Counts continuation bytes so columns are in characters, not bytes. */
static inline void count_cont(shk__lexer *lx, size_t from, size_t to)
{
  for (size_t i = from; i < to; i++)
    if (((unsigned char)lx->text[i] & 0xC0) == 0x80)
      lx->line_cont++;
}

static void skip_space(shk__lexer *lx)
{
  const unsigned char *s = (const unsigned char *)lx->text;
  while (lx->pos < lx->len) {
    unsigned char c = s[lx->pos];
    if (c == '\n') {
      lx->pos++;
      newline(lx, lx->pos);
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      lx->pos++;
    } else if (c == '/' && lx->pos + 1 < lx->len && s[lx->pos + 1] == '/') {
      size_t start = lx->pos;
      while (lx->pos < lx->len && s[lx->pos] != '\n' && s[lx->pos] != '\r')
        lx->pos++;
      count_cont(lx, start, lx->pos);
    } else if (c >= 0x80) {
      size_t k = unicode_space(s + lx->pos, lx->len - lx->pos);
      if (!k)
        return;
      count_cont(lx, lx->pos, lx->pos + k);
      lx->pos += k;
    } else {
      return;
    }
  }
}

/* Classifies an identifier with a switch on its length, so the lexer does
 * at most one comparison per identifier. */
static shk__kw keyword(const char *p, size_t n)
{
#define KW(str, k) (memcmp(p, str, n) == 0 ? (k) : SHK__KW_NONE)
  switch (n) {
  case 2:
    return p[0] != 'i'   ? SHK__KW_NONE
           : p[1] == 'f' ? SHK__KW_IF
           : p[1] == 'n' ? SHK__KW_IN
           : p[1] == 's' ? SHK__KW_IS
                         : SHK__KW_NONE;
  case 3:
    return KW("has", SHK__KW_HAS);
  case 4:
    switch (p[0]) {
    case 't': return p[1] == 'r' ? KW("true", SHK__KW_TRUE) : KW("then", SHK__KW_THEN);
    case 'e': return KW("else", SHK__KW_ELSE);
    case 'l': return KW("like", SHK__KW_LIKE);
    case 'w': return KW("when", SHK__KW_WHEN);
    default: return SHK__KW_NONE;
    }
  case 5:
    return KW("false", SHK__KW_FALSE);
  case 6:
    switch (p[0]) {
    case 'p': return KW("permit", SHK__KW_PERMIT);
    case 'f': return KW("forbid", SHK__KW_FORBID);
    case 'u': return KW("unless", SHK__KW_UNLESS);
    case 'a': return KW("action", SHK__KW_ACTION);
    default: return SHK__KW_NONE;
    }
  case 7:
    return KW("context", SHK__KW_CONTEXT);
  case 8:
    return KW("resource", SHK__KW_RESOURCE);
  case 9:
    return KW("principal", SHK__KW_PRINCIPAL);
  default:
    return SHK__KW_NONE;
  }
#undef KW
}

bool shk__ident_reserved(const char *p, size_t n)
{
  switch (keyword(p, n)) {
  case SHK__KW_TRUE:
  case SHK__KW_FALSE:
  case SHK__KW_IF:
  case SHK__KW_THEN:
  case SHK__KW_ELSE:
  case SHK__KW_IN:
  case SHK__KW_IS:
  case SHK__KW_HAS:
  case SHK__KW_LIKE:
    return true;
  case SHK__KW_NONE:
  case SHK__KW_PERMIT:
  case SHK__KW_FORBID:
  case SHK__KW_WHEN:
  case SHK__KW_UNLESS:
  case SHK__KW_PRINCIPAL:
  case SHK__KW_ACTION:
  case SHK__KW_RESOURCE:
  case SHK__KW_CONTEXT:
    break;
  }
  return false;
}

/* A string literal: `"(\\.|[^"\\])*"` where `.` is any character but a
 * newline, as the reference's token rule says. */
static void lex_string(shk__lexer *lx, shk__tok *t)
{
  const char *s = lx->text;
  size_t start = ++lx->pos;
  for (;;) {
    if (lx->pos >= lx->len) {
      t->kind = SHK__TK_ERROR;
      lx->error = "unterminated string literal";
      return;
    }
    unsigned char c = (unsigned char)s[lx->pos];
    if (c == '"')
      break;
    if (c == '\\') {
      if (lx->pos + 1 >= lx->len || s[lx->pos + 1] == '\n') {
        t->kind = SHK__TK_ERROR;
        lx->error = "invalid string literal: a backslash ends a line";
        return;
      }
      lx->pos += 2;
      if (((unsigned char)s[lx->pos - 1] & 0xC0) == 0x80)
        lx->line_cont++;
      continue;
    }
    lx->pos++;
    if (c == '\n')
      newline(lx, lx->pos);
    else if ((c & 0xC0) == 0x80)
      lx->line_cont++;
  }
  t->kind = SHK__TK_STRING;
  t->p = s + start;
  t->n = lx->pos - start;
  lx->pos++;
}

void shk__lex(shk__lexer *lx, shk__tok *t)
{
  skip_space(lx);
  const char *s = lx->text;
  t->kw = SHK__KW_NONE;
  t->loc.line = lx->line;
  t->loc.col = (uint32_t)(lx->pos - lx->line_start - lx->line_cont + 1);
  t->p = s + lx->pos;
  t->n = 0;
  if (lx->pos >= lx->len) {
    t->kind = SHK__TK_EOF;
    return;
  }
  size_t start = lx->pos;
  unsigned char c = (unsigned char)s[lx->pos];
  unsigned char d = lx->pos + 1 < lx->len ? (unsigned char)s[lx->pos + 1] : 0;
  if (is_ident_start(c)) {
    while (lx->pos < lx->len && is_ident_char((unsigned char)s[lx->pos]))
      lx->pos++;
    t->kind = SHK__TK_IDENT;
    t->n = lx->pos - start;
    t->kw = keyword(t->p, t->n);
    return;
  }
  if (c >= '0' && c <= '9') {
    while (lx->pos < lx->len && s[lx->pos] >= '0' && s[lx->pos] <= '9')
      lx->pos++;
    t->kind = SHK__TK_NUMBER;
    t->n = lx->pos - start;
    return;
  }
  if (c == '"') {
    lex_string(lx, t);
    return;
  }
  shk__tk k = SHK__TK_ERROR;
  size_t n = 1;
  switch (c) {
  case '@': k = SHK__TK_AT; break;
  case '.': k = SHK__TK_DOT; break;
  case ',': k = SHK__TK_COMMA; break;
  case ';': k = SHK__TK_SEMI; break;
  case ':':
    if (d == ':') {
      k = SHK__TK_COLONCOLON;
      n = 2;
    } else {
      k = SHK__TK_COLON;
    }
    break;
  case '(': k = SHK__TK_LPAREN; break;
  case ')': k = SHK__TK_RPAREN; break;
  case '{': k = SHK__TK_LBRACE; break;
  case '}': k = SHK__TK_RBRACE; break;
  case '[': k = SHK__TK_LBRACKET; break;
  case ']': k = SHK__TK_RBRACKET; break;
  case '=':
    if (d == '=') {
      k = SHK__TK_EQEQ;
      n = 2;
    } else {
      k = SHK__TK_EQ;
    }
    break;
  case '!':
    if (d == '=') {
      k = SHK__TK_NE;
      n = 2;
    } else {
      k = SHK__TK_BANG;
    }
    break;
  case '<':
    if (d == '=') {
      k = SHK__TK_LE;
      n = 2;
    } else {
      k = SHK__TK_LT;
    }
    break;
  case '>':
    if (d == '=') {
      k = SHK__TK_GE;
      n = 2;
    } else {
      k = SHK__TK_GT;
    }
    break;
  case '|':
    if (d == '|') {
      k = SHK__TK_OROR;
      n = 2;
    }
    break;
  case '&':
    if (d == '&') {
      k = SHK__TK_ANDAND;
      n = 2;
    }
    break;
  case '+': k = SHK__TK_PLUS; break;
  case '-': k = SHK__TK_MINUS; break;
  case '*': k = SHK__TK_STAR; break;
  case '/': k = SHK__TK_SLASH; break;
  case '%': k = SHK__TK_PERCENT; break;
  case '?':
    if (lx->schema) {
      k = SHK__TK_QUESTION;
    } else if (is_ident_start(d)) {
      n = 2;
      while (lx->pos + n < lx->len && is_ident_char((unsigned char)s[lx->pos + n]))
        n++;
      k = SHK__TK_SLOT;
    }
    break;
  default:
    break;
  }
  t->kind = k;
  if (k == SHK__TK_ERROR) {
    lx->error = "unexpected character";
    return;
  }
  lx->pos += n;
  t->n = n;
}

bool shk__utf8_valid(const char *str, size_t n)
{
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      k = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      k = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      k = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + k >= n)
      return false;
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (s[i + j] & 0x3F);
    }
    if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += k + 1;
  }
  return true;
}

int shk__hex_value(unsigned char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static size_t utf8_encode(uint32_t cp, char *o)
{
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes one \u{...} escape starting after the "u"; the rules (underscores
 * after the first digit, at most six digits, no surrogates) are Rust's. */
static int unicode_escape(const unsigned char *s, size_t n, size_t *i, uint32_t *out, const char **why)
{
  if (*i >= n || s[*i] != '{') {
    *why = "invalid escape: \\u must be followed by {";
    return -EINVAL;
  }
  (*i)++;
  if (*i >= n || s[*i] == '_' || s[*i] == '}' || shk__hex_value(s[*i]) < 0) {
    *why = *i < n && s[*i] == '}' ? "invalid escape: empty \\u{}" : "invalid character in \\u{...} escape";
    return -EINVAL;
  }
  uint32_t v = (uint32_t)shk__hex_value(s[(*i)++]);
  unsigned digits = 1;
  for (;;) {
    if (*i >= n) {
      *why = "unclosed \\u{...} escape";
      return -EINVAL;
    }
    unsigned char c = s[(*i)++];
    if (c == '_')
      continue;
    if (c == '}')
      break;
    int h = shk__hex_value(c);
    if (h < 0) {
      *why = "invalid character in \\u{...} escape";
      return -EINVAL;
    }
    if (++digits <= 6)
      v = v * 16 + (uint32_t)h;
  }
  if (digits > 6) {
    *why = "overlong \\u{...} escape: more than six digits";
    return -EINVAL;
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *why = v > 0x10FFFF ? "\\u{...} escape out of range" : "\\u{...} escape is a lone surrogate";
    return -EINVAL;
  }
  *out = v;
  return 0;
}

int shk__unescape(shk__arena *a, const char *str, size_t n, shk__str *out,
                  shk__pat **pat, size_t *n_pat, const char **why)
{
  const unsigned char *s = (const unsigned char *)str;
  char *o = NULL;
  shk__pat *po = NULL;
  size_t on = 0;
  /* The output is never longer than the input, in bytes or in elements. */
  if (pat)
    po = shk__arena_alloc(a, (n ? n : 1) * sizeof(*po));
  else
    o = shk__arena_alloc(a, n + 1);
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    char buf[4];
    size_t bn;
    bool star_wild = false;
    if (c != '\\') {
      if (c == '\r') {
        *why = "a carriage return must be escaped in a string";
        return -EINVAL;
      }
      buf[0] = (char)c;
      bn = 1;
      star_wild = c == '*';
      i++;
    } else if (i + 1 < n && s[i + 1] == '\n') {
      /* A line continuation skips the newline and the ASCII white space
       * after it, as Rust does. */
      i++;
      while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
      continue;
    } else {
      if (i + 1 >= n) {
        *why = "a lone backslash ends the string";
        return -EINVAL;
      }
      unsigned char e = s[i + 1];
      i += 2;
      bn = 1;
      switch (e) {
      case '"': buf[0] = '"'; break;
      case '\'': buf[0] = '\''; break;
      case '\\': buf[0] = '\\'; break;
      case 'n': buf[0] = '\n'; break;
      case 'r': buf[0] = '\r'; break;
      case 't': buf[0] = '\t'; break;
      case '0': buf[0] = '\0'; break;
      case 'x': {
        int hi = i < n ? shk__hex_value(s[i]) : -1;
        int lo = i + 1 < n ? shk__hex_value(s[i + 1]) : -1;
        if (hi < 0 || lo < 0) {
          *why = "invalid \\x escape: two hex digits needed";
          return -EINVAL;
        }
        if (hi > 7) {
          *why = "\\x escape out of range: at most \\x7f";
          return -EINVAL;
        }
        buf[0] = (char)(hi * 16 + lo);
        i += 2;
        break;
      }
      case 'u': {
        uint32_t cp;
        int r = unicode_escape(s, n, &i, &cp, why);
        if (r < 0)
          return r;
        bn = utf8_encode(cp, buf);
        break;
      }
      case '*':
        if (pat) {
          buf[0] = '*';
          break;
        }
        __attribute__((fallthrough));
      default:
        *why = "invalid escape sequence";
        return -EINVAL;
      }
    }
    if (pat) {
      for (size_t k = 0; k < bn; k++)
        po[on++] = (shk__pat){ .wildcard = star_wild, .byte = (unsigned char)buf[k] };
    } else {
      memcpy(o + on, buf, bn);
      on += bn;
    }
  }
  if (pat) {
    *pat = po;
    *n_pat = on;
  } else {
    o[on] = '\0';
    *out = (shk__str){ o, on };
  }
  return 0;
}

const char *shk__tok_describe(const shk__tok *t, char *buf, size_t n)
{
  switch (t->kind) {
  case SHK__TK_EOF:
    return "end of input";
  case SHK__TK_STRING:
    snprintf(buf, n, "string \"%.*s\"", t->n > 40 ? 40 : (int)t->n, t->p);
    return buf;
  case SHK__TK_ERROR:
    snprintf(buf, n, "`%c`", t->p[0]);
    return buf;
  case SHK__TK_IDENT:
  case SHK__TK_NUMBER:
  case SHK__TK_SLOT:
  case SHK__TK_AT:
  case SHK__TK_DOT:
  case SHK__TK_COMMA:
  case SHK__TK_SEMI:
  case SHK__TK_COLON:
  case SHK__TK_COLONCOLON:
  case SHK__TK_LPAREN:
  case SHK__TK_RPAREN:
  case SHK__TK_LBRACE:
  case SHK__TK_RBRACE:
  case SHK__TK_LBRACKET:
  case SHK__TK_RBRACKET:
  case SHK__TK_EQEQ:
  case SHK__TK_NE:
  case SHK__TK_LT:
  case SHK__TK_LE:
  case SHK__TK_GE:
  case SHK__TK_GT:
  case SHK__TK_OROR:
  case SHK__TK_ANDAND:
  case SHK__TK_PLUS:
  case SHK__TK_MINUS:
  case SHK__TK_STAR:
  case SHK__TK_SLASH:
  case SHK__TK_PERCENT:
  case SHK__TK_BANG:
  case SHK__TK_EQ:
  case SHK__TK_QUESTION:
    break;
  }
  snprintf(buf, n, "`%.*s`", t->n > 40 ? 40 : (int)t->n, t->p);
  return buf;
}

const char *shk__tk_spelling(shk__tk k)
{
  switch (k) {
  case SHK__TK_EOF: return "end of input";
  case SHK__TK_IDENT: return "an identifier";
  case SHK__TK_NUMBER: return "a number";
  case SHK__TK_STRING: return "a string";
  case SHK__TK_SLOT: return "a template slot";
  case SHK__TK_AT: return "`@`";
  case SHK__TK_DOT: return "`.`";
  case SHK__TK_COMMA: return "`,`";
  case SHK__TK_SEMI: return "`;`";
  case SHK__TK_COLON: return "`:`";
  case SHK__TK_COLONCOLON: return "`::`";
  case SHK__TK_LPAREN: return "`(`";
  case SHK__TK_RPAREN: return "`)`";
  case SHK__TK_LBRACE: return "`{`";
  case SHK__TK_RBRACE: return "`}`";
  case SHK__TK_LBRACKET: return "`[`";
  case SHK__TK_RBRACKET: return "`]`";
  case SHK__TK_EQEQ: return "`==`";
  case SHK__TK_NE: return "`!=`";
  case SHK__TK_LT: return "`<`";
  case SHK__TK_LE: return "`<=`";
  case SHK__TK_GE: return "`>=`";
  case SHK__TK_GT: return "`>`";
  case SHK__TK_OROR: return "`||`";
  case SHK__TK_ANDAND: return "`&&`";
  case SHK__TK_PLUS: return "`+`";
  case SHK__TK_MINUS: return "`-`";
  case SHK__TK_STAR: return "`*`";
  case SHK__TK_SLASH: return "`/`";
  case SHK__TK_PERCENT: return "`%`";
  case SHK__TK_BANG: return "`!`";
  case SHK__TK_EQ: return "`=`";
  case SHK__TK_QUESTION: return "`?`";
  case SHK__TK_ERROR: break;
  }
  return "a token";
}

void *shk__grow(shk__arena *a, void *p, size_t n, size_t *cap, size_t elem)
{
  size_t nc = *cap ? *cap * 2 : 4;
  void *np = shk__arena_alloc(a, nc * elem);
  if (n)
    memcpy(np, p, n * elem);
  *cap = nc;
  return np;
}

void shk__path_add(shk__arena *a, shk__path *path, shk__str part)
{
  size_t need = path->n + 2 + part.n + 1;
  if (need > path->cap) {
    size_t nc = path->cap ? path->cap * 2 : 32;
    while (nc < need)
      nc *= 2;
    char *np = shk__arena_alloc(a, nc);
    if (path->n)
      memcpy(np, path->p, path->n);
    path->p = np;
    path->cap = nc;
  }
  if (path->n) {
    path->p[path->n++] = ':';
    path->p[path->n++] = ':';
  }
  memcpy(path->p + path->n, part.p, part.n);
  path->n += part.n;
  path->p[path->n] = '\0';
}

void shk__cur_fail(shk__cursor *c, shk__loc loc, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  shk__error_vat(c->err, -EINVAL, NULL, loc.line, loc.col, fmt, ap);
  va_end(ap);
  longjmp(c->fail, 1);
}

void shk__cur_unexpected(shk__cursor *c)
{
  char buf[64];
  if (c->t.kind == SHK__TK_ERROR)
    shk__cur_fail(c, c->t.loc, "%s", c->lx.error);
  shk__cur_fail(c, c->t.loc, "unexpected token %s", shk__tok_describe(&c->t, buf, sizeof(buf)));
}

void shk__cur_expect(shk__cursor *c, shk__tk k)
{
  if (shk__cur_accept(c, k))
    return;
  if (c->t.kind == SHK__TK_ERROR)
    shk__cur_unexpected(c); /* the lexer's own reason */
  char buf[64];
  shk__cur_fail(c, c->t.loc, "unexpected token %s, expected %s", shk__tok_describe(&c->t, buf, sizeof(buf)),
                shk__tk_spelling(k));
}

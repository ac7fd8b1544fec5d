/* SPDX-License-Identifier: Apache-2.0 */
/* Events: the builder producers call, and the canonical JSON the writer
 * makes of what they built (docs/audit.md, "Entries").
 *
 * An entry is one JSON object, flat, in the RFC 8785 (JCS) canonical form
 * restricted to what the log needs: members sorted by key (all keys are
 * ASCII, so byte order is JCS's UTF-16 order), no whitespace, strings with
 * JCS's minimal escapes, integers with |v| < 2^53 in plain decimal,
 * booleans, and lists of strings. The same bytes come out of any JCS
 * implementation given the same object, so a third party can re-derive
 * them. */
#include "audit/audit-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/common.h"

#define SAFE_INT_MAX 9007199254740991LL /* 2^53 - 1 */

/* ------------------------------------------------------------------------
 * Buffers
 */
/* Room for n more bytes and the NUL after them. */
static int reserve(shk__abuf *b, size_t n)
{
  if (b->len + n + 1 <= b->cap)
    return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1)
    cap *= 2;
  char *np = realloc(b->p, cap);
  if (!np)
    return -ENOMEM;
  b->p = np;
  b->cap = cap;
  return 0;
}

int shk__abuf_add(shk__abuf *b, const void *p, size_t n)
{
  if (reserve(b, n) < 0)
    return -ENOMEM;
  if (n)
    memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int shk__abuf_str(shk__abuf *b, const char *s)
{
  return shk__abuf_add(b, s, strlen(s));
}

void shk__abuf_free(shk__abuf *b)
{
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------
 * Numbers and hex, without printf (the writer formats several per event)
 */
static void hex_bytes(const unsigned char *p, size_t n, char *out)
{
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
}

/* Decimal digits of v into out (at least 21 bytes); returns their count. */
static size_t format_int(int64_t v, char *out)
{
  char tmp[24];
  size_t n = 0, o = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    out[o++] = '-';
  while (n)
    out[o++] = tmp[--n];
  return o;
}

/* ------------------------------------------------------------------------
 * UTF-8 and JSON strings
 */
bool shk__audit_utf8_valid(const char *str, size_t n)
{
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    unsigned cp, min;
    if ((c & 0xe0) == 0xc0)
      len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
      len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return false;
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

/* The bytes a canonical string carries as they are: everything from U+0020
 * on but '"' and '\\' (UTF-8's bytes above 0x7f included). */
#define PLAIN(c) ((c) >= 0x20 && (c) != '"' && (c) != '\\')

int shk__json_string(shk__abuf *b, const char *s, size_t n)
{
  static const char hex[] = "0123456789abcdef";
  /* The worst case, every byte escaped as \u00xx, is reserved at once, so
   * that the loop writes with no check: most strings (host names, ids)
   * have nothing to escape and are one copy. */
  if (n > (SIZE_MAX - 3) / 6 || reserve(b, 6 * n + 2) < 0)
    return -ENOMEM;
  char *o = b->p + b->len;
  *o++ = '"';
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && PLAIN((unsigned char)s[run]))
      run++;
    memcpy(o, s + i, run - i);
    o += run - i;
    if (run == n)
      break;
    unsigned char c = (unsigned char)s[run];
    *o++ = '\\';
    switch (c) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '\b': *o++ = 'b'; break;
    case '\f': *o++ = 'f'; break;
    case '\n': *o++ = 'n'; break;
    case '\r': *o++ = 'r'; break;
    case '\t': *o++ = 't'; break;
    default:
      memcpy(o, "u00", 3);
      o[3] = hex[c >> 4];
      o[4] = hex[c & 15];
      o += 5;
    }
    i = run + 1;
  }
  *o++ = '"';
  *o = '\0';
  b->len = (size_t)(o - b->p);
  return 0;
}

/* ------------------------------------------------------------------------
 * Fields
 */
static const struct {
  const char *name;
  char type;
} fields[SHK_AUDIT_FIELD_COUNT] = {
  [SHK_AUDIT_SESSION] = { "gen_ai.conversation.id", 's' },
  [SHK_AUDIT_AGENT_ID] = { "gen_ai.agent.id", 's' },
  [SHK_AUDIT_AGENT_NAME] = { "gen_ai.agent.name", 's' },
  [SHK_AUDIT_MODEL] = { "gen_ai.request.model", 's' },
  [SHK_AUDIT_OPERATION] = { "gen_ai.operation.name", 's' },
  [SHK_AUDIT_TOOL] = { "gen_ai.tool.name", 's' },
  [SHK_AUDIT_ERROR_TYPE] = { "error.type", 's' },
  [SHK_AUDIT_HUMAN_UID] = { "shinken.human.uid", 'i' },
  [SHK_AUDIT_HUMAN_NAME] = { "shinken.human.name", 's' },
  [SHK_AUDIT_HUMAN_SURFACE] = { "shinken.human.surface", 's' },
  [SHK_AUDIT_CLASS] = { "shinken.class", 's' },
  [SHK_AUDIT_SCOPE] = { "shinken.scope", 's' },
  [SHK_AUDIT_DECISION] = { "shinken.decision", 's' },
  [SHK_AUDIT_POLICY] = { "shinken.policy.id", 's' },
  [SHK_AUDIT_TIER] = { "shinken.tier", 's' },
  [SHK_AUDIT_PROVENANCE] = { "shinken.provenance", 's' },
  [SHK_AUDIT_OUTCOME] = { "shinken.outcome", 's' },
  [SHK_AUDIT_LIFETIME] = { "shinken.lifetime", 's' },
  [SHK_AUDIT_REASON] = { "shinken.reason", 's' },
  [SHK_AUDIT_HANDLE] = { "shinken.handle.id", 's' },
  [SHK_AUDIT_HANDLE_PARENT] = { "shinken.handle.parent", 's' },
  [SHK_AUDIT_CARD] = { "shinken.card.id", 's' },
  [SHK_AUDIT_COUNT] = { "shinken.count", 'i' },
  [SHK_AUDIT_PROTOCOL] = { "shinken.egress.protocol", 's' },
  [SHK_AUDIT_CONNECTION] = { "shinken.egress.connection", 'i' },
  [SHK_AUDIT_HOST] = { "server.address", 's' },
  [SHK_AUDIT_PORT] = { "server.port", 'i' },
  [SHK_AUDIT_RULE] = { "shinken.egress.rule", 's' },
  [SHK_AUDIT_PID] = { "process.pid", 'i' },
  [SHK_AUDIT_EXIT_CODE] = { "process.exit.code", 'i' },
  [SHK_AUDIT_SIGNAL] = { "shinken.sandbox.signal", 's' },
  [SHK_AUDIT_LIMIT] = { "shinken.sandbox.limit", 's' },
  [SHK_AUDIT_ENFORCED] = { "shinken.sandbox.enforced", 'a' },
  [SHK_AUDIT_DEGRADED] = { "shinken.sandbox.degraded", 'a' },
  [SHK_AUDIT_EXECUTABLE] = { "process.executable.path", 's' },
  [SHK_AUDIT_HTTP_METHOD] = { "http.request.method", 's' },
  [SHK_AUDIT_HTTP_STATUS] = { "http.response.status_code", 'i' },
  [SHK_AUDIT_HTTP_BYTES] = { "http.response.body.size", 'i' },
  [SHK_AUDIT_DURATION_US] = { "shinken.egress.duration_us", 'i' },
};

const char *shk__audit_field_name(int f)
{
  return f >= 0 && f < SHK_AUDIT_FIELD_COUNT ? fields[f].name : NULL;
}

/* The packed form, in shk_audit_event.buf: one record per field, a tag
 * byte, a 16-bit little-endian length and the value. Tags below
 * SHK_AUDIT_FIELD_COUNT are fields; TAG_NAME holds the event name and
 * TAG_PARAM a hashed parameter ("NAME\0HEX64"). */
enum { TAG_NAME = 0xfe, TAG_PARAM = 0xfd };

static void fail(shk_audit_event *e, int field, const char *what)
{
  if (!e->error) {
    e->error = -EINVAL;
    e->error_field = field;
    e->error_what = what;
  }
}

static void put(shk_audit_event *e, int tag, const void *v1, size_t n1, const void *v2, size_t n2)
{
  size_t n = n1 + n2;
  if (e->error)
    return;
  if (n > 0xffff || e->len + 3 + n > sizeof e->buf) {
    fail(e, tag < SHK_AUDIT_FIELD_COUNT ? tag : -1, "makes the event larger than 4096 bytes");
    return;
  }
  unsigned char *p = e->buf + e->len;
  p[0] = (unsigned char)tag;
  p[1] = (unsigned char)(n & 0xff);
  p[2] = (unsigned char)(n >> 8);
  if (n1)
    memcpy(p + 3, v1, n1);
  if (n2)
    memcpy(p + 3 + n1, v2, n2);
  e->len += 3 + n;
}

static bool name_ok(const char *s, size_t max, bool dots)
{
  size_t n = 0;
  for (; s[n]; n++)
    if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') ||
          (dots ? s[n] == '.' || s[n] == '-' : s[n] == '_')))
      return false;
  return n > 0 && n <= max;
}

void shk_audit_event_init(shk_audit_event *e, const char *name)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  e->time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  e->error = 0;
  e->error_field = -1;
  e->error_what = NULL;
  e->set = 0;
  e->len = 0;
  if (!name || !name_ok(name, 64, true))
    fail(e, -1, "has a name that is not [a-z0-9.-]{1,64}");
  else
    put(e, TAG_NAME, name, strlen(name), NULL, 0);
}

/* Marks field f set, refusing a field of another type or one set twice
 * (canonical JSON has no duplicate keys). */
static bool claim(shk_audit_event *e, shk_audit_field f, char type)
{
  if (e->error)
    return false;
  if ((unsigned)f >= SHK_AUDIT_FIELD_COUNT) {
    fail(e, -1, "names a field that does not exist");
    return false;
  }
  if (fields[f].type != type) {
    fail(e, f, type == 'i' ? "is not an integer field" : type == 'a' ? "is not a list field"
                                                                      : "is not a string field");
    return false;
  }
  if (e->set & (UINT64_C(1) << f)) {
    fail(e, f, "is set twice");
    return false;
  }
  e->set |= UINT64_C(1) << f;
  return true;
}

void shk_audit_str(shk_audit_event *e, shk_audit_field f, const char *value)
{
  if (!value || !claim(e, f, 's'))
    return;
  size_t n = strlen(value);
  if (!shk__audit_utf8_valid(value, n))
    fail(e, f, "is not UTF-8");
  else
    put(e, f, value, n, NULL, 0);
}

void shk_audit_int(shk_audit_event *e, shk_audit_field f, int64_t v)
{
  if (!claim(e, f, 'i'))
    return;
  if (v > SAFE_INT_MAX || v < -SAFE_INT_MAX) {
    fail(e, f, "is out of the exact range of JSON numbers (2^53)");
    return;
  }
  unsigned char b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)((uint64_t)v >> (8 * i));
  put(e, f, b, 8, NULL, 0);
}

void shk_audit_strv(shk_audit_event *e, shk_audit_field f, const char *const *values)
{
  if (!values || !claim(e, f, 'a'))
    return;
  unsigned char tmp[SHK_AUDIT_EVENT_MAX];
  size_t n = 0;
  for (const char *const *v = values; *v; v++) {
    size_t k = strlen(*v) + 1;
    if (!shk__audit_utf8_valid(*v, k - 1)) {
      fail(e, f, "has an item that is not UTF-8");
      return;
    }
    if (n + k > sizeof tmp) {
      fail(e, f, "makes the event larger than 4096 bytes");
      return;
    }
    memcpy(tmp + n, *v, k);
    n += k;
  }
  put(e, f, tmp, n, NULL, 0);
}

void shk_audit_hashed(shk_audit_event *e, const char *name, const void *value, size_t len)
{
  if (e->error)
    return;
  if (!name || !name_ok(name, 32, false)) {
    fail(e, -1, "has a hashed parameter whose name is not [a-z0-9_]{1,32}");
    return;
  }
  size_t nl = strlen(name);
  for (size_t i = 0; i + 3 <= e->len;) {
    size_t k = e->buf[i + 1] | (size_t)e->buf[i + 2] << 8;
    if (e->buf[i] == TAG_PARAM && k > nl && !memcmp(e->buf + i + 3, name, nl + 1)) {
      fail(e, -1, "has a hashed parameter set twice");
      return;
    }
    i += 3 + k;
  }
  shk__hash h;
  shk__sha256(value, value ? len : 0, h);
  char rec[33 + 64];
  memcpy(rec, name, nl + 1);
  hex_bytes(h, 32, rec + nl + 1);
  put(e, TAG_PARAM, rec, nl + 1 + 64, NULL, 0);
}

/* ------------------------------------------------------------------------
 * Serialization
 */
typedef struct member {
  const char *key;           /* a static name, or pkey */
  size_t klen;
  int rank;                  /* a static name's place among them all (key_rank), or -1 */
  int tag;
  const unsigned char *v;
  size_t n;
  char pkey[64];             /* shinken.param.NAME.sha256 */
} member;

enum { ENV_NAME = 0x100, ENV_SEQ, ENV_TIME, ENV_PREV, ENV_OPERATION };

/* The static key names in byte order, once: then two of them compare as
 * two integers, and only a parameter's key (made per event) is compared
 * byte by byte. The same name has the same rank wherever it comes from. */
static const char *const env_keys[] = { "event.name", "seq", "time", "prev", "gen_ai.operation.name" };
#define N_STATIC (SHK_AUDIT_FIELD_COUNT + sizeof env_keys / sizeof env_keys[0])
static int ranks[N_STATIC];
static pthread_once_t ranks_once = PTHREAD_ONCE_INIT;

static const char *static_key(size_t i)
{
  return i < SHK_AUDIT_FIELD_COUNT ? fields[i].name : env_keys[i - SHK_AUDIT_FIELD_COUNT];
}

static void make_ranks(void)
{
  for (size_t i = 0; i < N_STATIC; i++) {
    int r = 0;
    for (size_t j = 0; j < N_STATIC; j++)
      r += strcmp(static_key(j), static_key(i)) < 0;
    /* The number of names before it: equal names have equal ranks. */
    ranks[i] = r;
  }
}

/* The rank of tag (a field, or ENV_*). */
static int key_rank(int tag)
{
  pthread_once(&ranks_once, make_ranks);
  return ranks[tag < SHK_AUDIT_FIELD_COUNT ? (size_t)tag : SHK_AUDIT_FIELD_COUNT + (size_t)(tag - ENV_NAME)];
}

static int member_cmp(const member *x, const member *y)
{
  if (x->rank >= 0 && y->rank >= 0)
    return (x->rank > y->rank) - (x->rank < y->rank);
  size_t n = x->klen < y->klen ? x->klen : y->klen;
  int c = memcmp(x->key, y->key, n);
  return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static void set_key(member *m, const char *key)
{
  m->key = key;
  m->klen = strlen(key);
  m->rank = -1;
}

static void set_static_key(member *m, int tag)
{
  set_key(m, tag < SHK_AUDIT_FIELD_COUNT ? fields[tag].name : env_keys[tag - ENV_NAME]);
  m->rank = key_rank(tag);
}

/* Insertion sort of pointers: an event has a score of members, so this
 * beats qsort and moves no member. */
static void sort_members(member **p, size_t n)
{
  for (size_t i = 1; i < n; i++) {
    member *x = p[i];
    size_t j = i;
    for (; j > 0 && member_cmp(p[j - 1], x) > 0; j--)
      p[j] = p[j - 1];
    p[j] = x;
  }
}

static int add_int(shk__abuf *out, int64_t v)
{
  char num[24];
  return shk__abuf_add(out, num, format_int(v, num));
}

int shk__audit_serialize(const unsigned char *rec, size_t len, int64_t time_ns, uint64_t seq,
                         const shk__hash prev, shk__abuf *out)
{
  member m[128], *sorted[128];
  size_t n = 0;
  bool has_tool = false, has_op = false, has_name = false;
  for (size_t i = 0; i < len;) {
    if (len - i < 3 || n >= sizeof m / sizeof m[0] - 5)
      return -EINVAL;
    int tag = rec[i];
    size_t k = rec[i + 1] | (size_t)rec[i + 2] << 8;
    if (len - i - 3 < k)
      return -EINVAL;
    member *x = &m[n++];
    x->tag = tag;
    x->v = rec + i + 3;
    x->n = k;
    if (tag == TAG_NAME) {
      x->tag = ENV_NAME;
      set_static_key(x, ENV_NAME);
      has_name = true;
    } else if (tag == TAG_PARAM) {
      const char *pname = (const char *)x->v;
      size_t pl = strnlen(pname, k);
      if (pl + 1 + 64 != k || pl > 32)
        return -EINVAL;
      snprintf(x->pkey, sizeof x->pkey, "shinken.param.%.*s.sha256", (int)pl, pname);
      set_key(x, x->pkey);
      x->v += pl + 1;
      x->n = 64;
    } else if (tag < SHK_AUDIT_FIELD_COUNT) {
      set_static_key(x, tag);
      has_tool |= tag == SHK_AUDIT_TOOL;
      has_op |= tag == SHK_AUDIT_OPERATION;
      if (fields[tag].type == 'i' && k != 8)
        return -EINVAL;
    } else {
      return -EINVAL;
    }
    i += 3 + k;
  }
  if (!has_name)
    return -EINVAL;
  /* A tool's request is an OpenTelemetry tool execution. */
  if (has_tool && !has_op) {
    set_static_key(&m[n], ENV_OPERATION);
    m[n++].tag = ENV_OPERATION;
  }
  set_static_key(&m[n], ENV_SEQ);
  m[n++].tag = ENV_SEQ;
  set_static_key(&m[n], ENV_TIME);
  m[n++].tag = ENV_TIME;
  set_static_key(&m[n], ENV_PREV);
  m[n++].tag = ENV_PREV;
  for (size_t i = 0; i < n; i++)
    sorted[i] = &m[i];
  sort_members(sorted, n);

  int r = shk__abuf_add(out, "{", 1);
  for (size_t i = 0; i < n && r == 0; i++) {
    const member *x = sorted[i];
    if (i && member_cmp(sorted[i - 1], x) == 0)
      return -EINVAL;
    /* Keys are [a-z0-9._] by construction: nothing to escape. */
    char key[80];
    size_t kn = 0;
    if (i)
      key[kn++] = ',';
    key[kn++] = '"';
    memcpy(key + kn, x->key, x->klen);
    kn += x->klen;
    key[kn++] = '"';
    key[kn++] = ':';
    if ((r = shk__abuf_add(out, key, kn)))
      break;
    const unsigned char *v = x->v;
    switch (x->tag) {
    case ENV_SEQ:
      r = add_int(out, (int64_t)seq);
      break;
    case ENV_TIME: {
      char t[31];
      shk__audit_time(time_ns, t);
      r = shk__json_string(out, t, 30);
      break;
    }
    case ENV_PREV: {
      char h[64];
      hex_bytes(prev, 32, h);
      r = shk__json_string(out, h, 64);
      break;
    }
    case ENV_OPERATION:
      r = shk__json_string(out, "execute_tool", 12);
      break;
    default:
      if (x->tag < SHK_AUDIT_FIELD_COUNT && fields[x->tag].type == 'i') {
        uint64_t u = 0;
        for (int b = 0; b < 8; b++)
          u |= (uint64_t)v[b] << (8 * b);
        r = add_int(out, (int64_t)u);
      } else if (x->tag < SHK_AUDIT_FIELD_COUNT && fields[x->tag].type == 'a') {
        r = shk__abuf_add(out, "[", 1);
        for (size_t p = 0, first = 1; p < x->n && r == 0; first = 0) {
          size_t l = strnlen((const char *)v + p, x->n - p);
          if (!first)
            r = shk__abuf_add(out, ",", 1);
          if (r == 0)
            r = shk__json_string(out, (const char *)v + p, l);
          p += l + 1;
        }
        if (r == 0)
          r = shk__abuf_add(out, "]", 1);
      } else {
        r = shk__json_string(out, (const char *)v, x->n);
      }
    }
  }
  return r ? r : shk__abuf_add(out, "}", 1);
}

/* ------------------------------------------------------------------------
 * The entry checker: the inverse of the serializer, accepting exactly the
 * canonical form.
 */
typedef struct cur {
  const char *s;
  size_t i, n;
  shk_error *err;
} cur;

static int bad(cur *c, const char *what)
{
  return shk__error_set(c->err, -EINVAL, "the entry is not canonical JSON at byte %zu: %s", c->i,
                        what);
}

/* A canonical string; its raw (still escaped) bytes are s[*from..*to). */
static int str(cur *c, size_t *from, size_t *to)
{
  if (c->i >= c->n || c->s[c->i] != '"')
    return bad(c, "a string was expected");
  size_t start = ++c->i;
  while (c->i < c->n) {
    unsigned char ch = (unsigned char)c->s[c->i];
    if (ch == '"') {
      if (!shk__audit_utf8_valid(c->s + start, c->i - start))
        return bad(c, "a string is not UTF-8");
      *from = start;
      *to = c->i++;
      return 0;
    }
    if (ch < 0x20)
      return bad(c, "a control character is not escaped");
    if (ch == '\\') {
      if (c->i + 1 >= c->n)
        return bad(c, "the text ends in an escape");
      char e = c->s[c->i + 1];
      if (e == 'u') {
        static const char forms[] = "0123456789abcdef";
        if (c->n - c->i < 6 || memcmp(c->s + c->i + 2, "00", 2) ||
            (c->s[c->i + 4] != '0' && c->s[c->i + 4] != '1') ||
            !memchr(forms, c->s[c->i + 5], 16))
          return bad(c, "an escape \\u is not one of \\u0000-\\u001f in lower case");
        unsigned v = (unsigned)(c->s[c->i + 4] - '0') * 16 +
                     (unsigned)((const char *)memchr(forms, c->s[c->i + 5], 16) - forms);
        if (v == 8 || v == 9 || v == 10 || v == 12 || v == 13)
          return bad(c, "a character with a short escape is escaped as \\u");
        c->i += 6;
        continue;
      }
      if (!strchr("\"\\bfnrt", e) || !e)
        return bad(c, "an escape is not one of the minimal ones");
      c->i += 2;
      continue;
    }
    c->i++;
  }
  return bad(c, "a string does not end");
}

static int integer(cur *c, int64_t *out)
{
  bool neg = c->i < c->n && c->s[c->i] == '-';
  if (neg)
    c->i++;
  if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9')
    return bad(c, "a value was expected");
  if (c->s[c->i] == '0' && c->i + 1 < c->n && c->s[c->i + 1] >= '0' && c->s[c->i + 1] <= '9')
    return bad(c, "an integer has a leading zero");
  int64_t v = 0;
  while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
    v = v * 10 + (c->s[c->i++] - '0');
    if (v > SAFE_INT_MAX)
      return bad(c, "an integer is out of the exact range");
  }
  if (c->i < c->n && strchr(".eE", c->s[c->i]))
    return bad(c, "a number is not an integer");
  if (neg && v == 0)
    return bad(c, "an integer is -0");
  *out = neg ? -v : v;
  return 0;
}

static bool lit(cur *c, const char *w)
{
  size_t n = strlen(w);
  if (c->n - c->i >= n && !memcmp(c->s + c->i, w, n)) {
    c->i += n;
    return true;
  }
  return false;
}

static int hexval(char ch)
{
  return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int shk__audit_entry_check(const char *entry, size_t n, uint64_t *seq, shk__hash prev,
                           shk_error *err)
{
  cur c = { .s = entry, .n = n, .err = err };
  if (!lit(&c, "{"))
    return bad(&c, "an object was expected");
  size_t pk_from = 0, pk_to = 0;
  bool first = true, have_seq = false, have_prev = false, have_time = false, have_name = false;
  while (!lit(&c, "}")) {
    if (!first && !lit(&c, ","))
      return bad(&c, "',' or '}' was expected");
    size_t kf, kt;
    int r = str(&c, &kf, &kt);
    if (r)
      return r;
    if (!first) {
      size_t a = pk_to - pk_from, b = kt - kf, m = a < b ? a : b;
      int cmp = memcmp(entry + pk_from, entry + kf, m);
      if (cmp > 0 || (cmp == 0 && a >= b))
        return bad(&c, "the keys are not sorted, or one repeats");
    }
    first = false;
    pk_from = kf, pk_to = kt;
    if (!lit(&c, ":"))
      return bad(&c, "':' was expected");
    size_t kl = kt - kf;
    const char *k = entry + kf;
#define KEY(lit_) (kl == sizeof lit_ - 1 && !memcmp(k, lit_, kl))
    if (c.i < c.n && c.s[c.i] == '"') {
      size_t vf, vt;
      if ((r = str(&c, &vf, &vt)))
        return r;
      if (KEY("prev")) {
        if (vt - vf != 64)
          return bad(&c, "prev is not 64 hex digits");
        for (int b = 0; b < 32; b++) {
          int hi = hexval(entry[vf + 2 * b]), lo = hexval(entry[vf + 2 * b + 1]);
          if (hi < 0 || lo < 0)
            return bad(&c, "prev is not 64 lower-case hex digits");
          prev[b] = (unsigned char)(hi << 4 | lo);
        }
        have_prev = true;
      }
      have_time |= KEY("time");
      have_name |= KEY("event.name");
    } else if (c.i < c.n && c.s[c.i] == '[') {
      c.i++;
      for (bool f2 = true; !lit(&c, "]"); f2 = false) {
        size_t vf, vt;
        if (!f2 && !lit(&c, ","))
          return bad(&c, "',' or ']' was expected");
        if ((r = str(&c, &vf, &vt)))
          return r;
      }
    } else if (lit(&c, "true") || lit(&c, "false")) {
    } else {
      int64_t v = 0;
      if ((r = integer(&c, &v)))
        return r;
      if (KEY("seq")) {
        if (v < 0)
          return bad(&c, "seq is negative");
        *seq = (uint64_t)v;
        have_seq = true;
      }
    }
#undef KEY
  }
  if (c.i != c.n)
    return bad(&c, "something follows the object");
  if (!have_seq || !have_prev || !have_time || !have_name)
    return shk__error_set(err, -EINVAL, "the entry lacks one of event.name, prev, seq, time");
  return 0;
}

/* ------------------------------------------------------------------------
 * Time
 */
void shk__audit_time(int64_t ns, char out[31])
{
  /* The date and time of day change once a second: each thread keeps the
   * last second it formatted. */
  static __thread int64_t cached_sec = INT64_MIN;
  static __thread char cached[20];
  int64_t sec = ns / 1000000000, frac = ns % 1000000000;
  if (frac < 0)
    frac += 1000000000, sec--;
  if (sec != cached_sec) {
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    char b[64];
    snprintf(b, sizeof b, "%04d-%02d-%02dT%02d:%02d:%02d", (tm.tm_year + 1900) % 10000,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    memcpy(cached, b, 19);
    cached_sec = sec;
  }
  memcpy(out, cached, 19);
  out[19] = '.';
  for (int i = 28; i >= 20; i--) {
    out[i] = (char)('0' + frac % 10);
    frac /= 10;
  }
  out[29] = 'Z';
  out[30] = '\0';
}

int shk_audit_parse_time(const char *s, int64_t *ns)
{
  struct tm tm = { 0 };
  int used = 0;
  if (sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
             &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6 || used != 19)
    return -EINVAL;
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return -EINVAL;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const char *p = s + used;
  int64_t frac = 0;
  if (*p == '.') {
    int digits = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, digits++)
      if (digits < 9)
        frac = frac * 10 + (*p - '0');
    if (digits == 0)
      return -EINVAL;
    for (; digits < 9; digits++)
      frac *= 10;
  }
  int64_t off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int hh, mm, n2 = 0;
    if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n2) != 2 || n2 != 5 || hh > 23 || mm > 59)
      return -EINVAL;
    off = (int64_t)(hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
    p += 6;
  } else {
    return -EINVAL;
  }
  if (*p)
    return -EINVAL;
  time_t t = timegm(&tm);
  *ns = ((int64_t)t - off) * 1000000000 + frac;
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The capability grammar: the eight classes, their scopes as JSON, and the
 * subset relation that attenuation and manifests rest on. Host patterns,
 * CIDRs, port ranges and paths are read by the shared grammar
 * (shinken/match.h), the same parsers and matchers the egress proxy and the
 * sandbox use; this file knows which field holds which.
 *
 * Every check here answers "does A grant anything B does not?". A wrong
 * "no" would widen authority, so each comparison is written to fail closed:
 * anything it cannot prove covered is not covered. */
#include "shinken/cap.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static const char *const class_names[SHK_CAP__COUNT] = {
  [SHK_CAP_NET_EGRESS] = "net.egress",
  [SHK_CAP_FS_SCOPE] = "fs.scope",
  [SHK_CAP_CLIPBOARD] = "clipboard",
  [SHK_CAP_GPU] = "gpu",
  [SHK_CAP_INSTALL_PRIVILEGED] = "install.privileged",
  [SHK_CAP_PERSISTENCE] = "persistence",
  [SHK_CAP_CREDENTIALS] = "credentials",
  [SHK_CAP_PERIPHERAL] = "peripheral",
};

const char *shk_cap_class_name(shk_cap_class c)
{
  return (unsigned)c < SHK_CAP__COUNT ? class_names[c] : NULL;
}

int shk_cap_class_parse(const char *name, shk_cap_class *out)
{
  for (int i = 0; i < SHK_CAP__COUNT; i++)
    if (!strcmp(name, class_names[i])) {
      *out = (shk_cap_class)i;
      return 0;
    }
  return -EINVAL;
}

typedef enum field_kind { F_DOMAINS, F_CIDRS, F_PORTS, F_PATHS, F_TOKENS, F_BOOL, F_ENUM } field_kind;

typedef struct field {
  const char *name;
  field_kind kind;
  size_t off;           /* offset of the shk_strv or bool in shk_cap_scope */
  const char *e0, *e1;  /* F_ENUM: the false and the true spelling */
} field;

#define STRV(f) offsetof(shk_cap_scope, f)
#define FLAG(f) offsetof(shk_cap_scope, f)

static const field net_fields[] = {
  { "domains", F_DOMAINS, STRV(domains), NULL, NULL },
  { "cidrs", F_CIDRS, STRV(cidrs), NULL, NULL },
  { "ports", F_PORTS, 0, NULL, NULL },
  { "tls_inspect", F_BOOL, FLAG(tls_inspect), NULL, NULL },
  { "limited", F_BOOL, FLAG(limited), NULL, NULL },
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field fs_fields[] = {
  { "read", F_PATHS, STRV(read), NULL, NULL },
  { "write", F_PATHS, STRV(write), NULL, NULL },
  { "deny", F_PATHS, STRV(deny), NULL, NULL },
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field clip_fields[] = {
  { "paste_in", F_BOOL, FLAG(paste_in), NULL, NULL },
  { "copy_out", F_BOOL, FLAG(copy_out), NULL, NULL },
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field gpu_fields[] = {
  { "device_ids", F_TOKENS, STRV(device_ids), NULL, NULL },
  { "mode", F_ENUM, FLAG(gpu_exclusive), "shared", "exclusive" },
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field install_fields[] = {
  { "scope", F_ENUM, FLAG(install_any), "pkg", "any" },
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field persist_fields[] = {
  { "paths", F_PATHS, STRV(paths), NULL, NULL },
  { "survives_session", F_BOOL, FLAG(survives_session), NULL, NULL },
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field cred_fields[] = {
  { "broker_scopes", F_TOKENS, STRV(broker_scopes), NULL, NULL },
  /* never_raw is parsed specially: it must be true. */
  { NULL, F_BOOL, 0, NULL, NULL },
};
static const field periph_fields[] = {
  { "camera", F_BOOL, FLAG(camera), NULL, NULL },
  { "mic", F_BOOL, FLAG(mic), NULL, NULL },
  { "usb", F_BOOL, FLAG(usb), NULL, NULL },
  { "input_inject", F_BOOL, FLAG(input_inject), NULL, NULL },
  { NULL, F_BOOL, 0, NULL, NULL },
};

static const field *const class_fields[SHK_CAP__COUNT] = {
  [SHK_CAP_NET_EGRESS] = net_fields,
  [SHK_CAP_FS_SCOPE] = fs_fields,
  [SHK_CAP_CLIPBOARD] = clip_fields,
  [SHK_CAP_GPU] = gpu_fields,
  [SHK_CAP_INSTALL_PRIVILEGED] = install_fields,
  [SHK_CAP_PERSISTENCE] = persist_fields,
  [SHK_CAP_CREDENTIALS] = cred_fields,
  [SHK_CAP_PERIPHERAL] = periph_fields,
};


static int oom(shk_error *err)
{
  return shk__error_set(err, -ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ parsing */

/* A token (a device id, a broker scope): compared as a whole, so any
 * byte but spaces and control characters will do, but not nothing and not
 * without bound. */
static bool valid_token(const char *s)
{
  if (!*s || strlen(s) > 256)
    return false;
  for (; *s; s++)
    if ((unsigned char)*s < 0x21 || *s == 0x7f)
      return false;
  return true;
}

static int parse_ports(json_t *v, shk_cap_scope *s, shk_error *err)
{
  if (!json_is_array(v))
    return shk__error_set(err, -EINVAL, "ports: expected an array of ports or \"LO-HI\" ranges");
  size_t n = json_array_size(v);
  s->ports = calloc(n ? n : 1, sizeof *s->ports);
  if (!s->ports)
    return oom(err);
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) {
    shk_port_range *r = &s->ports[i];
    shk_error perr;
    if (json_is_integer(e)) {
      json_int_t p = json_integer_value(e);
      if (p < 1 || p > 65535)
        return shk__error_set(err, -EINVAL, "ports[%zu]: a port is a number from 1 to 65535", i);
      r->lo = r->hi = (uint16_t)p;
    } else if (!json_is_string(e)) {
      return shk__error_set(err, -EINVAL,
                            "ports[%zu]: expected a port 1-65535 or a string \"LO-HI\"", i);
    } else if (shk_port_range_parse(json_string_value(e), json_string_length(e), r, &perr) < 0) {
      return shk__error_set(err, -EINVAL, "ports[%zu]: %s", i, perr.message);
    }
    s->n_ports++;
  }
  return 0;
}

/* One element of a list field, checked and reduced to its canonical text
 * in buf (patterns and CIDRs) or accepted as it is (*text = s). */
static int element(field_kind kind, const char *s, size_t len, char *buf, const char **text,
                   shk_error *err)
{
  *text = s;
  switch (kind) {
  case F_DOMAINS: {
    shk_host_pattern p;
    if (shk_host_pattern_parse(s, len, 0, &p, err) < 0)
      return -EINVAL;
    shk_host_pattern_format(&p, buf);
    *text = buf;
    return 0;
  }
  case F_CIDRS: {
    shk_cidr c;
    if (shk_cidr_parse(s, len, &c, err) < 0)
      return -EINVAL;
    shk_cidr_format(&c, buf);
    *text = buf;
    return 0;
  }
  case F_PATHS:
    return shk_path_check(s, err);
  case F_TOKENS:
    return valid_token(s) ? 0
                          : shk__error_set(err, -EINVAL,
                                           "expected a non-empty token of at most 256 bytes, "
                                           "without spaces or control characters");
  case F_PORTS: case F_BOOL: case F_ENUM:
    break;
  }
  return shk__error_set(err, -EINVAL, "not a list field");
}

static int parse_strv(const field *f, json_t *v, shk_strv *out, shk_error *err)
{
  if (!json_is_array(v))
    return shk__error_set(err, -EINVAL, "%s: expected an array of strings", f->name);
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) {
    const char *s = json_string_value(e);
    if (!s || strlen(s) != json_string_length(e))
      return shk__error_set(err, -EINVAL, "%s[%zu]: expected a string without NUL bytes",
                            f->name, i);
    char buf[SHK_HOST_PATTERN_TEXT_MAX > SHK_CIDR_TEXT_MAX ? SHK_HOST_PATTERN_TEXT_MAX
                                                           : SHK_CIDR_TEXT_MAX];
    const char *text;
    shk_error eerr;
    if (element(f->kind, s, json_string_length(e), buf, &text, &eerr) < 0)
      return shk__error_set(err, -EINVAL, "%s[%zu]: %s", f->name, i, eerr.message);
    if (shk_strv_push(out, text) < 0)
      return oom(err);
  }
  return 0;
}

static int parse_field(const field *f, json_t *v, shk_cap_scope *out, shk_error *err)
{
  bool *flag = (bool *)((char *)out + f->off);
  switch (f->kind) {
  case F_PORTS:
    return parse_ports(v, out, err);
  case F_BOOL:
    if (!json_is_boolean(v))
      return shk__error_set(err, -EINVAL, "%s: expected true or false", f->name);
    *flag = json_is_true(v);
    return 0;
  case F_ENUM: {
    const char *s = json_string_value(v);
    if (s && !strcmp(s, f->e0))
      *flag = false;
    else if (s && !strcmp(s, f->e1))
      *flag = true;
    else
      return shk__error_set(err, -EINVAL, "%s: expected \"%s\" or \"%s\"", f->name, f->e0, f->e1);
    return 0;
  }
  case F_DOMAINS: case F_CIDRS: case F_PATHS: case F_TOKENS:
    return parse_strv(f, v, (shk_strv *)((char *)out + f->off), err);
  }
  return shk__error_set(err, -EINVAL, "%s: unknown kind of field", f->name);
}

int shk_cap_scope_parse(shk_cap_class cls, const char *json, shk_cap_scope *out, shk_error *err)
{
  memset(out, 0, sizeof *out);
  out->cls = cls;
  if ((unsigned)cls >= SHK_CAP__COUNT)
    return shk__error_set(err, -EINVAL, "unknown capability class");
  json_error_t jerr;
  json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    if (json_error_code(&jerr) == json_error_out_of_memory)
      return oom(err);
    return shk__error_at(err, -EINVAL, NULL, (unsigned)(jerr.line > 0 ? jerr.line : 0),
                         (unsigned)(jerr.column > 0 ? jerr.column : 0),
                         "scope is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                         jerr.column);
  }
  int r = 0;
  if (!json_is_object(root)) {
    r = shk__error_set(err, -EINVAL, "scope must be a JSON object");
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    const field *f = class_fields[cls];
    while (f->name && strcmp(f->name, key))
      f++;
    if (f->name) {
      r = parse_field(f, v, out, err);
    } else if (cls == SHK_CAP_CREDENTIALS && !strcmp(key, "never_raw")) {
      /* A raw credential is never handed to an agent: the broker injects
       * it outside the sandbox. Asking otherwise is refused, not ignored. */
      if (!json_is_true(v))
        r = shk__error_set(err, -EINVAL,
                           "never_raw: must be true (raw credentials are never granted)");
    } else {
      r = shk__error_set(err, -EINVAL, "unknown field '%s' for class %s", key, class_names[cls]);
    }
    if (r)
      goto out;
  }
out:
  json_decref(root);
  if (r)
    shk_cap_scope_clear(out);
  return r;
}

/* ------------------------------------------------------------ copy, clear, JSON */

#define EACH_STRV(X) X(domains) X(cidrs) X(read) X(write) X(deny) X(device_ids) X(paths) \
  X(broker_scopes)

int shk_cap_scope_copy(shk_cap_scope *dst, const shk_cap_scope *src)
{
  *dst = *src;
#define NIL(f) dst->f = (shk_strv){ NULL, 0 };
  EACH_STRV(NIL)
#undef NIL
  dst->ports = NULL;
  dst->n_ports = 0;
  int r = 0;
#define COPY(f) if (r == 0) r = shk_strv_copy(&dst->f, &src->f);
  EACH_STRV(COPY)
#undef COPY
  if (r == 0 && src->n_ports) {
    dst->ports = malloc(src->n_ports * sizeof *dst->ports);
    if (dst->ports) {
      memcpy(dst->ports, src->ports, src->n_ports * sizeof *dst->ports);
      dst->n_ports = src->n_ports;
    } else {
      r = -ENOMEM;
    }
  }
  if (r)
    shk_cap_scope_clear(dst);
  return r;
}

void shk_cap_scope_clear(shk_cap_scope *s)
{
#define CLEAR(f) shk_strv_clear(&s->f);
  EACH_STRV(CLEAR)
#undef CLEAR
  free(s->ports);
  shk_cap_class cls = s->cls;
  memset(s, 0, sizeof *s);
  s->cls = cls;
}

/* json_object_set_new and json_array_append_new take the value even when
 * they fail, and refuse a NULL one: each returns nonzero when out of
 * memory, which the caller collects. */
static json_t *field_json(const shk_cap_scope *s, const field *f)
{
  const bool *flag = (const bool *)((const char *)s + f->off);
  json_t *a;
  switch (f->kind) {
  case F_BOOL:
    return json_boolean(*flag);
  case F_ENUM:
    return json_string(*flag ? f->e1 : f->e0);
  case F_PORTS:
    if (!(a = json_array()))
      return NULL;
    for (size_t i = 0; i < s->n_ports; i++) {
      const shk_port_range *r = &s->ports[i];
      char buf[SHK_PORT_RANGE_TEXT_MAX];
      shk_port_range_format(r, buf);
      if (json_array_append_new(a, r->lo == r->hi ? json_integer(r->lo) : json_string(buf))) {
        json_decref(a);
        return NULL;
      }
    }
    return a;
  case F_DOMAINS: case F_CIDRS: case F_PATHS: case F_TOKENS: {
    const shk_strv *v = (const shk_strv *)((const char *)s + f->off);
    if (!(a = json_array()))
      return NULL;
    for (size_t i = 0; i < v->n; i++)
      if (json_array_append_new(a, json_string(v->v[i]))) {
        json_decref(a);
        return NULL;
      }
    return a;
  }
  }
  return NULL;
}

char *shk_cap_scope_to_json(const shk_cap_scope *s)
{
  if ((unsigned)s->cls >= SHK_CAP__COUNT)
    return NULL;
  json_t *o = json_object();
  int bad = !o;
  for (const field *f = class_fields[s->cls]; f->name && !bad; f++)
    bad = json_object_set_new(o, f->name, field_json(s, f));
  if (!bad && s->cls == SHK_CAP_CREDENTIALS)
    bad = json_object_set_new(o, "never_raw", json_true());
  char *text = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return text;
}

/* ------------------------------------------------------------ subset */

/* Does parent's element p cover child's element c? Both are canonical text
 * that parsed when the scopes were made; one that does not parse now (a
 * scope filled in by hand) covers nothing and is covered by nothing. */
static bool element_covers(field_kind kind, const char *p, const char *c)
{
  switch (kind) {
  case F_DOMAINS: {
    shk_host_pattern pp, pc;
    return shk_host_pattern_parse(p, strlen(p), 0, &pp, NULL) == 0 &&
           shk_host_pattern_parse(c, strlen(c), 0, &pc, NULL) == 0 &&
           shk_host_pattern_covers(&pp, &pc);
  }
  case F_CIDRS: {
    shk_cidr cp, cc;
    return shk_cidr_parse(p, strlen(p), &cp, NULL) == 0 &&
           shk_cidr_parse(c, strlen(c), &cc, NULL) == 0 && shk_cidr_covers(&cp, &cc);
  }
  case F_PATHS:
    return shk_path_check(p, NULL) == 0 && shk_path_check(c, NULL) == 0 &&
           shk_path_within(c, p);
  case F_TOKENS:
    return !strcmp(p, c);
  case F_PORTS: case F_BOOL: case F_ENUM:
    break;
  }
  return false;
}

/* Every element of child covered by some element of parent; else *bad is
 * the first that is not. */
static bool strv_covered(field_kind kind, const shk_strv *child, const shk_strv *parent,
                         const char **bad)
{
  for (size_t i = 0; i < child->n; i++) {
    bool ok = false;
    for (size_t j = 0; j < parent->n && !ok; j++)
      ok = element_covers(kind, parent->v[j], child->v[i]);
    if (!ok) {
      *bad = child->v[i];
      return false;
    }
  }
  return true;
}

/* Security-relevant: a wrong true here lets attenuation widen a handle and
 * a manifest admit what it does not list. Every field of the class is
 * compared, each in the direction in which it grants. */
bool shk_cap_scope_subset(const shk_cap_scope *child, const shk_cap_scope *parent, shk_error *why)
{
  if ((unsigned)child->cls >= SHK_CAP__COUNT || (unsigned)parent->cls >= SHK_CAP__COUNT) {
    shk__error_set(why, -EINVAL, "unknown capability class");
    return false;
  }
  if (child->cls != parent->cls) {
    shk__error_set(why, -EPERM, "class %s is not %s", class_names[child->cls],
                   class_names[parent->cls]);
    return false;
  }
  for (const field *f = class_fields[child->cls]; f->name; f++) {
    const bool is_flag = f->kind == F_BOOL || f->kind == F_ENUM;
    const bool cf = is_flag && *(const bool *)((const char *)child + f->off);
    const bool pf = is_flag && *(const bool *)((const char *)parent + f->off);
    const char *bad = NULL;
    switch (f->kind) {
    case F_PORTS:
      /* An empty list leaves ports to the domain patterns; a list restricts.
       * So an unrestricted child is only within an unrestricted parent. */
      if (parent->n_ports && !child->n_ports) {
        shk__error_set(why, -EPERM, "ports: the parent restricts ports and the child does not");
        return false;
      }
      for (size_t i = 0; i < child->n_ports && parent->n_ports; i++) {
        bool ok = false;
        for (size_t j = 0; j < parent->n_ports && !ok; j++)
          ok = shk_port_range_covers(&parent->ports[j], &child->ports[i]);
        if (!ok) {
          shk__error_set(why, -EPERM, "ports: %u-%u is not within the parent's ports",
                         child->ports[i].lo, child->ports[i].hi);
          return false;
        }
      }
      break;
    case F_BOOL:
      /* tls_inspect and limited narrow (more is read, fewer methods
       * pass), every other flag grants. */
      if (f->off == FLAG(tls_inspect) || f->off == FLAG(limited) ? (pf && !cf) : (cf && !pf)) {
        shk__error_set(why, -EPERM, "%s: the parent does not allow %s", f->name,
                       cf ? "true" : "false");
        return false;
      }
      break;
    case F_ENUM:
      /* The second spelling ("exclusive", "any") is the wider one. */
      if (cf && !pf) {
        shk__error_set(why, -EPERM, "%s: \"%s\" is wider than the parent's \"%s\"", f->name,
                       f->e1, f->e0);
        return false;
      }
      break;
    case F_DOMAINS: case F_CIDRS: case F_PATHS: case F_TOKENS: {
      const shk_strv *cv = (const shk_strv *)((const char *)child + f->off);
      const shk_strv *pv = (const shk_strv *)((const char *)parent + f->off);
      if (f->off == STRV(deny)) {
        /* Denials narrow: the child must keep every denial of its parent. */
        if (!strv_covered(F_PATHS, pv, cv, &bad)) {
          shk__error_set(why, -EPERM, "deny: the parent's denial of %s is dropped", bad);
          return false;
        }
      } else if (!strv_covered(f->kind, cv, pv, &bad)) {
        shk__error_set(why, -EPERM, "%s: %s is not within the parent's %s", f->name, bad,
                       f->name);
        return false;
      }
      break;
    }
    }
  }
  return true;
}

/* ------------------------------------------------------------ use */

/* Security-relevant: the live egress hook admits a connection on true. It
 * fails closed: a host that does not parse, or a pattern or range that
 * does not (a scope filled in by hand), admits nothing. */
bool shk_cap_scope_allows_host(const shk_cap_scope *s, const char *host, uint16_t port)
{
  if (s->cls != SHK_CAP_NET_EGRESS)
    return false;
  bool port_ok = s->n_ports == 0 || port == 0;
  for (size_t i = 0; i < s->n_ports && !port_ok; i++)
    port_ok = shk_port_range_contains(&s->ports[i], port);
  if (!port_ok)
    return false;
  shk_host h;
  if (shk_host_parse(host, strlen(host), &h, NULL, NULL) < 0)
    return false;
  if (h.kind != SHK_HOST_NAME) {
    /* An address is matched against the CIDRs only: a domain pattern
     * never admits an address, whatever it resolves to. */
    for (size_t i = 0; i < s->cidrs.n; i++) {
      shk_cidr c;
      if (shk_cidr_parse(s->cidrs.v[i], strlen(s->cidrs.v[i]), &c, NULL) == 0 &&
          shk_cidr_contains(&c, &h.ip))
        return true;
    }
    return false;
  }
  for (size_t i = 0; i < s->domains.n; i++) {
    shk_host_pattern p;
    if (shk_host_pattern_parse(s->domains.v[i], strlen(s->domains.v[i]), 0, &p, NULL) == 0 &&
        shk_host_pattern_matches(&p, &h, port))
      return true;
  }
  return false;
}

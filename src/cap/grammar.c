/* The capability grammar: the eight classes, their scopes as JSON, and the
 * subset relation that attenuation and manifests rest on.
 *
 * Every check here answers "does A grant anything B does not?". A wrong
 * "no" would widen authority, so each comparison is written to fail closed:
 * anything it cannot prove covered is not covered. */
#include "shinken/cap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
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

/* ------------------------------------------------------------ validation */

/* A DNS name in canonical form: lowercase letters, digits and hyphens in
 * labels of 1..63 bytes, no leading or trailing hyphen, at most 253 bytes.
 * Anything else (uppercase, underscores, percent signs, a trailing dot) is
 * refused rather than normalized: grants are compared textually, so only
 * one spelling of a name may exist. */
static bool valid_dns_name(const char *s, size_t n)
{
  if (n == 0 || n > 253)
    return false;
  size_t label = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '.') {
      if (label == 0 || s[i - 1] == '-')
        return false;
      label = 0;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok || (c == '-' && label == 0) || ++label > 63)
      return false;
  }
  return label > 0 && s[n - 1] != '-';
}

typedef struct pattern {
  int wild;          /* 0 exact, 1 "*." subdomains only, 2 "**." apex and subdomains */
  const char *host;
  size_t host_len;
  int port;          /* -1: any port */
} pattern;

static bool parse_pattern(const char *s, pattern *p)
{
  p->wild = 0;
  p->port = -1;
  if (!strncmp(s, "**.", 3)) {
    p->wild = 2;
    s += 3;
  } else if (!strncmp(s, "*.", 2)) {
    p->wild = 1;
    s += 2;
  }
  const char *colon = strchr(s, ':');
  p->host = s;
  p->host_len = colon ? (size_t)(colon - s) : strlen(s);
  if (colon) {
    char *end;
    if (!colon[1] || colon[1] == '0' || colon[1] == '+' || colon[1] == '-')
      return false;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
      return false;
    p->port = (int)port;
  }
  return valid_dns_name(p->host, p->host_len);
}

/* True when name `a` equals `b` or is a subdomain of it. */
static bool name_within(const char *a, size_t an, const char *b, size_t bn, bool strict)
{
  if (an == bn)
    return !strict && !memcmp(a, b, an);
  return an > bn && a[an - bn - 1] == '.' && !memcmp(a + an - bn, b, bn);
}

static bool pattern_covers(const pattern *parent, const pattern *child)
{
  if (parent->port >= 0 && parent->port != child->port)
    return false;
  const char *c = child->host, *p = parent->host;
  size_t cn = child->host_len, pn = parent->host_len;
  switch (parent->wild) {
  case 0: /* exact: covers only the same exact name */
    return child->wild == 0 && cn == pn && !memcmp(c, p, cn);
  case 1: /* *.p covers names strictly below p */
    return child->wild == 0 || child->wild == 1 ? name_within(c, cn, p, pn, child->wild == 0)
                                                : name_within(c, cn, p, pn, true);
  default: /* **.p covers p and everything below */
    return name_within(c, cn, p, pn, false);
  }
}

typedef struct cidr {
  int family;
  uint8_t addr[16];
  int prefix;
} cidr;

static bool parse_cidr(const char *s, cidr *c)
{
  char buf[64];
  const char *slash = strchr(s, '/');
  size_t n = slash ? (size_t)(slash - s) : strlen(s);
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (inet_pton(AF_INET, buf, c->addr) == 1)
    c->family = AF_INET;
  else if (inet_pton(AF_INET6, buf, c->addr) == 1)
    c->family = AF_INET6;
  else
    return false;
  int max = c->family == AF_INET ? 32 : 128;
  c->prefix = max;
  if (slash) {
    char *end;
    if (!slash[1] || slash[1] == '+' || slash[1] == '-')
      return false;
    long p = strtol(slash + 1, &end, 10);
    if (*end || p < 0 || p > max)
      return false;
    c->prefix = (int)p;
  }
  /* Host bits must be zero: "10.0.0.1/8" is ambiguous about intent. */
  for (int bit = c->prefix; bit < max; bit++)
    if (c->addr[bit / 8] & (0x80 >> (bit % 8)))
      return false;
  return true;
}

static bool cidr_covers(const cidr *parent, const cidr *child)
{
  if (parent->family != child->family || child->prefix < parent->prefix)
    return false;
  for (int bit = 0; bit < parent->prefix; bit++) {
    uint8_t m = 0x80 >> (bit % 8);
    if ((parent->addr[bit / 8] & m) != (child->addr[bit / 8] & m))
      return false;
  }
  return true;
}

/* An absolute path without ".", ".." or empty components and without a
 * trailing slash (except "/"): a prefix test on such paths is a test on
 * directories, so "/w" never covers "/work". */
static bool valid_path(const char *s)
{
  if (s[0] != '/')
    return false;
  if (!strcmp(s, "/"))
    return true;
  for (const char *p = s; *p;) {
    const char *q = p + 1;
    const char *e = strchr(q, '/');
    size_t n = e ? (size_t)(e - q) : strlen(q);
    if (n == 0 || (n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.'))
      return false;
    p = q + n;
  }
  return true;
}

static bool path_within(const char *child, const char *parent)
{
  size_t pn = strlen(parent);
  if (!strcmp(parent, "/"))
    return true;
  return !strncmp(child, parent, pn) && (child[pn] == '\0' || child[pn] == '/');
}

static bool valid_token(const char *s)
{
  if (!*s || strlen(s) > 256)
    return false;
  for (; *s; s++)
    if ((unsigned char)*s < 0x21 || *s == 0x7f)
      return false;
  return true;
}

/* ------------------------------------------------------------ parsing */

typedef enum field_kind { F_DOMAINS, F_CIDRS, F_PORTS, F_PATHS, F_TOKENS, F_BOOL, F_ENUM } field_kind;

typedef struct field {
  const char *name;
  field_kind kind;
  size_t off;           /* offset of the shk_cap_strv or bool in shk_cap_scope */
  const char *e0, *e1;  /* F_ENUM: the false and the true spelling */
} field;

#define STRV(f) offsetof(shk_cap_scope, f)
#define FLAG(f) offsetof(shk_cap_scope, f)

static const field net_fields[] = {
  { "domains", F_DOMAINS, STRV(domains), NULL, NULL },
  { "cidrs", F_CIDRS, STRV(cidrs), NULL, NULL },
  { "ports", F_PORTS, 0, NULL, NULL },
  { "tls_inspect", F_BOOL, FLAG(tls_inspect), NULL, NULL },
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

static int parse_ports(json_t *v, shk_cap_scope *s, char *err, size_t errlen)
{
  if (!json_is_array(v)) {
    snprintf(err, errlen, "ports: expected an array of ports or \"LO-HI\" ranges");
    return -EINVAL;
  }
  s->n_ports = json_array_size(v);
  s->ports = shk__xcalloc(s->n_ports ? s->n_ports : 1, sizeof *s->ports);
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) {
    long lo, hi;
    if (json_is_integer(e)) {
      lo = hi = (long)json_integer_value(e);
    } else if (json_is_string(e)) {
      char tail;
      if (sscanf(json_string_value(e), "%5ld-%5ld%c", &lo, &hi, &tail) != 2 ||
          strchr(json_string_value(e), '+') || strchr(json_string_value(e), ' '))
        goto bad;
    } else {
      goto bad;
    }
    if (lo < 1 || hi > 65535 || lo > hi)
      goto bad;
    s->ports[i].lo = (uint16_t)lo;
    s->ports[i].hi = (uint16_t)hi;
  }
  return 0;
bad:
  snprintf(err, errlen, "ports[%zu]: expected a port 1-65535 or a range \"LO-HI\"", i);
  return -EINVAL;
}

static int parse_strv(const field *f, json_t *v, shk_cap_strv *out, char *err, size_t errlen)
{
  if (!json_is_array(v)) {
    snprintf(err, errlen, "%s: expected an array of strings", f->name);
    return -EINVAL;
  }
  out->n = json_array_size(v);
  out->v = shk__xcalloc(out->n ? out->n : 1, sizeof(char *));
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) {
    const char *s = json_string_value(e);
    bool ok = s && strlen(s) == json_string_length(e);
    pattern p;
    cidr c;
    if (ok) {
      switch (f->kind) {
      case F_DOMAINS: ok = parse_pattern(s, &p); break;
      case F_CIDRS: ok = parse_cidr(s, &c); break;
      case F_PATHS: ok = valid_path(s); break;
      case F_TOKENS: ok = valid_token(s); break;
      case F_PORTS: case F_BOOL: case F_ENUM: ok = false; break;
      }
    }
    if (!ok) {
      const char *what = f->kind == F_DOMAINS ? "a lowercase host, *.host or **.host with an optional :port"
                       : f->kind == F_CIDRS ? "an IP address or CIDR with zero host bits"
                       : f->kind == F_PATHS ? "an absolute path without '.', '..', empty components or a trailing '/'"
                       : "a non-empty printable token";
      snprintf(err, errlen, "%s[%zu]: expected %s", f->name, i, what);
      return -EINVAL;
    }
    out->v[i] = shk__xstrdup(s);
  }
  return 0;
}

int shk_cap_scope_parse(shk_cap_class cls, const char *json, shk_cap_scope *out,
                        char *err, size_t errlen)
{
  memset(out, 0, sizeof *out);
  out->cls = cls;
  if ((unsigned)cls >= SHK_CAP__COUNT) {
    snprintf(err, errlen, "unknown capability class");
    return -EINVAL;
  }
  json_error_t jerr;
  json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    snprintf(err, errlen, "scope is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
             jerr.column);
    return -EINVAL;
  }
  int r = 0;
  if (!json_is_object(root)) {
    snprintf(err, errlen, "scope must be a JSON object");
    r = -EINVAL;
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    const field *f = class_fields[cls];
    while (f->name && strcmp(f->name, key))
      f++;
    if (!f->name) {
      if (cls == SHK_CAP_CREDENTIALS && !strcmp(key, "never_raw")) {
        /* A raw credential is never handed to an agent: the broker injects
         * it outside the sandbox. Asking otherwise is refused, not ignored. */
        if (!json_is_true(v)) {
          snprintf(err, errlen, "never_raw: must be true (raw credentials are never granted)");
          r = -EINVAL;
          goto out;
        }
        continue;
      }
      snprintf(err, errlen, "unknown field '%s' for class %s", key, class_names[cls]);
      r = -EINVAL;
      goto out;
    }
    bool *flag = (bool *)((char *)out + f->off);
    switch (f->kind) {
    case F_PORTS:
      r = parse_ports(v, out, err, errlen);
      break;
    case F_BOOL:
      if (!json_is_boolean(v)) {
        snprintf(err, errlen, "%s: expected true or false", f->name);
        r = -EINVAL;
      } else {
        *flag = json_is_true(v);
      }
      break;
    case F_ENUM: {
      const char *s = json_string_value(v);
      if (s && !strcmp(s, f->e0)) {
        *flag = false;
      } else if (s && !strcmp(s, f->e1)) {
        *flag = true;
      } else {
        snprintf(err, errlen, "%s: expected \"%s\" or \"%s\"", f->name, f->e0, f->e1);
        r = -EINVAL;
      }
      break;
    }
    case F_DOMAINS: case F_CIDRS: case F_PATHS: case F_TOKENS:
      r = parse_strv(f, v, (shk_cap_strv *)((char *)out + f->off), err, errlen);
      break;
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

static void strv_clear(shk_cap_strv *v)
{
  for (size_t i = 0; i < v->n; i++)
    free(v->v[i]);
  free(v->v);
  v->v = NULL;
  v->n = 0;
}

void shk_cap_scope_clear(shk_cap_scope *s)
{
  strv_clear(&s->domains);
  strv_clear(&s->cidrs);
  strv_clear(&s->read);
  strv_clear(&s->write);
  strv_clear(&s->deny);
  strv_clear(&s->device_ids);
  strv_clear(&s->paths);
  strv_clear(&s->broker_scopes);
  free(s->ports);
  shk_cap_class cls = s->cls;
  memset(s, 0, sizeof *s);
  s->cls = cls;
}

char *shk_cap_scope_to_json(const shk_cap_scope *s)
{
  json_t *o = json_object();
  for (const field *f = class_fields[s->cls]; f->name; f++) {
    const bool *flag = (const bool *)((const char *)s + f->off);
    switch (f->kind) {
    case F_PORTS: {
      json_t *a = json_array();
      for (size_t i = 0; i < s->n_ports; i++) {
        if (s->ports[i].lo == s->ports[i].hi) {
          json_array_append_new(a, json_integer(s->ports[i].lo));
        } else {
          char buf[16];
          snprintf(buf, sizeof buf, "%u-%u", s->ports[i].lo, s->ports[i].hi);
          json_array_append_new(a, json_string(buf));
        }
      }
      json_object_set_new(o, f->name, a);
      break;
    }
    case F_BOOL:
      json_object_set_new(o, f->name, json_boolean(*flag));
      break;
    case F_ENUM:
      json_object_set_new(o, f->name, json_string(*flag ? f->e1 : f->e0));
      break;
    case F_DOMAINS: case F_CIDRS: case F_PATHS: case F_TOKENS: {
      const shk_cap_strv *v = (const shk_cap_strv *)((const char *)s + f->off);
      json_t *a = json_array();
      for (size_t i = 0; i < v->n; i++)
        json_array_append_new(a, json_string(v->v[i]));
      json_object_set_new(o, f->name, a);
      break;
    }
    }
  }
  if (s->cls == SHK_CAP_CREDENTIALS)
    json_object_set_new(o, "never_raw", json_true());
  char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  if (!text)
    shk__die(1, "out of memory");
  return text;
}

/* ------------------------------------------------------------ subset */

static bool strv_covered(field_kind kind, const shk_cap_strv *child, const shk_cap_strv *parent,
                         const char **bad)
{
  for (size_t i = 0; i < child->n; i++) {
    bool ok = false;
    for (size_t j = 0; j < parent->n && !ok; j++) {
      switch (kind) {
      case F_DOMAINS: {
        pattern pc, pp;
        ok = parse_pattern(child->v[i], &pc) && parse_pattern(parent->v[j], &pp) &&
             pattern_covers(&pp, &pc);
        break;
      }
      case F_CIDRS: {
        cidr cc, cp;
        ok = parse_cidr(child->v[i], &cc) && parse_cidr(parent->v[j], &cp) && cidr_covers(&cp, &cc);
        break;
      }
      case F_PATHS:
        ok = path_within(child->v[i], parent->v[j]);
        break;
      case F_TOKENS:
        ok = !strcmp(child->v[i], parent->v[j]);
        break;
      case F_PORTS: case F_BOOL: case F_ENUM:
        ok = false;
        break;
      }
    }
    if (!ok) {
      *bad = child->v[i];
      return false;
    }
  }
  return true;
}

bool shk_cap_scope_subset(const shk_cap_scope *child, const shk_cap_scope *parent, char *why,
                          size_t whylen)
{
  char dummy[1];
  if (!why) {
    why = dummy;
    whylen = sizeof dummy;
  }
  if (child->cls != parent->cls) {
    snprintf(why, whylen, "class %s is not %s", class_names[child->cls], class_names[parent->cls]);
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
        snprintf(why, whylen, "ports: the parent restricts ports and the child does not");
        return false;
      }
      for (size_t i = 0; i < child->n_ports && parent->n_ports; i++) {
        bool ok = false;
        for (size_t j = 0; j < parent->n_ports && !ok; j++)
          ok = child->ports[i].lo >= parent->ports[j].lo && child->ports[i].hi <= parent->ports[j].hi;
        if (!ok) {
          snprintf(why, whylen, "ports: %u-%u is not within the parent's ports", child->ports[i].lo,
                   child->ports[i].hi);
          return false;
        }
      }
      break;
    case F_BOOL:
      /* tls_inspect narrows (more is inspected), every other flag grants. */
      if (f->off == FLAG(tls_inspect) ? (pf && !cf) : (cf && !pf)) {
        snprintf(why, whylen, "%s: the parent does not allow %s", f->name, cf ? "true" : "false");
        return false;
      }
      break;
    case F_ENUM:
      /* The second spelling ("exclusive", "any") is the wider one. */
      if (cf && !pf) {
        snprintf(why, whylen, "%s: \"%s\" is wider than the parent's \"%s\"", f->name, f->e1, f->e0);
        return false;
      }
      break;
    case F_DOMAINS: case F_CIDRS: case F_PATHS: case F_TOKENS: {
      const shk_cap_strv *cv = (const shk_cap_strv *)((const char *)child + f->off);
      const shk_cap_strv *pv = (const shk_cap_strv *)((const char *)parent + f->off);
      if (f->off == STRV(deny)) {
        /* Denials narrow: the child must keep every denial of its parent. */
        if (!strv_covered(F_PATHS, pv, cv, &bad)) {
          snprintf(why, whylen, "deny: the parent's denial of %s is dropped", bad);
          return false;
        }
      } else if (!strv_covered(f->kind, cv, pv, &bad)) {
        snprintf(why, whylen, "%s: %s is not within the parent's %s", f->name, bad, f->name);
        return false;
      }
      break;
    }
    }
  }
  return true;
}

/* ------------------------------------------------------------ use */

bool shk_cap_scope_allows_host(const shk_cap_scope *s, const char *host, uint16_t port)
{
  if (s->cls != SHK_CAP_NET_EGRESS)
    return false;
  bool port_ok = s->n_ports == 0 || port == 0;
  for (size_t i = 0; i < s->n_ports && !port_ok; i++)
    port_ok = port >= s->ports[i].lo && port <= s->ports[i].hi;
  if (!port_ok)
    return false;
  cidr addr;
  if (strchr(host, '/') == NULL && parse_cidr(host, &addr)) {
    /* An address literal is matched against the CIDRs only: a domain
     * pattern never admits an address, whatever it resolves to. */
    for (size_t i = 0; i < s->cidrs.n; i++) {
      cidr c;
      if (parse_cidr(s->cidrs.v[i], &c) && cidr_covers(&c, &addr))
        return true;
    }
    return false;
  }
  pattern want = { 0, host, strlen(host), port ? port : -1 };
  for (size_t i = 0; i < s->domains.n; i++) {
    pattern p;
    if (!parse_pattern(s->domains.v[i], &p))
      continue;
    /* For a lookup (port 0) any pattern naming the host will do. */
    if (port == 0)
      p.port = -1;
    if (pattern_covers(&p, &want))
      return true;
  }
  return false;
}

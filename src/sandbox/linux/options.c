/* SPDX-License-Identifier: Apache-2.0 */
/* The options of `shinken run` (its argv parser) and their JSON form, the
 * profile. Both feed one shk_sandbox_opts; nothing here touches the
 * filesystem except reading a profile file. */
#include "shinken/sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "options-internal.h"
#include "sandbox-internal.h"
#include "shinken/match.h"

const char *shk_access_name(shk_access a)
{
  switch (a) {
  case SHK_ACCESS_WRITE: return "write";
  case SHK_ACCESS_READ: return "read";
  case SHK_ACCESS_DENY: return "deny";
  }
  return "?";
}

const char *shk_net_mode_name(shk_net_mode m)
{
  switch (m) {
  case SHK_NET_NONE: return "none";
  case SHK_NET_PROXY: return "proxy";
  case SHK_NET_HOST: return "host";
  }
  return "?";
}

void shk_sandbox_opts_init(shk_sandbox_opts *o)
{
  memset(o, 0, sizeof *o);
  o->net = SHK_NET_NONE;
  o->uid = o->gid = -1;
  o->tmpfs_size = SHK_SANDBOX_TMPFS_SIZE;
}

static void paths_free(shk_sandbox_paths *p)
{
  for (size_t i = 0; i < p->n; i++)
    free(p->v[i]);
  free(p->v);
  p->v = NULL;
  p->n = 0;
}

void shk_sandbox_opts_free(shk_sandbox_opts *o)
{
  paths_free(&o->write);
  paths_free(&o->read);
  paths_free(&o->deny);
  paths_free(&o->allow_domains);
  paths_free(&o->deny_domains);
  paths_free(&o->allow_cidrs);
  paths_free(&o->resolve);
  paths_free(&o->env);
  paths_free(&o->ceiling);
  free(o->hostname);
  free(o->machine_id);
  free(o->report);
  free(o->proxy_config);
  free(o->dns_upstream);
  const char *home = o->home;
  shk_sandbox_opts_init(o);
  o->home = home;
}

/* One sentence about bad input, and -EINVAL. */
#define fail(err, ...) shk__error_set(err, -EINVAL, __VA_ARGS__)
#define nomem(err) shk__error_set(err, -ENOMEM, "out of memory")

static int add_path(shk_sandbox_paths *p, const char *opt, const char *s, shk_error *err)
{
  if (!*s)
    return fail(err, "%s: empty value", opt);
  char *copy = strdup(s);
  char **v = copy ? realloc(p->v, (p->n + 1) * sizeof *p->v) : NULL;
  if (!v) {
    free(copy);
    return nomem(err);
  }
  p->v = v;
  p->v[p->n++] = copy;
  return 0;
}

int shk_sandbox_parse_size(const char *s, uint64_t *out)
{
  if (!isdigit((unsigned char)*s))
    return -EINVAL;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno)
    return -EINVAL;
  unsigned shift = 0;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  case 'T': case 't': shift = 40; end++; break;
  default: break;
  }
  if (*end || v == 0 || v > (UINT64_MAX >> shift))
    return -EINVAL;
  *out = (uint64_t)v << shift;
  return 0;
}

int shk_sandbox_parse_cores(const char *s, uint32_t *out)
{
  uint64_t whole = 0, frac = 0;
  unsigned ndec = 0;
  const char *p = s;
  if (!isdigit((unsigned char)*p))
    return -EINVAL;
  for (; isdigit((unsigned char)*p); p++) {
    whole = whole * 10 + (uint64_t)(*p - '0');
    if (whole > 1000000)
      return -EINVAL;
  }
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p))
      return -EINVAL;
    for (; isdigit((unsigned char)*p); p++) {
      if (++ndec > 3)
        return -EINVAL;
      frac = frac * 10 + (uint64_t)(*p - '0');
    }
  }
  if (*p)
    return -EINVAL;
  for (; ndec < 3; ndec++)
    frac *= 10;
  uint64_t milli = whole * 1000 + frac;
  if (milli == 0)
    return -EINVAL;
  *out = (uint32_t)milli;
  return 0;
}

static int set_net(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  if (!strcmp(v, "none"))
    o->net = SHK_NET_NONE;
  else if (!strcmp(v, "proxy"))
    o->net = SHK_NET_PROXY;
  else if (!strcmp(v, "host"))
    o->net = SHK_NET_HOST;
  else
    return fail(err, "--net: expected none, proxy or host, not '%s'", v);
  return 0;
}

static int set_mem(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  if (shk_sandbox_parse_size(v, &o->mem) < 0)
    return fail(err, "--mem: expected a size such as 512M, not '%s'", v);
  return 0;
}

static int set_pids(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  char *end;
  errno = 0;
  unsigned long long n = isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : 0;
  if (n == 0 || errno || *end || n > 1000000000ULL)
    return fail(err, "--pids: expected a positive integer, not '%s'", v);
  o->pids = n;
  return 0;
}

static int set_cpu(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  if (shk_sandbox_parse_cores(v, &o->cpu_milli) < 0)
    return fail(err, "--cpu: expected a positive number of cores such as 1.5, not '%s'", v);
  return 0;
}

static int set_string(char **dst, const char *v, shk_error *err);

/* --env NAME: an environment variable's name, as the shell allows one. */
static int add_env(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  bool ok = (isalpha((unsigned char)*v) || *v == '_') && strlen(v) < 256;
  for (const char *c = v; ok && *c; c++)
    ok = isalnum((unsigned char)*c) || *c == '_';
  if (!ok)
    return fail(err, "--env: expected the name of a variable (letters, digits, '_'), not '%s'", v);
  return add_path(&o->env, "--env", v, err);
}

static int set_tmpfs_size(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  if (shk_sandbox_parse_size(v, &o->tmpfs_size) < 0 || o->tmpfs_size < 1024 * 1024)
    return fail(err, "--tmpfs-size: expected a size of at least 1M such as 512M, not '%s'", v);
  return 0;
}

/* --hostname NAME: a host name of one to 63 letters, digits, '-' and '.'. */
static int set_hostname(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  size_t n = strlen(v);
  bool ok = n > 0 && n <= 63 && v[0] != '-' && v[0] != '.';
  for (const char *c = v; ok && *c; c++)
    ok = isalnum((unsigned char)*c) || *c == '-' || *c == '.';
  if (!ok)
    return fail(err, "--hostname: expected 1 to 63 letters, digits, '-' and '.', not '%s'", v);
  return set_string(&o->hostname, v, err);
}

/* --machine-id ID: 32 hexadecimal digits, as /etc/machine-id holds. */
static int set_machine_id(shk_sandbox_opts *o, const char *v, shk_error *err)
{
  bool ok = strlen(v) == 32;
  for (const char *c = v; ok && *c; c++)
    ok = isxdigit((unsigned char)*c) && !isupper((unsigned char)*c);
  if (!ok)
    return fail(err, "--machine-id: expected 32 lowercase hexadecimal digits, not '%s'", v);
  return set_string(&o->machine_id, v, err);
}

/* Replaces the string *DST with a copy of V. */
static int set_string(char **dst, const char *v, shk_error *err)
{
  char *copy = strdup(v);
  if (!copy)
    return nomem(err);
  free(*dst);
  *dst = copy;
  return 0;
}

/* A domain pattern for the proxy, checked where it is given so that the
 * error names the option: the proxy's own parser reads it again. */
static int check_domain(const char *opt, const char *v, shk_error *err)
{
  shk_host_pattern hp;
  shk_error perr;
  if (!strcmp(v, "*"))
    return 0; /* refused by the proxy unless its configuration allows every host */
  if (shk_host_pattern_parse(v, strlen(v), 0, &hp, &perr) == 0)
    return 0;
  if (strstr(v, "://") || strchr(v, '/'))
    return fail(err, "%s '%s': a pattern is a host name with an optional :port, not a URL "
                "(for example example.org or **.example.org:443)", opt, v);
  return fail(err, "%s '%s': %s", opt, v, perr.message);
}

static int check_cidr(const char *v, shk_error *err)
{
  shk_cidr c;
  shk_error perr;
  if (shk_cidr_parse(v, strlen(v), &c, &perr) < 0)
    return fail(err, "--allow-cidr '%s': %s", v, perr.message);
  return 0;
}

/* An address, bare or an IPv6 one in brackets, into OUT. */
static int parse_addr(const char *s, size_t len, shk_ip *out)
{
  if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
    s++;
    len -= 2;
  }
  return shk_ip_parse(s, len, out, NULL);
}

/* HOST:ADDR, the host a name (not an address), ADDR an IP address. */
static int check_resolve(const char *v, shk_error *err)
{
  const char *colon = strchr(v, ':');
  shk_host h;
  shk_ip ip;
  if (!colon)
    return fail(err, "--resolve '%s': expected HOST:ADDRESS, such as mirror.corp:10.1.2.3", v);
  if (shk_host_parse(v, (size_t)(colon - v), &h, NULL, NULL) < 0 || h.kind != SHK_HOST_NAME)
    return fail(err, "--resolve '%s': '%.*s' is not a host name", v, (int)(colon - v), v);
  if (parse_addr(colon + 1, strlen(colon + 1), &ip) < 0)
    return fail(err, "--resolve '%s': '%s' is not an IP address", v, colon + 1);
  return 0;
}

/* ADDR[:PORT], an IPv6 address in brackets. */
static int check_resolver(const char *v, shk_error *err)
{
  const char *port = NULL;
  size_t alen = strlen(v);
  if (v[0] == '[') {
    const char *close = strchr(v, ']');
    if (close && close[1] == ':')
      port = close + 2;
    alen = close ? (size_t)(close - v) + 1 : alen;
  } else if (strchr(v, ':') == strrchr(v, ':') && strchr(v, ':')) {
    port = strchr(v, ':') + 1;
    alen = (size_t)(port - 1 - v);
  }
  shk_ip ip;
  uint16_t pn;
  if (parse_addr(v, alen, &ip) < 0 || (port && shk_port_parse(port, strlen(port), &pn, NULL) < 0))
    return fail(err, "--dns-upstream '%s': expected ADDRESS[:PORT] (an IPv6 address in brackets)",
                v);
  return 0;
}

static int set_id(long *dst, const char *opt, const char *v, shk_error *err)
{
  char *end;
  errno = 0;
  unsigned long long n = isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : ULLONG_MAX;
  if (n == ULLONG_MAX || errno || *end || n >= 0xffffffffULL)
    return fail(err, "%s: expected a numeric id such as 0 or 1000, not '%s'", opt, v);
  *dst = (long)n;
  return 0;
}

static int apply_profile_file(shk_sandbox_opts *o, const char *file, shk_error *err)
{
  char *text;
  size_t len;
  int r = shk__read_file(file, &text, &len);
  if (r < 0)
    return shk__error_set(err, r == -ENOMEM ? r : -EINVAL, "--profile %s: %s", file, strerror(-r));
  if (strlen(text) != len) {
    free(text);
    return fail(err, "--profile %s: contains a NUL byte", file);
  }
  r = shk_sandbox_profile_apply(o, text, file, err);
  free(text);
  return r;
}

/* The options that take a value, and the flags. One table serves the
 * command line, the profile keys and the usage text, so the three cannot
 * drift apart. */
static const struct opt {
  const char *name;
  shk__opt_id id;
  const char *value; /* the value's name in the usage; NULL for a flag */
  shk__opt_kind kind;
  bool egress;
  const char *help;
} opts[] = {
  { "write", SHK__OPT_WRITE, "PATH", SHK__KIND_GRANTS, false,
    "make PATH writable (repeatable)" },
  { "read", SHK__OPT_READ, "PATH", SHK__KIND_GRANTS, false,
    "show PATH read-only, also inside a writable root (repeatable)" },
  { "deny", SHK__OPT_DENY, "PATH", SHK__KIND_LIMITS, false,
    "mask PATH, even inside a writable root (repeatable)" },
  { "restrict-reads", SHK__OPT_RESTRICT_READS, NULL, SHK__KIND_NARROWING, false,
    "show only the --read roots, the system directories and the writable roots" },
  { "read-only", SHK__OPT_READ_ONLY, NULL, SHK__KIND_NARROWING, false,
    "do not make the current directory writable" },
  { "net", SHK__OPT_NET, "none|proxy|host", SHK__KIND_ORDERED, true,
    "the network: none (default), the egress proxy, or the host's" },
  { "allow-domain", SHK__OPT_ALLOW_DOMAIN, "PATTERN", SHK__KIND_GRANTS, true,
    "--net proxy: let the proxy reach PATTERN (host, *.host, **.host[:PORT])" },
  { "deny-domain", SHK__OPT_DENY_DOMAIN, "PATTERN", SHK__KIND_LIMITS, true,
    "--net proxy: never let the proxy reach PATTERN" },
  { "allow-cidr", SHK__OPT_ALLOW_CIDR, "CIDR", SHK__KIND_GRANTS, true,
    "--net proxy: a non-public range the proxy may dial (an internal mirror's)" },
  { "resolve", SHK__OPT_RESOLVE, "HOST:ADDR", SHK__KIND_ROUTING, true,
    "--net proxy: pin HOST to ADDR, as curl --resolve does (repeatable)" },
  { "dns-upstream", SHK__OPT_DNS_UPSTREAM, "ADDR[:PORT]", SHK__KIND_ROUTING, true,
    "--net proxy: the resolver the proxy asks instead of the system's" },
  { "proxy-config", SHK__OPT_PROXY_CONFIG, "FILE", SHK__KIND_ROUTING, true,
    "--net proxy: the egress proxy's configuration (shinken-proxy(1))" },
  { "mem", SHK__OPT_MEM, "SIZE", SHK__KIND_CEILING, false,
    "memory limit of the session's cgroup (512M, 2G)" },
  { "pids", SHK__OPT_PIDS, "N", SHK__KIND_CEILING, false,
    "process limit of the session's cgroup" },
  { "cpu", SHK__OPT_CPU, "CORES", SHK__KIND_CEILING, false,
    "CPU limit of the session's cgroup, in cores (0.5, 2)" },
  { "uid", SHK__OPT_UID, "N", SHK__KIND_FREE, false,
    "the uid inside (default: the caller's; 0 for a tool that needs root)" },
  { "gid", SHK__OPT_GID, "N", SHK__KIND_FREE, false, "the gid inside (default: the caller's)" },
  { "env-clean", SHK__OPT_ENV_CLEAN, NULL, SHK__KIND_NARROWING, false,
    "start the command from a minimal environment" },
  { "env", SHK__OPT_ENV, "NAME", SHK__KIND_FREE, false,
    "pass the variable NAME although it would be removed (repeatable)" },
  { "tmpfs-size", SHK__OPT_TMPFS_SIZE, "SIZE", SHK__KIND_FREE, false,
    "how much each private tmpfs (/tmp, /var/tmp, /dev/shm, /run) may hold (default 1G)" },
  { "hostname", SHK__OPT_HOSTNAME, "NAME", SHK__KIND_FREE, false,
    "the sandbox's host name (default: shinken)" },
  { "machine-id", SHK__OPT_MACHINE_ID, "ID", SHK__KIND_FREE, false,
    "its /etc/machine-id, 32 hex digits (default: a new one per run)" },
  { "allow-degraded", SHK__OPT_ALLOW_DEGRADED, NULL, SHK__KIND_WIDENING, false,
    "run even where this host lacks a layer (each is named on stderr)" },
  { "profile", SHK__OPT_PROFILE, "FILE", SHK__KIND_NONE, false,
    "read options from a JSON profile, where it appears" },
  { "report", SHK__OPT_REPORT, "FILE", SHK__KIND_FREE, false,
    "write a JSON report of what was enforced once the sandbox is gone" },
  { "verbose", SHK__OPT_VERBOSE, NULL, SHK__KIND_FREE, false,
    "say the session on stderr, and each refused connection as it happens" },
  { "panel", SHK__OPT_PANEL, NULL, SHK__KIND_FREE, true,
    "--net proxy: serve the Permission Panel for this run on loopback (shinken-panel(1))" },
  { "no-observe", SHK__OPT_NO_OBSERVE, NULL, SHK__KIND_FREE, false,
    "do not count the writes the sandbox refuses (each write then costs nothing extra)" },
  { "help", SHK__OPT_HELP, NULL, SHK__KIND_NONE, false, "print this help" },
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const struct opt *opt_by_id(shk__opt_id id)
{
  for (size_t i = 0; i < NOPTS; i++)
    if (opts[i].id == id)
      return &opts[i];
  return NULL;
}

shk__opt_kind shk__opt_kind_of(shk__opt_id id)
{
  const struct opt *o = opt_by_id(id);
  return o ? o->kind : SHK__KIND_NONE;
}

const char *shk__opt_name(shk__opt_id id)
{
  const struct opt *o = opt_by_id(id);
  return o ? o->name : "?";
}

bool shk__opt_is_egress(shk__opt_id id)
{
  const struct opt *o = opt_by_id(id);
  return o && o->egress;
}

shk_sandbox_paths *shk__opt_list(shk_sandbox_opts *o, shk__opt_id id)
{
  switch ((int)id) {
  case SHK__OPT_WRITE: return &o->write;
  case SHK__OPT_READ: return &o->read;
  case SHK__OPT_DENY: return &o->deny;
  case SHK__OPT_ALLOW_DOMAIN: return &o->allow_domains;
  case SHK__OPT_DENY_DOMAIN: return &o->deny_domains;
  case SHK__OPT_ALLOW_CIDR: return &o->allow_cidrs;
  case SHK__OPT_RESOLVE: return &o->resolve;
  case SHK__OPT_ENV: return &o->env;
  default: return NULL;
  }
}

bool shk_sandbox_opt_describe(size_t i, const char **name, const char **value, const char **help)
{
  if (i >= NOPTS)
    return false;
  *name = opts[i].name;
  *value = opts[i].value;
  *help = opts[i].help;
  return true;
}

static const struct opt *find_opt(const char *name, size_t len)
{
  for (size_t i = 0; i < NOPTS; i++)
    if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
      return &opts[i];
  return NULL;
}

static int apply_value(shk_sandbox_opts *o, shk__opt_id id, const char *v, shk_error *err)
{
  int r = -EINVAL;
  switch (id) {
  case SHK__OPT_WRITE: r = add_path(&o->write, "--write", v, err); break;
  case SHK__OPT_READ: r = add_path(&o->read, "--read", v, err); break;
  case SHK__OPT_DENY: r = add_path(&o->deny, "--deny", v, err); break;
  case SHK__OPT_NET: r = set_net(o, v, err); break;
  case SHK__OPT_MEM: r = set_mem(o, v, err); break;
  case SHK__OPT_PIDS: r = set_pids(o, v, err); break;
  case SHK__OPT_CPU: r = set_cpu(o, v, err); break;
  case SHK__OPT_UID: r = set_id(&o->uid, "--uid", v, err); break;
  case SHK__OPT_GID: r = set_id(&o->gid, "--gid", v, err); break;
  case SHK__OPT_REPORT: r = set_string(&o->report, v, err); break;
  case SHK__OPT_PROXY_CONFIG: r = set_string(&o->proxy_config, v, err); break;
  case SHK__OPT_PROFILE: r = apply_profile_file(o, v, err); break;
  case SHK__OPT_ALLOW_DOMAIN:
  case SHK__OPT_DENY_DOMAIN: {
    const char *opt = id == SHK__OPT_ALLOW_DOMAIN ? "--allow-domain" : "--deny-domain";
    r = check_domain(opt, v, err);
    if (r == 0)
      r = add_path(id == SHK__OPT_ALLOW_DOMAIN ? &o->allow_domains : &o->deny_domains, opt, v, err);
    break;
  }
  case SHK__OPT_ALLOW_CIDR:
    if ((r = check_cidr(v, err)) == 0)
      r = add_path(&o->allow_cidrs, "--allow-cidr", v, err);
    break;
  case SHK__OPT_RESOLVE:
    if ((r = check_resolve(v, err)) == 0)
      r = add_path(&o->resolve, "--resolve", v, err);
    break;
  case SHK__OPT_DNS_UPSTREAM:
    if ((r = check_resolver(v, err)) == 0)
      r = set_string(&o->dns_upstream, v, err);
    break;
  case SHK__OPT_ENV: r = add_env(o, v, err); break;
  case SHK__OPT_TMPFS_SIZE: r = set_tmpfs_size(o, v, err); break;
  case SHK__OPT_HOSTNAME: r = set_hostname(o, v, err); break;
  case SHK__OPT_MACHINE_ID: r = set_machine_id(o, v, err); break;
  case SHK__OPT_RESTRICT_READS: case SHK__OPT_READ_ONLY: case SHK__OPT_ENV_CLEAN:
  case SHK__OPT_ALLOW_DEGRADED: case SHK__OPT_VERBOSE: case SHK__OPT_PANEL: case SHK__OPT_NO_OBSERVE:
  case SHK__OPT_HELP:
  case SHK__OPT_N:
    (void)NEVER(1);
    break;
  }
  if (r == 0 && id != SHK__OPT_PROFILE)
    o->set_ |= SHK__OPT_BIT(id);
  return r;
}

static void apply_flag(shk_sandbox_opts *o, shk__opt_id id, bool on)
{
  switch ((int)id) {
  case SHK__OPT_READ_ONLY: o->read_only = on; break;
  case SHK__OPT_RESTRICT_READS: o->restrict_reads = on; break;
  case SHK__OPT_ENV_CLEAN: o->env_clean = on; break;
  case SHK__OPT_ALLOW_DEGRADED: o->allow_degraded = on; break;
  case SHK__OPT_VERBOSE: o->verbose = on; break;
  case SHK__OPT_PANEL: o->panel = on; break;
  case SHK__OPT_NO_OBSERVE: o->no_observe = on; break;
  case SHK__OPT_HELP: o->help = on; return;
  default: (void)NEVER(1); return;
  }
  o->set_ |= SHK__OPT_BIT(id);
}

int shk_sandbox_opts_parse(shk_sandbox_opts *o, int argc, char **argv, shk_error *err)
{
  int i = 0;
  while (i < argc) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (!strcmp(a, "-h")) {
      o->help = true;
      return 0;
    }
    if (strncmp(a, "--", 2)) {
      if (a[0] == '-')
        return fail(err, "unknown option '%s' (see 'shinken run --help')", a);
      break;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct opt *opt = find_opt(name, len);
    if (!opt)
      return fail(err, "unknown option '--%.*s' (see 'shinken run --help')", (int)len, name);
    if (!opt->value) {
      if (eq)
        return fail(err, "--%s takes no value", opt->name);
      apply_flag(o, opt->id, true);
      if (o->help)
        return 0;
      i++;
      continue;
    }
    const char *v;
    if (eq) {
      v = eq + 1;
      i++;
    } else {
      if (i + 1 >= argc)
        return fail(err, "--%s needs a value (%s)", opt->name, opt->value);
      v = argv[i + 1];
      i += 2;
    }
    int r = apply_value(o, opt->id, v, err);
    if (r < 0)
      return r;
  }
  if (i >= argc)
    return fail(err, "no command given (usage: shinken run [OPTIONS] -- CMD [ARGS...])");
  o->command = argv + i;
  o->ncommand = (size_t)(argc - i);
  return 0;
}

/* A profile key may use '_' where the option uses '-'. */
static const struct opt *find_key(const char *key)
{
  char buf[32];
  size_t len = strlen(key);
  if (len >= sizeof buf)
    return NULL;
  for (size_t i = 0; i <= len; i++)
    buf[i] = key[i] == '_' ? '-' : key[i];
  const struct opt *opt = find_opt(buf, len);
  /* A profile cannot include another: that would be a second source of
   * truth with its own relative-path questions. */
  return opt && opt->id != SHK__OPT_PROFILE && opt->id != SHK__OPT_HELP ? opt : NULL;
}

/* A path of a profile with a leading ~ or $HOME (or ${HOME}) made the
 * home's, into BUF; V itself when it has neither. */
static int expand_home(const shk_sandbox_opts *o, const char *what, const char *key,
                       const char *v, char *buf, size_t size, const char **out, shk_error *err)
{
  static const char *const leads[] = { "~", "$HOME", "${HOME}" };
  *out = v;
  for (size_t k = 0; k < sizeof leads / sizeof leads[0]; k++) {
    size_t n = strlen(leads[k]);
    if (strncmp(v, leads[k], n) || (v[n] && v[n] != '/'))
      continue;
    if (!o->home)
      return fail(err, "%s: \"%s\": '%s' has no home directory to stand for", what, key, v);
    if ((size_t)snprintf(buf, size, "%s%s", o->home, v + n) >= size)
      return fail(err, "%s: \"%s\": '%s' is too long", what, key, v);
    *out = buf;
    return 0;
  }
  return 0;
}

static bool is_path_key(shk__opt_id id)
{
  return id == SHK__OPT_WRITE || id == SHK__OPT_READ || id == SHK__OPT_DENY ||
         id == SHK__OPT_REPORT || id == SHK__OPT_PROXY_CONFIG;
}

static int apply_string(shk_sandbox_opts *o, const struct opt *opt, const char *v,
                        const char *what, shk_error *err)
{
  char buf[PATH_MAX];
  if (is_path_key(opt->id)) {
    int r = expand_home(o, what, opt->name, v, buf, sizeof buf, &v, err);
    if (r < 0)
      return r;
  }
  return apply_value(o, opt->id, v, err);
}

static int apply_json_value(shk_sandbox_opts *o, const struct opt *opt, json_t *v,
                            const char *what, shk_error *err)
{
  char num[32];
  if (shk__opt_list(o, opt->id)) {
    if (!json_is_array(v))
      return fail(err, "%s: \"%s\" must be an array of strings", what, opt->name);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (!json_is_string(e))
        return fail(err, "%s: \"%s\" must be an array of strings", what, opt->name);
      int r = apply_string(o, opt, json_string_value(e), what, err);
      if (r < 0)
        return r;
    }
    return 0;
  }
  switch ((int)opt->id) {
  case SHK__OPT_NET:
  case SHK__OPT_REPORT:
  case SHK__OPT_PROXY_CONFIG:
  case SHK__OPT_DNS_UPSTREAM:
    if (!json_is_string(v))
      return fail(err, "%s: \"%s\" must be a string", what, opt->name);
    return apply_string(o, opt, json_string_value(v), what, err);
  case SHK__OPT_HOSTNAME:
  case SHK__OPT_MACHINE_ID:
    if (!json_is_string(v))
      return fail(err, "%s: \"%s\" must be a string", what, opt->name);
    return apply_value(o, opt->id, json_string_value(v), err);
  case SHK__OPT_MEM:
  case SHK__OPT_PIDS:
  case SHK__OPT_CPU:
  case SHK__OPT_UID:
  case SHK__OPT_GID:
  case SHK__OPT_TMPFS_SIZE:
    if (json_is_string(v))
      return apply_value(o, opt->id, json_string_value(v), err);
    if (json_is_integer(v) && (json_integer_value(v) > 0 ||
                               (json_integer_value(v) == 0 &&
                                (opt->id == SHK__OPT_UID || opt->id == SHK__OPT_GID)))) {
      snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
      return apply_value(o, opt->id, num, err);
    }
    if (opt->id == SHK__OPT_CPU && json_is_real(v) && json_real_value(v) > 0 &&
        json_real_value(v) < 1e6) {
      /* Three decimals is the precision of the option; more is an error
       * rather than a silent rounding. */
      snprintf(num, sizeof num, "%.3f", json_real_value(v));
      if (strtod(num, NULL) != json_real_value(v))
        return fail(err, "%s: \"cpu\" has more than three decimals", what);
      return apply_value(o, opt->id, num, err);
    }
    return fail(err, "%s: \"%s\" must be a positive number or a string", what, opt->name);
  case SHK__OPT_READ_ONLY:
  case SHK__OPT_RESTRICT_READS:
  case SHK__OPT_ENV_CLEAN:
  case SHK__OPT_ALLOW_DEGRADED:
  case SHK__OPT_VERBOSE:
  case SHK__OPT_PANEL:
  case SHK__OPT_NO_OBSERVE:
    if (!json_is_boolean(v))
      return fail(err, "%s: \"%s\" must be true or false", what, opt->name);
    apply_flag(o, opt->id, json_is_true(v));
    return 0;
  default:
    break;
  }
  (void)NEVER(1);
  return -EINVAL;
}

int shk_sandbox_profile_apply(shk_sandbox_opts *o, const char *text, const char *what, shk_error *err)
{
  json_error_t jerr;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return shk__error_at(err, -EINVAL, what, (unsigned)jerr.line, (unsigned)jerr.column,
                         "%s: invalid JSON at line %d: %s", what, jerr.line, jerr.text);
  int r = 0;
  if (!json_is_object(root)) {
    r = fail(err, "%s: a profile is a JSON object", what);
    goto out;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    const struct opt *opt = find_key(key);
    if (!opt) {
      r = fail(err, "%s: unknown key \"%s\"", what, key);
      goto out;
    }
    r = apply_json_value(o, opt, v, what, err);
    if (r < 0)
      goto out;
  }
out:
  json_decref(root);
  return r;
}

/* The paths the sandbox makes itself, which no rule may replace: a rule
 * there would either fail inside bwrap or undo what makes them safe (the
 * host's /tmp holds other programs' sockets, which the connect() guard
 * lets a writable mount reach; /proc must be the sandbox's own pid
 * namespace's). */
int shk__rule_path_check(shk_access a, const char *arg, const char *path, shk_error *err)
{
  static const char *const fresh[] = { "/tmp", "/var/tmp", "/run", "/dev", NULL };
  const char *opt = a == SHK_ACCESS_WRITE ? "--write" : a == SHK_ACCESS_READ ? "--read" : "--deny";
  if (!strcmp(path, "/") && a != SHK_ACCESS_READ)
    return fail(err, "%s %s: a rule cannot cover the whole root; name the directories you mean",
                opt, arg);
  if (shk_path_within(path, "/proc"))
    return fail(err, "%s %s: /proc inside is the sandbox's own, made for its processes; "
                "a rule cannot name it", opt, arg);
  for (const char *const *f = fresh; *f; f++)
    if (!strcmp(path, *f))
      return fail(err, "%s %s: %s is private inside the sandbox (empty, its own); to share a "
                  "host directory, name one beneath it", opt, arg, *f);
  return 0;
}

/* The options of `shinken run` (its argv parser) and their JSON form, the
 * profile. Both feed one shk_sandbox_opts; nothing here touches the
 * filesystem except reading a profile file. */
#include "shinken/sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

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
  paths_free(&o->env);
  free(o->hostname);
  free(o->machine_id);
  free(o->report);
  free(o->proxy_config);
  shk_sandbox_opts_init(o);
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

/* The options that take a value, and the flags. One table serves both the
 * command line and the profile keys, so the two cannot drift apart. */
typedef enum opt_id {
  OPT_WRITE, OPT_READ, OPT_DENY, OPT_NET, OPT_MEM, OPT_PIDS, OPT_CPU, OPT_REPORT,
  OPT_PROFILE, OPT_ALLOW_DOMAIN, OPT_DENY_DOMAIN, OPT_PROXY_CONFIG, OPT_READ_ONLY, OPT_ENV_CLEAN,
  OPT_ALLOW_DEGRADED,
  OPT_ENV, OPT_TMPFS_SIZE, OPT_HOSTNAME, OPT_MACHINE_ID,
} opt_id;

static const struct opt {
  const char *name;
  opt_id id;
  bool takes_value;
} opts[] = {
  { "write", OPT_WRITE, true },
  { "read", OPT_READ, true },
  { "deny", OPT_DENY, true },
  { "net", OPT_NET, true },
  { "mem", OPT_MEM, true },
  { "pids", OPT_PIDS, true },
  { "cpu", OPT_CPU, true },
  { "report", OPT_REPORT, true },
  { "profile", OPT_PROFILE, true },
  { "allow-domain", OPT_ALLOW_DOMAIN, true },
  { "deny-domain", OPT_DENY_DOMAIN, true },
  { "proxy-config", OPT_PROXY_CONFIG, true },
  { "read-only", OPT_READ_ONLY, false },
  { "env-clean", OPT_ENV_CLEAN, false },
  { "allow-degraded", OPT_ALLOW_DEGRADED, false },
  { "env", OPT_ENV, true },
  { "tmpfs-size", OPT_TMPFS_SIZE, true },
  { "hostname", OPT_HOSTNAME, true },
  { "machine-id", OPT_MACHINE_ID, true },
};

static const struct opt *find_opt(const char *name, size_t len)
{
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
      return &opts[i];
  return NULL;
}

static int apply_value(shk_sandbox_opts *o, opt_id id, const char *v, shk_error *err)
{
  switch (id) {
  case OPT_WRITE: return add_path(&o->write, "--write", v, err);
  case OPT_READ: return add_path(&o->read, "--read", v, err);
  case OPT_DENY: return add_path(&o->deny, "--deny", v, err);
  case OPT_NET: return set_net(o, v, err);
  case OPT_MEM: return set_mem(o, v, err);
  case OPT_PIDS: return set_pids(o, v, err);
  case OPT_CPU: return set_cpu(o, v, err);
  case OPT_REPORT: return set_string(&o->report, v, err);
  case OPT_PROXY_CONFIG: return set_string(&o->proxy_config, v, err);
  case OPT_PROFILE: return apply_profile_file(o, v, err);
  case OPT_ALLOW_DOMAIN: return add_path(&o->allow_domains, "--allow-domain", v, err);
  case OPT_DENY_DOMAIN: return add_path(&o->deny_domains, "--deny-domain", v, err);
  case OPT_ENV: return add_env(o, v, err);
  case OPT_TMPFS_SIZE: return set_tmpfs_size(o, v, err);
  case OPT_HOSTNAME: return set_hostname(o, v, err);
  case OPT_MACHINE_ID: return set_machine_id(o, v, err);
  case OPT_READ_ONLY:
  case OPT_ENV_CLEAN:
  case OPT_ALLOW_DEGRADED:
    break;
  }
  (void)NEVER(1);
  return -EINVAL;
}

static void apply_flag(shk_sandbox_opts *o, opt_id id, bool on)
{
  switch (id) {
  case OPT_READ_ONLY: o->read_only = on; return;
  case OPT_ENV_CLEAN: o->env_clean = on; return;
  case OPT_ALLOW_DEGRADED: o->allow_degraded = on; return;
  case OPT_WRITE: case OPT_READ: case OPT_DENY: case OPT_NET: case OPT_MEM: case OPT_PIDS:
  case OPT_CPU: case OPT_REPORT: case OPT_PROFILE: case OPT_ALLOW_DOMAIN: case OPT_DENY_DOMAIN:
  case OPT_PROXY_CONFIG: case OPT_ENV: case OPT_TMPFS_SIZE: case OPT_HOSTNAME: case OPT_MACHINE_ID:
    break;
  }
  (void)NEVER(1);
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
    if (strncmp(a, "--", 2)) {
      if (a[0] == '-')
        return fail(err, "unknown option '%s'", a);
      break;
    }
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct opt *opt = find_opt(name, len);
    if (!opt)
      return fail(err, "unknown option '--%.*s'", (int)len, name);
    if (!opt->takes_value) {
      if (eq)
        return fail(err, "--%s takes no value", opt->name);
      apply_flag(o, opt->id, true);
      i++;
      continue;
    }
    const char *v;
    if (eq) {
      v = eq + 1;
      i++;
    } else {
      if (i + 1 >= argc)
        return fail(err, "--%s needs a value", opt->name);
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
  return opt && opt->id != OPT_PROFILE ? opt : NULL;
}

static int apply_json_value(shk_sandbox_opts *o, const struct opt *opt, json_t *v,
                            const char *what, shk_error *err)
{
  char num[32];
  switch (opt->id) {
  case OPT_WRITE:
  case OPT_READ:
  case OPT_DENY:
  case OPT_ALLOW_DOMAIN:
  case OPT_DENY_DOMAIN:
  case OPT_ENV: {
    if (!json_is_array(v))
      return fail(err, "%s: \"%s\" must be an array of strings", what, opt->name);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (!json_is_string(e))
        return fail(err, "%s: \"%s\" must be an array of strings", what, opt->name);
      int r = apply_value(o, opt->id, json_string_value(e), err);
      if (r < 0)
        return r;
    }
    return 0;
  }
  case OPT_NET:
  case OPT_REPORT:
  case OPT_PROXY_CONFIG:
  case OPT_HOSTNAME:
  case OPT_MACHINE_ID:
    if (!json_is_string(v))
      return fail(err, "%s: \"%s\" must be a string", what, opt->name);
    return apply_value(o, opt->id, json_string_value(v), err);
  case OPT_MEM:
  case OPT_PIDS:
  case OPT_CPU:
  case OPT_TMPFS_SIZE:
    if (json_is_string(v))
      return apply_value(o, opt->id, json_string_value(v), err);
    if (json_is_integer(v) && json_integer_value(v) > 0) {
      snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
      return apply_value(o, opt->id, num, err);
    }
    if (opt->id == OPT_CPU && json_is_real(v) && json_real_value(v) > 0 &&
        json_real_value(v) < 1e6) {
      /* Three decimals is the precision of the option; more is an error
       * rather than a silent rounding. */
      snprintf(num, sizeof num, "%.3f", json_real_value(v));
      if (strtod(num, NULL) != json_real_value(v))
        return fail(err, "%s: \"cpu\" has more than three decimals", what);
      return apply_value(o, opt->id, num, err);
    }
    return fail(err, "%s: \"%s\" must be a positive number or a string", what, opt->name);
  case OPT_READ_ONLY:
  case OPT_ENV_CLEAN:
  case OPT_ALLOW_DEGRADED:
    if (!json_is_boolean(v))
      return fail(err, "%s: \"%s\" must be true or false", what, opt->name);
    apply_flag(o, opt->id, json_is_true(v));
    return 0;
  case OPT_PROFILE:
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

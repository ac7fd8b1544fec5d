/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration files of `shinken run`, layered: the administrator's
 * file (its defaults and its limits), the user's, the project's (only while
 * the user's trust store holds its current hash), then the command line
 * with its profiles. Every file has the keys of a profile (options.c). No
 * layer may widen what the administrator's file set: what "widen" means
 * depends on the kind of the key (options-internal.h, one table), and the
 * check runs after each layer, so that the error names the layer.
 *
 * The project's file lives in the working directory, which the sandbox can
 * write: its content is trusted only as the user read it. The file is read
 * once, and the bytes hashed are the bytes applied. The trust store lives
 * in the user's state directory, which the plan keeps read-only inside. */
#include "options-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/match.h"

#define fail(err, ...) shk__error_set(err, -EINVAL, __VA_ARGS__)
#define nomem(err) shk__error_set(err, -ENOMEM, "out of memory")

/* What the administrator's file set, kept to judge the later layers. */
typedef struct admin {
  const char *file;
  uint64_t set;
  bool egress;      /* it said anything about egress */
  size_t n[SHK__OPT_N]; /* how many entries of each list are the administrator's */
  shk_sandbox_opts v;   /* its scalars (a shallow copy; lists point into the live opts) */
  char *dns_upstream, *proxy_config;
} admin;

static bool admin_set(const admin *ad, shk__opt_id id)
{
  return ad->file && (ad->set & SHK__OPT_BIT(id));
}

/* PATH absolute (against CWD) and, when it exists, resolved: the form the
 * plan will use. */
static int canon_path(const char *path, const char *cwd, char out[PATH_MAX])
{
  char *norm = NULL;
  if (shk_path_normalize(path, cwd, &norm, NULL) < 0)
    return -EINVAL;
  if (!realpath(norm, out)) {
    if (strlen(norm) >= PATH_MAX) {
      free(norm);
      return -ENAMETOOLONG;
    }
    strcpy(out, norm);
  }
  free(norm);
  return 0;
}

/* Whether the grant V (a value of option ID) falls within one of the
 * administrator's entries. */
static bool covered(shk__opt_id id, const char *v, const shk_sandbox_paths *l, size_t n,
                    const char *cwd)
{
  for (size_t i = 0; i < n; i++) {
    const char *a = l->v[i];
    if (id == SHK__OPT_WRITE || id == SHK__OPT_READ) {
      char pv[PATH_MAX], pa[PATH_MAX];
      if (canon_path(v, cwd, pv) == 0 && canon_path(a, cwd, pa) == 0 && shk_path_within(pv, pa))
        return true;
    } else if (id == SHK__OPT_ALLOW_DOMAIN) {
      shk_host_pattern pv, pa;
      if (shk_host_pattern_parse(a, strlen(a), SHK_HOST_PATTERN_ALLOW_ANY, &pa, NULL) == 0 &&
          shk_host_pattern_parse(v, strlen(v), SHK_HOST_PATTERN_ALLOW_ANY, &pv, NULL) == 0 &&
          shk_host_pattern_covers(&pa, &pv))
        return true;
    } else if (id == SHK__OPT_ALLOW_CIDR) {
      shk_cidr cv, ca;
      if (shk_cidr_parse(a, strlen(a), &ca, NULL) == 0 && shk_cidr_parse(v, strlen(v), &cv, NULL) == 0 &&
          shk_cidr_covers(&ca, &cv))
        return true;
    }
  }
  return false;
}

static const char *net_text(shk_net_mode m)
{
  return shk_net_mode_name(m);
}

static bool same_string(const char *a, const char *b)
{
  return (!a && !b) || (a && b && !strcmp(a, b));
}

/* After LAYER (named WHAT): every key the administrator set is still
 * within what it set. */
static int check_layer(shk_sandbox_opts *o, const admin *ad, const char *what, const char *cwd,
                       shk_error *err)
{
  if (!ad->file)
    return 0;
  for (int id = 0; id < SHK__OPT_N; id++) {
    const char *name = shk__opt_name((shk__opt_id)id);
    shk__opt_kind kind = shk__opt_kind_of((shk__opt_id)id);
    if (kind == SHK__KIND_ROUTING && ad->egress) {
      shk_sandbox_paths *l = shk__opt_list(o, (shk__opt_id)id);
      bool changed = l ? l->n != ad->n[id]
                   : id == SHK__OPT_DNS_UPSTREAM ? !same_string(o->dns_upstream, ad->dns_upstream)
                                                 : !same_string(o->proxy_config, ad->proxy_config);
      if (changed)
        return fail(err, "%s: \"%s\" cannot be set here: %s configures egress, and where allowed "
                    "traffic goes is the administrator's to say", what, name, ad->file);
      continue;
    }
    if (!admin_set(ad, (shk__opt_id)id))
      continue;
    switch (kind) {
    case SHK__KIND_GRANTS: {
      shk_sandbox_paths *l = shk__opt_list(o, (shk__opt_id)id);
      for (size_t i = ad->n[id]; i < l->n; i++)
        if (!covered((shk__opt_id)id, l->v[i], l, ad->n[id], cwd))
          return fail(err, "%s: \"%s\" '%s' goes beyond %s, which allows only what its own \"%s\" "
                      "list covers", what, name, l->v[i], ad->file, name);
      break;
    }
    case SHK__KIND_ORDERED:
      if (o->net > ad->v.net)
        return fail(err, "%s: \"net\" '%s' goes beyond %s, which allows at most '%s'", what,
                    net_text(o->net), ad->file, net_text(ad->v.net));
      break;
    case SHK__KIND_CEILING: {
      uint64_t now = id == SHK__OPT_MEM ? o->mem : id == SHK__OPT_PIDS ? o->pids : o->cpu_milli;
      uint64_t max = id == SHK__OPT_MEM ? ad->v.mem : id == SHK__OPT_PIDS ? ad->v.pids
                                                                         : ad->v.cpu_milli;
      if (now == 0 || now > max)
        return fail(err, "%s: \"%s\" is above the limit %s sets; a limit may be lowered, not "
                    "raised", what, name, ad->file);
      break;
    }
    case SHK__KIND_NARROWING: {
      bool was = id == SHK__OPT_READ_ONLY ? ad->v.read_only : id == SHK__OPT_ENV_CLEAN
                                          ? ad->v.env_clean : ad->v.restrict_reads;
      bool now = id == SHK__OPT_READ_ONLY ? o->read_only : id == SHK__OPT_ENV_CLEAN
                                          ? o->env_clean : o->restrict_reads;
      if (was && !now)
        return fail(err, "%s: \"%s\" cannot be turned off: %s turns it on", what, name, ad->file);
      break;
    }
    case SHK__KIND_WIDENING:
      if (!ad->v.allow_degraded && o->allow_degraded)
        return fail(err, "%s: \"%s\" is refused by %s", what, name, ad->file);
      break;
    case SHK__KIND_LIMITS: case SHK__KIND_ROUTING: case SHK__KIND_FREE: case SHK__KIND_NONE:
      break;
    }
  }
  return 0;
}

static void sha256_hex(const void *p, size_t n, char hex[65])
{
  unsigned char h[32];
  unsigned len = 0;
  if (!EVP_Digest(p, n, h, &len, EVP_sha256(), NULL) || len != 32)
    memset(h, 0, sizeof h);
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", h[i]);
}

/* The trust store's entry for FILE, or NULL (none, or no store). */
static char *trusted_hash(const char *store, const char *file)
{
  json_t *root = json_load_file(store, JSON_REJECT_DUPLICATES, NULL);
  const char *h = json_string_value(json_object_get(json_object_get(root, "files"), file));
  char *out = h ? shk__strdup(h) : NULL;
  json_decref(root);
  return out;
}

/* Reads FILE: 0 and its text, 1 when it does not exist, or -errno. */
static int read_layer(const char *file, char **text, size_t *len, const char *what, shk_error *err)
{
  int r = shk__read_file(file, text, len);
  if (r == -ENOENT)
    return 1;
  if (r < 0)
    return shk__error_set(err, r == -ENOMEM ? r : -EINVAL, "%s %s: %s", what, file, strerror(-r));
  if (strlen(*text) != *len) {
    free(*text);
    return fail(err, "%s %s: contains a NUL byte", what, file);
  }
  return 0;
}

static int apply_file(shk_sandbox_opts *o, const char *file, const char *text, const admin *ad,
                      const char *cwd, shk_error *err)
{
  int r = shk_sandbox_profile_apply(o, text, file, err);
  return r < 0 ? r : check_layer(o, ad, file, cwd, err);
}

int shk_sandbox_config_apply(shk_sandbox_opts *o, const shk_sandbox_config *c, int argc,
                             char **argv, shk_sandbox_config_notes *notes, shk_error *err)
{
  memset(notes, 0, sizeof *notes);
  admin ad = { 0 };
  char *text = NULL;
  size_t len;
  int r = 0;
  if (c->admin && (r = read_layer(c->admin, &text, &len, "the administrator's configuration",
                                  err)) == 0) {
    r = shk_sandbox_profile_apply(o, text, c->admin, err);
    free(text);
    text = NULL;
    if (r < 0)
      goto out;
    notes->admin = true;
    ad.file = c->admin;
    ad.set = o->set_;
    ad.v = *o;
    for (int id = 0; id < SHK__OPT_N; id++) {
      shk_sandbox_paths *l = shk__opt_list(o, (shk__opt_id)id);
      ad.n[id] = l ? l->n : 0;
      ad.egress |= shk__opt_is_egress((shk__opt_id)id) && (ad.set & SHK__OPT_BIT(id));
    }
    if ((o->dns_upstream && !(ad.dns_upstream = shk__strdup(o->dns_upstream))) ||
        (o->proxy_config && !(ad.proxy_config = shk__strdup(o->proxy_config)))) {
      r = nomem(err);
      goto out;
    }
  }
  if (r < 0)
    goto out;
  if (c->user && (r = read_layer(c->user, &text, &len, "the user's configuration", err)) == 0) {
    r = apply_file(o, c->user, text, &ad, c->cwd, err);
    free(text);
    text = NULL;
    if (r < 0)
      goto out;
    notes->user = true;
  }
  if (r < 0)
    goto out;
  if (c->project && (r = read_layer(c->project, &text, &len, "the project's configuration",
                                    err)) == 0) {
    char hex[65];
    sha256_hex(text, len, hex);
    char *known = c->trust ? trusted_hash(c->trust, c->project) : NULL;
    if (!known)
      notes->project_skipped = "it is not trusted: read it, then run 'shinken trust'";
    else if (strcmp(known, hex))
      notes->project_skipped = "it changed since it was trusted: read it again, then run "
                               "'shinken trust'";
    else if ((r = apply_file(o, c->project, text, &ad, c->cwd, err)) == 0)
      notes->project = true;
    free(known);
    free(text);
    text = NULL;
    if (r < 0)
      goto out;
  }
  if (r < 0)
    goto out;
  r = shk_sandbox_opts_parse(o, argc, argv, err);
  if (r == 0 && !o->help)
    r = check_layer(o, &ad, "the command line", c->cwd, err);
  /* The working directory is writable unless --read-only: it is a write
   * grant too. */
  char cwd[PATH_MAX];
  if (r == 0 && !o->help && admin_set(&ad, SHK__OPT_WRITE) && !o->read_only && c->cwd &&
      canon_path(c->cwd, NULL, cwd) == 0 &&
      !covered(SHK__OPT_WRITE, cwd, &o->write, ad.n[SHK__OPT_WRITE], c->cwd))
    r = fail(err, "the working directory %s is outside what %s lets be written; run from "
             "within it, or with --read-only", c->cwd, ad.file);
out:
  free(ad.dns_upstream);
  free(ad.proxy_config);
  return r < 0 ? r : 0;
}

/* ---- trust ---- */

int shk_sandbox_trust_hash(const char *file, char hex[65], shk_error *err)
{
  char *text;
  size_t len;
  int r = shk__read_file(file, &text, &len);
  if (r < 0)
    return shk__error_set(err, r, "%s: %s", file, strerror(-r));
  sha256_hex(text, len, hex);
  free(text);
  return 0;
}

/* Safe because the store is the user's own: made with mode 0600 in a
 * directory of mode 0700, written to a new file and renamed over the old
 * one, so that it is never seen half written. */
int shk_sandbox_trust(const char *store, const char *file, const char *hex, shk_error *err)
{
  char dir[PATH_MAX];
  if ((size_t)snprintf(dir, sizeof dir, "%s", store) >= sizeof dir)
    return shk__error_set(err, -ENAMETOOLONG, "%s: the path is too long", store);
  /* Each missing directory above the store. */
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
      return shk__error_set(err, -errno, "%s: %s", dir, strerror(errno));
    *p = '/';
  }
  json_error_t jerr;
  json_t *root = json_load_file(store, JSON_REJECT_DUPLICATES, &jerr);
  if (!root && access(store, F_OK) == 0)
    return fail(err, "%s: not a trust store (%s); move it away", store, jerr.text);
  if (!root)
    root = json_pack("{s:i, s:{}}", "version", 1, "files");
  json_t *files = json_object_get(root, "files");
  if (!json_is_object(files)) {
    json_decref(root);
    return fail(err, "%s: not a trust store (no \"files\" object); move it away", store);
  }
  if (json_object_set_new(files, file, json_string(hex)) < 0) {
    json_decref(root);
    return nomem(err);
  }
  char tmp[PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.%d", store, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  int r = fd < 0 ? -errno : 0;
  if (r == 0) {
    r = json_dumpfd(root, fd, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 || write(fd, "\n", 1) != 1 ||
                fsync(fd) < 0
            ? -EIO
            : 0;
    if (close(fd) < 0 && r == 0)
      r = -errno;
    if (r == 0 && rename(tmp, store) < 0)
      r = -errno;
    if (r < 0)
      unlink(tmp);
  }
  json_decref(root);
  return r < 0 ? shk__error_set(err, r, "%s: %s", store, strerror(-r)) : 0;
}

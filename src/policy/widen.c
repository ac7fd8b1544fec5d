/* SPDX-License-Identifier: Apache-2.0 */
/* Policy edits: a project or session tier that would allow more than the
 * one it replaces is refused unless the operator accepts the widening.
 * "The one it replaces" is the last tier a load accepted, recorded in the
 * manager's state directory: a copy of its text and the text's SHA-256.
 *
 * Why this is safe: the record is read through shk_policy_read_file, so a
 * record that anyone but root and the manager's user could have replaced
 * is refused, and one whose hash does not match is damaged; either way the
 * load stops unless the operator accepts. The comparison is the analyzer's
 * over every request the schema admits, with the admin tier on both sides
 * (only what could actually be granted counts), and anything it cannot
 * decide (no solver, a timeout, an old tier that no longer validates) is a
 * refusal. The record is written only after a load succeeded, with mode
 * 0600, by rename, so it is the old record or the new one, never a part. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/common.h"
#include "policy/policy-internal.h"
#include "shinken/cedar.h"

typedef enum { PROJECT, SESSION } tier_kind;

static const char *const tier_file[] = { "policy-project.cedar", "policy-session.cedar" };
static const char *const tier_what[] = { "the project tier (project.cedar)", "the session tier" };

static int sha256_hex(const char *text, char hex[65])
{
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (!EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL) || n != 32)
    return -EIO;
  for (unsigned i = 0; i < n; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return 0;
}

static char *record_path(const shk_policy_source *src, tier_kind t, const char *suffix)
{
  char *path = NULL;
  return asprintf(&path, "%s/%s%s", src->state_dir, tier_file[t], suffix) < 0 ? NULL : path;
}

/* The recorded text of tier T: 0 with *text (NULL when nothing is
 * recorded), or -EPERM with err saying why the record cannot be believed;
 * -ENOMEM. */
static int read_record(const shk_policy_source *src, tier_kind t, char **text, shk_error *err)
{
  *text = NULL;
  shk_autofree char *path = record_path(src, t, "");
  shk_autofree char *hpath = record_path(src, t, ".sha256");
  if (!path || !hpath)
    return shk__error_set(err, -ENOMEM, "out of memory");
  char *body = NULL, *hash = NULL;
  shk_error e1 = { 0 }, e2 = { 0 };
  int r1 = shk_policy_read_file(path, src->owner, &body, &e1);
  int r2 = shk_policy_read_file(hpath, src->owner, &hash, &e2);
  int r = 0;
  char hex[65];
  if (r1 == -ENOENT && r2 == -ENOENT) {
    r = 0;
  } else if (r1 == -ENOMEM || r2 == -ENOMEM) {
    r = shk__error_set(err, -ENOMEM, "out of memory");
  } else if (r1 < 0 || r2 < 0) {
    r = shk__error_set(err, -EPERM, "the record of %s is damaged: %s", tier_what[t],
                       r1 < 0 ? e1.message : e2.message);
  } else if (sha256_hex(body, hex) < 0 || strncmp(hash, hex, 64) || (hash[64] && strcmp(hash + 64, "\n"))) {
    r = shk__error_set(err, -EPERM, "the record of %s is damaged: %s does not match its hash", tier_what[t], path);
  } else {
    *text = body;
    body = NULL;
  }
  free(body);
  free(hash);
  return r;
}

/* A policy set of TEXT prepared for analysis against the loaded schema. */
static int prepare(const shk_policy *p, const char *text, const char *what, shk_cedar_policy_set **ps,
                   shk_analysis_set **set, shk_error *err)
{
  shk_cedar_error cerr;
  int r = shk_cedar_policy_set_parse(text, strlen(text), ps, &cerr);
  if (r < 0)
    return shk__error_set(err, r == -ENOMEM ? r : -EINVAL, "%s does not parse: %s", what, cerr.message);
  shk_error e = { 0 };
  if ((r = shk_analysis_set_new(p->schema, *ps, set, &e)) < 0)
    return shk__error_set(err, r, "%s: %s", what, e.message);
  return 0;
}

static char *join3(const char *a, const char *b, const char *c)
{
  char *s = NULL;
  return asprintf(&s, "%s\n%s\n%s\n", a, b, c ? c : "") < 0 ? NULL : s;
}

/* Appends the examples of every environment where NEW allows what OLD
 * denies to *report, one per line. */
static void report_examples(const shk_analysis_comparison *c, char **report)
{
  if (!report)
    return;
  shk__buf b = { 0 };
  for (size_t i = 0; i < c->n_envs; i++) {
    const shk_analysis_example *x = c->envs[i].wider;
    if (x)
      shk__buf_printf(&b, "%s: the new tier allows, the accepted one denies: request %s entities %s\n", x->env,
                      x->request, x->entities);
  }
  free(*report);
  *report = shk__buf_take(&b);
}

/* A counterexample's context for a message: the fields that decide most
 * often first (tier, approval, trust, provenance), the request and the
 * instant last. */
static char *context_text(json_t *ctx)
{
  static const char *const first[] = { "tier", "approval_state", "trust_tier", "provenance", "request", NULL };
  json_t *o = json_object();
  for (size_t i = 0; o && first[i]; i++)
    if (json_object_get(ctx, first[i]))
      json_object_set(o, first[i], json_object_get(ctx, first[i]));
  const char *key;
  json_t *v;
  json_object_foreach(ctx, key, v) {
    if (!json_object_get(o, key))
      json_object_set(o, key, v);
  }
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return text;
}

/* Compares tier T's new text with its record; 0 when it is no wider. */
static int compare_tier(const shk_policy *p, const shk_policy_source *src, tier_kind t, const char *admin,
                        const char *project, const char *session, const char *old, shk_error *err)
{
  const char *what = tier_what[t];
  /* Both sides have the admin tier; the session comparison has the new
   * project tier on both sides, so each tier answers for its own change. */
  shk_autofree char *old_text = t == PROJECT ? join3(admin, old, NULL) : join3(admin, project, old);
  shk_autofree char *new_text = t == PROJECT ? join3(admin, project, NULL) : join3(admin, project, session);
  if (!old_text || !new_text)
    return shk__error_set(err, -ENOMEM, "out of memory");
  shk_cedar_policy_set *ops = NULL, *nps = NULL;
  shk_analysis_set *oset = NULL, *nset = NULL;
  shk_analysis_comparison c = { 0 };
  shk_error e = { 0 };
  char old_what[160];
  snprintf(old_what, sizeof old_what, "the record of %s", what);
  int r = prepare(p, old_text, old_what, &ops, &oset, &e);
  if (r == 0)
    r = prepare(p, new_text, what, &nps, &nset, &e);
  if (r == 0)
    r = shk__pattern_compare(p, oset, nset, &c, &e);
  if (r == -ENOMEM) {
    shk__error_set(err, r, "out of memory");
  } else if (r < 0) {
    r = shk__error_set(err, -EPERM, "cannot prove that %s is no more permissive than the one last accepted: %s; "
                       "start with --accept-widening to accept it anyway", what, e.message);
  } else if (c.rel == SHK_ANALYSIS_WIDER || c.rel == SHK_ANALYSIS_INCOMPARABLE) {
    const shk_analysis_example *x = NULL;
    for (size_t i = 0; i < c.n_envs && !x; i++)
      x = c.envs[i].wider;
    report_examples(&c, src->widening_report);
    /* The example as a person reads it: the environment and the context
     * (the principal and resource of a counterexample are rarely telling). */
    json_t *req = x ? json_loads(x->request, JSON_ALLOW_NUL, NULL) : NULL;
    char *ctx = req ? context_text(json_object_get(req, "context")) : NULL;
    json_decref(req);
    r = shk__error_set(err, -EPERM, "%s is more permissive than the one last accepted (%s in %s; start with "
                       "--accept-widening to accept it): it allows %s with the context %s",
                       what, tier_file[t], src->state_dir, x ? x->env : "a request", ctx ? ctx : "?");
    free(ctx);
  }
  shk_analysis_comparison_clear(&c);
  shk_analysis_set_free(oset);
  shk_analysis_set_free(nset);
  shk_cedar_policy_set_free(ops);
  shk_cedar_policy_set_free(nps);
  return r;
}

int shk__widen_check(const shk_policy *p, const shk_policy_source *src, const char *admin, const char *project,
                     const char *session, shk_error *err)
{
  if (!src->state_dir || src->accept_widening)
    return 0;
  const char *now[] = { project, session ? session : "" };
  for (int t = PROJECT; t <= SESSION; t++) {
    char *old = NULL;
    int r = read_record(src, (tier_kind)t, &old, err);
    if (r == 0 && old && strcmp(old, now[t]))
      r = compare_tier(p, src, (tier_kind)t, admin, project, session, old, err);
    free(old);
    if (r < 0)
      return r;
  }
  return 0;
}

/* Creates DIR and its missing parents, each 0700. */
static int make_dirs(const char *dir, shk_error *err)
{
  shk_autofree char *d = strdup(dir);
  if (!d)
    return shk__error_set(err, -ENOMEM, "out of memory");
  for (char *q = d + 1;; q++) {
    if (*q == '/' || *q == '\0') {
      char c = *q;
      *q = '\0';
      if (mkdir(d, 0700) < 0 && errno != EEXIST)
        return shk__error_set(err, -EIO, "cannot create %s: %s", d, strerror(errno));
      *q = c;
      if (!c)
        return 0;
    }
  }
}

/* Writes TEXT to PATH by way of a temporary file beside it: mode 0600,
 * synced, renamed over the old one. */
static int write_atomic(const char *path, const char *text, shk_error *err)
{
  shk_autofree char *tmp = NULL;
  if (asprintf(&tmp, "%s.tmp%ld", path, (long)getpid()) < 0)
    return shk__error_set(err, -ENOMEM, "out of memory");
  unlink(tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return shk__error_set(err, -EIO, "cannot record the accepted policy in %s: %s", path, strerror(errno));
  size_t n = strlen(text), off = 0;
  int r = fchmod(fd, 0600) < 0 ? -errno : 0;
  while (r == 0 && off < n) {
    ssize_t w = write(fd, text + off, n - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      r = -errno;
    else
      off += (size_t)w;
  }
  if (r == 0 && fsync(fd) < 0)
    r = -errno;
  if (close(fd) < 0 && r == 0)
    r = -errno;
  if (r == 0 && rename(tmp, path) < 0)
    r = -errno;
  if (r < 0) {
    unlink(tmp);
    return shk__error_set(err, -EIO, "cannot record the accepted policy in %s: %s", path, strerror(-r));
  }
  return 0;
}

int shk__widen_record(const shk_policy_source *src, const char *project, const char *session, shk_error *err)
{
  if (!src->state_dir)
    return 0;
  int r = make_dirs(src->state_dir, err);
  const char *text[] = { project, session ? session : "" };
  for (int t = PROJECT; r == 0 && t <= SESSION; t++) {
    char hex[66];
    shk_autofree char *path = record_path(src, (tier_kind)t, "");
    shk_autofree char *hpath = record_path(src, (tier_kind)t, ".sha256");
    if (!path || !hpath)
      return shk__error_set(err, -ENOMEM, "out of memory");
    if (sha256_hex(text[t], hex) < 0)
      return shk__error_set(err, -EIO, "cannot hash the accepted policy");
    strcat(hex, "\n");
    if ((r = write_atomic(path, text[t], err)) == 0)
      r = write_atomic(hpath, hex, err);
  }
  if (r == 0) {
    int dfd = open(src->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
  }
  return r;
}

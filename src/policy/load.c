/* SPDX-License-Identifier: Apache-2.0 */
/* Loading the decision's inputs: the schema, the admin and project tiers,
 * the session tier and the image manifest, each read only from a place no
 * one but root and the manager's user can change. */
#include "shinken/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "policy/policy-internal.h"
#include "shinken/cedar.h"

#define MAX_HOPS 40
#define MAX_POLICY_FILE (16 * 1024 * 1024)

/* NULL when `st` is something only root and `owner` can change; else why
 * not. A directory others may write is accepted only when it is sticky:
 * then they may add entries but cannot rename or remove ours, and what we
 * open next is checked in its turn. A symlink's own mode means nothing;
 * its owner does. */
static const char *untrusted(const struct stat *st, uid_t owner)
{
  if (st->st_uid != 0 && st->st_uid != owner)
    return "is owned by someone other than root and the manager's user";
  if (S_ISLNK(st->st_mode))
    return NULL;
  if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX)))
    return "is writable by group or others";
  return NULL;
}

static int refuse(shk_error *err, const char *path, const char *what, const char *why,
                  const struct stat *st)
{
  return shk__error_set(err, -EPERM, "%s: %s %s (owner uid %u, mode %04o): refusing to load policy from it",
                        path, what, why, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
}

static int read_fd(int fd, const char *path, char **text, shk_error *err)
{
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf)
    return shk__error_set(err, -ENOMEM, "%s: out of memory", path);
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = cap < MAX_POLICY_FILE ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        free(buf);
        return cap < MAX_POLICY_FILE ? shk__error_set(err, -ENOMEM, "%s: out of memory", path)
                                     : shk__error_set(err, -EINVAL, "%s: larger than %d bytes", path,
                                                      MAX_POLICY_FILE);
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      return shk__error_set(err, -e, "%s: %s", path, strerror(e));
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  buf[n] = '\0';
  *text = buf;
  return 0;
}

/* Why this is safe: the path is walked one component at a time from the
 * root, with each directory opened (O_PATH, O_NOFOLLOW) and checked through
 * its descriptor before the next component is looked up in it, and each
 * symlink checked (its owner) and followed by hand. So every directory the
 * file is reached through, and every link on the way, is one only root and
 * `owner` can change: no one else can redirect the walk between the check
 * and the open, and the file is read from the descriptor that was checked. */
int shk_policy_read_file(const char *path, uid_t owner, char **text, shk_error *err)
{
  *text = NULL;
  if (!path || !*path)
    return shk__error_set(err, -EINVAL, "no policy file named");
  char *todo = NULL;
  if (path[0] == '/') {
    todo = strdup(path);
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
      return shk__error_set(err, -errno, "%s: the current directory: %s", path, strerror(errno));
    if (asprintf(&todo, "%s/%s", cwd, path) < 0)
      todo = NULL;
  }
  if (!todo)
    return shk__error_set(err, -ENOMEM, "%s: out of memory", path);
  int dirfd = -1, fd = -1, r = 0, hops = 0;
  char seen[PATH_MAX] = "";
  struct stat st;
  const char *why;
  const char *p = todo;
  for (bool restart = true; r == 0 && fd < 0;) {
    if (restart) {
      restart = false;
      if (dirfd >= 0)
        close(dirfd);
      seen[0] = '\0';
      dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dirfd < 0 || fstat(dirfd, &st) < 0) {
        r = shk__error_set(err, -errno, "/: %s", strerror(errno));
        break;
      }
      if ((why = untrusted(&st, owner))) {
        r = refuse(err, path, "the directory /", why, &st);
        break;
      }
    }
    while (*p == '/')
      p++;
    if (!*p) {
      r = shk__error_set(err, -EISDIR, "%s: is a directory, not a policy file", path);
      break;
    }
    size_t len = strcspn(p, "/");
    const char *rest = p + len;
    bool last = rest[strspn(rest, "/")] == '\0';
    char comp[NAME_MAX + 1];
    if (len > NAME_MAX) {
      r = shk__error_set(err, -ENAMETOOLONG, "%s: a component of the path is too long", path);
      break;
    }
    memcpy(comp, p, len);
    comp[len] = '\0';
    p = rest;
    size_t sl = strlen(seen);
    snprintf(seen + sl, sizeof seen - sl, "/%s", comp);
    if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      r = shk__error_set(err, -errno, "%s: %s", path, strerror(errno));
      break;
    }
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlinkat(dirfd, comp, target, sizeof target - 1);
      if ((why = untrusted(&st, owner))) {
        r = refuse(err, path, seen, why, &st);
        break;
      }
      if (n <= 0 || ++hops > MAX_HOPS) {
        r = shk__error_set(err, -ELOOP, "%s: too many symbolic links, or an unreadable one", path);
        break;
      }
      target[n] = '\0';
      /* The link's target takes the link's place in what remains. */
      char *next;
      if (asprintf(&next, "%s%s", target, p) < 0) {
        r = shk__error_set(err, -ENOMEM, "%s: out of memory", path);
        break;
      }
      free(todo);
      todo = next;
      p = todo;
      restart = target[0] == '/';
      if (!restart)
        seen[sl] = '\0';
      continue;
    }
    int nfd = openat(dirfd, comp, last ? O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK
                                       : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (nfd < 0 || fstat(nfd, &st) < 0) {
      r = shk__error_set(err, -errno, "%s: %s", path, strerror(errno));
      if (nfd >= 0)
        close(nfd);
      break;
    }
    if ((why = untrusted(&st, owner))) {
      r = refuse(err, path, last ? "the file" : seen, why, &st);
      close(nfd);
      break;
    }
    if (last && !S_ISREG(st.st_mode)) {
      r = shk__error_set(err, -EINVAL, "%s: not a regular file", path);
      close(nfd);
      break;
    }
    if (last) {
      fd = nfd;
    } else {
      close(dirfd);
      dirfd = nfd;
    }
  }
  if (dirfd >= 0)
    close(dirfd);
  free(todo);
  if (r == 0) {
    r = read_fd(fd, path, text, err);
    close(fd);
  }
  return r;
}

const char *shk_policy_image(const shk_policy *p)
{
  return p && p->manifest ? shk__manifest_image(p->manifest) : NULL;
}

void shk_policy_free(shk_policy *p)
{
  if (!p)
    return;
  shk__pattern_free(p->pattern);
  shk_cedar_policy_set_free(p->set);
  shk_cedar_schema_free(p->schema);
  shk__manifest_free(p->manifest);
  free(p);
}

static int read_in(const char *dir, const char *name, uid_t owner, char **out, shk_error *err)
{
  char *path;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return shk__error_set(err, -ENOMEM, "out of memory");
  int r = shk_policy_read_file(path, owner, out, err);
  free(path);
  return r;
}

/* A Cedar error in a text, with the text's name as its place. */
static int cedar_error(shk_error *err, int r, const char *file, const shk_cedar_error *cerr)
{
  return shk__error_at(err, r, file, cerr->line, cerr->column, "%s:%u:%u: %s", file, cerr->line,
                       cerr->column, cerr->message);
}

int shk_policy_load(const shk_policy_source *src, shk_policy **out, shk_error *err)
{
  *out = NULL;
  if (!src || !src->dir)
    return shk__error_set(err, -EINVAL, "no policy directory given");
  if (src->widening_report)
    *src->widening_report = NULL;
  char *schema = NULL, *admin = NULL, *project = NULL, *manifest = NULL, *all = NULL;
  shk_cedar_policy_set *session = NULL;
  shk_cedar_error cerr;
  shk_cedar_validation_result vr = { 0 };
  shk_policy *p = calloc(1, sizeof *p);
  int r = p ? 0 : shk__error_set(err, -ENOMEM, "out of memory");
  if (r || (r = read_in(src->dir, "schema.cedarschema", src->owner, &schema, err)) ||
      (r = read_in(src->dir, "admin.cedar", src->owner, &admin, err)) ||
      (r = read_in(src->dir, "project.cedar", src->owner, &project, err)) ||
      (r = src->manifest ? shk_policy_read_file(src->manifest, src->owner, &manifest, err)
                         : read_in(src->dir, "manifests/default.json", src->owner, &manifest, err)))
    goto out;
  if ((r = shk__manifest_parse(manifest, &p->manifest, err))) {
    char m[sizeof err->message];
    snprintf(m, sizeof m, "%s", err ? err->message : "");
    shk__error_set(err, r, "%s: %s", src->manifest ? src->manifest : "manifests/default.json", m);
    goto out;
  }
  if ((r = shk_cedar_schema_parse(schema, strlen(schema), SHK_CEDAR_SCHEMA_TEXT, &p->schema, &cerr))) {
    cedar_error(err, r, "schema.cedarschema", &cerr);
    goto out;
  }
  /* The session tier may only narrow: it is checked on its own first, and
   * any permit in it is refused. */
  if (src->session_text) {
    if ((r = shk_cedar_policy_set_parse(src->session_text, strlen(src->session_text), &session, &cerr))) {
      cedar_error(err, r, "session policy", &cerr);
      goto out;
    }
    for (size_t i = 0; i < shk_cedar_policy_set_count(session); i++)
      if (!shk_cedar_policy_is_forbid(session, i)) {
        r = shk__error_set(err, -EPERM, "session policy %s is a permit: a session may only narrow (forbid)",
                           shk_cedar_policy_id(session, i));
        goto out;
      }
  }
  if (asprintf(&all, "%s\n%s\n%s\n", admin, project, src->session_text ? src->session_text : "") < 0) {
    all = NULL;
    r = shk__error_set(err, -ENOMEM, "out of memory");
    goto out;
  }
  if ((r = shk_cedar_policy_set_parse(all, strlen(all), &p->set, &cerr))) {
    cedar_error(err, r, "policies", &cerr);
    goto out;
  }
  if ((r = shk_cedar_validate(p->set, p->schema, &vr))) {
    shk__error_set(err, r, "the policies could not be validated: %s", shk_strerror(r));
  } else if (vr.n_errors) {
    r = shk__error_set(err, -EINVAL, "policy %s does not validate against the schema: %s",
                       vr.errors[0].policy_id, vr.errors[0].message);
  }
  /* The analysis for patterns, and then the widening check, which uses
   * it; the record only once everything else succeeded. */
  if (r || (r = shk__pattern_new(src, &p->pattern, err)) ||
      (r = shk__widen_check(p, src, admin, project, src->session_text, err)) ||
      (r = shk__widen_record(src, project, src->session_text, err)))
    goto out;
  *out = p;
  p = NULL;
out:
  shk_cedar_validation_result_clear(&vr);
  shk_cedar_policy_set_free(session);
  shk_policy_free(p);
  free(schema);
  free(admin);
  free(project);
  free(manifest);
  free(all);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The filesystem plan: the options and the built-in protections resolved
 * against the real filesystem into an ordered list of rules, each with the
 * mount that makes it real. Paths are resolved here, once, before anything
 * uses them, so that a symlink cannot redirect a rule later. The work done
 * is proportional to the number of protected paths that exist (each
 * directory they lie in is listed once, so a missing name costs no system
 * call) and, for the search for git repositories, to the size of the
 * writable trees, which is bounded (repos.c). */
#include "plan-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *const shk_sandbox_system_dirs[] = {
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys", NULL,
};

const char *shk_mount_kind_name(shk_mount_kind k)
{
  switch (k) {
  case SHK_MOUNT_BIND_RW: return "bind-mount";
  case SHK_MOUNT_BIND_RO: return "read-only bind-mount";
  case SHK_MOUNT_TMPFS: return "tmpfs";
  case SHK_MOUNT_DEV_NULL: return "dev-null";
  case SHK_MOUNT_PIN: return "pin";
  case SHK_MOUNT_FILE: return "file";
  }
  return "?";
}

#define fail(err, ...) shk__error_set(err, -EINVAL, __VA_ARGS__)
#define nomem(err) shk__error_set(err, -ENOMEM, "out of memory")
#define toolong(err, path) shk__error_set(err, -ENAMETOOLONG, "%.200s...: path too long", path)

/* Copies SRC into the PATH_MAX buffer DST; -ENAMETOOLONG when it does not
 * fit. */
static int copy_path(char *dst, const char *src)
{
  size_t n = strlen(src);
  if (n >= PATH_MAX)
    return -ENAMETOOLONG;
  memcpy(dst, src, n + 1);
  return 0;
}

/* A, then SEP, then the first BLEN bytes of B, into the PATH_MAX buffer
 * DST; -ENAMETOOLONG when they do not fit. Paths are joined by the hundred
 * at every start (the protected table at each of its bases), so this is
 * copying, not formatting: snprintf took an eighth of the launcher's time. */
static int cat_path(char *dst, const char *a, const char *sep, const char *b, size_t blen)
{
  size_t al = strlen(a), sl = strlen(sep);
  if (al + sl + blen >= PATH_MAX)
    return -ENAMETOOLONG;
  memcpy(dst, a, al);
  memcpy(dst + al, sep, sl);
  memcpy(dst + al + sl, b, blen);
  dst[al + sl + blen] = '\0';
  return 0;
}

int shk__path_join(char *dst, const char *dir, const char *name)
{
  return cat_path(dst, dir, strcmp(dir, "/") ? "/" : "", name, strlen(name));
}

#define is_under shk__path_under

bool shk__path_under(const char *path, const char *root)
{
  size_t n = strlen(root);
  if (n == 1)
    return true;
  return !strncmp(path, root, n) && (path[n] == '\0' || path[n] == '/');
}

static size_t depth(const char *path)
{
  size_t d = 0;
  for (const char *s = path; *s; s++)
    d += *s == '/' && s[1];
  return d;
}

bool shk_sandbox_is_private(const char *path)
{
  static const char *const dirs[] = { "/tmp", "/var/tmp", "/run", "/dev", "/proc", NULL };
  for (const char *const *d = dirs; *d; d++)
    if (is_under(path, *d))
      return true;
  return false;
}

#define covering_rule shk__plan_covering

const shk_sandbox_rule *shk__plan_covering(const shk_sandbox_plan *p, const char *path)
{
  const shk_sandbox_rule *best = NULL;
  for (size_t i = 0; i < p->n; i++)
    if (is_under(path, p->rules[i].path) &&
        (!best || strlen(p->rules[i].path) > strlen(best->path) ||
         (strlen(p->rules[i].path) == strlen(best->path) && p->rules[i].access > best->access)))
      best = &p->rules[i];
  return best;
}

shk_access shk_sandbox_plan_access(const shk_sandbox_plan *p, const char *path, bool *visible)
{
  const shk_sandbox_rule *r = covering_rule(p, path);
  *visible = r || !p->read_restricted;
  return r ? r->access : SHK_ACCESS_READ;
}

/* The rules defaults are judged against: the options and the cwd, never
 * another default, so the order of the table does not matter. */
static shk_sandbox_plan roots_of(const shk__builder *b)
{
  return (shk_sandbox_plan){ b->p->read_restricted, b->p->rules, b->nroots, NULL, 0 };
}

bool shk__plan_writable(const shk__builder *b, const char *path)
{
  shk_sandbox_plan roots = roots_of(b);
  bool visible;
  return shk_sandbox_plan_access(&roots, path, &visible) == SHK_ACCESS_WRITE && visible;
}

/* Does the view show the host's PATH at all? Not where a rule masks it,
 * nor beneath the private directories unless a rule binds the host's
 * there, nor outside the listed roots in read-restricted mode. */
static bool shown(const shk__builder *b, const char *path)
{
  shk_sandbox_plan roots = roots_of(b);
  const shk_sandbox_rule *r = covering_rule(&roots, path);
  if (r)
    return r->kind == SHK_MOUNT_BIND_RW || r->kind == SHK_MOUNT_BIND_RO ||
           r->kind == SHK_MOUNT_PIN;
  return !b->p->read_restricted && !shk_sandbox_is_private(path);
}

static int add_rule(shk_sandbox_plan *p, const char *path, shk_access a, shk_mount_kind k,
                    bool dflt, bool created, shk_error *err)
{
  char *copy = strdup(path);
  shk_sandbox_rule *rules = copy ? realloc(p->rules, (p->n + 1) * sizeof *p->rules) : NULL;
  if (!rules) {
    free(copy);
    return nomem(err);
  }
  p->rules = rules;
  p->rules[p->n++] = (shk_sandbox_rule){ .path = copy, .access = a, .kind = k,
                                         .is_default = dflt, .created = created };
  return 0;
}

static int add(shk_sandbox_plan *p, const char *path, shk_access a, shk_mount_kind k, bool dflt,
               shk_error *err)
{
  return add_rule(p, path, a, k, dflt, false, err);
}

static shk_mount_kind kind_for(shk_access a, const struct stat *st)
{
  switch (a) {
  case SHK_ACCESS_WRITE: return SHK_MOUNT_BIND_RW;
  case SHK_ACCESS_READ: return SHK_MOUNT_BIND_RO;
  case SHK_ACCESS_DENY: return st && S_ISDIR(st->st_mode) ? SHK_MOUNT_TMPFS : SHK_MOUNT_DEV_NULL;
  }
  return SHK_MOUNT_DEV_NULL;
}

int shk__path_normalize(const char *in, const char *cwd, char *out)
{
  char s[PATH_MAX];
  if ((in[0] == '/' ? cat_path(s, "", "", in, strlen(in)) : cat_path(s, cwd, "/", in, strlen(in))) < 0)
    return -ENAMETOOLONG;
  size_t n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(s, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
    if (!strcmp(tok, "."))
      continue;
    if (!strcmp(tok, "..")) {
      while (n > 0 && out[n - 1] != '/')
        n--;
      if (n > 0)
        n--;
      continue;
    }
    out[n++] = '/';
    size_t l = strlen(tok);
    memcpy(out + n, tok, l);
    n += l;
  }
  if (n == 0)
    out[n++] = '/';
  out[n] = '\0';
  return 0;
}

void shk__path_parent(const char *path, char *d)
{
  if (NEVER(copy_path(d, path) < 0)) {
    strcpy(d, "/");
    return;
  }
  char *slash = strrchr(d, '/');
  if (slash == d)
    slash[1] = '\0';
  else if (slash)
    *slash = '\0';
}

#define parent_of shk__path_parent
#define join shk__path_join
#define normalize shk__path_normalize

static int name_cmp(const void *x, const void *y)
{
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Lists DIR into L; false (and L unlisted) when it cannot be read or holds
 * more than SHK__LISTING_MAX names, and lstat() answers instead. */
static bool list_dir(shk__listing *l)
{
  DIR *d = opendir(l->dir);
  if (!d)
    return false;
  size_t cap = 0;
  bool ok = true;
  for (struct dirent *e; ok && (e = readdir(d));) {
    if (l->n == SHK__LISTING_MAX) {
      ok = false;
      break;
    }
    if (l->n == cap) {
      char **v = realloc(l->names, (cap = cap ? 2 * cap : 64) * sizeof *v);
      if (!v) {
        ok = false;
        break;
      }
      l->names = v;
    }
    if (!(l->names[l->n] = strdup(e->d_name)))
      ok = false;
    else
      l->n++;
  }
  closedir(d);
  if (ok)
    qsort(l->names, l->n, sizeof *l->names, name_cmp);
  return ok;
}

static void builder_free(shk__builder *b)
{
  for (int i = 0; i < SHK__LISTINGS && b->dirs[i]; i++) {
    for (size_t k = 0; k < b->dirs[i]->n; k++)
      free(b->dirs[i]->names[k]);
    free(b->dirs[i]->names);
    free(b->dirs[i]);
  }
  for (size_t i = 0; i < b->nmemo; i++) {
    free(b->memo[i].dir);
    free(b->memo[i].real);
    free(b->memo[i].link);
  }
  free(b->memo);
}

/* An answer from the listing is as old as the listing, as lstat()'s is as
 * old as its call: the plan is a snapshot either way, and the mounts made
 * from it check what they mount onto. */
int shk__plan_lstat(shk__builder *b, const char *path, struct stat *st)
{
  char dir[PATH_MAX];
  parent_of(path, dir);
  const char *name = strrchr(path, '/') + 1;
  shk__listing *l = NULL;
  int i = 0;
  for (; i < SHK__LISTINGS && b->dirs[i]; i++)
    if (!strcmp(b->dirs[i]->dir, dir)) {
      l = b->dirs[i];
      break;
    }
  if (!l && i < SHK__LISTINGS && (l = calloc(1, sizeof *l))) {
    strcpy(l->dir, dir);
    b->dirs[i] = l;
  }
  if (l && !l->listed && ++l->lookups == SHK__LIST_AT)
    l->listed = list_dir(l);
  if (l && l->listed && *name &&
      !bsearch(&name, l->names, l->n, sizeof *l->names, name_cmp)) {
    errno = ENOENT;
    return -1;
  }
  return lstat(path, st);
}

static const shk__dir_memo *remember(shk__builder *b, const char *dir, const char *real,
                                     const char *link)
{
  if (b->nmemo == b->capmemo) {
    size_t cap = b->capmemo ? 2 * b->capmemo : 32;
    shk__dir_memo *m = realloc(b->memo, cap * sizeof *m);
    if (!m)
      return NULL;
    b->memo = m;
    b->capmemo = cap;
  }
  char *d = strdup(dir), *r = real ? strdup(real) : NULL, *l = link ? strdup(link) : NULL;
  if (!d || (real && !r) || (link && !l)) {
    free(d);
    free(r);
    free(l);
    return NULL;
  }
  b->memo[b->nmemo] = (shk__dir_memo){ d, r, l };
  return &b->memo[b->nmemo++];
}

/* Resolved one component at a time, from the parent's resolution: each
 * directory costs one lookup in its parent's listing (and a realpath()
 * only where it is a symlink). */
const shk__dir_memo *shk__plan_resolve(shk__builder *b, const char *dir)
{
  static const shk__dir_memo root = { (char *)"/", (char *)"/", NULL };
  if (!strcmp(dir, "/"))
    return &root;
  for (size_t i = b->nmemo; i-- > 0;)
    if (!strcmp(b->memo[i].dir, dir))
      return &b->memo[i];
  char par[PATH_MAX], full[PATH_MAX], real[PATH_MAX];
  parent_of(dir, par);
  const shk__dir_memo *up = shk__plan_resolve(b, par);
  if (!up)
    return NULL;
  /* Copied: the memo array moves as it grows. */
  char link[PATH_MAX];
  bool linked = up->link && copy_path(link, up->link) == 0;
  const char *res = NULL;
  struct stat st;
  if (up->real && join(full, up->real, strrchr(dir, '/') + 1) == 0 &&
      shk__plan_lstat(b, full, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      res = full;
    } else if (S_ISLNK(st.st_mode) && realpath(full, real) && stat(real, &st) == 0 &&
               S_ISDIR(st.st_mode)) {
      res = real;
      if (!linked && shk__plan_writable(b, up->real) && copy_path(link, full) == 0)
        linked = true;
    }
  }
  return remember(b, dir, res, linked ? link : NULL);
}

const char *shk__plan_real_dir(shk__builder *b, const char *dir)
{
  const shk__dir_memo *m = shk__plan_resolve(b, dir);
  return m ? m->real : NULL;
}

int shk__plan_warn(shk__builder *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char *line = shk__vasprintf(fmt, ap);
  va_end(ap);
  char **v = line ? realloc(b->p->warnings, (b->p->nwarnings + 1) * sizeof *v) : NULL;
  if (!v) {
    free(line);
    return nomem(b->err);
  }
  b->p->warnings = v;
  v[b->p->nwarnings++] = line;
  return 0;
}

/* A symlink where a protected path should be, inside a writable root (an
 * earlier run may have planted it, say .git/hooks -> /etc): a mount cannot
 * cover what the link names and keep the link from being replaced, so the
 * link itself is masked (/dev/null over it), and the run says so. */
static int mask_symlink(shk__builder *b, const char *path, shk_access a)
{
  for (size_t i = 0; i < b->p->n; i++)
    if (b->p->rules[i].symlink && !strcmp(b->p->rules[i].path, path))
      return 0;
  char target[PATH_MAX];
  ssize_t n = readlink(path, target, sizeof target - 1);
  target[n > 0 ? n : 0] = '\0';
  int r = shk__plan_warn(b, "%s is a symlink (to %s) inside a writable root, where a protected "
                         "path should be; it is masked: nothing reaches it inside", path,
                         n > 0 ? target : "?");
  if (r == 0)
    r = add(b->p, path, a, SHK_MOUNT_DEV_NULL, true, b->err);
  if (r == 0)
    b->p->rules[b->p->n - 1].symlink = true;
  return r;
}

/* PATH's parent is missing: its first missing component is a directory,
 * masked where something could be planted (a writable parent). */
static int protect_missing_parent(shk__builder *b, const char *par, shk_access a)
{
  char cur[PATH_MAX], up[PATH_MAX], miss[PATH_MAX];
  if (copy_path(cur, par) < 0)
    return toolong(b->err, par);
  for (;;) {
    parent_of(cur, up);
    const char *rp = shk__plan_real_dir(b, up);
    if (rp) {
      if (join(miss, rp, strrchr(cur, '/') + 1) < 0)
        return toolong(b->err, par);
      struct stat st;
      if (!shk__plan_writable(b, rp) || !shown(b, rp))
        return 0;
      /* Something that is not a directory stands there: nothing of PATH
       * can be created beneath it, unless it is a symlink (dangling), which
       * could be replaced by a directory. */
      if (shk__plan_lstat(b, miss, &st) == 0)
        return S_ISLNK(st.st_mode) ? mask_symlink(b, miss, a) : 0;
      return add_rule(b->p, miss, a, SHK_MOUNT_TMPFS, true, true, b->err);
    }
    if (!strcmp(up, "/"))
      return 0;
    strcpy(cur, up);
  }
}

int shk__plan_protect(shk__builder *b, const char *path, shk_access a, unsigned flags,
                      const char *text)
{
  char par[PATH_MAX], full[PATH_MAX], real[PATH_MAX];
  parent_of(path, par);
  const shk__dir_memo *m = shk__plan_resolve(b, par);
  if (!m)
    return nomem(b->err);
  /* A symlink on the way lies inside a writable root: what is beneath it
   * is protected by masking the link. */
  if (m->link) {
    if (!copy_path(real, m->link))
      return mask_symlink(b, real, a);
    return toolong(b->err, path);
  }
  const char *rp = m->real;
  if (!rp)
    return flags & SHK__PROTECT_EXISTING ? 0 : protect_missing_parent(b, par, a);
  if (join(full, rp, strrchr(path, '/') + 1) < 0)
    return toolong(b->err, path);
  struct stat st;
  if (shk__plan_lstat(b, full, &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      if (shk__plan_writable(b, rp) && shown(b, rp))
        return mask_symlink(b, full, a);
      if (realpath(full, real) && stat(real, &st) == 0 && shown(b, real))
        return add(b->p, real, a, kind_for(a, &st), true, b->err);
      return 0;
    }
    return shown(b, full) ? add(b->p, full, a, kind_for(a, &st), true, b->err) : 0;
  }
  if ((flags & SHK__PROTECT_EXISTING) || !shk__plan_writable(b, rp) || !shown(b, rp))
    return 0;
  shk_mount_kind k = flags & SHK__PROTECT_DIR ? SHK_MOUNT_TMPFS
                     : text && *text ? SHK_MOUNT_FILE : SHK_MOUNT_DEV_NULL;
  int r = add_rule(b->p, full, a, k, true, true, b->err);
  if (r == 0)
    b->p->rules[b->p->n - 1].text = k == SHK_MOUNT_FILE ? text : NULL;
  return r;
}

/* An option's path: it must exist for write and read; a missing --deny
 * path is masked at its first missing component. */
static int add_option(shk__builder *b, const char *arg, const char *cwd, shk_access a)
{
  char real[PATH_MAX], abs[PATH_MAX], par[PATH_MAX];
  struct stat st;
  if (normalize(arg, cwd, abs) < 0)
    return toolong(b->err, arg);
  if (realpath(abs, real) && stat(real, &st) == 0) {
    int r = shk__rule_path_check(a, arg, real, b->err);
    if (r < 0)
      return r;
    r = add(b->p, real, a, kind_for(a, &st), false, b->err);
    if (r == 0)
      b->p->rules[b->p->n - 1].via_symlink = strcmp(abs, real) != 0;
    return r;
  }
  if (a != SHK_ACCESS_DENY)
    return fail(b->err, "--%s %s: %s", shk_access_name(a), arg, strerror(errno));
  int r = shk__rule_path_check(a, arg, abs, b->err);
  if (r < 0)
    return r;
  /* A missing --deny path: masked at its first missing component, whatever
   * the options make writable (the options' own rules are not all known
   * yet, and a deny is never a widening). */
  char cur[PATH_MAX];
  strcpy(cur, abs);
  for (;;) {
    parent_of(cur, par);
    if (realpath(par, real) && stat(real, &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return 0;
      char miss[PATH_MAX];
      if (join(miss, real, strrchr(cur, '/') + 1) < 0)
        return toolong(b->err, arg);
      return add_rule(b->p, miss, a, SHK_MOUNT_DEV_NULL, false, true, b->err);
    }
    if (!strcmp(par, "/"))
      return 0;
    strcpy(cur, par);
  }
}

/* BASE/NAME of the table, NAME's trailing '/' marking a directory. */
static int protect_entry(shk__builder *b, const char *base, const shk__protected *e)
{
  size_t len = strlen(e->name);
  bool dir = e->name[len - 1] == '/';
  char path[PATH_MAX], norm[PATH_MAX];
  if (cat_path(path, base, "/", e->name, len - dir) < 0 || normalize(path, "/", norm) < 0)
    return toolong(b->err, base);
  unsigned flags = (dir ? SHK__PROTECT_DIR : 0) |
                   (e->base == SHK__BASE_ROOTS ? SHK__PROTECT_EXISTING : 0);
  return shk__plan_protect(b, norm, e->access, flags, NULL);
}

static int protect_base(shk__builder *b, shk__base base, const char *dir)
{
  for (const shk__protected *e = shk__protected_paths; e->name; e++)
    if (e->base == base) {
      int r = protect_entry(b, dir, e);
      if (r < 0)
        return r;
    }
  return 0;
}

/* A home the caller cannot search (root's, as $HOME of a command run as
 * another user) holds nothing the command could reach: it runs with the
 * caller's ids and no capability. One check instead of a refused lookup
 * per protected name. */
static bool searchable(const char *dir)
{
  return !(faccessat(AT_FDCWD, dir, X_OK, AT_EACCESS) < 0 && errno == EACCES);
}

/* The table, at each of its bases. An XDG base directory set elsewhere
 * than its default is protected as well as the default: a tool that
 * ignores the variable keeps its files there. */
static int protect_table(shk__builder *b)
{
  const shk_sandbox_env *env = b->env;
  char homes[2][PATH_MAX];
  size_t nhomes = 0;
  for (size_t i = 0; i < 2; i++)
    if (env->homes[i] && realpath(env->homes[i], homes[nhomes]) && searchable(homes[nhomes]) &&
        (nhomes == 0 || strcmp(homes[0], homes[nhomes])))
      nhomes++;
  static const struct {
    shk__base base;
    const char *sub;
  } xdg[] = { { SHK__BASE_CONFIG, ".config" }, { SHK__BASE_DATA, ".local/share" },
              { SHK__BASE_STATE, ".local/state" } };
  const char *xdg_env[] = { env->xdg_config, env->xdg_data, env->xdg_state };
  int r = 0;
  for (size_t h = 0; h < nhomes && r == 0; h++) {
    r = protect_base(b, SHK__BASE_HOME, homes[h]);
    for (size_t x = 0; x < 3 && r == 0; x++) {
      char dir[PATH_MAX];
      if (join(dir, homes[h], xdg[x].sub) < 0)
        return toolong(b->err, homes[h]);
      r = protect_base(b, xdg[x].base, dir);
    }
  }
  for (size_t x = 0; x < 3 && r == 0; x++) {
    char real[PATH_MAX];
    if (!xdg_env[x] || !realpath(xdg_env[x], real) || !searchable(real))
      continue;
    bool known = false;
    for (size_t h = 0; h < nhomes; h++) {
      char dir[PATH_MAX];
      known |= join(dir, homes[h], xdg[x].sub) == 0 && !strcmp(dir, real);
    }
    if (!known)
      r = protect_base(b, xdg[x].base, real);
  }
  if (r == 0 && env->xdg_runtime)
    r = protect_base(b, SHK__BASE_RUNTIME, env->xdg_runtime);
  for (const shk__protected *e = shk__protected_paths; r == 0 && e->name; e++)
    if (e->base == SHK__BASE_ABS)
      r = protect_entry(b, "/", e);
  /* A project's own tool configuration, at each writable root. A copy of
   * each path: the rules array moves as protections are added. */
  for (size_t i = 0; i < b->nroots && r == 0; i++) {
    char root[PATH_MAX];
    if (b->p->rules[i].access != SHK_ACCESS_WRITE)
      continue;
    strcpy(root, b->p->rules[i].path);
    r = protect_base(b, SHK__BASE_ROOTS, root);
  }
  return r;
}

static int protect_path_dirs(shk__builder *b, const char *path_var)
{
  for (const char *d = path_var; d && *d; d += *d == ':') {
    size_t len = strcspn(d, ":");
    char entry[PATH_MAX], norm[PATH_MAX];
    /* A relative entry names a different directory for every cwd; the
     * writable cwd is the command's own. An empty one is the cwd too. */
    if (d[0] == '/') {
      if (len >= PATH_MAX)
        return toolong(b->err, d);
      memcpy(entry, d, len);
      entry[len] = '\0';
      int r = normalize(entry, "/", norm);
      if (r == 0)
        r = shk__plan_protect(b, norm, SHK_ACCESS_READ, SHK__PROTECT_DIR, NULL);
      if (r < 0)
        return r == -ENAMETOOLONG ? toolong(b->err, entry) : r;
    }
    d += len;
  }
  return 0;
}

/* A symlink planted in a writable root (by an earlier run, say) must not
 * turn an innocent option into authority over a protected path: an option
 * that reaches a protected path, or one beneath it, only through a symlink
 * is dropped, and the protection stays. Naming the protected path itself is
 * how to grant it. */
static void drop_symlinked_grants(shk_sandbox_plan *p)
{
  size_t out = 0;
  for (size_t i = 0; i < p->n; i++) {
    shk_sandbox_rule *o = &p->rules[i];
    bool drop = false;
    for (size_t j = 0; j < p->n && o->via_symlink && o->access != SHK_ACCESS_DENY && !drop; j++)
      drop = p->rules[j].is_default && p->rules[j].access != SHK_ACCESS_WRITE &&
             is_under(o->path, p->rules[j].path);
    if (drop)
      free(o->path);
    else
      p->rules[out++] = *o;
  }
  p->n = out;
}

/* A protected path inside a writable root can be defeated without touching
 * it: rename a directory between the two (.git, .config) and create a fresh
 * one in its place. A mount point cannot be renamed or removed, so each such
 * directory is bound onto itself. Masks of existing content need no pin:
 * the mount moves with a renamed parent and keeps hiding what it hid. */
static int pin_parents(shk_sandbox_plan *p, shk_error *err)
{
  size_t n = p->n;
  for (size_t i = 0; i < n; i++) {
    if (p->rules[i].access == SHK_ACCESS_WRITE)
      continue;
    shk_sandbox_plan others = { p->read_restricted, p->rules, p->n, NULL, 0 };
    char par[PATH_MAX], up[PATH_MAX];
    parent_of(p->rules[i].path, par);
    for (;;) {
      const shk_sandbox_rule *anc = covering_rule(&others, par);
      struct stat st;
      if (!strcmp(par, "/") || !anc || anc->access != SHK_ACCESS_WRITE ||
          !strcmp(anc->path, par) || lstat(par, &st) < 0 || !S_ISDIR(st.st_mode))
        break;
      int r = add(p, par, SHK_ACCESS_WRITE, SHK_MOUNT_PIN, true, err);
      if (r < 0)
        return r;
      others.rules = p->rules;
      others.n = p->n;
      parent_of(par, up);
      strcpy(par, up);
    }
  }
  return 0;
}

static int rule_cmp(const void *a, const void *b)
{
  const shk_sandbox_rule *x = a, *y = b;
  size_t dx = depth(x->path), dy = depth(y->path);
  if (dx != dy)
    return dx < dy ? -1 : 1;
  return strcmp(x->path, y->path);
}

/* Sorts by depth, keeps one rule per path (an option over a default, then
 * the most restrictive), and drops a bind that repeats what its nearest
 * ancestor already shows. */
static void finish(shk_sandbox_plan *p)
{
  if (p->n == 0)
    return;
  qsort(p->rules, p->n, sizeof *p->rules, rule_cmp);
  size_t out = 0;
  for (size_t i = 0; i < p->n; i++) {
    shk_sandbox_rule *r = &p->rules[i];
    if (out > 0 && !strcmp(p->rules[out - 1].path, r->path)) {
      shk_sandbox_rule *prev = &p->rules[out - 1];
      bool take = prev->is_default != r->is_default ? !r->is_default : r->access > prev->access;
      if (take) {
        free(prev->path);
        *prev = *r;
      } else {
        free(r->path);
      }
      continue;
    }
    p->rules[out++] = *r;
  }
  p->n = out;
  out = 0;
  for (size_t i = 0; i < p->n; i++) {
    shk_sandbox_rule *r = &p->rules[i];
    shk_sandbox_plan view = { p->read_restricted, p->rules, out, NULL, 0 };
    const shk_sandbox_rule *anc = covering_rule(&view, r->path);
    bool same = anc ? anc->kind == r->kind && anc->kind != SHK_MOUNT_TMPFS &&
                          anc->kind != SHK_MOUNT_DEV_NULL && anc->kind != SHK_MOUNT_PIN &&
                          anc->kind != SHK_MOUNT_FILE
                    : !p->read_restricted && r->kind == SHK_MOUNT_BIND_RO &&
                          !shk_sandbox_is_private(r->path);
    if (same) {
      free(r->path);
      continue;
    }
    p->rules[out++] = *r;
  }
  p->n = out;
}

int shk_sandbox_plan_build(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                           shk_sandbox_plan *p, shk_error *err)
{
  memset(p, 0, sizeof *p);
  shk__builder b = { .p = p, .env = env, .err = err };
  p->read_restricted = o->restrict_reads;
  int r = 0;
  if (o->read_only && o->write.n > 0) {
    r = fail(err, "--read-only cannot be combined with --write");
    goto out;
  }
  for (size_t i = 0; i < o->write.n && r == 0; i++)
    r = add_option(&b, o->write.v[i], env->cwd, SHK_ACCESS_WRITE);
  for (size_t i = 0; i < o->read.n && r == 0; i++)
    r = add_option(&b, o->read.v[i], env->cwd, SHK_ACCESS_READ);
  for (size_t i = 0; i < o->deny.n && r == 0; i++)
    r = add_option(&b, o->deny.v[i], env->cwd, SHK_ACCESS_DENY);
  if (r < 0)
    goto out;
  /* The current directory: writable, or with --read-only still shown
   * (read-only) so that the command starts where it was asked to. */
  if (!o->read_only)
    r = add(p, env->cwd, SHK_ACCESS_WRITE, SHK_MOUNT_BIND_RW, true, err);
  else if (!p->read_restricted)
    r = add(p, env->cwd, SHK_ACCESS_READ, SHK_MOUNT_BIND_RO, true, err);
  b.nroots = p->n;
  if (r == 0)
    r = protect_table(&b);
  if (r == 0)
    r = protect_path_dirs(&b, env->path);
  for (const char *const *m = shk__root_masked; env->root && *m && r == 0; m++)
    r = shk__plan_protect(&b, *m, SHK_ACCESS_DENY, 0, NULL);
  if (r == 0)
    r = shk__plan_protect_repos(&b);
  if (r < 0)
    goto out;
  drop_symlinked_grants(p);
  if ((r = pin_parents(p, err)) < 0)
    goto out;
  finish(p);
out:
  builder_free(&b);
  if (r < 0)
    shk_sandbox_plan_free(p);
  return r;
}

void shk_sandbox_plan_free(shk_sandbox_plan *p)
{
  for (size_t i = 0; i < p->n; i++)
    free(p->rules[i].path);
  free(p->rules);
  for (size_t i = 0; i < p->nwarnings; i++)
    free(p->warnings[i]);
  free(p->warnings);
  memset(p, 0, sizeof *p);
}

/* Does the file at PATH hold exactly TEXT? */
static bool holds(const char *path, const char *text)
{
  char buf[64];
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n >= 0 && (size_t)n == strlen(text) && !memcmp(buf, text, (size_t)n);
}

/* Safe because it runs after the sandbox is gone (every process inside died
 * with its pid namespace), removes only mount points the sandbox created for
 * this plan, only while they are still empty (or hold just the text stage 2
 * wrote), and never through a symlink. */
void shk_sandbox_plan_cleanup(const shk_sandbox_plan *p)
{
  for (size_t i = p->n; i-- > 0;) {
    const shk_sandbox_rule *r = &p->rules[i];
    if (!r->created)
      continue;
    char par[PATH_MAX], real[PATH_MAX];
    parent_of(r->path, par);
    struct stat st;
    if (!realpath(par, real) || strcmp(real, par) || lstat(r->path, &st) < 0)
      continue;
    /* The parent's times are put back, as stage 2 put them back when it
     * made the mount point (mask.c). */
    struct stat pst;
    shk_autoclose int pfd = open(par, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    bool timed = pfd >= 0 && fstat(pfd, &pst) == 0;
    int gone = -1;
    if (S_ISDIR(st.st_mode))
      gone = rmdir(r->path);
    else if (S_ISREG(st.st_mode) &&
             (st.st_size == 0 || (r->text && holds(r->path, r->text))))
      gone = unlink(r->path);
    if (gone == 0 && timed)
      (void)futimens(pfd, (struct timespec[2]){ pst.st_atim, pst.st_mtim });
  }
}

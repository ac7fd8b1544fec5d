/* The filesystem plan: the options and the built-in protections resolved
 * against the real filesystem into an ordered list of rules, each with the
 * mount that makes it real. Paths are resolved here, once, before anything
 * uses them, so that a symlink cannot redirect a rule later. The work done is
 * proportional to the number of rules, never to the size of the filesystem. */
#include "sandbox-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

const char *const shk_sandbox_system_dirs[] = {
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys", NULL,
};

/* Credentials: masked. A trailing '/' marks a directory: a missing one is
 * masked by an empty directory, so that what bwrap leaves on the host for
 * the mount point, until `shinken run` removes it, has the expected type. */
static const char *const home_masked[] = {
  ".ssh/", ".aws/", ".gnupg/", ".config/gcloud/", ".kube/", ".docker/", ".netrc",
  ".git-credentials", NULL,
};

/* Shell start-up files and Shinken's own configuration and trust store:
 * read-only, so that nothing the command writes runs later outside the
 * sandbox, or is trusted there. */
static const char *const home_readonly[] = {
  ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
  ".zprofile", ".zlogin", ".config/fish/", ".config/shinken/", ".local/state/shinken/", NULL,
};

/* For a caller that is root outside, who stays the owner of root's files
 * inside (kuid 0, no capability needed for that): the usual owner-only
 * secrets of the host. Any other such file is readable (docs/sandbox.md). */
static const char *const root_masked[] = {
  "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
  "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key",
  "/etc/ssh/ssh_host_dsa_key", NULL,
};

/* Inside every writable root: what git would run or obey later. */
static const char *const git_readonly[] = { ".git/hooks/", ".git/config", NULL };

const char *shk_mount_kind_name(shk_mount_kind k)
{
  switch (k) {
  case SHK_MOUNT_BIND_RW: return "bind-mount";
  case SHK_MOUNT_BIND_RO: return "read-only bind-mount";
  case SHK_MOUNT_TMPFS: return "tmpfs";
  case SHK_MOUNT_DEV_NULL: return "dev-null";
  case SHK_MOUNT_PIN: return "pin";
  }
  return "?";
}

/* The names of one directory, listed once: most protected paths are
 * missing names in a handful of directories (the home, ~/.config), and one
 * listing answers for all of them where each lstat() would walk the whole
 * path. */
typedef struct listing {
  char dir[PATH_MAX];
  unsigned lookups;  /* lstat()s so far; the directory is listed at the second */
  bool listed;       /* `names` holds every name in it */
  char **names;      /* sorted */
  size_t n;
} listing;

enum { LISTINGS = 8, LISTING_MAX = 4096 };

typedef struct builder {
  shk_sandbox_plan *p;
  listing *dirs[LISTINGS];
  size_t nroots; /* the rules that defaults are judged against */
  shk_error *err;
  /* The last directory first_missing resolved, and what it resolved to
   * ("" when it does not resolve to a directory): most protected paths are
   * missing names in the same home directory, and each resolution costs a
   * system call per component. */
  bool memo;
  char memo_dir[PATH_MAX], memo_real[PATH_MAX];
} builder;

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

/* DIR/NAME into the PATH_MAX buffer DST (no doubled '/' after "/"). */
static int join(char *dst, const char *dir, const char *name)
{
  int n = snprintf(dst, PATH_MAX, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name);
  return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

#define is_under shk__path_under

/* Is `path` equal to `root` or beneath it? Both absolute and normalized. */
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

static bool writable(const shk_sandbox_plan *p, const char *path)
{
  bool visible;
  return shk_sandbox_plan_access(p, path, &visible) == SHK_ACCESS_WRITE && visible;
}

static int add(shk_sandbox_plan *p, const char *path, shk_access a, shk_mount_kind k, bool dflt,
               shk_error *err)
{
  char *copy = strdup(path);
  shk_sandbox_rule *rules = copy ? realloc(p->rules, (p->n + 1) * sizeof *p->rules) : NULL;
  if (!rules) {
    free(copy);
    return nomem(err);
  }
  p->rules = rules;
  p->rules[p->n++] = (shk_sandbox_rule){ copy, a, k, dflt, false, false };
  return 0;
}

/* A mask on a path that does not exist: bwrap creates its mount point. */
static int add_created(shk_sandbox_plan *p, const char *path, shk_access a, shk_mount_kind k,
                       bool dflt, shk_error *err)
{
  int r = add(p, path, a, k, dflt, err);
  if (r == 0)
    p->rules[p->n - 1].created = true;
  return r;
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

/* Makes `in` absolute against `cwd` and removes ".", ".." and repeated '/'
 * lexically, into the PATH_MAX buffer OUT; used only for paths that do not
 * exist (yet). */
static int normalize(const char *in, const char *cwd, char *out)
{
  char s[PATH_MAX];
  int len = in[0] == '/' ? snprintf(s, sizeof s, "%s", in) : snprintf(s, sizeof s, "%s/%s", cwd, in);
  if (len < 0 || len >= PATH_MAX)
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

/* The parent of PATH (absolute, normalized, shorter than PATH_MAX) into the
 * PATH_MAX buffer D. */
static void parent_of(const char *path, char *d)
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

static int name_cmp(const void *x, const void *y)
{
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Lists DIR into L; false (and L unlisted) when it cannot be read or holds
 * more than LISTING_MAX names, and lstat() answers instead. */
static bool list_dir(listing *l)
{
  DIR *d = opendir(l->dir);
  if (!d)
    return false;
  size_t cap = 0;
  bool ok = true;
  for (struct dirent *e; ok && (e = readdir(d));) {
    if (l->n == LISTING_MAX) {
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

static void listings_free(builder *b)
{
  for (int i = 0; i < LISTINGS && b->dirs[i]; i++) {
    for (size_t k = 0; k < b->dirs[i]->n; k++)
      free(b->dirs[i]->names[k]);
    free(b->dirs[i]->names);
    free(b->dirs[i]);
  }
}

/* lstat(), except that a name its directory's listing does not hold is
 * missing without a system call. An answer from the listing is as old as
 * the listing, as lstat()'s is as old as its call: the plan is a snapshot
 * either way, and the mounts made from it check what they mount onto. */
static int plan_lstat(builder *b, const char *path, struct stat *st)
{
  char dir[PATH_MAX];
  parent_of(path, dir);
  const char *name = strrchr(path, '/') + 1;
  listing *l = NULL;
  int i = 0;
  for (; i < LISTINGS && b->dirs[i]; i++)
    if (!strcmp(b->dirs[i]->dir, dir)) {
      l = b->dirs[i];
      break;
    }
  if (!l && i < LISTINGS && (l = calloc(1, sizeof *l))) {
    strcpy(l->dir, dir);
    b->dirs[i] = l;
  }
  if (l && !l->listed && ++l->lookups == 2)
    l->listed = list_dir(l);
  if (l && l->listed && *name &&
      !bsearch(&name, l->names, l->n, sizeof *l->names, name_cmp)) {
    errno = ENOENT;
    return -1;
  }
  return lstat(path, st);
}

/* For a path that does not exist: the first missing component, made of the
 * resolved existing prefix and one more name, into the PATH_MAX buffer OUT.
 * Returns 1, or 0 when no prefix resolves to a directory (nothing could be
 * created there either), or -ENAMETOOLONG. */
static int first_missing(builder *b, const char *path, char *out)
{
  char cur[PATH_MAX], par[PATH_MAX];
  if (copy_path(cur, path) < 0)
    return -ENAMETOOLONG;
  for (;;) {
    parent_of(cur, par);
    struct stat st;
    bool known = b->memo && !strcmp(par, b->memo_dir);
    if (known || plan_lstat(b, par, &st) == 0) {
      if (!known) {
        b->memo = true;
        strcpy(b->memo_dir, par);
        if (!realpath(par, b->memo_real) || stat(b->memo_real, &st) < 0 || !S_ISDIR(st.st_mode))
          b->memo_real[0] = '\0';
      }
      if (!b->memo_real[0])
        return 0;
      return join(out, b->memo_real, strrchr(cur, '/') + 1) < 0 ? -ENAMETOOLONG : 1;
    }
    if (!strcmp(par, "/"))
      return 0;
    strcpy(cur, par);
  }
}

/* An option's path: it must exist for write and read; a missing --deny
 * path is masked at its first missing component. */
static int add_option(builder *b, const char *arg, const char *cwd, shk_access a)
{
  char real[PATH_MAX], abs[PATH_MAX], miss[PATH_MAX];
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
  r = first_missing(b, abs, miss);
  if (r < 0)
    return toolong(b->err, arg);
  return r ? add_created(b->p, miss, a, SHK_MOUNT_DEV_NULL, false, b->err) : 0;
}

/* A built-in protection. It never widens what is visible: a path the plan
 * does not show is left alone. A missing path is masked only where something
 * could be planted (a writable parent). A symlink is followed to what it
 * protects; one inside a writable root cannot be covered by a mount, so the
 * run is refused rather than left open. */
static int protect(builder *b, const char *path, shk_access a, bool dir)
{
  shk_sandbox_plan *p = b->p;
  /* Judged against the options and the cwd only, never against another
   * default, so the order of the lists above does not matter. */
  shk_sandbox_plan roots = { p->read_restricted, p->rules, b->nroots };
  struct stat st;
  bool visible;
  char par[PATH_MAX], miss[PATH_MAX];
  if (plan_lstat(b, path, &st) == 0) {
    parent_of(path, par);
    if (S_ISLNK(st.st_mode)) {
      if (writable(&roots, par))
        return fail(b->err, "protected path %s is a symlink inside a writable root; "
                    "move it or pass --deny or --read for it explicitly", path);
      char real[PATH_MAX];
      if (realpath(path, real) && stat(real, &st) == 0) {
        shk_sandbox_plan_access(&roots, real, &visible);
        if (visible)
          return add(p, real, a, kind_for(a, &st), true, b->err);
      }
      return 0;
    }
    shk_sandbox_plan_access(&roots, path, &visible);
    return visible ? add(p, path, a, kind_for(a, &st), true, b->err) : 0;
  }
  int r = first_missing(b, path, miss);
  if (r <= 0)
    return r < 0 ? toolong(b->err, path) : 0;
  parent_of(miss, par);
  /* A missing parent of the protected path (~/.config for
   * ~/.config/gcloud) is a directory too. */
  bool as_dir = dir || strcmp(strrchr(miss, '/'), strrchr(path, '/'));
  if (writable(&roots, par))
    return add_created(p, miss, a, as_dir ? SHK_MOUNT_TMPFS : SHK_MOUNT_DEV_NULL, true, b->err);
  return 0;
}

/* Protects BASE/NAME, where a trailing '/' on NAME marks a directory. */
static int protect_name(builder *b, const char *base, const char *name, shk_access a)
{
  size_t len = strlen(name);
  bool dir = name[len - 1] == '/';
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s%s%.*s", base, strcmp(base, "/") ? "/" : "",
                   (int)(len - dir), name);
  if (n < 0 || n >= PATH_MAX)
    return toolong(b->err, base);
  return protect(b, path, a, dir);
}

static int protect_home(builder *b, const char *home)
{
  char real[PATH_MAX];
  if (!home || !realpath(home, real))
    return 0;
  /* A home the caller cannot search (root's, as $HOME of a command run as
   * another user) holds nothing the command could reach: it runs with the
   * caller's ids and no capability. One check instead of a refused lstat()
   * per protected name. */
  if (faccessat(AT_FDCWD, real, X_OK, AT_EACCESS) < 0 && errno == EACCES)
    return 0;
  const char *const *lists[] = { home_masked, home_readonly };
  for (size_t l = 0; l < 2; l++)
    for (const char *const *n = lists[l]; *n; n++) {
      int r = protect_name(b, real, *n, l == 0 ? SHK_ACCESS_DENY : SHK_ACCESS_READ);
      if (r < 0)
        return r;
    }
  return 0;
}

static int protect_path_dirs(builder *b, const char *path_var)
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
        r = protect(b, norm, SHK_ACCESS_READ, true);
      if (r < 0)
        return r == -ENAMETOOLONG ? toolong(b->err, entry) : r;
    }
    d += len;
  }
  return 0;
}

/* The hooks and config of the repository whose work tree is DIR, and of
 * its submodules (kept in .git/modules/NAME). */
static int protect_repo(builder *b, const char *dir, size_t *budget)
{
  for (const char *const *n = git_readonly; *n; n++) {
    int r = protect_name(b, dir, *n, SHK_ACCESS_READ);
    if (r < 0)
      return r;
  }
  char modules[PATH_MAX];
  if (join(modules, dir, ".git/modules") < 0)
    return toolong(b->err, dir);
  DIR *d = opendir(modules);
  if (!d)
    return 0;
  int r = 0;
  for (struct dirent *e; r == 0 && *budget > 0 && (e = readdir(d));) {
    (*budget)--;
    if (e->d_name[0] == '.' || e->d_type != DT_DIR)
      continue;
    char m[PATH_MAX];
    if (join(m, modules, e->d_name) < 0) {
      r = toolong(b->err, modules);
      break;
    }
    static const char *const names[] = { "hooks/", "config", NULL };
    for (const char *const *n = names; r == 0 && *n; n++)
      r = protect_name(b, m, *n, SHK_ACCESS_READ);
  }
  closedir(d);
  return r;
}

/* Finds repositories at ROOT and up to four levels below it (a tree of
 * checkouts such as src/HOST/OWNER/REPO), breadth first so that the
 * shallow ones come first. The scan reads at most *budget directory
 * entries in at most *dirs directories, so its cost never grows with the
 * size of the tree; a repository
 * past the budget is not protected (docs/sandbox.md). node_modules holds no
 * repositories worth the budget. */
static int scan_repos(builder *b, const char *root, size_t *budget, size_t *dirs)
{
  enum { MAX_DEPTH = 4 };
  char **level = malloc(sizeof *level);
  size_t n = 1;
  if (!level || !(level[0] = strdup(root))) {
    free(level);
    return nomem(b->err);
  }
  int r = 0;
  for (int depth = 0; n > 0 && r == 0; depth++) {
    char **next = NULL;
    size_t nn = 0;
    for (size_t i = 0; i < n && r == 0 && *dirs > 0; i++) {
      /* A directory is a repository when its listing has a .git directory;
       * at the deepest level only that is looked for. */
      DIR *d = opendir(level[i]);
      if (!d)
        continue;
      (*dirs)--;
      bool repo = false;
      for (struct dirent *e; *budget > 0 && (e = readdir(d));) {
        (*budget)--;
        if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
          continue;
        if (!strcmp(e->d_name, ".git")) {
          repo = true;
          continue;
        }
        if (depth == MAX_DEPTH || !strcmp(e->d_name, "node_modules"))
          continue;
        char sub[PATH_MAX];
        if (join(sub, level[i], e->d_name) < 0) {
          r = toolong(b->err, level[i]);
          break;
        }
        char **grown = realloc(next, (nn + 1) * sizeof *next);
        if (grown)
          next = grown;
        if (!grown || !(next[nn] = strdup(sub))) {
          r = nomem(b->err);
          break;
        }
        nn++;
      }
      closedir(d);
      if (repo && r == 0)
        r = protect_repo(b, level[i], budget);
    }
    for (size_t i = 0; i < n; i++)
      free(level[i]);
    free(level);
    level = next;
    n = nn;
  }
  for (size_t i = 0; i < n; i++)
    free(level[i]);
  free(level);
  return r;
}

static int protect_git(builder *b)
{
  for (size_t i = 0; i < b->nroots; i++) {
    if (b->p->rules[i].access != SHK_ACCESS_WRITE)
      continue;
    /* A copy: the rules array moves as protections are added. */
    char root[PATH_MAX];
    strcpy(root, b->p->rules[i].path);
    size_t budget = 4096, dirs = 128;
    int r = scan_repos(b, root, &budget, &dirs);
    if (r < 0)
      return r;
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
    shk_sandbox_plan others = { p->read_restricted, p->rules, p->n };
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
    shk_sandbox_plan view = { p->read_restricted, p->rules, out };
    const shk_sandbox_rule *anc = covering_rule(&view, r->path);
    bool same = anc ? anc->kind == r->kind && anc->kind != SHK_MOUNT_TMPFS &&
                          anc->kind != SHK_MOUNT_DEV_NULL && anc->kind != SHK_MOUNT_PIN
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
  builder b = { p, { NULL }, 0, err, false, "", "" };
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
  for (size_t i = 0; i < 2 && r == 0; i++)
    if (env->homes[i] && (i == 0 || !env->homes[0] || strcmp(env->homes[0], env->homes[1])))
      r = protect_home(&b, env->homes[i]);
  if (r == 0)
    r = protect_path_dirs(&b, env->path);
  for (const char *const *m = root_masked; env->root && *m && r == 0; m++)
    r = protect(&b, *m, SHK_ACCESS_DENY, false);
  if (r == 0)
    r = protect_git(&b);
  if (r < 0)
    goto out;
  drop_symlinked_grants(p);
  if ((r = pin_parents(p, err)) < 0)
    goto out;
  finish(p);
out:
  listings_free(&b);
  if (r < 0)
    shk_sandbox_plan_free(p);
  return r;
}

void shk_sandbox_plan_free(shk_sandbox_plan *p)
{
  for (size_t i = 0; i < p->n; i++)
    free(p->rules[i].path);
  free(p->rules);
  memset(p, 0, sizeof *p);
}

/* Safe because it runs after the sandbox is gone (every process inside died
 * with its pid namespace), removes only mount points bwrap created for this
 * plan, only while they are still empty, and never through a symlink. */
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
    if (S_ISDIR(st.st_mode))
      rmdir(r->path);
    else if (S_ISREG(st.st_mode) && st.st_size == 0)
      unlink(r->path);
  }
}

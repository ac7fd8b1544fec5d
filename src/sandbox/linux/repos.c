/* SPDX-License-Identifier: Apache-2.0 */
/* Git repositories: nothing the command writes may run when git is used
 * later on the host. Git finds a repository from the directory it runs in
 * (a `.git` directory or file, or a directory that is itself a git
 * directory), then reads configuration and hooks from every place these
 * name. So, read-only to the sandbox, for every repository found:
 *   - `.git` itself when it is a file ("gitdir: ..."), a submodule's or a
 *     linked worktree's;
 *   - in each git directory: config, config.worktree, commondir, gitdir,
 *     hooks/ and info/, and the same in modules/ (submodules, nested) and
 *     worktrees/ (linked worktrees), and the common directory commondir
 *     names;
 *   - what the configuration files name: core.hooksPath, included files
 *     (include.path, includeIf.*.path) and the files named by path in
 *     command-valued keys (core.fsmonitor, aliases with '!', filters, ...:
 *     the program and the scripts it is given); the same for the global
 *     configuration
 *     (~/.gitconfig, $XDG_CONFIG_HOME/git/config, /etc/gitconfig).
 * A missing commondir is masked by a file that names the git directory
 * itself ("."), which changes nothing for git inside or on the host; a
 * missing config by an empty one; missing hooks/ by an empty directory.
 *
 * Which repositories: the one git finds from each writable root (walking
 * up, as git does), and every one inside a writable root, found by reading
 * the whole tree (no count the tree's own content could exhaust: the cost
 * is bounded by SHK_SANDBOX_SCAN_MAX directories, past which the run is
 * refused). node_modules is not searched (package managers keep no
 * repositories there), nor the inside of a git directory. Where the
 * repository git finds for a writable root lies above it, a missing `.git`
 * (and HEAD, which makes a bare repository) there is masked: one made
 * there would take that place. */
#include "plan-internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#define nomem(err) shk__error_set(err, -ENOMEM, "out of memory")
#define toolong(err, path) shk__error_set(err, -ENAMETOOLONG, "%.200s...: path too long", path)

enum { MAX_INCLUDE_DEPTH = 10, MAX_MODULE_DEPTH = 16, MAX_CONFIG = 1 << 20 };

typedef struct strs {
  char **v;
  size_t n;
} strs;

typedef struct repos {
  shk__builder *b;
  strs done;      /* git directories protected already (resolved) */
  strs rel_hooks; /* relative core.hooksPath of the global configuration */
  strs rel_cmds;  /* relative programs of the global configuration's commands */
} repos;

static bool strs_has(const strs *s, const char *v)
{
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->v[i], v))
      return true;
  return false;
}

static int strs_add(strs *s, const char *v)
{
  char *c = strdup(v);
  char **n = c ? realloc(s->v, (s->n + 1) * sizeof *n) : NULL;
  if (!n) {
    free(c);
    return -ENOMEM;
  }
  s->v = n;
  s->v[s->n++] = c;
  return 0;
}

static void strs_free(strs *s)
{
  for (size_t i = 0; i < s->n; i++)
    free(s->v[i]);
  free(s->v);
}

/* P made absolute: "~/..." against the first home, a relative path against
 * BASE (NULL: a relative path is not resolved), into the PATH_MAX buffer
 * OUT. False when it cannot be. */
static bool resolve_path(const shk__builder *b, const char *p, const char *base, char *out)
{
  char tmp[PATH_MAX];
  const char *home = b->env->homes[0] ? b->env->homes[0] : b->env->homes[1];
  if (p[0] == '~') {
    if (p[1] != '/' || !home || snprintf(tmp, sizeof tmp, "%s%s", home, p + 1) >= (int)sizeof tmp)
      return false;
    p = tmp;
  } else if (p[0] != '/' && !base) {
    return false;
  }
  return shk__path_normalize(p, base ? base : "/", out) == 0;
}

static int protect_file(repos *rs, const char *path, const char *text, unsigned flags)
{
  return shk__plan_protect(rs->b, path, SHK_ACCESS_READ, flags, text);
}

static int protect_in(repos *rs, const char *dir, const char *name, unsigned flags,
                      const char *text)
{
  char path[PATH_MAX];
  if (shk__path_join(path, dir, name) < 0)
    return toolong(rs->b->err, dir);
  return protect_file(rs, path, text, flags);
}

/* ---- the configuration files ---- */

/* What a configuration file says that matters here. */
typedef struct conf_ctx {
  repos *rs;
  const char *file_dir; /* includes are relative to the including file */
  const char *worktree; /* hooks and commands run from here; NULL: unknown */
  bool global;          /* the global configuration: relative paths are per repository */
  int depth;
} conf_ctx;

static int parse_config(conf_ctx *c, const char *file);

/* The next word of the command V (from *POS) that names a file by path
 * (holds a '/': the program, or a script it is given, `sh tools/x.sh`),
 * into the PATH_MAX buffer OUT; false when none is left. Quotes are
 * dropped, not interpreted: a word git's shell would split differently is
 * at worst protected needlessly. */
static bool command_path(const char *v, size_t *pos, char *out)
{
  const char *p = v + *pos;
  while (*p) {
    while (*p == '!' || isspace((unsigned char)*p) || strchr(";|&<>()", *p))
      p++;
    size_t n = 0;
    bool slash = false;
    for (; *p && !isspace((unsigned char)*p) && !strchr(";|&<>()", *p); p++) {
      if (*p == '"' || *p == '\'')
        continue;
      slash |= *p == '/';
      if (n < PATH_MAX - 1)
        out[n++] = *p;
    }
    out[n] = '\0';
    if (slash && n < PATH_MAX - 1) {
      *pos = (size_t)(p - v);
      return true;
    }
  }
  *pos = (size_t)(p - v);
  return false;
}

/* Does SECTION.SUB.KEY take a command (a program git runs)? */
static bool command_key(const char *section, const char *sub, const char *key)
{
  static const char *const plain[] = {
    "core.fsmonitor", "core.sshcommand", "core.pager", "core.editor", "core.askpass",
    "core.alternaterefscommand", "sequence.editor", "diff.external", "gpg.program",
    "credential.helper", "uploadpack.packobjectshook", "sendemail.sendmailcmd", NULL,
  };
  char full[160];
  snprintf(full, sizeof full, "%s.%s", section, key);
  for (const char *const *p = plain; *p; p++)
    if (!strcmp(full, *p))
      return true;
  if (!sub)
    return false;
  return (!strcmp(section, "filter") &&
          (!strcmp(key, "clean") || !strcmp(key, "smudge") || !strcmp(key, "process"))) ||
         (!strcmp(section, "merge") && !strcmp(key, "driver")) ||
         (!strcmp(section, "diff") && (!strcmp(key, "textconv") || !strcmp(key, "command"))) ||
         (!strcmp(section, "gpg") && !strcmp(key, "program")) ||
         (!strcmp(section, "credential") && !strcmp(key, "helper"));
}

static int on_value(conf_ctx *c, const char *section, const char *sub, const char *key,
                    const char *value)
{
  repos *rs = c->rs;
  char path[PATH_MAX], prog[PATH_MAX];
  if ((!strcmp(section, "include") && !sub && !strcmp(key, "path")) ||
      (!strcmp(section, "includeif") && sub && !strcmp(key, "path"))) {
    /* Every conditional include counts: which condition holds later is not
     * known here. */
    if (!value || !resolve_path(rs->b, value, c->file_dir, path))
      return 0;
    int r = protect_file(rs, path, "", 0);
    if (r == 0 && c->depth < MAX_INCLUDE_DEPTH) {
      conf_ctx sub_ctx = *c;
      char dir[PATH_MAX];
      shk__path_parent(path, dir);
      sub_ctx.file_dir = dir;
      sub_ctx.depth++;
      r = parse_config(&sub_ctx, path);
    }
    return r;
  }
  if (!value)
    return 0;
  bool hooks = !strcmp(section, "core") && !sub && !strcmp(key, "hookspath");
  bool cmd = (!strcmp(section, "alias") && sub == NULL && value[0] == '!') ||
             (!strcmp(section, "pager") && !sub) || command_key(section, sub, key);
  if (!hooks && !cmd)
    return 0;
  size_t pos = 0;
  int r = 0;
  while (r == 0 && (hooks ? pos++ == 0 : command_path(value, &pos, prog))) {
    const char *v = hooks ? value : prog;
    /* A relative path of the global configuration is relative to each
     * repository's work tree: kept for the repositories found. */
    if (v[0] != '/' && v[0] != '~' && c->global)
      r = strs_add(hooks ? &rs->rel_hooks : &rs->rel_cmds, v) < 0 ? nomem(rs->b->err) : 0;
    else if (resolve_path(rs->b, v, c->worktree, path))
      r = protect_file(rs, path, NULL, hooks ? SHK__PROTECT_DIR : SHK__PROTECT_EXISTING);
  }
  return r;
}

static char *lower(char *s)
{
  for (char *p = s; *p; p++)
    *p = (char)tolower((unsigned char)*p);
  return s;
}

/* A reader of git's configuration syntax, enough to find the values above:
 * sections ([s], [s "sub"], [s.sub]), keys (case-insensitive), values with
 * quotes, backslash escapes, line continuations and comments, and a key
 * alone (a boolean true). Malformed input ends the reading: git itself
 * refuses such a file. */
static int parse_config(conf_ctx *c, const char *file)
{
  char *text = NULL;
  size_t len = 0;
  int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return 0;
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MAX_CONFIG) {
    close(fd);
    return 0;
  }
  close(fd);
  int r = shk__read_file(file, &text, &len);
  if (r < 0)
    return r == -ENOMEM ? nomem(c->rs->b->err) : 0;
  char section[64] = "", sub_buf[256], key[64], value[PATH_MAX];
  const char *sub = NULL;
  const char *p = text, *end = text + len;
  r = 0;
  while (p < end && r == 0) {
    while (p < end && isspace((unsigned char)*p))
      p++;
    if (p >= end)
      break;
    if (*p == '#' || *p == ';') {
      while (p < end && *p != '\n')
        p++;
      continue;
    }
    if (*p == '[') {
      p++;
      size_t n = 0;
      while (p < end && (isalnum((unsigned char)*p) || *p == '-' || *p == '.') && n < sizeof section - 1)
        section[n++] = *p++;
      section[n] = '\0';
      sub = NULL;
      char *dot = strchr(section, '.');
      if (dot) { /* [section.subsection], the old form */
        *dot = '\0';
        snprintf(sub_buf, sizeof sub_buf, "%s", lower(dot + 1));
        sub = sub_buf;
      }
      while (p < end && (*p == ' ' || *p == '\t'))
        p++;
      if (p < end && *p == '"') {
        p++;
        n = 0;
        while (p < end && *p != '"' && *p != '\n') {
          if (*p == '\\' && p + 1 < end)
            p++;
          if (n < sizeof sub_buf - 1)
            sub_buf[n++] = *p;
          p++;
        }
        sub_buf[n] = '\0';
        sub = sub_buf;
        if (p < end && *p == '"')
          p++;
      }
      if (p >= end || *p != ']')
        break;
      p++;
      lower(section);
      continue;
    }
    if (!isalpha((unsigned char)*p))
      break;
    size_t n = 0;
    while (p < end && (isalnum((unsigned char)*p) || *p == '-') && n < sizeof key - 1)
      key[n++] = *p++;
    key[n] = '\0';
    lower(key);
    while (p < end && (*p == ' ' || *p == '\t'))
      p++;
    if (p >= end || *p == '\n' || *p == '#' || *p == ';') {
      r = on_value(c, section, sub, key, NULL);
      continue;
    }
    if (*p != '=')
      break;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
      p++;
    bool quoted = false;
    n = 0;
    size_t keep = 0; /* the value without trailing blanks outside quotes */
    for (; p < end; p++) {
      char ch = *p;
      if (ch == '\n' && !quoted)
        break;
      if (!quoted && (ch == '#' || ch == ';')) {
        while (p < end && *p != '\n')
          p++;
        break;
      }
      if (ch == '"') {
        quoted = !quoted;
        keep = n;
        continue;
      }
      if (ch == '\\' && p + 1 < end) {
        ch = *++p;
        if (ch == '\n')
          continue;
        ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch == 'b' ? '\b' : ch;
        if (n < sizeof value - 1)
          value[n++] = ch;
        keep = n;
        continue;
      }
      if (n < sizeof value - 1)
        value[n++] = ch;
      if (quoted || !isspace((unsigned char)ch))
        keep = n;
    }
    value[keep] = '\0';
    r = on_value(c, section, sub, key, value);
  }
  free(text);
  return r;
}

/* ---- git directories and work trees ---- */

static int protect_gitdir(repos *rs, const char *gitdir, const char *worktree, int depth);

/* Reads a one-line file ("gitdir: X", a commondir) into OUT (PATH_MAX). */
static bool read_line(const char *path, const char *prefix, char *out)
{
  char buf[PATH_MAX + 16];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  size_t pl = strlen(prefix);
  if (strncmp(buf, prefix, pl))
    return false;
  return snprintf(out, PATH_MAX, "%s", buf + pl) < PATH_MAX && out[0];
}

/* The git directories below DIR (modules/, whose names may nest): a
 * directory holding HEAD or config is one. */
static int protect_modules(repos *rs, const char *dir, int depth)
{
  if (depth > MAX_MODULE_DEPTH)
    return 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int r = 0;
  for (struct dirent *e; r == 0 && (e = readdir(d));) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
      continue;
    char sub[PATH_MAX], probe[PATH_MAX];
    struct stat st;
    if (shk__path_join(sub, dir, e->d_name) < 0) {
      r = toolong(rs->b->err, dir);
      break;
    }
    if (lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode))
      continue;
    bool gitdir = (shk__path_join(probe, sub, "HEAD") == 0 && lstat(probe, &st) == 0) ||
                  (shk__path_join(probe, sub, "config") == 0 && lstat(probe, &st) == 0);
    r = gitdir ? protect_gitdir(rs, sub, NULL, depth + 1) : protect_modules(rs, sub, depth + 1);
  }
  closedir(d);
  return r;
}

/* GITDIR (a path, not yet resolved): what git reads there to find the
 * configuration and the hooks. WORKTREE is the work tree it serves, when
 * known (hooks and commands run from there). */
static int protect_gitdir(repos *rs, const char *gitdir, const char *worktree, int depth)
{
  shk__builder *b = rs->b;
  const char *g = shk__plan_real_dir(b, gitdir);
  if (!g)
    return 0;
  char real[PATH_MAX], path[PATH_MAX], target[PATH_MAX];
  strcpy(real, g);
  if (strs_has(&rs->done, real))
    return 0;
  if (strs_add(&rs->done, real) < 0)
    return nomem(b->err);
  conf_ctx c = { rs, real, worktree ? worktree : real, false, 0 };
  int r = protect_in(rs, real, "config", 0, "");
  if (r == 0 && shk__path_join(path, real, "config") == 0)
    r = parse_config(&c, path);
  /* A commondir git would follow; when missing, one that names this very
   * directory, so that one made inside cannot redirect git. */
  if (r == 0)
    r = protect_in(rs, real, "commondir", 0, ".\n");
  if (r == 0)
    r = protect_in(rs, real, "gitdir", SHK__PROTECT_EXISTING, NULL);
  if (r == 0)
    r = protect_in(rs, real, "hooks", SHK__PROTECT_DIR, NULL);
  if (r == 0)
    r = protect_in(rs, real, "info", SHK__PROTECT_DIR | SHK__PROTECT_EXISTING, NULL);
  /* config.worktree counts only under extensions.worktreeConfig, which a
   * linked worktree's git directory takes from the common one: masked when
   * missing in every git directory, whatever the configuration says. */
  if (r == 0)
    r = protect_in(rs, real, "config.worktree", 0, "");
  if (r == 0 && shk__path_join(path, real, "config.worktree") == 0)
    r = parse_config(&c, path);
  /* The global configuration's relative hooks and programs, in this work
   * tree. */
  for (size_t i = 0; worktree && r == 0 && i < rs->rel_hooks.n; i++)
    if (resolve_path(b, rs->rel_hooks.v[i], worktree, path))
      r = protect_file(rs, path, NULL, SHK__PROTECT_DIR);
  for (size_t i = 0; worktree && r == 0 && i < rs->rel_cmds.n; i++)
    if (resolve_path(b, rs->rel_cmds.v[i], worktree, path))
      r = protect_file(rs, path, NULL, SHK__PROTECT_EXISTING);
  /* The common directory of a linked worktree's git directory. */
  if (r == 0 && shk__path_join(path, real, "commondir") == 0 && read_line(path, "", target) &&
      depth < MAX_MODULE_DEPTH && resolve_path(b, target, real, path))
    r = protect_gitdir(rs, path, worktree, depth + 1);
  if (r == 0 && shk__path_join(path, real, "modules") == 0)
    r = protect_modules(rs, path, depth);
  if (r == 0 && shk__path_join(path, real, "worktrees") == 0 && depth < MAX_MODULE_DEPTH) {
    DIR *d = opendir(path);
    for (struct dirent *e; d && r == 0 && (e = readdir(d));) {
      char wt[PATH_MAX];
      if (e->d_name[0] == '.' || shk__path_join(wt, path, e->d_name) < 0)
        continue;
      r = protect_gitdir(rs, wt, NULL, depth + 1);
    }
    if (d)
      closedir(d);
  }
  return r;
}

/* The repository whose work tree is DIR, found by its `.git` ENTRY (a
 * directory, a "gitdir:" file, or a symlink). */
static int protect_worktree(repos *rs, const char *dir, const char *entry)
{
  shk__builder *b = rs->b;
  struct stat st;
  char gitdir[PATH_MAX], target[PATH_MAX];
  if (shk__plan_lstat(b, entry, &st) < 0)
    return 0;
  if (S_ISDIR(st.st_mode))
    return protect_gitdir(rs, entry, dir, 0);
  /* A file or a symlink: the entry itself is protected (a symlink inside
   * a writable root is masked, with a warning). */
  int r = protect_file(rs, entry, NULL, SHK__PROTECT_EXISTING);
  if (r < 0)
    return r;
  if (S_ISLNK(st.st_mode)) {
    if (shk__plan_writable(b, dir))
      return 0;
    return realpath(entry, gitdir) ? protect_gitdir(rs, gitdir, dir, 0) : 0;
  }
  if (S_ISREG(st.st_mode) && read_line(entry, "gitdir: ", target) &&
      resolve_path(b, target, dir, gitdir))
    return protect_gitdir(rs, gitdir, dir, 0);
  return 0;
}

/* A directory that is itself a git directory (a bare repository): HEAD,
 * objects/ and refs/, as git checks. A plain lstat(): the ancestors this
 * probes are asked for two or three names, and listing them (/tmp may hold
 * thousands) would cost more. */
static bool is_gitdir(const char *dir)
{
  static const char *const names[] = { "HEAD", "objects", "refs" };
  for (size_t i = 0; i < 3; i++) {
    char p[PATH_MAX];
    struct stat st;
    if (shk__path_join(p, dir, names[i]) < 0 || lstat(p, &st) < 0 ||
        (i > 0 && !S_ISDIR(st.st_mode)))
      return false;
  }
  return true;
}

/* From the writable root ROOT up, as git searches: the first directory
 * with a `.git`, or that is a git directory, is the repository git would
 * use there. When it lies above ROOT, a `.git` or HEAD made in a writable
 * directory on the way would take its place: those are masked. */
static int walk_up(repos *rs, const char *root)
{
  shk__builder *b = rs->b;
  char cur[PATH_MAX], entry[PATH_MAX], up[PATH_MAX];
  strcpy(cur, root);
  int r = 0;
  for (;;) {
    struct stat st;
    if (shk__path_join(entry, cur, ".git") < 0)
      return toolong(b->err, cur);
    if (lstat(entry, &st) == 0) {
      r = protect_worktree(rs, cur, entry);
      break;
    }
    if (is_gitdir(cur)) {
      r = protect_gitdir(rs, cur, NULL, 0);
      break;
    }
    if (!strcmp(cur, "/"))
      return 0;
    shk__path_parent(cur, up);
    strcpy(cur, up);
  }
  if (r < 0 || !strcmp(cur, root))
    return r;
  /* Every writable directory from ROOT up to the repository. */
  strcpy(up, root);
  while (r == 0 && strcmp(up, cur) && shk__plan_writable(b, up)) {
    r = protect_in(rs, up, ".git", SHK__PROTECT_DIR, NULL);
    if (r == 0)
      r = protect_in(rs, up, "HEAD", 0, NULL);
    char par[PATH_MAX];
    shk__path_parent(up, par);
    strcpy(up, par);
  }
  return r;
}

/* The whole tree below ROOT, breadth first, each directory read once:
 * every `.git` found is a repository, every git directory (a bare
 * repository) one too, and neither is searched further (their insides are
 * protected as git directories). */
static int scan(repos *rs, const char *root)
{
  shk__builder *b = rs->b;
  strs queue = { 0 };
  if (strs_add(&queue, root) < 0)
    return nomem(b->err);
  int r = 0;
  for (size_t q = 0; q < queue.n && r == 0; q++) {
    const char *dir = queue.v[q];
    if (++b->scanned > SHK_SANDBOX_SCAN_MAX) {
      r = shk__error_set(b->err, -E2BIG, "the writable roots hold more than %d directories "
                         "(outside node_modules), too many to search for git repositories, "
                         "whose hooks and configuration must be protected "
                         "(work in a smaller directory, or --write less)", SHK_SANDBOX_SCAN_MAX);
      break;
    }
    DIR *d = opendir(dir);
    if (!d && (errno == ENOENT || errno == ENOTDIR))
      continue; /* gone since its parent was read: nothing to protect */
    if (!d) {
      /* A directory that cannot be listed may still hold a repository the
       * command reaches by name (search permission is enough), and one the
       * caller owns the command can make readable: either way a repository
       * in it would go unprotected. Safe to skip only when the caller can
       * neither enter it nor change its mode, so that nothing below it is
       * reachable from inside. */
      int e = errno;
      struct stat st;
      bool owned = stat(dir, &st) == 0 && st.st_uid == b->env->uid;
      if (!owned && access(dir, X_OK) != 0)
        continue;
      r = shk__error_set(b->err, -e, "%.200s: a directory in a writable root that cannot be "
                         "listed (%s), so the git repositories it may hold cannot be protected "
                         "(make it readable, or --write less)", dir, strerror(e));
      break;
    }
    size_t first = queue.n;
    bool git = false, head = false, objects = false, refs = false;
    for (struct dirent *e; r == 0 && (e = readdir(d));) {
      const char *n = e->d_name;
      if (n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))
        continue;
      if (!strcmp(n, ".git")) {
        git = true;
        continue;
      }
      head |= !strcmp(n, "HEAD");
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st;
        type = fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)
               ? DT_DIR : DT_REG;
      }
      if (type != DT_DIR)
        continue;
      objects |= !strcmp(n, "objects");
      refs |= !strcmp(n, "refs");
      if (!strcmp(n, "node_modules"))
        continue;
      char sub[PATH_MAX];
      if (shk__path_join(sub, dir, n) < 0 || strlen(sub) >= PATH_MAX - 64) {
        r = shk__error_set(b->err, -ENAMETOOLONG, "%.200s...: a directory too deep in a writable "
                           "root to protect the git repositories it may hold; nothing was run",
                           dir);
        break;
      }
      if (strs_add(&queue, sub) < 0)
        r = nomem(b->err);
    }
    closedir(d);
    if (r < 0)
      break;
    char entry[PATH_MAX];
    /* queue.v may have moved: DIR is read again from it. */
    dir = queue.v[q];
    if (git && shk__path_join(entry, dir, ".git") == 0) {
      r = protect_worktree(rs, dir, entry);
    } else if (head && objects && refs) {
      r = protect_gitdir(rs, dir, NULL, 0);
      /* Not searched further. */
      for (size_t i = first; i < queue.n; i++)
        free(queue.v[i]);
      queue.n = first;
    }
  }
  strs_free(&queue);
  return r;
}

int shk__plan_protect_repos(shk__builder *b)
{
  repos rs = { .b = b };
  int r = 0;
  /* The global configuration: what it includes, its hooks and programs. */
  const shk_sandbox_env *env = b->env;
  char files[6][PATH_MAX];
  size_t nfiles = 0;
  snprintf(files[nfiles++], PATH_MAX, "/etc/gitconfig");
  for (size_t i = 0; i < 2; i++)
    if (env->homes[i]) {
      snprintf(files[nfiles++], PATH_MAX, "%s/.gitconfig", env->homes[i]);
      snprintf(files[nfiles++], PATH_MAX, "%s/.config/git/config", env->homes[i]);
    }
  if (env->xdg_config)
    snprintf(files[nfiles++], PATH_MAX, "%s/git/config", env->xdg_config);
  for (size_t i = 0; i < nfiles && r == 0; i++) {
    char dir[PATH_MAX];
    shk__path_parent(files[i], dir);
    conf_ctx c = { &rs, dir, NULL, true, 0 };
    r = parse_config(&c, files[i]);
  }
  /* A copy of each root: the rules array moves as protections are added.
   * A root inside another is searched with it. */
  for (size_t i = 0; i < b->nroots && r == 0; i++) {
    char root[PATH_MAX];
    if (b->p->rules[i].access != SHK_ACCESS_WRITE)
      continue;
    strcpy(root, b->p->rules[i].path);
    r = walk_up(&rs, root);
    bool inside = false;
    for (size_t j = 0; j < b->nroots && !inside; j++)
      inside = j != i && b->p->rules[j].access == SHK_ACCESS_WRITE &&
               shk__path_under(root, b->p->rules[j].path) &&
               (strcmp(root, b->p->rules[j].path) || j < i);
    if (r == 0 && !inside)
      r = scan(&rs, root);
  }
  strs_free(&rs.done);
  strs_free(&rs.rel_hooks);
  strs_free(&rs.rel_cmds);
  return r;
}

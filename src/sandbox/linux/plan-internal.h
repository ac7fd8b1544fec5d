/* SPDX-License-Identifier: Apache-2.0 */
/* Between the parts of the filesystem plan: plan.c (options, protections,
 * ordering), protected.c (the table of protected paths) and repos.c (git
 * repositories). Internal to the module. */
#pragma once

#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "common/common.h"
#include "sandbox-internal.h"

/* Where a protected name lies (protected.c). */
typedef enum shk__base {
  SHK__BASE_HOME,    /* each home directory */
  SHK__BASE_CONFIG,  /* $XDG_CONFIG_HOME, and each home's .config */
  SHK__BASE_DATA,    /* $XDG_DATA_HOME, and each home's .local/share */
  SHK__BASE_STATE,   /* $XDG_STATE_HOME, and each home's .local/state */
  SHK__BASE_RUNTIME, /* $XDG_RUNTIME_DIR */
  SHK__BASE_ROOTS,   /* each writable root, where the name exists */
  SHK__BASE_ABS,     /* an absolute path */
} shk__base;

typedef struct shk__protected {
  shk__base base;
  const char *name; /* a trailing '/' marks a directory */
  shk_access access; /* DENY: masked; READ: read-only */
} shk__protected;

/* The table, ending with a NULL name, and a root caller's extra masks. */
extern const shk__protected shk__protected_paths[];
extern const char *const shk__root_masked[];

/* The names of one directory, listed once. */
typedef struct shk__listing {
  char dir[PATH_MAX];
  unsigned lookups; /* lstat()s so far; the directory is listed at SHK__LIST_AT */
  bool listed;      /* `names` holds every name in it */
  char **names;     /* sorted */
  size_t n;
} shk__listing;

/* A directory is listed at the third name looked up in it: a home or a
 * writable root, where the table looks up hundreds, is listed once, while
 * the ancestors that the search for a repository probes for two names
 * (.git, HEAD) are not (/tmp may hold thousands). */
enum { SHK__LISTINGS = 64, SHK__LISTING_MAX = 4096, SHK__LIST_AT = 3 };

/* A directory as the plan resolved it: its real path, or NULL when it is
 * missing or not a directory; and the symlink on the way to it that lies
 * inside a writable root, if any (that link could be replaced by a fresh
 * directory, so what lies beneath it is protected by masking the link). */
typedef struct shk__dir_memo {
  char *dir, *real, *link;
} shk__dir_memo;

typedef struct shk__builder {
  shk_sandbox_plan *p;
  const shk_sandbox_env *env;
  shk__listing *dirs[SHK__LISTINGS];
  shk__dir_memo *memo;
  size_t nmemo, capmemo;
  size_t nroots; /* the rules (options and the cwd) defaults are judged against */
  size_t scanned; /* directories read to find repositories */
  shk_error *err;
} shk__builder;

/* Flags of shk__plan_protect. */
enum {
  SHK__PROTECT_DIR = 1 << 0,      /* the path is a directory (masked by one when missing) */
  SHK__PROTECT_EXISTING = 1 << 1, /* only where it exists: nothing is masked when missing */
};

/* Protects PATH (absolute, normalized, not yet resolved): its directory is
 * resolved (symlinks followed) and PATH protected there with access A,
 * when the view shows it. Where it is missing inside a writable root, its
 * first missing component is masked (a directory, a file by /dev/null, or,
 * given TEXT, by a read-only file holding TEXT); a symlink inside a
 * writable root is masked where it is, with a warning; one outside is
 * followed to what it names. 0 or -errno (with B->err). */
int shk__plan_protect(shk__builder *b, const char *path, shk_access a, unsigned flags,
                      const char *text);
/* DIR resolved (memoized): its memo, whose real is NULL when DIR is
 * missing or not a directory; NULL when out of memory. */
const shk__dir_memo *shk__plan_resolve(shk__builder *b, const char *dir);
/* DIR's real path, or NULL. */
const char *shk__plan_real_dir(shk__builder *b, const char *dir);
/* lstat(), answered from the directory's listing where a name is missing. */
int shk__plan_lstat(shk__builder *b, const char *path, struct stat *st);
/* Does the view let the command write PATH (resolved)? By the options and
 * the cwd alone. */
bool shk__plan_writable(const shk__builder *b, const char *path);
/* One warning line for the plan. 0 or -ENOMEM. */
SHK_PRINTF(2, 3) int shk__plan_warn(shk__builder *b, const char *fmt, ...);

/* DIR/NAME into the PATH_MAX buffer DST. 0 or -ENAMETOOLONG. */
int shk__path_join(char *dst, const char *dir, const char *name);
/* The parent of PATH (absolute, normalized) into the PATH_MAX buffer D. */
void shk__path_parent(const char *path, char *d);
/* IN made absolute against CWD, ".", ".." and repeated '/' removed
 * lexically, into the PATH_MAX buffer OUT. 0 or -ENAMETOOLONG. */
int shk__path_normalize(const char *in, const char *cwd, char *out);

/* The git repositories of the writable roots, their ancestors and their
 * trees, and what git reads to find their configuration and hooks
 * (repos.c). 0 or -errno. */
int shk__plan_protect_repos(shk__builder *b);

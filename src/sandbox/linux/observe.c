/* SPDX-License-Identifier: Apache-2.0 */
/* The write observer. A refused write shows inside only as the workload's
 * own EROFS or EACCES, and Landlock's audit records need an audit daemon
 * and a privilege the caller may not have. So stage 2 installs a second
 * seccomp filter whose only action besides ALLOW is a user notification,
 * for the calls that create, remove, rename or truncate a name and the
 * opens that ask to write (tools/seccomp-gen.c); its listener comes to the
 * launcher with stage 2's report, shared with the connect() guard.
 *
 * For each call the launcher reads the path (a bounded read of the
 * workload's memory, which never blocks on the workload), checks with
 * SECCOMP_IOCTL_NOTIF_ID_VALID that the thread it read from is still the
 * one that made the call, and answers SECCOMP_USER_NOTIF_FLAG_CONTINUE at
 * once: the kernel then performs the call as it would without the
 * observer, its mounts and Landlock deciding. The observer never grants
 * and never refuses anything. Only then does it resolve the path (inside
 * the sandbox's root, symlinks followed as the kernel follows them) and
 * judge it against the sandbox's own plan: beneath a masked or protected
 * tree, a read-only one, or outside every writable root, on a mount that
 * is still read-only (a live grant may have made it writable since), the
 * kernel refused it, and it is counted under that tree. A name that exists
 * for a call that creates one (EEXIST), or is missing for one that removes
 * or truncates one (ENOENT), is no refusal, and is not counted.
 *
 * Holding a call instead of answering at once (to ask a human, mount a
 * grant, then let it continue) fits here: the judgement needs only what
 * was read before the answer, and the thread stays blocked, its arguments
 * unchanged, for as long as its notification is unanswered. Nothing of
 * that is done now.
 *
 * If the launcher dies, the listener goes with it and every observed call
 * fails with ENOSYS: the sandbox loses writes, never gains any. */
#include "plan-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/common.h"

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef ST_RDONLY
#define ST_RDONLY 1
#endif

/* The most trees counted apart; writes under more are counted together. */
#define MAX_TREES 64

struct shk__observer {
  const shk_sandbox_plan *plan;
  void (*live)(void *, const shk_sandbox_write_refusal *);
  void *data;
  int root; /* the sandbox's root directory (every process inside shares it), or -1 */
  shk_sandbox_write_refusal *trees;
  size_t n;
  unsigned more;
};

shk__observer *shk__observer_new(const shk_sandbox_plan *plan,
                                 void (*live)(void *, const shk_sandbox_write_refusal *),
                                 void *data)
{
  shk__observer *o = calloc(1, sizeof *o);
  if (!o)
    return NULL;
  o->plan = plan;
  o->live = live;
  o->data = data;
  o->root = -1;
  return o;
}

void shk__observer_free(shk__observer *o)
{
  if (!o)
    return;
  if (o->root >= 0)
    close(o->root);
  for (size_t i = 0; i < o->n; i++)
    free(o->trees[i].tree);
  free(o->trees);
  free(o);
}

void shk__observer_take(shk__observer *o, shk_sandbox_result *res)
{
  if (!o)
    return;
  res->writes_refused = o->trees;
  res->nwrites_refused = o->n;
  res->writes_refused_more = o->more;
  o->trees = NULL;
  o->n = 0;
}

/* What an observed call does to the name it is given. */
typedef enum what {
  CREATES, /* makes a new name: EEXIST when it exists */
  REMOVES, /* removes or changes an existing name: ENOENT when it does not */
  OPENS,   /* open() with FLAGS */
  REPLACES, /* rename()'s target: a write whether it exists or not */
} what;

/* One name a call writes: the path argument and the directory it is
 * relative to (AT_FDCWD or a descriptor of the caller's). */
typedef struct name {
  int dirfd;
  uint64_t addr;
  what w;
} name;

/* The names call REQ writes (at most two, for rename), and the flags of an
 * open. 0 names: not a call this observer knows. */
static size_t names_of(const struct seccomp_notif *req, name out[2], uint64_t *flags)
{
  const __u64 *a = req->data.args;
  *flags = 0;
  switch (req->data.nr) {
#ifdef SYS_open
  case SYS_open: *flags = a[1]; out[0] = (name){ AT_FDCWD, a[0], OPENS }; return 1;
  case SYS_creat:
    *flags = O_CREAT | O_WRONLY | O_TRUNC;
    out[0] = (name){ AT_FDCWD, a[0], OPENS };
    return 1;
  case SYS_mkdir: case SYS_mknod: out[0] = (name){ AT_FDCWD, a[0], CREATES }; return 1;
  case SYS_unlink: case SYS_rmdir: case SYS_truncate:
    out[0] = (name){ AT_FDCWD, a[0], REMOVES };
    return 1;
  case SYS_rename:
    out[0] = (name){ AT_FDCWD, a[0], REMOVES };
    out[1] = (name){ AT_FDCWD, a[1], REPLACES };
    return 2;
  case SYS_link: case SYS_symlink: out[0] = (name){ AT_FDCWD, a[1], CREATES }; return 1;
#endif
  case SYS_openat: *flags = a[2]; out[0] = (name){ (int)a[0], a[1], OPENS }; return 1;
  case SYS_mkdirat: case SYS_mknodat: out[0] = (name){ (int)a[0], a[1], CREATES }; return 1;
  case SYS_unlinkat: out[0] = (name){ (int)a[0], a[1], REMOVES }; return 1;
  case SYS_renameat: case SYS_renameat2:
    out[0] = (name){ (int)a[0], a[1], REMOVES };
    out[1] = (name){ (int)a[2], a[3], REPLACES };
    return 2;
  case SYS_linkat: out[0] = (name){ (int)a[2], a[3], CREATES }; return 1;
  case SYS_symlinkat: out[0] = (name){ (int)a[1], a[2], CREATES }; return 1;
  default: return 0;
  }
}

/* Reads the NUL-terminated string at ADDR in thread TID into BUF (PATH_MAX
 * bytes), a page at a time so that an unmapped page after the string does
 * not fail the read. process_vm_readv never waits on the target. Returns
 * its length, or -1 (unreadable, or too long to be a path). */
static ssize_t read_string(pid_t tid, uint64_t addr, char *buf)
{
  size_t got = 0;
  const size_t page = 4096;
  while (got < PATH_MAX) {
    uint64_t at = addr + got;
    size_t chunk = page - (size_t)(at % page);
    if (chunk > PATH_MAX - got)
      chunk = PATH_MAX - got;
    struct iovec local = { buf + got, chunk }, remote = { (void *)(uintptr_t)at, chunk };
    ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
    if (n <= 0)
      return -1;
    char *nul = memchr(buf + got, '\0', (size_t)n);
    if (nul)
      return nul - buf;
    got += (size_t)n;
  }
  return -1;
}

/* What a write was relative to, read while the thread still waits: the
 * directory of DIRFD, or its working directory, as the sandbox names them
 * (the kernel gives the path inside the sandbox's own mount namespace). */
static int base_of(pid_t tid, int dirfd, char *out)
{
  char link[64];
  if (dirfd == AT_FDCWD)
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)tid);
  else if (dirfd >= 0)
    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)tid, dirfd);
  else
    return -EBADF;
  ssize_t n = readlink(link, out, PATH_MAX - 1);
  if (n <= 0 || out[0] != '/')
    return -ENOENT;
  out[n] = '\0';
  return 0;
}

/* One name as read before the answer: the path and what it was relative
 * to. */
typedef struct captured {
  what w;
  char path[PATH_MAX];
  char base[PATH_MAX]; /* "" when the path is absolute */
} captured;

/* The path of descriptor FD, as the sandbox names it, into OUT. */
static int path_of_fd(int fd, char *out)
{
  char link[48];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, PATH_MAX - 1);
  if (n <= 0 || out[0] != '/')
    return -ENOENT;
  out[n] = '\0';
  return 0;
}

/* Opens DIR (a path inside the sandbox) with O_PATH inside its root,
 * symlinks and ".." resolved as the kernel resolves them for the workload,
 * never past its root. */
static int open_inside(int root, const char *dir, unsigned flags)
{
  struct open_how how = { .flags = O_PATH | O_CLOEXEC | flags,
                          .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
  return (int)syscall(SYS_openat2, root, dir, &how, sizeof how);
}

/* Counts one refused write under TREE. */
static void count(shk__observer *o, const char *tree, const char *why)
{
  shk_sandbox_write_refusal *t = NULL;
  for (size_t i = 0; i < o->n && !t; i++)
    if (o->trees[i].why == why && !strcmp(o->trees[i].tree, tree))
      t = &o->trees[i];
  if (!t && o->n < MAX_TREES) {
    shk_sandbox_write_refusal *v = realloc(o->trees, (o->n + 1) * sizeof *v);
    char *copy = v ? strdup(tree) : NULL;
    if (v)
      o->trees = v;
    if (copy) {
      t = &o->trees[o->n++];
      *t = (shk_sandbox_write_refusal){ copy, why, 0 };
    }
  }
  if (!t) {
    o->more++;
    return;
  }
  t->n++;
  if (o->live)
    o->live(o->data, t);
}

/* Judges one captured name (see the top of the file) and counts it when
 * the kernel refused it. FLAGS: an open's. */
static void judge(shk__observer *o, const captured *c, uint64_t flags)
{
  char full[2 * PATH_MAX + 2];
  if (snprintf(full, sizeof full, "%s%s%s", c->base, c->base[0] ? "/" : "", c->path) >=
      (int)sizeof full)
    return;
  /* The last component apart from its directory, trailing slashes off. */
  size_t len = strlen(full);
  while (len > 1 && full[len - 1] == '/')
    full[--len] = '\0';
  char *slash = strrchr(full, '/');
  if (!slash)
    return;
  const char *leaf = slash + 1;
  if (!*leaf || !strcmp(leaf, ".") || !strcmp(leaf, ".."))
    return;
  *slash = '\0';
  shk_autoclose int dir = open_inside(o->root, full[0] ? full : "/", O_DIRECTORY);
  char where[PATH_MAX];
  if (dir < 0 || path_of_fd(dir, where) < 0)
    return;
  bool follow = c->w == OPENS && !(flags & O_NOFOLLOW) &&
                (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
  struct stat st;
  bool exists = fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
  /* An open follows a final symlink: it writes where that leads. */
  shk_autoclose int target = -1;
  if (exists && follow && S_ISLNK(st.st_mode)) {
    target = openat(dir, leaf, O_PATH | O_CLOEXEC);
    exists = target >= 0;
    char to[PATH_MAX];
    if (target < 0 || path_of_fd(target, to) < 0)
      return;
    char *s = strrchr(to, '/');
    if (!s || !s[1])
      return;
    *s = '\0';
    snprintf(where, sizeof where, "%s", to[0] ? to : "/");
    leaf = s + 1;
    leaf = strcpy(full, leaf);
    close(dir);
    dir = open_inside(o->root, where, O_DIRECTORY);
    if (dir < 0)
      return;
  }
  switch (c->w) {
  case CREATES:
    if (exists)
      return;
    break;
  case REMOVES:
    if (!exists)
      return;
    break;
  case OPENS: {
    bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
    if (exists ? !writes || (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)
               : !(flags & O_CREAT))
      return;
    break;
  }
  case REPLACES: break;
  }
  char path[PATH_MAX];
  if (shk__path_join(path, where, leaf) < 0)
    return;
  const shk_sandbox_rule *r = shk__plan_covering(o->plan, path);
  if (r && r->access == SHK_ACCESS_WRITE)
    return;
  /* The private directories are the sandbox's own, writable or the
   * kernel's (/proc): no tree of the host's is refused there. */
  if (!r && shk_sandbox_is_private(path))
    return;
  const char *why = !r ? "outside the writable roots"
                    : r->access == SHK_ACCESS_DENY || r->is_default ? "protected"
                    : "read-only";
  /* A read-only tree a live grant has made writable since the start: the
   * write went through. A mask (an empty read-only directory, /dev/null
   * over a file) never lets a write reach the file it hides. */
  struct statfs sf;
  if ((!r || r->access == SHK_ACCESS_READ) &&
      (fstatfs(dir, &sf) < 0 || !(sf.f_flags & ST_RDONLY)))
    return;
  count(o, r ? r->path : where, why);
}

int shk__observer_serve(shk__observer *o, int listener, const struct seccomp_notif *req)
{
  name names[2];
  uint64_t flags;
  size_t n = names_of(req, names, &flags);
  captured *c = n ? calloc(n, sizeof *c) : NULL;
  bool ok = c != NULL;
  pid_t tid = (pid_t)req->pid;
  for (size_t i = 0; i < n && ok; i++) {
    c[i].w = names[i].w;
    ok = read_string(tid, names[i].addr, c[i].path) > 0 &&
         (c[i].path[0] == '/' || base_of(tid, names[i].dirfd, c[i].base) == 0);
  }
  if (ok && o->root < 0) {
    char proc[48];
    snprintf(proc, sizeof proc, "/proc/%d/root", (int)tid);
    o->root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
  /* What was read belongs to the call only if the thread is still the one
   * waiting on it: a thread that died and whose id was reused would have
   * been read instead. The check comes after every read. */
  uint64_t id = req->id;
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0)
    ok = false;
  /* Safe because CONTINUE lets the kernel perform the call exactly as it
   * would without this filter: the main filter, the mounts and Landlock
   * decide it. Nothing here adds to what the workload may do. */
  struct seccomp_notif_resp resp = { .id = req->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
  int r = 0;
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
    r = -errno;
  for (size_t i = 0; i < n && ok && o->root >= 0; i++)
    judge(o, &c[i], flags);
  free(c);
  return r;
}

/* The argument vectors of bwrap and of stage 2, built from the plan. bwrap
 * applies mounts in the order given, so the plan's order (ancestors first)
 * makes the most specific rule win. */
#include "sandbox-internal.h"

#include <errno.h>
#include <stdlib.h>

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

/* A NULL-terminated vector that remembers its first failure: the builder
 * below pushes without checking, and the result is checked once. */
typedef struct strv {
  char **v;
  size_t n;
  bool oom;
} strv;

static void push(strv *s, const char *a)
{
  if (s->oom)
    return;
  char *copy = strdup(a);
  char **v = copy ? realloc(s->v, (s->n + 2) * sizeof *s->v) : NULL;
  if (!v) {
    free(copy);
    s->oom = true;
    return;
  }
  s->v = v;
  s->v[s->n++] = copy;
  s->v[s->n] = NULL;
}

static void push2(strv *s, const char *a, const char *b)
{
  push(s, a);
  push(s, b);
}

static void push3(strv *s, const char *a, const char *b, const char *c)
{
  push(s, a);
  push(s, b);
  push(s, c);
}

void shk__strv_free(char **v)
{
  for (char **p = v; p && *p; p++)
    free(*p);
  free(v);
}

/* Read-restricted mode starts from an empty root: the system directories
 * come back read-only, a top-level symlink (merged /usr) as a symlink. */
static void system_dirs(strv *s)
{
  for (const char *const *d = shk_sandbox_system_dirs; *d; d++) {
    struct stat st;
    if (lstat(*d, &st) < 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(*d, target, sizeof target - 1);
      if (n <= 0)
        continue;
      target[n] = '\0';
      push3(s, "--symlink", target, *d);
    } else {
      push3(s, "--ro-bind", *d, *d);
    }
  }
}

/* Where stage 2 is run from inside: the binary's own path when the view
 * already shows it as it is on the host (one mount less at every start),
 * otherwise a read-only bind at a fixed path. */
static const char *stage2_path(const shk_sandbox_plan *p, const char *exe)
{
  bool visible;
  if (p->read_restricted || exe[0] != '/' || shk_sandbox_is_private(exe) ||
      shk_sandbox_plan_access(p, exe, &visible) == SHK_ACCESS_DENY || !visible)
    return SHK_SANDBOX_STAGE2_EXE;
  return exe;
}

/* Whether stage 2 makes this mask instead of bwrap. For bwrap 0.8 each bind
 * means a reread of the whole mount table (about 0.12 ms at every start on
 * the development VM); stage 2 binds with two mount calls. It can only for a
 * caller that is root, whose stage 2 may keep CAP_SYS_ADMIN over the
 * sandbox's mount namespace until it drops every capability, and only over
 * a file that is there to bind onto: not a mount point bwrap would have to
 * create, nor one inside a directory that is itself masked. */
static bool mask_in_stage2(const shk_sandbox_plan *p, const shk_sandbox_rule *r, bool root)
{
  if (!root || r->kind != SHK_MOUNT_DEV_NULL || r->created)
    return false;
  char path[PATH_MAX];
  if (NEVER(snprintf(path, sizeof path, "%s", r->path) >= (int)sizeof path))
    return false;
  bool visible;
  return shk_sandbox_plan_access(p, dirname(path), &visible) != SHK_ACCESS_DENY && visible;
}

/* The writer's push: the vector remembers a failure itself. */
static int push_arg(void *ctx, const char *a)
{
  push(ctx, a);
  return 0;
}

/* A list of the stage-2 arguments, grown one path at a time. */
typedef struct list {
  const char **v;
  size_t n, cap;
} list;

static int add(list *l, const char *path)
{
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    const char **v = realloc(l->v, cap * sizeof *v);
    if (!v)
      return -ENOMEM;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = path;
  return 0;
}

static shk__stage2_list done(const list *l)
{
  return (shk__stage2_list){ l->v, l->n };
}

/* Stage 2's arguments: its masks and Landlock's paths. The paths point
 * into the plan and into static strings. */
static int stage2_args(const shk_sandbox_plan *p, const shk__bwrap_opts *l, const bool *in_stage2,
                       bool var_tmp, shk__stage2_args *a)
{
  list masks = { 0 }, ro = { 0 }, rw = { 0 }, dev = { 0 };
  int r = 0;
  for (size_t i = 0; i < p->n && r == 0; i++)
    if (in_stage2[i])
      r = add(&masks, p->rules[i].path);
  if (p->read_restricted) {
    for (const char *const *d = shk_sandbox_system_dirs; *d && r == 0; d++)
      r = add(&ro, *d);
    if (r == 0)
      r = add(&ro, "/run");
  } else if (r == 0) {
    r = add(&ro, "/");
  }
  for (size_t i = 0; i < p->n && r == 0; i++) {
    const shk_sandbox_rule *rule = &p->rules[i];
    if (rule->access == SHK_ACCESS_WRITE)
      r = add(&rw, rule->path);
    else if (rule->access == SHK_ACCESS_READ && p->read_restricted)
      r = add(&ro, rule->path);
  }
  if (r == 0)
    r = add(&rw, "/tmp");
  if (r == 0 && var_tmp)
    r = add(&rw, "/var/tmp");
  if (r == 0)
    r = add(&rw, "/dev/shm");
  if (r == 0)
    r = add(&dev, "/dev");
  /* /proc is read-only to Landlock as well: writes there reach the kernel's
   * global settings when the caller is root outside. */
  if (r == 0 && p->read_restricted)
    r = add(&ro, "/proc");
  *a = (shk__stage2_args){ .net = l->net, .landlock = l->landlock, .seccomp = l->seccomp,
                           .guard = l->guard, .sync_fd = l->sync_fd, .exe_fd = l->exe_fd,
                           .mask_files = done(&masks), .ll_ro = done(&ro), .ll_rw = done(&rw),
                           .ll_dev = done(&dev), .command = l->command,
                           .ncommand = l->ncommand };
  if (r < 0)
    shk__stage2_args_free(a);
  return r;
}

void shk__stage2_args_free(shk__stage2_args *a)
{
  free((void *)a->mask_files.v);
  free((void *)a->mask_dirs.v);
  free((void *)a->ro_files.v);
  free((void *)a->create_files.v);
  free((void *)a->create_dirs.v);
  free((void *)a->ll_ro.v);
  free((void *)a->ll_rw.v);
  free((void *)a->ll_dev.v);
  memset(a, 0, sizeof *a);
}

int shk__bwrap_argv(const shk_sandbox_plan *p, const shk__bwrap_opts *l, char ***out,
                    shk__stage2_args *s2)
{
  strv s = { NULL, 0, false };
  /* Decided once per rule: each answer resolves the rule's directory in
   * the plan, and three places below read it. */
  shk_autofree bool *in_stage2 = calloc(p->n ? p->n : 1, sizeof *in_stage2);
  if (!in_stage2)
    return -ENOMEM;
  bool stage2_masks = false;
  for (size_t i = 0; i < p->n; i++)
    stage2_masks |= (in_stage2[i] = mask_in_stage2(p, &p->rules[i], l->root));
  push(&s, l->bwrap);
  push(&s, "--unshare-user");
  push(&s, "--unshare-ipc");
  push(&s, "--unshare-pid");
  push(&s, "--unshare-uts");
  push(&s, "--unshare-cgroup");
  if (l->net != SHK_NET_HOST)
    push(&s, "--unshare-net");
  push(&s, "--die-with-parent");
  push(&s, "--new-session");
  /* Stage 2 keeps the capabilities the network bridge needs (lo, ports
   * below 1024) and the one that lets it drop the bounding set; otherwise
   * none reach it, also when the caller is root. */
  if (l->net == SHK_NET_PROXY) {
    /* bwrap run by an unprivileged user gives these capabilities no power
     * over the new network namespace unless the caller is mapped to uid 0
     * inside (measured with bwrap 0.8): binding port 53 fails. The workload
     * then sees uid 0, which is still the caller outside and has no
     * capability once stage 2 has dropped them. */
    if (!l->root) {
      push2(&s, "--uid", "0");
      push2(&s, "--gid", "0");
    }
    push2(&s, "--cap-add", "CAP_NET_ADMIN");
    push2(&s, "--cap-add", "CAP_NET_BIND_SERVICE");
    push2(&s, "--cap-add", "CAP_SETPCAP");
  } else {
    push2(&s, "--cap-drop", "ALL");
    /* A root caller's stage 2 makes file masks (mask_in_stage2), and then
     * needs CAP_SETPCAP to empty the bounding set (caps.c; the mask itself is mask.c). */
    if (stage2_masks) {
      push2(&s, "--cap-add", "CAP_SYS_ADMIN");
      push2(&s, "--cap-add", "CAP_SETPCAP");
    }
  }
  if (p->read_restricted)
    system_dirs(&s);
  else
    push3(&s, "--ro-bind", "/", "/");
  push2(&s, "--dev", "/dev");
  push2(&s, "--proc", "/proc");
  /* bwrap 0.8 covers only /proc/irq and /proc/bus. A caller that is root
   * outside is kuid 0 inside, which the sysctl files' owner check lets write
   * without any capability. Landlock refuses those writes already (stage 2
   * grants /proc nothing but reading, in both modes), so the read-only
   * mounts are made only where Landlock is missing: each bind costs bwrap
   * a reread of the mount table at every start. */
  if (!l->landlock) {
    push3(&s, "--ro-bind", "/proc/sys", "/proc/sys");
    push3(&s, "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger");
  }
  /* Private /tmp, /var/tmp and /run: a read-only bind does not stop
   * connect() on a unix socket, and these hold the host's (docker, dbus,
   * systemd, X11, ssh-agent, ...). */
  push2(&s, "--tmpfs", "/tmp");
  struct stat st;
  bool var_tmp = lstat("/var/tmp", &st) == 0 && S_ISDIR(st.st_mode);
  if (var_tmp)
    push2(&s, "--tmpfs", "/var/tmp");
  push2(&s, "--tmpfs", "/run");
  /* The stage 2 program runs from the launcher's copy in memory, which
   * bwrap's child reaches through its own descriptor table; `shinken
   * __stage2` from the binary. */
  char self[40];
  const char *stage2 = self;
  if (l->exe_fd >= 0)
    snprintf(self, sizeof self, "/proc/self/fd/%d", l->exe_fd);
  else
    stage2 = stage2_path(p, l->exe);
  if (l->exe_fd < 0 && stage2 != l->exe)
    push3(&s, "--ro-bind", l->exe, stage2);
  if (l->egress_dir)
    push3(&s, "--bind", l->egress_dir, SHK_SANDBOX_EGRESS_DIR);
  if (l->resolv)
    push3(&s, "--ro-bind", l->resolv_src ? l->resolv_src : l->resolv, l->resolv);
  for (size_t i = 0; i < p->n; i++) {
    const shk_sandbox_rule *r = &p->rules[i];
    switch (r->kind) {
    case SHK_MOUNT_BIND_RW:
    case SHK_MOUNT_PIN: push3(&s, "--bind", r->path, r->path); break;
    case SHK_MOUNT_BIND_RO: push3(&s, "--ro-bind", r->path, r->path); break;
    case SHK_MOUNT_TMPFS: push2(&s, "--tmpfs", r->path); break;
    case SHK_MOUNT_DEV_NULL:
      if (!in_stage2[i])
        push3(&s, "--ro-bind", "/dev/null", r->path);
      break;
    }
  }
  /* Made read-only last, once the rules nested inside have their mount
   * points. */
  for (size_t i = 0; i < p->n; i++)
    if (p->rules[i].kind == SHK_MOUNT_TMPFS)
      push2(&s, "--remount-ro", p->rules[i].path);
  if (l->chdir)
    push2(&s, "--chdir", l->chdir);
  push(&s, "--");
  push(&s, stage2);
  int r = stage2_args(p, l, in_stage2, var_tmp, s2);
  if (r == 0)
    r = shk__stage2_args_write(s2, push_arg, &s);
  if (r < 0 || s.oom) {
    shk__strv_free(s.v);
    shk__stage2_args_free(s2);
    return -ENOMEM;
  }
  *out = s.v;
  return 0;
}

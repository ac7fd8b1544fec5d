/* SPDX-License-Identifier: Apache-2.0 */
/* The argument vectors of bwrap and of stage 2, built from the plan. bwrap
 * applies mounts in the order given, so the plan's order (ancestors first)
 * makes the most specific rule win. */
#include "sandbox-internal.h"

#include "shinken/egress.h"

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

/* Which of the plan's mounts stage 2 makes itself instead of bwrap: -1 for
 * bwrap, else the shk__mount_op (a read-only bind of a directory and a pin
 * are recursive binds onto themselves, which keep whatever bwrap mounted
 * beneath them). For bwrap 0.8 each bind means a reread of
 * the whole mount table (about 0.12 ms at every start on the development
 * VM, so a hundred masks would cost more than everything else); stage 2
 * makes one in a few system calls. It holds CAP_SYS_ADMIN over the
 * sandbox's mount namespace until it drops every capability, for any
 * caller. It takes the masks of files and directories and the read-only
 * binds of regular files, where it cannot change their meaning: the mount
 * point must already show inside (beneath one of bwrap's binds of host
 * content, or in the default view), a mount point to create must lie in a
 * writable directory, and nothing the plan mounts may lie beneath a
 * directory it masks (bwrap's mounts all come first). */
static int stage2_op(const shk_sandbox_plan *p, size_t i)
{
  const shk_sandbox_rule *r = &p->rules[i];
  struct stat st;
  bool is_dir = r->kind == SHK_MOUNT_BIND_RO && !r->created && lstat(r->path, &st) == 0 &&
                S_ISDIR(st.st_mode);
  int op = r->kind == SHK_MOUNT_FILE ? SHK__MOUNT_FILE
           : r->kind == SHK_MOUNT_DEV_NULL ? (r->symlink ? SHK__MOUNT_MASK_LINK : SHK__MOUNT_MASK_FILE)
           : r->kind == SHK_MOUNT_TMPFS ? SHK__MOUNT_MASK_DIR
           : r->kind == SHK_MOUNT_PIN ? SHK__MOUNT_PIN
           : r->kind == SHK_MOUNT_BIND_RO && !r->created ? (is_dir ? SHK__MOUNT_RO_DIR
                                                                   : SHK__MOUNT_RO_FILE)
           : -1;
  char parent[PATH_MAX];
  if (op < 0 || NEVER(snprintf(parent, sizeof parent, "%s", r->path) >= (int)sizeof parent))
    return -1;
  const shk_sandbox_rule *anc = shk__plan_covering(p, dirname(parent));
  bool shown = anc ? anc->kind == SHK_MOUNT_BIND_RW || anc->kind == SHK_MOUNT_BIND_RO ||
                         anc->kind == SHK_MOUNT_PIN
                   : !p->read_restricted && !shk_sandbox_is_private(r->path);
  if (!shown || (r->created && !(anc && anc->access == SHK_ACCESS_WRITE)))
    return -1;
  if (op == SHK__MOUNT_MASK_DIR)
    for (size_t j = 0; j < p->n; j++)
      if (j != i && shk__path_under(p->rules[j].path, r->path))
        return -1;
  if (op == SHK__MOUNT_RO_FILE && (lstat(r->path, &st) < 0 || !S_ISREG(st.st_mode)))
    return -1;
  return op;
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

/* The sandbox's own files (stage 2 writes them and binds them read-only):
 * its machine id, its host name, and with --net none a resolver file
 * without a name server. Each goes onto the host file's real path when the
 * view shows one there that no rule masks; a file that is not there leaks
 * nothing. The texts point into L. */
typedef struct data_files {
  const char *paths[6], *texts[6];
  char real[6][PATH_MAX];
  size_t n;
} data_files;

static void data_file(data_files *df, const shk_sandbox_plan *p, const char *path,
                      const char *text)
{
  char *real = df->real[df->n];
  struct stat st;
  bool visible;
  if (!text || !realpath(path, real) || stat(real, &st) < 0 || !S_ISREG(st.st_mode) ||
      shk_sandbox_is_private(real) ||
      shk_sandbox_plan_access(p, real, &visible) == SHK_ACCESS_DENY || !visible)
    return;
  for (size_t i = 0; i < df->n; i++)
    if (!strcmp(df->paths[i], real))
      return;
  df->paths[df->n] = real;
  df->texts[df->n++] = text;
}

static void data_files_for(data_files *df, const shk_sandbox_plan *p, const shk__bwrap_opts *l)
{
  df->n = 0;
  data_file(df, p, "/etc/machine-id", l->machine_id);
  data_file(df, p, "/var/lib/dbus/machine-id", l->machine_id);
  data_file(df, p, "/etc/hostname", l->hostname_file);
  if (l->net == SHK_NET_NONE)
    data_file(df, p, "/etc/resolv.conf",
              "# shinken run --net none: no network, and no name server\n");
}

/* Stage 2's arguments: its mounts and Landlock's paths. The paths point
 * into the plan and into static strings. */
static int stage2_args(const shk_sandbox_plan *p, const shk__bwrap_opts *l, const int *op,
                       bool var_tmp, const data_files *df, shk__stage2_args *a)
{
  list mask_files = { 0 }, create_files = { 0 }, mask_dirs = { 0 }, create_dirs = { 0 },
       ro_files = { 0 }, ro_dirs = { 0 }, pins = { 0 }, mask_links = { 0 }, ro = { 0 },
       rw = { 0 }, dev = { 0 }, tmpfs = { 0 }, create_data = { 0 }, create_texts = { 0 };
  int r = 0;
  for (size_t i = 0; i < p->n && r == 0; i++) {
    bool created = p->rules[i].created;
    switch (op[i]) {
    case SHK__MOUNT_MASK_FILE: r = add(created ? &create_files : &mask_files, p->rules[i].path); break;
    case SHK__MOUNT_MASK_DIR: r = add(created ? &create_dirs : &mask_dirs, p->rules[i].path); break;
    case SHK__MOUNT_RO_FILE: r = add(&ro_files, p->rules[i].path); break;
    case SHK__MOUNT_RO_DIR: r = add(&ro_dirs, p->rules[i].path); break;
    case SHK__MOUNT_PIN: r = add(&pins, p->rules[i].path); break;
    case SHK__MOUNT_MASK_LINK: r = add(&mask_links, p->rules[i].path); break;
    case SHK__MOUNT_FILE:
      r = add(&create_data, p->rules[i].path);
      if (r == 0)
        r = add(&create_texts, p->rules[i].text ? p->rules[i].text : "");
      break;
    default: break;
    }
  }
  /* Every private tmpfs gets a size: /run holds nothing but what stage 2
   * and bwrap put there, and is written only where Landlock is missing. */
  static const char *const tmpfs_dirs[] = { "/tmp", "/var/tmp", "/dev/shm", "/run" };
  for (size_t i = 0; i < 4 && r == 0 && l->tmpfs_size; i++)
    if (i != 1 || var_tmp)
      r = add(&tmpfs, tmpfs_dirs[i]);
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
  /* The ceiling of live grants (shk_sandbox_opts.ceiling): Landlock is
   * applied once and can never be widened, so it must already allow what a
   * later grant may make writable. Safe because the mount namespace keeps
   * these read-only (the view of "/") until a grant attaches a writable
   * mount, and a revoke detaches it again; Landlock still refuses writes
   * everywhere outside the ceiling. */
  for (size_t i = 0; l->ceiling && i < l->ceiling->n && r == 0; i++)
    r = add(&rw, l->ceiling->v[i]);
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
                           .guard = l->guard, .observe = l->observe && l->seccomp,
                           .sync_fd = l->sync_fd, .exe_fd = l->exe_fd,
                           .ctty = l->ctty,
                           .map_uid = l->map_uid, .map_gid = l->map_gid,
                           .mask_files = done(&mask_files), .mask_dirs = done(&mask_dirs),
                           .ro_files = done(&ro_files), .create_files = done(&create_files),
                           .create_dirs = done(&create_dirs), .ro_dirs = done(&ro_dirs),
                           .pins = done(&pins), .mask_links = done(&mask_links),
                           .data_paths = { df->paths, df->n }, .data_texts = { df->texts, df->n },
                           .create_data_paths = done(&create_data),
                           .create_data_texts = done(&create_texts),
                           .tmpfs = done(&tmpfs), .tmpfs_size = l->tmpfs_size,
                           .warnings = { (const char *const *)p->warnings, p->nwarnings },
                           .ll_ro = done(&ro),
                           .ll_rw = done(&rw), .ll_dev = done(&dev), .command = l->command,
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
  free((void *)a->ro_dirs.v);
  free((void *)a->pins.v);
  free((void *)a->mask_links.v);
  free((void *)a->tmpfs.v);
  free((void *)a->create_data_paths.v);
  free((void *)a->create_data_texts.v);
  free((void *)a->ll_ro.v);
  free((void *)a->ll_rw.v);
  free((void *)a->ll_dev.v);
  memset(a, 0, sizeof *a);
}

int shk__bwrap_argv(const shk_sandbox_plan *p, const shk__bwrap_opts *l, char ***out,
                    shk__stage2_args *s2)
{
  strv s = { NULL, 0, false };
  /* Decided once per rule: each answer looks the rule's directory up in
   * the plan, and three places below read it. */
  shk_autofree int *op = calloc(p->n ? p->n : 1, sizeof *op);
  if (!op)
    return -ENOMEM;
  data_files *df = malloc(sizeof *df);
  if (!df)
    return -ENOMEM;
  data_files_for(df, p, l);
  bool stage2_mounts = l->tmpfs_size || df->n;
  for (size_t i = 0; i < p->n; i++)
    stage2_mounts |= (op[i] = stage2_op(p, i)) >= 0;
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
  /* The sandbox's own host name (the uts namespace is its own). */
  if (l->hostname)
    push2(&s, "--hostname", l->hostname);
  /* Stage 2 keeps the capabilities the network bridge needs (lo, ports
   * below 1024) and the one that lets it drop the bounding set; otherwise
   * none reach it, also when the caller is root. */
  if (l->net == SHK_NET_PROXY) {
    /* bwrap run by an unprivileged user gives these capabilities no power
     * over the new network namespace unless the caller is mapped to uid 0
     * inside (measured with bwrap 0.8): binding port 53 fails. The workload
     * does not stay there: once the bridge is up, stage 2 enters a user
     * namespace of its own that maps the caller's ids (or --uid/--gid). */
    if (!l->root) {
      push2(&s, "--uid", "0");
      push2(&s, "--gid", "0");
      /* Stage 2 then enters a user namespace of its own for the workload
       * (the caller's ids by default), once the bridge is up; see below. */
      if (l->map_uid >= 0)
        push2(&s, "--cap-add", "CAP_SETFCAP");
    }
    push2(&s, "--cap-add", "CAP_NET_ADMIN");
    push2(&s, "--cap-add", "CAP_NET_BIND_SERVICE");
    push2(&s, "--cap-add", "CAP_SETPCAP");
    if (stage2_mounts)
      push2(&s, "--cap-add", "CAP_SYS_ADMIN");
  } else {
    /* For an unprivileged caller bwrap sets the sandbox up as uid 0 of a
     * user namespace, then enters a second one that maps the caller's uid
     * back, where its capabilities no longer reach the mount namespace.
     * Stage 2 needs them for its own mounts: bwrap stops at uid 0, and
     * stage 2 enters that second namespace itself once its mounts are
     * made (stage2.c). The command sees the caller's ids either way. */
    push2(&s, "--cap-drop", "ALL");
    if (!l->root) {
      push2(&s, "--uid", "0");
      push2(&s, "--gid", "0");
      /* The kernel lets a process map its new namespace's ids onto uid 0
       * of the parent only when it held CAP_SETFCAP there as it made it
       * (so that file capabilities valid for that root cannot be set from
       * inside). */
      if (l->map_uid >= 0)
        push2(&s, "--cap-add", "CAP_SETFCAP");
    }
    /* Stage 2 makes mounts of its own (stage2_op, mask.c), and then needs
     * CAP_SETPCAP to empty the bounding set (caps.c). */
    if (stage2_mounts) {
      push2(&s, "--cap-add", "CAP_SYS_ADMIN");
      push2(&s, "--cap-add", "CAP_SETPCAP");
    }
  }
  if (p->read_restricted)
    system_dirs(&s);
  else
    push3(&s, "--ro-bind", "/", "/");
  push2(&s, "--dev", "/dev");
  /* A tmpfs of its own rather than a directory of /dev's, so that stage 2
   * can bound its size (--tmpfs-size). */
  if (l->tmpfs_size)
    push2(&s, "--tmpfs", "/dev/shm");
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
  /* The sudo shim: the same binary, read-only, which only sends the
   * command line to the session's manager through the bridge and prints
   * what comes back. It holds no authority: what runs is decided outside. */
  if (l->egress_dir && l->exe_fd < 0) {
    push3(&s, "--ro-bind", l->exe, SHK_SANDBOX_SUDO_EXE);
    struct stat sst;
    if (lstat("/usr/bin/sudo", &sst) == 0 && S_ISREG(sst.st_mode))
      push3(&s, "--ro-bind", l->exe, "/usr/bin/sudo");
  }
  if (l->resolv)
    push3(&s, "--ro-bind", l->resolv_src ? l->resolv_src : l->resolv, l->resolv);
  /* A session that can inspect TLS wrote the trust store its sandbox sees
   * in place of the system's (the system's bundle and the inspection CA),
   * so that the workload trusts the proxy's leaves without doing
   * anything; read-only, so nothing inside can add a CA of its own for
   * others. */
  char bundle[PATH_MAX];
  if (l->egress_dir &&
      snprintf(bundle, sizeof bundle, "%s/" SHK_EGRESS_CA_BUNDLE, l->egress_dir) < (int)sizeof bundle &&
      access(bundle, R_OK) == 0)
    push3(&s, "--ro-bind", bundle, SHK_EGRESS_SYSTEM_BUNDLE);
  /* Java's copy of it, read-only over itself in the bound directory. */
  char jstore[PATH_MAX];
  if (l->egress_dir &&
      snprintf(jstore, sizeof jstore, "%s/" SHK_EGRESS_JAVA_STORE, l->egress_dir) < (int)sizeof jstore &&
      access(jstore, R_OK) == 0)
    push3(&s, "--ro-bind", jstore, SHK_SANDBOX_EGRESS_DIR "/" SHK_EGRESS_JAVA_STORE);
  for (size_t i = 0; i < p->n; i++) {
    const shk_sandbox_rule *r = &p->rules[i];
    /* A symlink cannot be masked by bwrap, which follows it: stage 2
     * masks every one (the plan makes such a rule only where it can). */
    if (NEVER(r->symlink && op[i] < 0))
      continue;
    switch (r->kind) {
    case SHK_MOUNT_BIND_RW: push3(&s, "--bind", r->path, r->path); break;
    case SHK_MOUNT_PIN:
      if (op[i] < 0)
        push3(&s, "--bind", r->path, r->path);
      break;
    case SHK_MOUNT_BIND_RO:
      if (op[i] < 0)
        push3(&s, "--ro-bind", r->path, r->path);
      break;
    case SHK_MOUNT_TMPFS:
      if (op[i] < 0)
        push2(&s, "--tmpfs", r->path);
      break;
    case SHK_MOUNT_DEV_NULL:
      if (op[i] < 0)
        push3(&s, "--ro-bind", "/dev/null", r->path);
      break;
    case SHK_MOUNT_FILE:
      /* Stage 2's alone: the plan makes one only in a writable directory
       * the view shows. */
      (void)NEVER(op[i] < 0);
      break;
    }
  }
  /* Made read-only last, once the rules nested inside have their mount
   * points. */
  for (size_t i = 0; i < p->n; i++)
    if (p->rules[i].kind == SHK_MOUNT_TMPFS && op[i] < 0)
      push2(&s, "--remount-ro", p->rules[i].path);
  if (l->chdir)
    push2(&s, "--chdir", l->chdir);
  push(&s, "--");
  push(&s, stage2);
  int r = stage2_args(p, l, op, var_tmp, df, s2);
  if (r == 0)
    r = shk__stage2_args_write(s2, push_arg, &s);
  /* The data files' paths live in DF, freed here: the launcher checks
   * stage 2's report against the counts alone. */
  s2->data_paths.v = s2->data_texts.v = NULL;
  free(df);
  if (r < 0 || s.oom) {
    shk__strv_free(s.v);
    shk__stage2_args_free(s2);
    return -ENOMEM;
  }
  *out = s.v;
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Between the parts of the sandbox module: how the launcher starts bwrap,
 * and the pieces stage 2 applies inside. Internal to the module (and its
 * unit tests). */
#pragma once

#include "shinken/sandbox.h"
#include "stage2-proto.h"

typedef struct shk__bwrap_opts {
  const char *bwrap;      /* host path of bwrap */
  const char *exe;        /* host path of the shinken binary (stage 2) */
  const char *egress_dir; /* host directory of the egress sockets, or NULL */
  const char *resolv;     /* where the sandbox's resolver file goes, or NULL */
  const char *resolv_src; /* what is shown there: NULL for the host's own file
                           * (host mode), the egress stub's in proxy mode */
  const char *chdir;      /* working directory inside, or NULL */
  const char *hostname;   /* the sandbox's host name, or NULL: the host's */
  const char *hostname_file; /* what /etc/hostname shows ("NAME\n"), or NULL */
  const char *machine_id; /* what /etc/machine-id shows ("32 hex digits\n"), or NULL */
  uint64_t tmpfs_size;    /* bytes for each private tmpfs; 0: unbounded */
  shk_net_mode net;
  bool root;              /* the caller is root outside */
  uid_t uid;              /* the caller's ids outside */
  gid_t gid;
  /* An unprivileged caller: the ids the workload gets in stage 2's own
   * user namespace, which maps them onto the uid and gid 0 bwrap sets the
   * sandbox up with; -1: none (the workload stays uid 0 there, or the
   * caller is root). */
  long map_uid, map_gid;
  bool landlock, seccomp; /* false only when degraded mode was allowed */
  bool guard;             /* the connect() guard; likewise */
  bool observe;           /* the write observer (needs seccomp) */
  int sync_fd;            /* a unix socket: stage 2 reports here just before exec,
                           * with the connect() guard's listener */
  int exe_fd;             /* the descriptor stage 2 is run from, or -1 */
  bool ctty;              /* stdin is a pseudo-terminal: stage 2 makes it the
                           * controlling terminal of the workload's session */
  char *const *command;
  size_t ncommand;
  const shk_sandbox_paths *ceiling; /* Landlock's write ceiling for live grants, or NULL */
} shk__bwrap_opts;

/* A rule of the options (--write, --read, --deny ARG, PATH its resolved
 * form) on a path the sandbox makes itself: the root, the private /tmp,
 * /var/tmp, /run and /dev, and /proc. 0, or -EINVAL with one sentence
 * (options.c). */
int shk__rule_path_check(shk_access a, const char *arg, const char *path, shk_error *err);
/* The environment the command gets (envfilter.c): ENV's, without the
 * variables that carry secrets or sockets (their names in REMOVED), or with
 * --env-clean a minimal one; --env NAME passes NAME either way. ENVIRON
 * points into ENV's strings and into OWNED. */
typedef struct shk__env_result {
  char **environ;
  char **owned;
  char **removed;
  size_t nremoved;
} shk__env_result;
int shk__env_for_command(const shk_sandbox_env *env, const shk_sandbox_opts *o,
                         shk__env_result *res);
void shk__env_result_free(shk__env_result *res);

/* The sandbox's host name, what its /etc/hostname and /etc/machine-id show
 * (identity.c). 0, or -errno when no random id could be drawn. */
typedef struct shk__identity {
  const char *hostname;
  char hostname_file[72];
  char machine_id[34];
} shk__identity;
int shk__sandbox_identity(const shk_sandbox_opts *o, shk__identity *id);

/* The plan's rule nearest above PATH (PATH itself included), or NULL. */
const shk_sandbox_rule *shk__plan_covering(const shk_sandbox_plan *p, const char *path);
/* Is PATH equal to ROOT or beneath it? Both absolute and normalized. */
bool shk__path_under(const char *path, const char *root);

/* bwrap's argv (argv[0] is l->bwrap), ending with stage 2's command line,
 * into *OUT (free with shk__strv_free), and stage 2's arguments as written
 * there into *S2 (free with shk__stage2_args_free), which the launcher
 * checks stage 2's report against. 0 or -ENOMEM. */
int shk__bwrap_argv(const shk_sandbox_plan *p, const shk__bwrap_opts *l, char ***out,
                    shk__stage2_args *s2);
void shk__stage2_args_free(shk__stage2_args *a);
void shk__strv_free(char **v);

/* The session cgroup of a running sandbox, made known to the freezer
 * (freeze.c) from its creation to its removal: take over then freezes that
 * cgroup. Detaching forgets it. Both only take the freezer's lock. */
int shk__freezer_attach(const shk_sandbox_cgroup *cg);
void shk__freezer_detach(const shk_sandbox_cgroup *cg);

/* ---- stage 2 (inside the sandbox) ----
 *
 * Stage 2's code (stage2.c and the pieces below) makes system calls itself
 * (sys.h) and calls nothing of the C library: it is built both into the
 * small program the launcher runs as stage 2 and into `shinken __stage2`. */

typedef struct shk__stage2_hooks {
  /* --net proxy: starts the egress bridge, while stage 2 still has the
   * capabilities it needs, and sets the proxy variables. 0 or -errno. */
  int (*bridge)(void);
  /* The environment the command gets, read after bridge(); NULL: the one
   * stage 2 was started with. */
  char **(*environ)(void);
} shk__stage2_hooks;

/* Runs stage 2: parses ARGV (stage2-proto.h), applies every layer, reports
 * to the launcher and execs the command. Never returns: a failure exits 125
 * with one line on stderr. HOOKS may be NULL (no bridge: --net proxy is
 * then refused). */
__attribute__((noreturn)) void shk__stage2_main(int argc, char **argv, char **envp,
                                                const shk__stage2_hooks *hooks);

typedef enum shk__mount_op {
  SHK__MOUNT_MASK_FILE, /* /dev/null over a file */
  SHK__MOUNT_MASK_DIR,  /* an empty read-only tmpfs over a directory */
  SHK__MOUNT_RO_FILE,   /* a read-only bind of a regular file onto itself */
  SHK__MOUNT_RO_DIR,    /* a read-only bind of a directory onto itself (recursive) */
  SHK__MOUNT_PIN,       /* a directory bound onto itself (recursive), writable */
  SHK__MOUNT_MASK_LINK, /* /dev/null over a symlink itself */
  SHK__MOUNT_FILE,      /* a read-only file of fixed content over a missing one */
} shk__mount_op;

/* One of stage 2's own mounts on PATH (mask.c); MAKE creates the mount
 * point first. Needs CAP_SYS_ADMIN over the sandbox's mount namespace. */
int shk__stage2_mount(const char *path, shk__mount_op op, bool make);
/* A read-only bind of a new file holding TEXT (written under /run/shinken,
 * named by INDEX) onto the regular file TARGET: the sandbox's own
 * /etc/machine-id, /etc/hostname, resolver file, or a missing file git
 * reads. MAKE creates TARGET first, holding TEXT too (what the host sees
 * there until the launcher removes it). */
int shk__stage2_data(const char *target, const char *text, unsigned index, bool make);
/* Bounds the tmpfs mounted at PATH to SIZE bytes (and SIZE/16 KiB files). */
int shk__stage2_tmpfs_limit(const char *path, uint64_t size);
/* Drops every capability: bounding set, ambient, effective, permitted,
 * inheritable. Returns 0 only when none is left. */
int shk__drop_caps(void);
/* Applies Landlock at the best ABI the kernel offers: read-only access
 * beneath A's ll_ro, full access beneath ll_rw, device access beneath
 * ll_dev; TCP bind/connect refused with --net none (ABI 4); abstract unix
 * sockets and signals scoped (ABI 6). Returns the ABI applied, and adds the
 * SHK__APPLIED_LANDLOCK_* bits of what it handled to *FLAGS. */
int shk__landlock_apply(const shk__stage2_args *a, unsigned *flags);
/* Installs the precompiled seccomp filter for `net`. Must be the last step
 * before exec: it refuses the syscalls used to set the sandbox up. With
 * GUARD, the filter also hands every connect() of the workload to a
 * listener, returned (the connect() guard; stage 2 passes it to the
 * launcher), and forbids the workload a listener of its own, which would
 * take precedence. With OBSERVE, a second filter hands the workload's
 * write-intent calls to the listener too (observe.c), which then also
 * carries the guard's: one listener either way. Returns 0 (or the
 * listener), or -errno. */
int shk__seccomp_apply(shk_net_mode net, bool guard, bool observe);
/* The precompiled filters, for tests: the main one, and the write
 * observer's (with the guard's rules when GUARD). */
struct sock_filter;
int shk__seccomp_filter(shk_net_mode net, bool guard, const struct sock_filter **prog, size_t *len);
int shk__seccomp_observer(bool guard, const struct sock_filter **prog, size_t *len);

/* ---- the stdio relay, the launcher's side (relay.c) ---- */

/* open() makes the pipes or the pseudo-terminal; the child makes
 * child_fds()[0..2] its stdin, stdout and stderr; started() closes them in
 * the launcher (and puts the caller's terminal in raw mode); then, in the
 * supervising loop, fds() fills at most SHK__RELAY_FDS entries (and sets
 * *timeout, -1 or milliseconds) and handle() moves what poll found. Once
 * the sandbox is gone (GONE), drained() says when its output is all
 * delivered. close() restores the caller's terminal, on every path. */
#define SHK__RELAY_FDS 5
typedef struct shk__relay shk__relay;
int shk__relay_open(shk__relay **out, const shk_sandbox_io *io, shk_error *err);
const int *shk__relay_child_fds(const shk__relay *r);
bool shk__relay_is_pty(const shk__relay *r);
void shk__relay_started(shk__relay *r);
struct pollfd;
size_t shk__relay_fds(shk__relay *r, struct pollfd *fds, bool gone, int *timeout);
void shk__relay_handle(shk__relay *r, const struct pollfd *fds, size_t n);
bool shk__relay_drained(const shk__relay *r);
void shk__relay_close(shk__relay *r);

/* ---- the connect() guard, the launcher's side (guard.c) ---- */

/* A pathname unix socket may be connected only when it was bound inside
 * the sandbox (the guard records every unix bind()); with `deny_abstract`
 * (--net host) abstract sockets are refused. attach_diag() gives the guard
 * the NETLINK_SOCK_DIAG socket stage 2 made in the sandbox's network
 * namespace (the guard owns it from then on; without one no pathname
 * socket can be connected). serve() answers one request the launcher
 * received from the listener (a connect() or a bind()). new() returns
 * NULL when out of memory. */
typedef struct shk__guard shk__guard;
shk__guard *shk__guard_new(bool deny_abstract);
void shk__guard_attach_diag(shk__guard *g, int diag);
struct seccomp_notif;
int shk__guard_serve(shk__guard *g, int listener, const struct seccomp_notif *req);
void shk__guard_free(shk__guard *g);

/* A running sandbox, as the manager reaches it from outside (unlock.c
 * opens it; sudo.c runs privileged commands in it). */
struct shk_sandbox_target {
  int userns; /* the user namespace that owns the sandbox's mount namespace */
  int mntns;  /* the sandbox's mount namespace */
  int root;   /* the sandbox's root directory (O_PATH) */
  pid_t pid;  /* the process it was opened from (its /proc/PID/mountinfo) */
  uid_t owner; /* who made its user namespace */
  int other[4]; /* its net, uts, ipc and pid namespaces, in that order */
};
/* ---- the write observer, the launcher's side (observe.c) ---- */

/* Reports the workload's refused writes: serve() answers one write-intent
 * call the launcher received from the listener, always by letting it
 * continue (the kernel decides it), and counts it per tree when PLAN says
 * the kernel refuses it. LIVE (may be NULL) hears each one as it is
 * counted. take() moves the counts into RES once the sandbox is gone. new()
 * returns NULL when out of memory; PLAN must outlive the observer. */
typedef struct shk__observer shk__observer;
shk__observer *shk__observer_new(const shk_sandbox_plan *plan,
                                 void (*live)(void *data, const shk_sandbox_write_refusal *w),
                                 void *data);
int shk__observer_serve(shk__observer *o, int listener, const struct seccomp_notif *req);
void shk__observer_take(shk__observer *o, shk_sandbox_result *res);
void shk__observer_free(shk__observer *o);

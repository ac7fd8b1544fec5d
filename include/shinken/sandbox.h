/* Shinken's enforcement layer on Linux: the options of `shinken run`, the
 * filesystem plan they resolve to, what the host can enforce, and the pieces
 * stage 2 applies inside the sandbox (capabilities, Landlock, seccomp).
 *
 * Library functions return 0 or a negative errno; the ones that can fail on
 * user input also return a one-line message in *err (free() it). */
#ifndef SHINKEN_SANDBOX_H
#define SHINKEN_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ordered from least to most restrictive: for two rules on the same path,
 * the larger value wins. */
typedef enum shk_access {
  SHK_ACCESS_WRITE,
  SHK_ACCESS_READ,
  SHK_ACCESS_DENY,
} shk_access;

typedef enum shk_net_mode {
  SHK_NET_NONE,
  SHK_NET_PROXY,
  SHK_NET_HOST,
} shk_net_mode;

const char *shk_access_name(shk_access a);
const char *shk_net_mode_name(shk_net_mode m);

typedef struct shk_sandbox_paths {
  char **v;
  size_t n;
} shk_sandbox_paths;

/* The options of `shinken run`, as asked (paths not yet resolved). */
typedef struct shk_sandbox_opts {
  shk_sandbox_paths write, read, deny;
  /* --net proxy: domain patterns for the egress proxy (host, *.host,
   * **.host, each with an optional :port). */
  shk_sandbox_paths allow_domains, deny_domains;
  /* --net proxy: the egress proxy's JSON configuration (shinken-proxy(1));
   * its policy is joined with the patterns above. */
  char *proxy_config;
  bool read_only, env_clean, allow_degraded;
  shk_net_mode net;
  uint64_t mem;       /* bytes; 0: no limit asked */
  uint64_t pids;      /* 0: no limit asked */
  uint32_t cpu_milli; /* thousandths of a core; 0: no limit asked */
  char *report;       /* NULL: no report */
  char **command;     /* points into the argv given to parse; NULL-terminated */
  size_t ncommand;
} shk_sandbox_opts;

void shk_sandbox_opts_init(shk_sandbox_opts *o);
void shk_sandbox_opts_free(shk_sandbox_opts *o);

/* Parses `[OPTIONS] [--] CMD [ARGS...]` (argv[0] is the first option, not a
 * program name). Options are applied in order; --profile FILE is applied
 * where it appears. A missing command is an error. */
int shk_sandbox_opts_parse(shk_sandbox_opts *o, int argc, char **argv, char **err);
/* Applies a JSON profile (text, NUL-terminated). `what` names it in errors. */
int shk_sandbox_profile_apply(shk_sandbox_opts *o, const char *json, const char *what, char **err);

/* "512M" -> bytes (K, M, G, T are powers of 1024); a positive integer. */
int shk_sandbox_parse_size(const char *s, uint64_t *out);
/* "1.5" -> 1500 thousandths; positive, at most three decimals. */
int shk_sandbox_parse_cores(const char *s, uint32_t *out);

/* ---- the filesystem plan ---- */

/* How a rule is made real in the mount namespace. */
typedef enum shk_mount_kind {
  SHK_MOUNT_BIND_RW,  /* bind the host path writable */
  SHK_MOUNT_BIND_RO,  /* bind the host path read-only */
  SHK_MOUNT_TMPFS,    /* a directory masked by an empty read-only tmpfs */
  SHK_MOUNT_DEV_NULL, /* a file, or a missing path, masked by /dev/null */
  SHK_MOUNT_PIN,      /* a writable directory bound onto itself, only so that
                       * it cannot be renamed or removed: it holds a protected
                       * path that must not be replaced by a new one */
} shk_mount_kind;

const char *shk_mount_kind_name(shk_mount_kind k);

typedef struct shk_sandbox_rule {
  char *path; /* absolute and resolved */
  shk_access access;
  shk_mount_kind kind;
  bool is_default; /* a built-in protection, not an option */
  bool created;    /* masks a missing path: bwrap creates the mount point */
  bool via_symlink; /* an option whose path led here through a symlink */
} shk_sandbox_rule;

/* Who the caller is and where the defaults come from. The module reads
 * nothing of this from the process itself: shk_sandbox_env_from_process
 * fills it (the one place that asks who the caller is), tests fill it by
 * hand. */
typedef struct shk_sandbox_env {
  const char *cwd;      /* resolved */
  const char *homes[2]; /* $HOME and the password database's; NULL when absent */
  const char *path;     /* $PATH; may be NULL */
  bool root;            /* the caller is root outside (effective uid 0) */
  uid_t uid;            /* the caller's effective ids outside */
  gid_t gid;
  const char *user;          /* the caller's name in the password database, or NULL */
  const char *cgroup_parent; /* SHINKEN_CGROUP_PARENT (cgroup v1), or NULL */
  const char *exe;           /* the shinken binary */
  char *const *environ;      /* the environment the command inherits */
  char *storage_;            /* what shk_sandbox_env_from_process allocated */
} shk_sandbox_env;

/* Reads the caller's ids, the working directory, the binary's path and the
 * variables above from this process. Free with shk_sandbox_env_free. */
int shk_sandbox_env_from_process(shk_sandbox_env *env, shk_error *err);
void shk_sandbox_env_free(shk_sandbox_env *env);

typedef struct shk_sandbox_plan {
  bool read_restricted; /* --read given: an empty root plus listed roots */
  /* Sorted so that a rule comes after every rule on an ancestor of its path:
   * applying them in order makes the most specific rule win. */
  shk_sandbox_rule *rules;
  size_t n;
} shk_sandbox_plan;

/* Resolves the options against the filesystem and the defaults. Fails on a
 * missing --write or --read path, --read-only with --write, or a protected
 * path that is a symlink inside a writable root. */
int shk_sandbox_plan_build(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                           shk_sandbox_plan *p, char **err);
void shk_sandbox_plan_free(shk_sandbox_plan *p);
/* After the sandbox is gone: removes the mount points bwrap created on the
 * host for masks of missing paths, when they are still empty. */
void shk_sandbox_plan_cleanup(const shk_sandbox_plan *p);
/* The access the plan gives PATH (absolute, resolved): the rule on its
 * nearest covered ancestor; `*visible` is false in read-restricted mode for a
 * path no rule covers. */
shk_access shk_sandbox_plan_access(const shk_sandbox_plan *p, const char *path, bool *visible);

/* Is PATH beneath /tmp, /run, /dev or /proc? Those are fresh inside the
 * sandbox: the host's content there shows only where a rule binds it. */
bool shk_sandbox_is_private(const char *path);

/* The system directories visible in read-restricted mode. */
extern const char *const shk_sandbox_system_dirs[];

/* ---- launching ---- */

/* Where the shinken binary (when its own path is not visible inside) and
 * the egress socket directory appear inside. */
#define SHK_SANDBOX_STAGE2_EXE "/run/shinken/shinken"
#define SHK_SANDBOX_EGRESS_DIR "/run/shinken/egress"

typedef struct shk_sandbox_bwrap_opts {
  const char *bwrap;      /* host path of bwrap */
  const char *exe;        /* host path of the shinken binary (stage 2) */
  const char *egress_dir; /* host directory of the egress sockets, or NULL */
  const char *resolv;     /* where the sandbox's resolver file goes, or NULL */
  const char *resolv_src; /* what is shown there: NULL for the host's own file
                           * (host mode), the egress stub's in proxy mode */
  const char *chdir;      /* working directory inside, or NULL */
  shk_net_mode net;
  bool root;              /* the caller is root outside */
  bool landlock, seccomp; /* false only when degraded mode was allowed */
  bool guard;             /* the connect() guard; likewise */
  int sync_fd;            /* a unix socket: stage 2 sends one byte here just before
                           * exec, with the connect() guard's listener */
  char *const *command;
  size_t ncommand;
} shk_sandbox_bwrap_opts;

/* bwrap's argv (argv[0] is l->bwrap), ending with stage 2's command line;
 * free with shk_sandbox_strv_free. */
char **shk_sandbox_bwrap_argv(const shk_sandbox_plan *p, const shk_sandbox_bwrap_opts *l);
void shk_sandbox_strv_free(char **v);

/* ---- what this host can enforce ---- */

enum {
  SHK_CG_MEMORY = 1 << 0,
  SHK_CG_PIDS = 1 << 1,
  SHK_CG_CPU = 1 << 2,
};

/* The cgroup v1 hierarchies used (index i < SHK_CG1_FREEZER is SHK_CG_* bit
 * i); the freezer stops a session before it is killed. */
enum { SHK_CG1_MEMORY, SHK_CG1_PIDS, SHK_CG1_CPU, SHK_CG1_FREEZER, SHK_CG1_N };

typedef struct shk_sandbox_features {
  char *bwrap;         /* path of bwrap, NULL when not found */
  bool bwrap_setuid;
  bool userns;         /* unprivileged user namespaces usable (or bwrap setuid) */
  char *userns_detail; /* why not, or how */
  bool apparmor_userns; /* AppArmor's user-namespace restriction exists here (a
                         * non-root caller's namespaces may be powerless) */
  int landlock_abi;    /* 0: no Landlock */
  bool seccomp;
  bool connect_guard;  /* seccomp listeners, pidfd_getfd, openat2, STATX_MNT_ID */
  bool cgroup_v2;
  char *cgroup_mount;  /* the cgroup2 mount, NULL when none */
  char *cgroup_parent; /* where session cgroups go, NULL when none usable */
  bool cgroup_own_parent; /* cgroup_parent is root's to create, and its
                           * controllers root's to enable */
  unsigned cgroup_controllers; /* SHK_CG_* available at cgroup_parent */
  char *cgroup_detail;
  /* The fallback where cgroup v2 lacks the controllers (a hybrid host):
   * cgroup_parent is then NULL, cgroup_controllers are those of the v1
   * hierarchies, and cgroup_v1_parent holds where session cgroups go in each
   * hierarchy (SHK_CG1_*), NULL where none is usable by this caller. */
  bool cgroup_v1;
  char *cgroup_v1_parent[SHK_CG1_N];
} shk_sandbox_features;

enum {
  SHK_DETECT_CGROUP = 1 << 0, /* look for a usable cgroup v2 parent */
  SHK_DETECT_USERNS_TRY = 1 << 1, /* actually create a user namespace */
};

/* What this host can enforce for the caller ENV describes. Cheap unless
 * asked for more: a few stat() and sysctl reads. */
void shk_sandbox_features_detect(shk_sandbox_features *f, const shk_sandbox_env *env,
                                 unsigned what);
void shk_sandbox_features_free(shk_sandbox_features *f);

/* ---- cgroup v2 session ---- */

typedef struct shk_sandbox_cgroup {
  char *path;  /* the session cgroup */
  int procs_fd; /* its cgroup.procs, open for a child to join */
  /* With cgroup v1: the session cgroup in each hierarchy (SHK_CG1_*), NULL
   * where none, each with its cgroup.procs open; `path` then repeats the
   * first of them. */
  char *v1[SHK_CG1_N];
  int v1_procs[SHK_CG1_N];
} shk_sandbox_cgroup;

/* Creates a session cgroup under f->cgroup_parent with the limits of `o`. */
int shk_sandbox_cgroup_create(const shk_sandbox_features *f, const shk_sandbox_opts *o,
                              shk_sandbox_cgroup *cg, char **err);
/* In a child before exec: moves the calling process into the cgroup. */
int shk_sandbox_cgroup_join(const shk_sandbox_cgroup *cg);
/* Kills every process left in the cgroup and removes it. */
void shk_sandbox_cgroup_destroy(shk_sandbox_cgroup *cg);

/* ---- the launcher ---- */

/* Runs the sandbox the plan describes (bwrap, stage 2, the command) in the
 * session cgroup CG, with the egress sockets of EGRESS_DIR (proxy mode),
 * and waits for it. Returns the exit
 * status of `shinken run`. */
int shk_sandbox_launch(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                       const shk_sandbox_plan *plan, const shk_sandbox_features *f,
                       const shk_sandbox_cgroup *cg, const char *egress_dir);

/* ---- stage 2 (inside the sandbox) ---- */

/* The stage 2 program, `shinken __stage2 ARGS`, run by bwrap with the
 * arguments the launcher wrote: applies the layers and execs the command,
 * or exits 125. Never returns on success. */
int shk_sandbox_stage2(int argc, char **argv);

/* Stage 2, caller root only: binds /dev/null read-only over the existing
 * file PATH (see bwrap.c for when a mask is made here instead of by bwrap).
 * Needs CAP_SYS_ADMIN over the sandbox's mount namespace. */
int shk_sandbox_mask_file(const char *path);
/* Drops every capability: bounding set, ambient, effective, permitted,
 * inheritable. Returns 0 only when none is left. */
int shk_sandbox_drop_caps(void);
/* Applies Landlock at the best ABI the kernel offers: read-only access
 * beneath `ro`, full access beneath `rw`, device access beneath `dev`;
 * TCP bind/connect refused when `deny_tcp`; abstract unix sockets and
 * signals scoped at ABI 6 and later. Returns the ABI applied. */
int shk_sandbox_landlock_apply(const char *const *ro, size_t nro, const char *const *rw,
                               size_t nrw, const char *const *dev, size_t ndev, bool deny_tcp);
/* The connect() guard (guard.c). Stage 2 installs a filter that hands
 * every connect() of the workload to a listener (returned, or -errno) and
 * passes that listener to the launcher; call it just before
 * shk_sandbox_seccomp_apply, whose filter forbids the workload a listener of
 * its own (which would take precedence). */
int shk_sandbox_guard_install(void);
/* The launcher's side: `allowed` are the paths (as inside) on whose mounts
 * a pathname unix socket may be connected, the writable ones; with
 * `deny_abstract` (--net host) abstract sockets are refused. serve() handles
 * one pending request: call it when the listener is readable. */
typedef struct shk_sandbox_guard shk_sandbox_guard;
shk_sandbox_guard *shk_sandbox_guard_new(const char *const *allowed, size_t n, bool deny_abstract);
int shk_sandbox_guard_serve(shk_sandbox_guard *g, int listener);
void shk_sandbox_guard_free(shk_sandbox_guard *g);
/* Installs the precompiled seccomp filter for `net`. Must be the last step
 * before exec: it refuses the syscalls used to set the sandbox up. */
int shk_sandbox_seccomp_apply(shk_net_mode net);

#ifdef __cplusplus
}
#endif

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's enforcement layer on Linux: the options of `shinken run`, who the
 * caller is, the filesystem plan the options resolve to, what the host can
 * enforce and what a run would, the launch (bwrap, then stage 2 inside,
 * which applies the layers bwrap does not), and the report of a run.
 *
 * Library functions follow the contract of shinken/common.h: 0 or a
 * negative errno, and one sentence in an optional shk_error. */
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
  /* --read adds a read-only path; with --restrict-reads the listed roots
   * (and the system directories and writable roots) are all that is
   * visible. */
  shk_sandbox_paths write, read, deny;
  /* --net proxy: domain patterns for the egress proxy (host, *.host,
   * **.host, each with an optional :port). */
  shk_sandbox_paths allow_domains, deny_domains;
  /* --net proxy: non-public ranges the proxy may dial (an internal
   * mirror's), and names pinned to addresses ("HOST:ADDR"). */
  shk_sandbox_paths allow_cidrs, resolve;
  char *dns_upstream; /* --net proxy: the resolver the proxy asks, "ADDR[:PORT]" */
  /* --net proxy: the egress proxy's JSON configuration (shinken-proxy(1));
   * its policy is joined with the options above. */
  char *proxy_config;
  bool read_only, restrict_reads, env_clean, allow_degraded;
  bool help;          /* --help was given: nothing else was parsed after it */
  bool verbose;       /* --verbose: say the session and each refusal as it happens */
  bool no_observe;    /* --no-observe: no write observer (refused writes are not counted) */
  bool panel;         /* --panel: the run's own manager serves the Permission Panel
                       * (the CLI's to do; the sandbox itself has no part in it) */
  shk_net_mode net;
  uint64_t mem;       /* bytes; 0: no limit asked */
  uint64_t pids;      /* 0: no limit asked */
  uint32_t cpu_milli; /* thousandths of a core; 0: no limit asked */
  long uid, gid;      /* the ids inside for an unprivileged caller; -1: the caller's */
  uint64_t tmpfs_size; /* bytes each private tmpfs (/tmp, /var/tmp, /dev/shm, /run)
                        * may hold; SHK_SANDBOX_TMPFS_SIZE unless asked */
  shk_sandbox_paths env; /* --env NAME: variables passed although they would be removed */
  /* Not an option: what live grants could ever make writable (the image
   * manifest's fs.scope ceiling). Landlock cannot be widened once applied,
   * so stage 2 lets these be written as far as Landlock goes, and the
   * mounts (read-only until a grant puts a writable one there) carry what
   * is granted now. Empty: Landlock allows the writable roots alone. */
  shk_sandbox_paths ceiling;
  /* Not an option: the session has an Ask loop that may take it over, so
   * it gets a cgroup of its own to freeze where this host gives one, even
   * with no limit asked. */
  bool freezer;
  char *hostname;     /* the sandbox's host name; NULL: "shinken" */
  char *machine_id;   /* its /etc/machine-id (32 hex digits); NULL: a new one per run */
  char *report;       /* NULL: no report */
  char **command;     /* points into the argv given to parse; NULL-terminated */
  size_t ncommand;
  /* Set by the caller before parsing: what a leading ~ or $HOME stands for
   * in a profile's paths (NULL: such a path is refused). */
  const char *home;
  uint64_t set_;      /* the keys set so far, one bit per option (internal) */
} shk_sandbox_opts;

/* The default bound of each private tmpfs: 1 GiB. */
#define SHK_SANDBOX_TMPFS_SIZE (UINT64_C(1) << 30)

void shk_sandbox_opts_init(shk_sandbox_opts *o);
void shk_sandbox_opts_free(shk_sandbox_opts *o);

/* Parses `[OPTIONS] [--] CMD [ARGS...]` (argv[0] is the first option, not a
 * program name). Options are applied in order; --profile FILE is applied
 * where it appears. A missing command is an error, except after --help
 * (o->help), where parsing stops. */
int shk_sandbox_opts_parse(shk_sandbox_opts *o, int argc, char **argv, shk_error *err);
/* Applies a JSON profile (text, NUL-terminated). `what` names it in errors. */
int shk_sandbox_profile_apply(shk_sandbox_opts *o, const char *json, const char *what,
                              shk_error *err);

/* The options, for a usage text: option I's name (without dashes), the
 * name of its value (NULL for a flag) and one line of help. False past
 * the last. */
bool shk_sandbox_opt_describe(size_t i, const char **name, const char **value,
                              const char **help);

/* ---- configuration files ---- */

/* Where the layers of `shinken run`'s options come from; NULL skips one. */
typedef struct shk_sandbox_config {
  const char *admin;   /* the administrator's: /etc/shinken/config.json */
  const char *user;    /* the user's: $XDG_CONFIG_HOME/shinken/config.json */
  const char *project; /* the project's: .shinken.json in the working directory */
  const char *trust;   /* the trust store, which holds the project files the user read */
  const char *cwd;     /* the working directory, resolved */
} shk_sandbox_config;

typedef struct shk_sandbox_config_notes {
  bool admin, user, project;   /* each file was read and applied */
  const char *project_skipped; /* why the project's file was not loaded (a static
                                * sentence), or NULL */
} shk_sandbox_config_notes;

/* Layers into O, in order: the administrator's file (its defaults and its
 * limits), the user's, the project's only while the trust store holds the
 * SHA-256 of what it now says, then the command line ARGV as
 * shk_sandbox_opts_parse takes it (with its profiles). Each file has a
 * profile's keys. No later layer may widen what the administrator's file
 * set (shinken-config(5) has the table of what that means for each key):
 * an attempt is an error naming the layer and the key. A missing file is
 * no layer. */
int shk_sandbox_config_apply(shk_sandbox_opts *o, const shk_sandbox_config *c, int argc,
                             char **argv, shk_sandbox_config_notes *notes, shk_error *err);
/* The SHA-256 of FILE's content, in hex. */
int shk_sandbox_trust_hash(const char *file, char hex[65], shk_error *err);
/* Records HEX as the trusted content of FILE (an absolute path) in the
 * trust store STORE (made 0600, its missing directories 0700). */
int shk_sandbox_trust(const char *store, const char *file, const char *hex, shk_error *err);

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
  SHK_MOUNT_FILE,     /* a missing file that git reads, masked by a read-only
                       * file of fixed content (rule.text) */
} shk_mount_kind;

const char *shk_mount_kind_name(shk_mount_kind k);

typedef struct shk_sandbox_rule {
  char *path; /* absolute and resolved */
  shk_access access;
  shk_mount_kind kind;
  bool is_default; /* a built-in protection, not an option */
  bool created;    /* masks a missing path: the sandbox creates the mount point */
  bool via_symlink; /* an option whose path led here through a symlink */
  bool symlink;     /* a protected path that is a symlink inside a writable root
                     * (planted there, say, by an earlier run): masked where
                     * it is, by /dev/null over the link itself */
  const char *text; /* SHK_MOUNT_FILE: what the file holds (static) */
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
  /* $XDG_CONFIG_HOME, $XDG_DATA_HOME, $XDG_STATE_HOME, $XDG_RUNTIME_DIR
   * (absolute, or NULL): where tools keep what the protections cover, when
   * not in the home directory's defaults. */
  const char *xdg_config, *xdg_data, *xdg_state, *xdg_runtime;
  const char *cgroup_parent; /* SHINKEN_CGROUP_PARENT (cgroup v1), or NULL */
  const char *exe;           /* the shinken binary, for `shinken __stage2`; NULL:
                              * /proc/self/exe, read when it is needed */
  char *const *environ;      /* the environment the command inherits */
  char *storage_;            /* what shk_sandbox_env_from_process allocated */
} shk_sandbox_env;

/* Reads the caller's ids, the working directory and the variables above
 * from this process. Free with shk_sandbox_env_free. */
int shk_sandbox_env_from_process(shk_sandbox_env *env, shk_error *err);
void shk_sandbox_env_free(shk_sandbox_env *env);

typedef struct shk_sandbox_plan {
  bool read_restricted; /* --restrict-reads: an empty root plus the listed roots */
  /* Sorted so that a rule comes after every rule on an ancestor of its path:
   * applying them in order makes the most specific rule win. */
  shk_sandbox_rule *rules;
  size_t n;
  /* One line each, for the caller to show before the command runs (stage 2
   * prints them) and the report: a protected path that is a symlink inside
   * a writable root, masked. */
  char **warnings;
  size_t nwarnings;
} shk_sandbox_plan;

/* Resolves the options against the filesystem and the defaults. Fails on a
 * missing --write or --read path, --read-only with --write, or a writable
 * root too large to search for git repositories (SHK_SANDBOX_SCAN_MAX). */
int shk_sandbox_plan_build(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                           shk_sandbox_plan *p, shk_error *err);
void shk_sandbox_plan_free(shk_sandbox_plan *p);
/* The most directories the plan reads, over all writable roots, to find
 * the git repositories inside them (node_modules and the repositories' own
 * directories are not searched); past it the run is refused. */
#define SHK_SANDBOX_SCAN_MAX 100000
/* After the sandbox is gone: removes the mount points it created on the
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
/* With --net proxy, the sudo shim (the shinken binary, which acts as the
 * shim when called sudo) at this path, its directory put first on PATH,
 * and over /usr/bin/sudo when the host has one. */
#define SHK_SANDBOX_SUDO_DIR "/run/shinken/bin"
#define SHK_SANDBOX_SUDO_EXE SHK_SANDBOX_SUDO_DIR "/sudo"


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
  bool nomem_; /* detection ran out of memory */
} shk_sandbox_features;

enum {
  SHK_DETECT_CGROUP = 1 << 0, /* look for a usable cgroup v2 parent */
  SHK_DETECT_USERNS_TRY = 1 << 1, /* actually create a user namespace */
};

/* What this host can enforce for the caller ENV describes. Cheap unless
 * asked for more: a few stat() and sysctl reads. 0, or -ENOMEM. */
int shk_sandbox_features_detect(shk_sandbox_features *f, const shk_sandbox_env *env,
                                unsigned what);
void shk_sandbox_features_free(shk_sandbox_features *f);

/* ---- what a run enforces here: one assessment ---- */

/* The layers a run may lack, each a decision for the caller: refused
 * unless degraded mode is allowed (a host gap), or warned about (asked
 * for by the options). */
typedef enum shk_sandbox_layer {
  SHK_SANDBOX_LAYER_CALLER,   /* an unprivileged caller: root's own files stay root's */
  SHK_SANDBOX_LAYER_LANDLOCK,
  SHK_SANDBOX_LAYER_SECCOMP,
  SHK_SANDBOX_LAYER_GUARD,    /* the connect() guard */
  SHK_SANDBOX_LAYER_CGROUP,   /* the limits asked for */
  SHK_SANDBOX_LAYER_NETWORK,  /* the network namespace (off with --net host) */
  SHK_SANDBOX_LAYER_N
} shk_sandbox_layer;

typedef struct shk_sandbox_gap {
  shk_sandbox_layer layer;
  bool requested;  /* turned off by the options, not missing from the host */
  const char *why; /* one sentence, static */
} shk_sandbox_gap;

typedef enum shk_sandbox_level {
  SHK_SANDBOX_LEVEL_NONE,
  SHK_SANDBOX_LEVEL_PARTIAL,
  SHK_SANDBOX_LEVEL_FULL,
} shk_sandbox_level;

#define SHK_SANDBOX_TEXT_MAX 512

/* One class of authority (filesystem, network, processes, syscalls,
 * privileges, resources): how much of it this host enforces. */
typedef struct shk_sandbox_class {
  const char *name;
  shk_sandbox_level level;
  char mechanism[SHK_SANDBOX_TEXT_MAX]; /* "" when none */
  char missing[SHK_SANDBOX_TEXT_MAX];   /* "" when nothing is */
} shk_sandbox_class;

enum {
  SHK_SANDBOX_CLASS_FILESYSTEM,
  SHK_SANDBOX_CLASS_NETWORK,
  SHK_SANDBOX_CLASS_PROCESSES,
  SHK_SANDBOX_CLASS_SYSCALLS,
  SHK_SANDBOX_CLASS_PRIVILEGES,
  SHK_SANDBOX_CLASS_RESOURCES,
  SHK_SANDBOX_CLASS_N
};

typedef struct shk_sandbox_assessment {
  char fatal[SHK_SANDBOX_TEXT_MAX]; /* why nothing can run here (no bwrap, no user
                                     * namespaces); "" when something can */
  shk_sandbox_gap gaps[SHK_SANDBOX_LAYER_N];
  size_t ngaps;
  /* What a launch with these options uses. */
  int landlock_abi;    /* 0: no Landlock */
  bool landlock_net;   /* TCP bind and connect refused by Landlock */
  bool landlock_scope; /* abstract unix sockets and signals scoped */
  bool seccomp, guard, cgroup, netns;
  shk_sandbox_class classes[SHK_SANDBOX_CLASS_N];
} shk_sandbox_assessment;

/* What a run with options O (NULL: the defaults) enforces on this host for
 * the caller ENV. Allocates nothing and cannot fail. */
void shk_sandbox_assess(const shk_sandbox_features *f, const shk_sandbox_env *env,
                        const shk_sandbox_opts *o, shk_sandbox_assessment *a);
const char *shk_sandbox_layer_name(shk_sandbox_layer l);
const char *shk_sandbox_level_name(shk_sandbox_level l);
/* Whether the cgroup controllers the limits of O need are there. */
bool shk_sandbox_cgroup_usable(const shk_sandbox_features *f, const shk_sandbox_opts *o);

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
                              shk_sandbox_cgroup *cg, shk_error *err);
/* In a child before exec: moves the calling process into the cgroup. */
int shk_sandbox_cgroup_join(const shk_sandbox_cgroup *cg);
/* Kills every process left in the cgroup and removes it. */
void shk_sandbox_cgroup_destroy(shk_sandbox_cgroup *cg);

/* ---- the launch ---- */

/* Where a --net proxy sandbox's traffic goes: the session a capability
 * manager opened for it. */
typedef struct shk_sandbox_egress {
  const char *dir;     /* host directory of the session's egress sockets */
  const char *session; /* the session's id */
} shk_sandbox_egress;

/* What stage 2 applied, as it reported just before it exec'd the command
 * (stage 2 stops rather than run the command with less than it was asked,
 * and the launcher checks the report against what it asked). */
typedef struct shk_sandbox_applied {
  int landlock_abi;     /* the ABI Landlock was applied at; 0: not applied */
  bool landlock_net;    /* TCP bind and connect handled (refused) */
  bool landlock_scope;  /* abstract unix sockets and signals scoped */
  bool seccomp;         /* the syscall filter is loaded */
  bool guard;           /* the connect() guard is installed, its listener with the launcher */
  bool caps_dropped;    /* no capability left, the bounding set empty */
  bool no_new_privs;
  bool keyring;         /* a fresh session keyring */
  bool bridge;          /* the egress bridge runs (--net proxy) */
  bool userns;          /* the command runs in stage 2's own user namespace */
  bool observe;         /* the write observer is installed, its listener with the launcher */
  unsigned masks;       /* mounts stage 2 made itself (bwrap made the others) */
} shk_sandbox_applied;

/* ---- the workload's stdio and the caller's terminal ---- */

/* The sandbox never gets the caller's own stdin, stdout or stderr (a
 * descriptor can be reopened through /proc/self/fd). */
typedef enum shk_sandbox_stdio {
  /* A pseudo-terminal of the workload's own when stdin and stdout are
   * terminals (the caller's terminal in raw mode meanwhile, restored on
   * the way out), pipes otherwise: the launcher relays either. */
  SHK_SANDBOX_STDIO_AUTO,
  SHK_SANDBOX_STDIO_PIPES, /* pipes, even on a terminal */
} shk_sandbox_stdio;

/* A line for a human on the caller's terminal, outside the workload's
 * view: while it shows, the workload's output is held back (so nothing it
 * draws covers the prompt) and the key that answers it is read from the
 * caller's terminal and never given to the workload. The launch draws it
 * when it relays a pseudo-terminal; any thread may ask. */
typedef struct shk_sandbox_prompt shk_sandbox_prompt;

int shk_sandbox_prompt_new(shk_sandbox_prompt **out, shk_error *err);
/* After the launch that used it has returned. */
void shk_sandbox_prompt_free(shk_sandbox_prompt *p);
/* Shows TEXT (lines separated by '\n'; control characters are shown as
 * '?') at the bottom of the caller's terminal and waits for one of the
 * bytes of KEYS, pressed alone: returns that byte. A key pressed in the
 * first 400 ms is not taken (it was typed for the workload), nor are
 * pastes and escape sequences. -ETIMEDOUT after TIMEOUT_MS (0: no
 * timeout), -ECANCELED after shk_sandbox_prompt_cancel, -ENOTTY when no
 * launch relays a terminal (or it ended), -EINVAL, -ENOMEM. One prompt at a
 * time: a second ask waits for the first. */
int shk_sandbox_prompt_ask(shk_sandbox_prompt *p, const char *text, const char *keys,
                           int timeout_ms);
/* Ends the ask in progress, if any, with -ECANCELED (the request it asked
 * about was resolved elsewhere). */
void shk_sandbox_prompt_cancel(shk_sandbox_prompt *p);

/* Stops, continues or kills every process of the sandboxes this process
 * launched: its descendants in another PID namespace. Stopping repeats
 * until none is left running. Where the sandbox has a cgroup (a freezer
 * session, shk_sandbox_opts.freezer), stopping and continuing use the
 * cgroup freezer instead (cgroup v1's freezer.state, or cgroup v2's
 * cgroup.freeze): the processes are frozen where they stand, and nothing
 * inside can see it or undo it. *COUNT (may be NULL) gets how many were
 * signalled (or frozen). 0, or a negative errno (err): then the caller must not count
 * them as stopped. Any thread. */
typedef enum shk_sandbox_signal {
  SHK_SANDBOX_STOP,
  SHK_SANDBOX_CONTINUE,
  SHK_SANDBOX_KILL,
} shk_sandbox_signal;
int shk_sandbox_signal_launched(shk_sandbox_signal what, unsigned *count, shk_error *err);

/* The freezer of a sandbox another process launched (a session a daemon
 * hosts): freezes (STOP) or thaws the session cgroup that holds process
 * PID, named also by PIDFD so that a reused pid is not taken for it.
 * -ENOSYS when that process is in no session cgroup (its sandbox has no
 * freezer), -ESRCH when it is gone, else 0 or a negative errno (err). */
int shk_sandbox_freeze_process(int pidfd, pid_t pid, bool stop, shk_error *err);

/* Writes of the workload the sandbox refused, by tree (the write
 * observer: shk_sandbox_opts.no_observe turns it off). */
typedef struct shk_sandbox_write_refusal {
  /* The protected or read-only tree the plan has a rule for, or, outside
   * every writable root, the directory written in. */
  char *tree;
  const char *why; /* "protected", "read-only" or "outside the writable roots" */
  unsigned n;
} shk_sandbox_write_refusal;

struct shk_sandbox_result;
typedef struct shk_sandbox_io {
  shk_sandbox_stdio stdio;
  shk_sandbox_prompt *prompt; /* NULL: no prompt is drawn */
  /* Called once stage 2 has reported what it enforced (RES->applied; the
   * command is being exec'd) and as which process (RES->pid), on the
   * launcher's thread, before any of the
   * workload's connect() calls is answered; NULL: none. A negative return
   * (ERR saying why) kills the sandbox: the audit timeline records the
   * start of every sandbox that goes on running. */
  int (*on_started)(void *data, const struct shk_sandbox_result *res, shk_error *err);
  void *started_data;
  /* Called on the launcher's thread for each refused write the observer
   * counts, W->n being its tree's count so far; NULL: none. */
  void (*on_write_refused)(void *data, const shk_sandbox_write_refusal *w);
  void *refused_data;
} shk_sandbox_io;

/* What one launch did. */
typedef struct shk_sandbox_result {
  shk_sandbox_plan plan;  /* the filesystem plan the sandbox was built from */
  /* The session cgroup's directories (removed by now), NULL-terminated;
   * cgroup_v1 when they are cgroup v1 ones. */
  char *cgroup_paths[SHK_CG1_N + 1];
  bool cgroup_v1;
  char *session;          /* the egress session's id (--net proxy), or NULL */
  /* The names of the caller's variables the command did not get (they
   * carry secrets or sockets; --env NAME passes one), never their values. */
  char **env_removed;
  size_t nenv_removed;
  bool started;           /* stage 2 reported: the command was exec'd (or, with an
                           * error, it may have been before the sandbox was killed) */
  shk_sandbox_applied applied; /* what stage 2 reported, when started */
  pid_t pid;              /* stage 2's pid in the launcher's pid namespace (what live
                           * unlocks mount into), from its report; 0: unknown */
  int exit_status;        /* bwrap's exit status, the command's (128+N after signal
                           * N), or -1 when bwrap was killed */
  int exit_signal;        /* the signal that killed bwrap, or 0 */
  int launcher_signal;    /* a signal the launcher received and ended the sandbox
                           * with, or 0 */
  bool pty;               /* the workload had a pseudo-terminal (else pipes) */
  unsigned oom_kills;     /* processes the session's memory limit killed */
  unsigned pids_refused;  /* forks the session's pids limit refused */
  /* The workload's refused writes, by tree, in the order first seen; and
   * how many more there were under trees past the most kept. */
  shk_sandbox_write_refusal *writes_refused;
  size_t nwrites_refused;
  unsigned writes_refused_more;
} shk_sandbox_result;

/* Runs one sandbox from PLAN (built by shk_sandbox_plan_build for O and
 * ENV; the launch takes it over, whatever it returns: it moves into RES and
 * *PLAN is left empty), creates the session cgroup when the assessment A
 * says so, starts bwrap (which starts
 * stage 2, which execs the command) with EG's egress sockets in proxy mode,
 * serves the connect() guard, relays the workload's stdio as IO says (NULL:
 * SHK_SANDBOX_STDIO_AUTO, no prompt) and waits until the sandbox is gone
 * and its output delivered. SIGPIPE is ignored meanwhile. While it
 * runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT end the sandbox (the previous
 * handlers are restored before it returns); one launch at a time per
 * process. Returns 0 once the sandbox has come and gone, whatever the
 * command did (see RES), or -errno when it could not run or could not be
 * supervised: then nothing of it is left (the sandbox killed, the cgroup
 * and the mount points bwrap created removed). Free RES with
 * shk_sandbox_result_free, also after a failure. */
int shk_sandbox_launch(const shk_sandbox_opts *o, const shk_sandbox_env *env,
                       const shk_sandbox_features *f, const shk_sandbox_assessment *a,
                       shk_sandbox_plan *plan, const shk_sandbox_egress *eg,
                       const shk_sandbox_io *io,
                       shk_sandbox_result *res, shk_error *err);
void shk_sandbox_result_free(shk_sandbox_result *res);

/* The report of a run, as JSON text (malloc'd, into *JSON): what was
 * asked (O), what this host enforces (A, the assessment the run was
 * decided on), the plan's rules, what stage 2 applied, and the exit. The
 * same object is what a sandbox's audit event carries. 0 or -ENOMEM. */
int shk_sandbox_report(const shk_sandbox_opts *o, const shk_sandbox_assessment *a,
                       const shk_sandbox_result *res, char **json, shk_error *err);

/* ---- live unlocks: a host path granted to a running sandbox ---- */

/* The namespaces of a running sandbox, held open (they outlive the
 * process they were found through). */
typedef struct shk_sandbox_target shk_sandbox_target;

/* Opens the sandbox that process PID runs in, for a grant asked by FOR_UID
 * (0: anyone's): -EPERM when PID is not in a mount namespace of its own or
 * its sandbox is another user's, -ESRCH, -ENOMEM. */
int shk_sandbox_target_open(pid_t pid, uid_t for_uid, shk_sandbox_target **out, shk_error *err);
void shk_sandbox_target_free(shk_sandbox_target *t);

/* A path inside a granted tree that stays protected. */
typedef enum shk_sandbox_cover_kind {
  SHK_SANDBOX_COVER_MASK, /* hidden: an empty read-only tmpfs, or /dev/null */
  SHK_SANDBOX_COVER_RO,   /* read-only (it must exist) */
  SHK_SANDBOX_COVER_PIN,  /* bound onto itself: cannot be renamed or removed */
  SHK_SANDBOX_COVER_TEXT, /* a read-only file holding `text` */
} shk_sandbox_cover_kind;
typedef struct shk_sandbox_cover {
  const char *path; /* absolute, beneath the granted path */
  shk_sandbox_cover_kind kind;
  bool dir;         /* MASK of a missing path: a directory (else a file) */
  /* Missing on the host, in a writable grant, where the workload could
   * create it: its mount point is made on the host (as a fresh sandbox's
   * are) and removed again, if still empty, when the mount goes. */
  bool create;
  const char *text; /* TEXT: what the file shows */
} shk_sandbox_cover;

/* One mount attached to a running sandbox. */
typedef struct shk_sandbox_unlock shk_sandbox_unlock;

/* Makes the host's PATH (absolute; no symlink on the way) appear at PATH
 * inside the sandbox T, writable when WRITE (else read-only), nosuid and
 * nodev, on top of what was there, with COVERS applied inside it before
 * it is visible. On failure nothing was mounted. */
int shk_sandbox_unlock_mount(const shk_sandbox_target *t, const char *path, bool write,
                             const shk_sandbox_cover *covers, size_t n_covers,
                             shk_sandbox_unlock **out, shk_error *err);
/* Detaches the mount (MNT_DETACH: the view underneath is back for every
 * new open; files already open, and working directories inside, stay
 * usable) and frees U, also when the detach failed (T NULL: the sandbox is
 * gone, only frees). With STOP, then kills (SIGKILL) every process of the
 * sandbox that still holds a descriptor, working directory or root on the
 * mount, and says how many in *STOPPED. */
int shk_sandbox_unlock_undo(const shk_sandbox_target *t, shk_sandbox_unlock *u, bool stop,
                            unsigned *stopped, shk_error *err);
const char *shk_sandbox_unlock_path(const shk_sandbox_unlock *u);
/* NULL when this process can inject mounts into sandboxes; else a static
 * sentence saying what this host or user lacks. */
const char *shk_sandbox_unlock_missing(void);

/* ---- persistence: what a sandbox writes beneath a granted path, kept ---- */

/* The store of persisted data (persist.c): STATE_DIR/persist when
 * STATE_DIR is given, else $XDG_STATE_HOME/shinken/persist, else
 * ~/.local/state/shinken/persist. -ENOENT (err) when none can be named. */
int shk_sandbox_persist_root(const char *state_dir, char *buf, size_t len, shk_error *err);

/* One entry of the store, opened and locked for one mount. */
typedef struct shk_sandbox_persist shk_sandbox_persist;
/* Opens (making it when missing) the entry of PATH for IMAGE in the store
 * ROOT, and locks it: -EBUSY when another sandbox has it mounted. With
 * SURVIVES the entry is the image's one for PATH, kept across sessions;
 * without, a fresh one for this grant alone (SESSION says whose), to be
 * discarded when it ends. Entries of ended sessions that were never
 * discarded (their manager died) are removed here. */
int shk_sandbox_persist_open(const char *root, const char *image, const char *path, bool survives,
                             const char *session, shk_sandbox_persist **out, shk_error *err);
/* A descriptor of the entry's "upper" or "work" directory, or -errno. */
int shk_sandbox_persist_layer(const shk_sandbox_persist *p, const char *which);
bool shk_sandbox_persist_survives(const shk_sandbox_persist *p);
/* The entry's directory (absolute), for messages and for the overlay made
 * in a user namespace, which opens its layers again there. */
const char *shk_sandbox_persist_where(const shk_sandbox_persist *p);
/* Unlocks and frees P; with DISCARD, first removes the entry and all it
 * holds. */
void shk_sandbox_persist_close(shk_sandbox_persist *p, bool discard);

/* What `shinken persist list|show` says of an entry. */
typedef struct shk_sandbox_persist_info {
  char *image, *path;
  char *name;            /* the entry's directory name in the image's */
  char *session;         /* the session that made it, or NULL */
  bool survives;         /* kept for the image's next sessions */
  bool in_use;           /* mounted in a running sandbox now */
  int64_t created_ms;
  uint64_t bytes, files; /* what its upper layer holds */
} shk_sandbox_persist_info;
/* Every entry of the store (of IMAGE alone, when given), sorted by image
 * and path; an empty list when nothing was ever persisted. */
int shk_sandbox_persist_list(const char *root, const char *image, shk_sandbox_persist_info **out, size_t *n,
                             shk_error *err);
void shk_sandbox_persist_info_free(shk_sandbox_persist_info *v, size_t n);
/* The surviving entry of PATH for IMAGE; -ENOENT (err) when there is none. */
int shk_sandbox_persist_show(const char *root, const char *image, const char *path,
                             shk_sandbox_persist_info *info, shk_error *err);
/* Calls FN for each file the entry's upper layer holds, with its path as
 * the sandbox sees it and its kind: 'f' file, 'd' directory, 'l' symbolic
 * link, 'x' a file the sandbox deleted (it stays on the host). A nonzero
 * return of FN stops the walk and is returned. */
typedef int (*shk_sandbox_persist_walk_fn)(void *data, const char *path, char kind, uint64_t size);
int shk_sandbox_persist_walk(const char *root, const char *image, const char *path,
                             shk_sandbox_persist_walk_fn fn, void *data, shk_error *err);
/* Removes the surviving entry of PATH for IMAGE: -EBUSY while it is
 * mounted in a running sandbox, -ENOENT when there is none. */
int shk_sandbox_persist_remove(const char *root, const char *image, const char *path, shk_error *err);

/* Makes the host's PATH appear at PATH inside the sandbox T as an overlay
 * whose upper layer is P's: the sandbox reads the host's files and its own
 * changes, and writes only into P (the host's PATH never changes). Nosuid
 * and nodev, with COVERS applied inside before it is visible (a cover's
 * mount point is made in the upper layer, never on the host). On failure
 * nothing was mounted. shk_sandbox_unlock_undo takes it away again; P
 * stays the caller's to close. */
int shk_sandbox_unlock_overlay(const shk_sandbox_target *t, const char *path, const shk_sandbox_persist *p,
                               const shk_sandbox_cover *covers, size_t n_covers, shk_sandbox_unlock **out,
                               shk_error *err);
/* Makes the host's device node HOST (a character device, or a directory
 * of them such as /dev/snd; no symlink on the way; never a block device)
 * appear at INSIDE (beneath /dev) in the sandbox T: nosuid and noexec,
 * but not nodev, so the workload can open it. The mount point, and any
 * directory above it missing from the sandbox's private /dev, is made
 * there and removed again by shk_sandbox_unlock_undo. On failure nothing
 * was mounted. */
int shk_sandbox_unlock_device(const shk_sandbox_target *t, const char *host, const char *inside,
                              shk_sandbox_unlock **out, shk_error *err);
/* NULL when this host can mount overlays for persistence (beyond what
 * shk_sandbox_unlock_missing says); else a static sentence. */
const char *shk_sandbox_overlay_missing(void);

/* ---- privileged commands in a running sandbox (sudo) ---- */

/* NULL when this process can run a privileged command in a sandbox (root,
 * with the mount API and the overlay filesystem); else a static sentence
 * saying why not. */
const char *shk_sandbox_sudo_missing(void);
/* NULL when privileged commands may run in the sandbox T (a root caller's);
 * else why not (in buf). */
const char *shk_sandbox_sudo_refuses(const shk_sandbox_target *t, char *buf, size_t len);
/* Mounts into the running sandbox T, at PATH, an overlay of the host's
 * PATH whose changes go to P's store entry: read-only for the sandbox
 * (its own mounts beneath PATH carried over on top), writable only for the
 * privileged commands shk_sandbox_sudo_spawn starts, which mount *rw_tree
 * (a detached writable clone of the same overlay, the caller's to close).
 * Undone with shk_sandbox_unlock_undo. 0, or -errno with err; nothing is
 * mounted then. */
int shk_sandbox_unlock_system(const shk_sandbox_target *t, const char *path, const shk_sandbox_persist *p,
                              shk_sandbox_unlock **out, int *rw_tree, shk_error *err);
/* Starts ARGV (looked up on a fixed system PATH when it has no slash) in
 * the sandbox T's namespaces, as uid 0 of a user namespace of its own with
 * the capabilities a package manager needs and no other, each of the N_RW
 * writable trees RW_TREES mounted at RW_PATHS in a mount namespace of its
 * own, in CWD (else /), its output to OUT_FD and ERR_FD. *pid is a helper
 * whose exit status is the command's (128+N for signal N); *status_fd
 * yields, until its end, the one line saying what failed before the
 * command started (nothing when it started). 0, or -errno. */
int shk_sandbox_sudo_spawn(const shk_sandbox_target *t, const char *const *rw_paths, const int *rw_trees,
                           size_t n_rw, char *const *argv, const char *cwd, int out_fd, int err_fd, pid_t *pid,
                           int *status_fd, shk_error *err);

/* The protections shk_sandbox_plan_build gives a root at PATH (deny
 * rules, read-only git metadata, pins) beneath it, as covers for a grant
 * of PATH (malloc'd array, paths into *PLAN, which the caller frees with
 * shk_sandbox_plan_free). -EPERM (err) when PATH itself is denied. */
int shk_sandbox_unlock_covers(const char *path, bool write, const shk_sandbox_env *env,
                              shk_sandbox_plan *plan, shk_sandbox_cover **covers, size_t *n,
                              shk_error *err);

/* ---- stage 2 (inside the sandbox) ---- */

/* The stage 2 program, `shinken __stage2 ARGS` (argv[0] is "__stage2"),
 * run by bwrap with the arguments the launcher wrote: applies the layers
 * and execs the command, or exits 125. Never returns. */
__attribute__((noreturn)) int shk_sandbox_stage2(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif

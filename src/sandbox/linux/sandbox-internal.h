/* Between the parts of the sandbox module: how the launcher starts bwrap,
 * and the pieces stage 2 applies inside. Internal to the module (and its
 * unit tests). */
#pragma once

#include "shinken/sandbox.h"

typedef struct shk__bwrap_opts {
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
} shk__bwrap_opts;

/* bwrap's argv (argv[0] is l->bwrap), ending with stage 2's command line,
 * into *OUT; free with shk__strv_free. 0 or -ENOMEM. */
int shk__bwrap_argv(const shk_sandbox_plan *p, const shk__bwrap_opts *l, char ***out);
void shk__strv_free(char **v);

/* ---- stage 2's pieces (inside the sandbox) ---- */

/* Stage 2, caller root only: binds /dev/null read-only over the existing
 * file PATH (see bwrap.c for when a mask is made here instead of by bwrap).
 * Needs CAP_SYS_ADMIN over the sandbox's mount namespace. */
int shk__mask_file(const char *path);
/* Drops every capability: bounding set, ambient, effective, permitted,
 * inheritable. Returns 0 only when none is left. */
int shk__drop_caps(void);
/* Applies Landlock at the best ABI the kernel offers: read-only access
 * beneath `ro`, full access beneath `rw`, device access beneath `dev`;
 * TCP bind/connect refused when `deny_tcp`; abstract unix sockets and
 * signals scoped at ABI 6 and later. Returns the ABI applied. */
int shk__landlock_apply(const char *const *ro, size_t nro, const char *const *rw,
                               size_t nrw, const char *const *dev, size_t ndev, bool deny_tcp);
/* The connect() guard (guard.c). Stage 2 installs a filter that hands
 * every connect() of the workload to a listener (returned, or -errno) and
 * passes that listener to the launcher; call it just before
 * shk__seccomp_apply, whose filter forbids the workload a listener of
 * its own (which would take precedence). */
int shk__guard_install(void);
/* The launcher's side: `allowed` are the paths (as inside) on whose mounts
 * a pathname unix socket may be connected, the writable ones; with
 * `deny_abstract` (--net host) abstract sockets are refused. serve() handles
 * one pending request: call it when the listener is readable. new()
 * returns NULL when out of memory. */
typedef struct shk__guard shk__guard;
shk__guard *shk__guard_new(const char *const *allowed, size_t n, bool deny_abstract);
int shk__guard_serve(shk__guard *g, int listener);
void shk__guard_free(shk__guard *g);
/* Installs the precompiled seccomp filter for `net`. Must be the last step
 * before exec: it refuses the syscalls used to set the sandbox up. */
int shk__seccomp_apply(shk_net_mode net);


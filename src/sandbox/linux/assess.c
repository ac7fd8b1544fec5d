/* SPDX-License-Identifier: Apache-2.0 */
/* What this host enforces for a caller and a set of options: the layers a
 * launch uses, the ones that are missing or turned off (each with one
 * sentence), and the per-class summary `shinken doctor` prints. `shinken
 * run`, its report and `shinken doctor` all read this one answer, so they
 * cannot disagree. It decides nothing: whether a run may go ahead without
 * a layer is the caller's decision. */
#include "shinken/sandbox.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

static const char root_caller[] =
  "root-owned files are readable: the caller is root, and the sandbox runs as the caller's "
  "uid (run as an unprivileged user to protect root's files)";

static void gap(shk_sandbox_assessment *a, shk_sandbox_layer layer, bool requested,
                const char *why)
{
  if (ALWAYS(a->ngaps < SHK_SANDBOX_LAYER_N))
    a->gaps[a->ngaps++] = (shk_sandbox_gap){ layer, requested, why };
}

SHK_PRINTF(2, 3) static void put(char *buf, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, SHK_SANDBOX_TEXT_MAX, fmt, ap);
  va_end(ap);
}

static void klass(shk_sandbox_class *c, const char *name, shk_sandbox_level level)
{
  c->name = name;
  c->level = level;
  c->mechanism[0] = c->missing[0] = '\0';
}

/* Doctor's view: per class of authority, how much this host enforces and
 * by which mechanism, and what is missing. */
static void classify(const shk_sandbox_features *f, const shk_sandbox_env *env,
                     shk_sandbox_assessment *a)
{
  shk_sandbox_class *c = a->classes;
  bool ns = f->bwrap && f->userns;
  const char *nons = !f->bwrap ? "bwrap not found" : "user namespaces unavailable";
  int abi = f->landlock_abi;
  /* A root caller's sandbox runs as the host's root. */
  bool root = env->root;

  klass(&c[SHK_SANDBOX_CLASS_FILESYSTEM], "filesystem", SHK_SANDBOX_LEVEL_NONE);
  if (ns) {
    c[SHK_SANDBOX_CLASS_FILESYSTEM].level = abi > 0 && !root ? SHK_SANDBOX_LEVEL_FULL : SHK_SANDBOX_LEVEL_PARTIAL;
    if (abi > 0)
      put(c[SHK_SANDBOX_CLASS_FILESYSTEM].mechanism, "bwrap mount namespace + Landlock ABI %d", abi);
    else
      put(c[SHK_SANDBOX_CLASS_FILESYSTEM].mechanism, "bwrap mount namespace");
    if (!abi || root)
      put(c[SHK_SANDBOX_CLASS_FILESYSTEM].missing, "%s%s%s", abi ? "" : "Landlock", !abi && root ? "; " : "",
          root ? root_caller : "");
  } else {
    put(c[SHK_SANDBOX_CLASS_FILESYSTEM].missing, "%s", nons);
  }

  klass(&c[SHK_SANDBOX_CLASS_NETWORK], "network", SHK_SANDBOX_LEVEL_NONE);
  if (ns) {
    bool tcp = abi >= 4;
    c[SHK_SANDBOX_CLASS_NETWORK].level = f->seccomp && tcp ? SHK_SANDBOX_LEVEL_FULL : SHK_SANDBOX_LEVEL_PARTIAL;
    put(c[SHK_SANDBOX_CLASS_NETWORK].mechanism, "network namespace (lo only)%s%s",
        f->seccomp ? " + seccomp socket families" : "", tcp ? " + Landlock TCP bind/connect" : "");
    if (!f->seccomp || !tcp)
      put(c[SHK_SANDBOX_CLASS_NETWORK].missing, "%s%s%s", f->seccomp ? "" : "seccomp", !f->seccomp && !tcp ? ", " : "",
          tcp ? "" : "Landlock ABI 4 (TCP rules)");
  } else {
    put(c[SHK_SANDBOX_CLASS_NETWORK].missing, "%s", nons);
  }

  klass(&c[SHK_SANDBOX_CLASS_PROCESSES], "processes", ns ? SHK_SANDBOX_LEVEL_FULL : SHK_SANDBOX_LEVEL_NONE);
  if (ns)
    put(c[SHK_SANDBOX_CLASS_PROCESSES].mechanism, "pid, ipc, uts, cgroup namespaces; die-with-parent; new session%s",
        abi >= 6 ? "; Landlock signal and abstract-socket scoping" : "");
  else
    put(c[SHK_SANDBOX_CLASS_PROCESSES].missing, "%s", nons);

  klass(&c[SHK_SANDBOX_CLASS_SYSCALLS], "syscalls", !f->seccomp ? SHK_SANDBOX_LEVEL_NONE
                           : f->connect_guard ? SHK_SANDBOX_LEVEL_FULL : SHK_SANDBOX_LEVEL_PARTIAL);
  if (f->seccomp)
    put(c[SHK_SANDBOX_CLASS_SYSCALLS].mechanism, "%s", f->connect_guard
        ? "seccomp filter (libseccomp, precompiled); connect() guard (seccomp user notification)"
        : "seccomp filter (libseccomp, precompiled)");
  if (!f->seccomp)
    put(c[SHK_SANDBOX_CLASS_SYSCALLS].missing, "seccomp");
  else if (!f->connect_guard)
    put(c[SHK_SANDBOX_CLASS_SYSCALLS].missing, "connect() guard (needs Linux 5.8 and CONFIG_UNIX_DIAG)");

  klass(&c[SHK_SANDBOX_CLASS_PRIVILEGES], "privileges", ns ? SHK_SANDBOX_LEVEL_FULL : SHK_SANDBOX_LEVEL_NONE);
  if (ns)
    put(c[SHK_SANDBOX_CLASS_PRIVILEGES].mechanism, "user namespace; all capabilities and the bounding set dropped; "
        "no-new-privs; fresh session keyring");
  else
    put(c[SHK_SANDBOX_CLASS_PRIVILEGES].missing, "%s", nons);

  unsigned all = SHK_CG_MEMORY | SHK_CG_PIDS | SHK_CG_CPU;
  unsigned have = f->cgroup_parent || f->cgroup_v1 ? f->cgroup_controllers & all : 0;
  klass(&c[SHK_SANDBOX_CLASS_RESOURCES], "resources", have == all ? SHK_SANDBOX_LEVEL_FULL
                            : have ? SHK_SANDBOX_LEVEL_PARTIAL : SHK_SANDBOX_LEVEL_NONE);
  if (have && f->cgroup_v1)
    put(c[SHK_SANDBOX_CLASS_RESOURCES].mechanism, "cgroup v1 hierarchies%s:%s%s%s", root ? "" : " delegated to this user",
        have & SHK_CG_MEMORY ? " memory.limit_in_bytes" : "", have & SHK_CG_PIDS ? " pids.max" : "",
        have & SHK_CG_CPU ? " cpu.cfs_quota_us" : "");
  else if (have)
    put(c[SHK_SANDBOX_CLASS_RESOURCES].mechanism, "cgroup v2 at %s:%s%s%s", f->cgroup_parent,
        have & SHK_CG_MEMORY ? " memory.max" : "", have & SHK_CG_PIDS ? " pids.max" : "",
        have & SHK_CG_CPU ? " cpu.max" : "");
  if (have != all)
    put(c[SHK_SANDBOX_CLASS_RESOURCES].missing, "%s", f->cgroup_detail ? f->cgroup_detail : "cgroup v2");
}

bool shk_sandbox_cgroup_usable(const shk_sandbox_features *f, const shk_sandbox_opts *o)
{
  unsigned need = (o->mem ? SHK_CG_MEMORY : 0) | (o->pids ? SHK_CG_PIDS : 0) |
                  (o->cpu_milli ? SHK_CG_CPU : 0);
  return (f->cgroup_parent || f->cgroup_v1) && (f->cgroup_controllers & need) == need;
}

void shk_sandbox_assess(const shk_sandbox_features *f, const shk_sandbox_env *env,
                        const shk_sandbox_opts *o, shk_sandbox_assessment *a)
{
  memset(a, 0, sizeof *a);
  shk_net_mode net = o ? o->net : SHK_NET_NONE;
  bool limits = o && (o->mem || o->pids || o->cpu_milli);
  if (!f->bwrap) {
    put(a->fatal, "bwrap not found (install bubblewrap)");
  } else if (!f->userns) {
    put(a->fatal, "user namespaces unavailable: %s", f->userns_detail ? f->userns_detail : "");
  }
  a->landlock_abi = f->landlock_abi;
  a->landlock_net = net == SHK_NET_NONE && f->landlock_abi >= 4;
  a->landlock_scope = f->landlock_abi >= 6;
  a->seccomp = f->seccomp;
  a->guard = f->seccomp && f->connect_guard;
  /* A session the Ask loop may take over gets a cgroup for its freezer
   * where the host has one this caller may use (it needs no controller). */
  a->cgroup = (limits || (o && o->freezer)) && shk_sandbox_cgroup_usable(f, o);
  a->netns = net != SHK_NET_HOST;

  /* In the order `shinken run` names them when it refuses: the first is
   * what it says. Capabilities are dropped, but file ownership stays: as
   * root, the workload can read any 0600 root file no rule masks. */
  if (env->root)
    gap(a, SHK_SANDBOX_LAYER_CALLER, false, root_caller);
  if (f->landlock_abi == 0)
    gap(a, SHK_SANDBOX_LAYER_LANDLOCK, false,
        "Landlock unavailable: files are confined by the mount namespace only, TCP is not "
        "refused by Landlock");
  if (!f->seccomp)
    gap(a, SHK_SANDBOX_LAYER_SECCOMP, false, "seccomp unavailable: no syscall filter");
  else if (!f->connect_guard)
    gap(a, SHK_SANDBOX_LAYER_GUARD, false,
        "the connect() guard needs Linux 5.8 (seccomp listener, pidfd_getfd, openat2, statx "
        "mount id) and the unix socket diagnostics (CONFIG_UNIX_DIAG): host unix sockets stay "
        "connectable");
  if (limits && !a->cgroup)
    gap(a, SHK_SANDBOX_LAYER_CGROUP, false,
        "cgroup limits unavailable: --mem, --pids and --cpu are not enforced");
  if (net == SHK_NET_HOST)
    gap(a, SHK_SANDBOX_LAYER_NETWORK, true,
        "--net host: the command uses the host's network, unfiltered");
  classify(f, env, a);
}

const char *shk_sandbox_layer_name(shk_sandbox_layer l)
{
  switch (l) {
  case SHK_SANDBOX_LAYER_CALLER: return "user-separation";
  case SHK_SANDBOX_LAYER_LANDLOCK: return "landlock";
  case SHK_SANDBOX_LAYER_SECCOMP: return "seccomp";
  case SHK_SANDBOX_LAYER_GUARD: return "connect-guard";
  case SHK_SANDBOX_LAYER_CGROUP: return "cgroup";
  case SHK_SANDBOX_LAYER_NETWORK: return "network";
  case SHK_SANDBOX_LAYER_N: break;
  }
  return "?";
}

const char *shk_sandbox_level_name(shk_sandbox_level l)
{
  switch (l) {
  case SHK_SANDBOX_LEVEL_NONE: return "none";
  case SHK_SANDBOX_LEVEL_PARTIAL: return "partial";
  case SHK_SANDBOX_LEVEL_FULL: return "full";
  }
  return "?";
}

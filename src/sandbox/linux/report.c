/* SPDX-License-Identifier: Apache-2.0 */
/* The report of one sandbox run: what was asked, what the assessment said
 * this host enforces, what stage 2 reported it applied, and how the run
 * ended. One JSON object, built here and written by the caller: it is what
 * `shinken run --report FILE` writes, and what a "sandbox start" audit
 * event carries. Nothing here does I/O. */
#include "report-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static json_t *strv_json(char *const *v, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, json_string(v[i])) < 0) {
      json_decref(a);
      return NULL;
    }
  return a;
}

static json_t *num_or_null(uint64_t v)
{
  return v ? json_integer((json_int_t)v) : json_null();
}

static json_t *int_or_null(bool present, int v)
{
  return present ? json_integer(v) : json_null();
}

static json_t *id_or_null(long v)
{
  return v >= 0 ? json_integer(v) : json_null();
}

static json_t *str_or_null(const char *s)
{
  return s ? json_string(s) : json_null();
}

static json_t *asked_json(const shk_sandbox_opts *o)
{
  char cpu[32] = "";
  if (o->cpu_milli)
    snprintf(cpu, sizeof cpu, "%u.%03u", o->cpu_milli / 1000, o->cpu_milli % 1000);
  json_t *a = json_pack("{s:o, s:o, s:o, s:b, s:b, s:s, s:o, s:o, s:o, s:b, s:b, s:o, s:o, s:o}",
      "write", strv_json(o->write.v, o->write.n), "read", strv_json(o->read.v, o->read.n),
      "deny", strv_json(o->deny.v, o->deny.n), "read-only", o->read_only,
      "restrict-reads", o->restrict_reads,
      "net", shk_net_mode_name(o->net), "mem", num_or_null(o->mem), "pids", num_or_null(o->pids),
      "cpu", o->cpu_milli ? json_string(cpu) : json_null(), "env-clean", o->env_clean,
      "allow-degraded", o->allow_degraded,
      "allow-domain", strv_json(o->allow_domains.v, o->allow_domains.n),
      "deny-domain", strv_json(o->deny_domains.v, o->deny_domains.n),
      "command", strv_json(o->command, o->ncommand));
  if (a && json_object_update_new(a, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}",
          "allow-cidr", strv_json(o->allow_cidrs.v, o->allow_cidrs.n),
          "resolve", strv_json(o->resolve.v, o->resolve.n),
          "dns-upstream", str_or_null(o->dns_upstream),
          "proxy-config", str_or_null(o->proxy_config),
          "uid", id_or_null(o->uid), "gid", id_or_null(o->gid))) < 0) {
    json_decref(a);
    return NULL;
  }
  return a;
}

static json_t *rules_json(const shk_sandbox_plan *p)
{
  json_t *rules = json_array();
  for (size_t i = 0; rules && i < p->n; i++)
    if (json_array_append_new(rules, json_pack("{s:s, s:s, s:s, s:s}", "path", p->rules[i].path,
            "access", shk_access_name(p->rules[i].access),
            "origin", p->rules[i].is_default ? "default" : "option",
            "mechanism", shk_mount_kind_name(p->rules[i].kind))) < 0) {
      json_decref(rules);
      return NULL;
    }
  return rules;
}

/* What the network mode is enforced by, from what was applied. */
static json_t *network_json(const shk_sandbox_opts *o, const shk_sandbox_applied *ap)
{
  const char *m[4];
  size_t n = 0;
  if (o->net != SHK_NET_HOST)
    m[n++] = "network namespace (lo only)";
  if (ap->seccomp)
    m[n++] = o->net == SHK_NET_NONE ? "seccomp: socket() AF_UNIX only"
             : "seccomp: socket() AF_UNIX, AF_INET, AF_INET6, netlink route only";
  if (ap->landlock_net)
    m[n++] = "Landlock: TCP bind and connect refused";
  if (ap->bridge)
    m[n++] = "egress proxy (HTTP 3128, SOCKS5 1080, DNS 53)";
  return json_pack("{s:s, s:o}", "mode", shk_net_mode_name(o->net), "mechanism",
                   strv_json((char *const *)m, n));
}

static json_t *cgroup_json(const shk_sandbox_opts *o, const shk_sandbox_result *res)
{
  bool on = res->cgroup_paths[0] != NULL;
  size_t n = 0;
  while (res->cgroup_paths[n])
    n++;
  char cpumax[48] = "";
  if (o->cpu_milli)
    snprintf(cpumax, sizeof cpumax, "%u 100000", o->cpu_milli * 100);
  return json_pack("{s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "enforced", on,
      "mechanism", !on ? json_null() : json_string(res->cgroup_v1 ? "cgroup v1" : "cgroup v2"),
      /* With cgroup v1 the limits sit in one cgroup per hierarchy. */
      "paths", strv_json(res->cgroup_paths, n),
      "path", on ? json_string(res->cgroup_paths[0]) : json_null(),
      "memory.max", on ? num_or_null(o->mem) : json_null(),
      "pids.max", on ? num_or_null(o->pids) : json_null(),
      "cpu.max", on && o->cpu_milli ? json_string(cpumax) : json_null());
}

/* What the sandbox enforced: the mount namespace's rules and the
 * namespaces bwrap made (it stops otherwise), and the layers as stage 2
 * reported them. Before stage 2 reported, nothing is claimed. */
static json_t *enforced_json(const shk_sandbox_opts *o, const shk_sandbox_result *res)
{
  const shk_sandbox_applied *ap = &res->applied;
  bool up = res->started;
  return json_pack(
      "{s:o, s:b, s:[sssssss], s:o, s:{s:i, s:b, s:b, s:b, s:b}, s:{s:b, s:s},"
      " s:o, s:o, s:b, s:o, s:b, s:b, s:s, s:i, s:s}",
      "rules", rules_json(&res->plan), "read-restricted", res->plan.read_restricted,
      "namespaces", "user", "pid", "mount", "ipc", "uts", "cgroup",
      o->net == SHK_NET_HOST ? "net (not used: --net host)" : "net",
      "network", network_json(o, ap),
      "landlock", "abi", ap->landlock_abi, "enforced", ap->landlock_abi > 0,
      "fs", ap->landlock_abi > 0, "net", ap->landlock_net, "scope", ap->landlock_scope,
      "seccomp", "enforced", ap->seccomp, "mechanism", "libseccomp (precompiled BPF)",
      "cgroup", cgroup_json(o, res),
      "capabilities", ap->caps_dropped
          ? json_string("all dropped (effective, permitted, inheritable, ambient, bounding)")
          : json_null(),
      "no-new-privs", ap->no_new_privs,
      "keyring", ap->keyring ? json_string("fresh session keyring") : json_null(),
      "new-session", up, "die-with-parent", up,
      "unix-connect", ap->guard ? "connect() mediated by the launcher (seccomp user "
                                  "notification): pathname sockets only on writable mounts"
                                : "not mediated",
      "stage2-mounts", (int)ap->masks,
      /* The workload's stdio is never the caller's own descriptors. */
      "stdio", res->pty ? "pseudo-terminal (relayed)" : "pipes (relayed)");
}

/* Stage 2's own report, as it came. */
static json_t *applied_json(const shk_sandbox_result *res)
{
  const shk_sandbox_applied *ap = &res->applied;
  if (!res->started)
    return json_null();
  return json_pack("{s:i, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:i}",
      "landlock-abi", ap->landlock_abi, "landlock-net", ap->landlock_net,
      "landlock-scope", ap->landlock_scope, "seccomp", ap->seccomp, "connect-guard", ap->guard,
      "write-observer", ap->observe,
      "capabilities-dropped", ap->caps_dropped, "no-new-privs", ap->no_new_privs,
      "keyring", ap->keyring, "egress-bridge", ap->bridge, "user-namespace", ap->userns,
      "mounts", (int)ap->masks);
}

static json_t *gaps_json(const shk_sandbox_assessment *a, bool all)
{
  json_t *g = json_array();
  for (size_t i = 0; g && i < a->ngaps; i++) {
    const shk_sandbox_gap *gap = &a->gaps[i];
    json_t *e = all ? json_pack("{s:s, s:b, s:s}", "layer", shk_sandbox_layer_name(gap->layer),
                                "requested", gap->requested, "why", gap->why)
                : gap->requested ? NULL : json_string(gap->why);
    if ((all || !gap->requested) && json_array_append_new(g, e) < 0) {
      json_decref(g);
      return NULL;
    }
  }
  return g;
}

/* The refused writes the observer counted, by tree; null without it. */
static json_t *refused_writes_json(const shk_sandbox_result *res)
{
  if (!res->applied.observe)
    return json_null();
  json_t *l = json_array();
  for (size_t i = 0; l && i < res->nwrites_refused; i++) {
    const shk_sandbox_write_refusal *w = &res->writes_refused[i];
    if (json_array_append_new(l, json_pack("{s:s, s:s, s:i}", "tree", w->tree, "why", w->why,
                                           "count", (json_int_t)w->n)) < 0) {
      json_decref(l);
      return NULL;
    }
  }
  return json_pack("{s:o, s:i}", "trees", l, "more", (json_int_t)res->writes_refused_more);
}

json_t *shk__sandbox_report_json(const shk_sandbox_opts *o, const shk_sandbox_assessment *a,
                                 const shk_sandbox_result *res)
{
  bool exited = res->exit_status >= 0;
  return json_pack("{s:o, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:b, s:o, s:o, s:o}}",
      "refused-writes", refused_writes_json(res),
      "version", 2, "asked", asked_json(o), "session",
      res->session ? json_string(res->session) : json_null(),
      "enforced", enforced_json(o, res), "applied", applied_json(res),
      /* The layers missing from this host, as sentences (the ones a run
       * needs --allow-degraded for), and every layer missing or turned
       * off, by name. */
      "degraded", gaps_json(a, false), "gaps", gaps_json(a, true),
      "exit", "started", res->started, "status", int_or_null(exited, res->exit_status),
      "signal", int_or_null(res->exit_signal != 0, res->exit_signal),
      "launcher-signal", int_or_null(res->launcher_signal != 0, res->launcher_signal));
}

int shk_sandbox_report(const shk_sandbox_opts *o, const shk_sandbox_assessment *a,
                       const shk_sandbox_result *res, char **json, shk_error *err)
{
  json_t *r = shk__sandbox_report_json(o, a, res);
  *json = r ? json_dumps(r, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
  json_decref(r);
  return *json ? 0 : shk__error_set(err, -ENOMEM, "out of memory");
}

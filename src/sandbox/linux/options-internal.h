/* SPDX-License-Identifier: Apache-2.0 */
/* Between the options (options.c) and the configuration files that layer
 * them (config.c): the options by number, and what kind of authority each
 * one is, which decides how a later layer may change what the
 * administrator's file set. Internal to the module (and its unit tests). */
#pragma once

#include "shinken/sandbox.h"

typedef enum shk__opt_id {
  SHK__OPT_WRITE, SHK__OPT_READ, SHK__OPT_DENY, SHK__OPT_RESTRICT_READS, SHK__OPT_READ_ONLY,
  SHK__OPT_NET, SHK__OPT_ALLOW_DOMAIN, SHK__OPT_DENY_DOMAIN, SHK__OPT_ALLOW_CIDR,
  SHK__OPT_RESOLVE, SHK__OPT_DNS_UPSTREAM, SHK__OPT_PROXY_CONFIG, SHK__OPT_MEM, SHK__OPT_PIDS,
  SHK__OPT_CPU, SHK__OPT_UID, SHK__OPT_GID, SHK__OPT_ENV_CLEAN, SHK__OPT_ALLOW_DEGRADED,
  SHK__OPT_PROFILE, SHK__OPT_REPORT, SHK__OPT_VERBOSE, SHK__OPT_ENV, SHK__OPT_TMPFS_SIZE,
  SHK__OPT_HOSTNAME, SHK__OPT_MACHINE_ID, SHK__OPT_PANEL, SHK__OPT_NO_OBSERVE, SHK__OPT_HELP, SHK__OPT_N
} shk__opt_id;

/* What a later layer may do to a key the administrator's file set (one
 * table, docs/shinken-config.5.scd):
 *   GRANTS      a list that grants: a later entry must fall within one of
 *               the administrator's (a path beneath one of its paths, a
 *               pattern one of its patterns covers, a range inside one of
 *               its ranges)
 *   LIMITS      a list that takes away: every layer's entries apply
 *   ORDERED     net, none < proxy < host: at most the administrator's
 *   CEILING     mem, pids, cpu: lowered, never raised
 *   NARROWING   a flag that takes away: set, it stays set
 *   WIDENING    allow-degraded: unset (false), it stays unset
 *   ROUTING     where allowed traffic goes (proxy-config, resolve,
 *               dns-upstream): the administrator's alone once its file says
 *               anything about egress
 *   FREE        report, uid, gid: any layer, the last one wins
 *   NONE        profile, help: not keys of a file */
typedef enum shk__opt_kind {
  SHK__KIND_GRANTS, SHK__KIND_LIMITS, SHK__KIND_ORDERED, SHK__KIND_CEILING,
  SHK__KIND_NARROWING, SHK__KIND_WIDENING, SHK__KIND_ROUTING, SHK__KIND_FREE, SHK__KIND_NONE,
} shk__opt_kind;

shk__opt_kind shk__opt_kind_of(shk__opt_id id);
/* The option's name without its dashes ("allow-domain"). */
const char *shk__opt_name(shk__opt_id id);
/* Whether the key concerns egress (the proxy and what it lets through). */
bool shk__opt_is_egress(shk__opt_id id);
/* The list of O that option ID fills, or NULL for a scalar. */
shk_sandbox_paths *shk__opt_list(shk_sandbox_opts *o, shk__opt_id id);

#define SHK__OPT_BIT(id) (UINT64_C(1) << (id))

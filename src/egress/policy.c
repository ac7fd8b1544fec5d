/* SPDX-License-Identifier: Apache-2.0 */
/* The domain and CIDR policy: rules and the None < Allow < Deny lattice of
 * shk_egress_verdict. Deny wins, and no match at all is None, which is a
 * refusal: an empty allowlist blocks everything. Patterns and ranges are
 * the shared grammar's (shinken/match.h); what is decided here is what a
 * verdict makes of a match. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <errno.h>
#include <string.h>

/* PORT 0 is a DNS query, which names no port: an allow rule with a port
 * still lets the name resolve (the connection is checked with its port
 * later), while a deny rule with a port does not refuse the whole name. */
static bool rule_matches(const shk__domain_rule *r, const shk_host *h, uint16_t port)
{
  if (port == 0 && r->pattern.port && r->verdict == SHK_EGRESS_DENY)
    return false;
  return shk_host_pattern_matches(&r->pattern, h, port);
}

static void join(shk__decision *d, shk_egress_verdict v, const char *text)
{
  if (v > d->verdict) {
    d->verdict = v;
    d->rule = text;
  }
}

void shk__eg_decide(const shk__eg_config *cfg, const shk_host *host, uint16_t port,
                    shk__decision *d)
{
  d->verdict = SHK_EGRESS_NONE;
  d->rule = NULL;
  for (size_t i = 0; i < cfg->n_domains; i++)
    if (rule_matches(&cfg->domains[i], host, port))
      join(d, cfg->domains[i].verdict, cfg->domains[i].text);
  if (host->kind != SHK_HOST_NAME)
    for (size_t i = 0; i < cfg->n_cidrs; i++)
      if (shk_cidr_contains(&cfg->cidrs[i].cidr, &host->ip))
        join(d, cfg->cidrs[i].verdict, cfg->cidrs[i].text);
}

/* Security-relevant: NULL lets the proxy dial IP. Denied ranges are
 * checked first, so a deny holds even when a name leads into the range and
 * whatever the private opt-ins say. */
const char *shk__eg_ip_blocked(const shk__eg_config *cfg, const shk_ip *ip)
{
  for (size_t i = 0; i < cfg->n_cidrs; i++)
    if (cfg->cidrs[i].verdict == SHK_EGRESS_DENY && shk_cidr_contains(&cfg->cidrs[i].cidr, ip))
      return "policy-deny-cidr";
  const char *r = shk_ip_nonpublic(ip);
  if (!r)
    return NULL;
  for (size_t i = 0; i < cfg->n_private_ok; i++)
    if (shk_cidr_contains(&cfg->private_ok[i], ip))
      return NULL;
  return r;
}

const shk__pin *shk__eg_pin_find(const shk__eg_config *cfg, const char *host)
{
  for (size_t i = 0; i < cfg->n_pins; i++)
    if (!strcmp(cfg->pins[i].host, host))
      return &cfg->pins[i];
  return NULL;
}

shk__eg_config *shk__eg_config_new(void)
{
  shk__eg_config *cfg = calloc(1, sizeof *cfg);
  if (cfg) {
    cfg->dns_timeout_ms = 3000;
    unsigned *l = (unsigned *)&cfg->limits;
    for (size_t i = 0; i < sizeof cfg->limits / sizeof(unsigned); i++)
      l[i] = SHK__LIMIT_UNSET;
  }
  return cfg;
}

int shk__eg_config_add_domain(shk__eg_config *cfg, const char *pat, shk_egress_verdict v,
                              shk_error *err)
{
  shk__domain_rule rule = { .verdict = v };
  int r = shk_host_pattern_parse(pat, strlen(pat), SHK_HOST_PATTERN_ALLOW_ANY, &rule.pattern, err);
  if (r < 0)
    return r;
  if (rule.pattern.kind == SHK_HOST_PATTERN_ANY) {
    /* Deny-all is the empty allowlist; a deny '*' would only hide that. */
    if (v == SHK_EGRESS_DENY)
      return shk__error_set(err, -EINVAL,
                            "a bare '*' is refused in a deny rule (to deny everything, allow "
                            "nothing)");
    if (!cfg->allow_all)
      return shk__error_set(err, -EINVAL,
                            "a bare '*' (every host) needs dangerously_allow_all: true");
  }
  rule.text = strdup(pat);
  shk__domain_rule *nd = realloc(cfg->domains, (cfg->n_domains + 1) * sizeof *nd);
  if (!rule.text || !nd) {
    free(rule.text);
    if (nd)
      cfg->domains = nd;
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  cfg->domains = nd;
  cfg->domains[cfg->n_domains++] = rule;
  return 0;
}

void shk__eg_config_free(shk__eg_config *cfg)
{
  if (!cfg)
    return;
  free(cfg->listen_http);
  free(cfg->listen_socks5);
  for (size_t i = 0; i < cfg->n_domains; i++)
    free(cfg->domains[i].text);
  free(cfg->domains);
  for (size_t i = 0; i < cfg->n_cidrs; i++)
    free(cfg->cidrs[i].text);
  free(cfg->cidrs);
  free(cfg->private_ok);
  for (size_t i = 0; i < cfg->n_pins; i++)
    free(cfg->pins[i].ips);
  free(cfg->pins);
  free(cfg->audit_path);
  free(cfg->upstream_ca);
  free(cfg);
}

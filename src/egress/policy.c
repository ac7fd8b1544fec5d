/* The domain and CIDR policy: patterns and the None < Allow < Deny
 * lattice. Deny wins, and no match at all is None, which is a refusal: an
 * empty allowlist blocks everything. */
#include "egress/egress-internal.h"

#include "common/common.h"

#include <string.h>

const char *shk__pattern_parse(const char *pat, shk__verdict verdict, bool allow_all,
                               shk__domain_rule *rule)
{
  memset(rule, 0, sizeof *rule);
  size_t len = strlen(pat);
  const char *colon = memchr(pat, ':', len);
  if (colon) {
    const char *r = shk__port_parse(colon + 1, len - (size_t)(colon + 1 - pat), &rule->port);
    if (r)
      return "pattern-bad-port";
    len = (size_t)(colon - pat);
  }
  const char *host = pat;
  if (len == 1 && pat[0] == '*') {
    /* Deny-all is the empty allowlist; a deny '*' would only hide that. */
    if (verdict == SHK__DENY)
      return "pattern-star-in-deny";
    if (!allow_all)
      return "pattern-star-needs-dangerously-allow-all";
    rule->kind = SHK__PAT_ANY;
  } else if (len > 3 && !memcmp(pat, "**.", 3)) {
    rule->kind = SHK__PAT_APEX_SUB;
    host += 3;
    len -= 3;
  } else if (len > 2 && !memcmp(pat, "*.", 2)) {
    rule->kind = SHK__PAT_SUB;
    host += 2;
    len -= 2;
  } else {
    rule->kind = SHK__PAT_EXACT;
  }
  if (rule->kind != SHK__PAT_ANY) {
    if (memchr(host, '*', len))
      return "pattern-bad-wildcard";
    shk__host h;
    const char *r = shk__host_canon(host, len, &h);
    if (r)
      return r;
    if (h.kind != SHK__HOST_NAME)
      return "pattern-ip-belongs-in-cidrs";
    memcpy(rule->host, h.text, sizeof rule->host);
  }
  rule->verdict = verdict;
  rule->text = shk__xstrdup(pat);
  return NULL;
}

/* PORT 0 is a DNS query, which names no port: an allow rule with a port
 * still lets the name resolve (the connection is checked with its port
 * later), while a deny rule with a port does not refuse the whole name. */
static bool rule_matches(const shk__domain_rule *r, const shk__host *h, uint16_t port)
{
  if (r->port && (port ? r->port != port : r->verdict == SHK__DENY))
    return false;
  if (r->kind == SHK__PAT_ANY)
    return true;
  if (h->kind != SHK__HOST_NAME)
    return false;
  size_t hl = strlen(h->text), rl = strlen(r->host);
  bool exact = hl == rl && !memcmp(h->text, r->host, hl);
  bool sub = hl > rl + 1 && h->text[hl - rl - 1] == '.' && !memcmp(h->text + hl - rl, r->host, rl);
  switch (r->kind) {
  case SHK__PAT_EXACT:
    return exact;
  case SHK__PAT_SUB:
    return sub;
  case SHK__PAT_APEX_SUB:
    return exact || sub;
  case SHK__PAT_ANY:
    break;
  }
  return false;
}

static void join(shk__decision *d, shk__verdict v, const char *text)
{
  if (v > d->verdict) {
    d->verdict = v;
    d->rule = text;
  }
}

void shk__eg_decide(const shk__eg_config *cfg, const shk__host *host, uint16_t port,
                    shk__decision *d)
{
  d->verdict = SHK__NONE;
  d->rule = NULL;
  for (size_t i = 0; i < cfg->n_domains; i++)
    if (rule_matches(&cfg->domains[i], host, port))
      join(d, cfg->domains[i].verdict, cfg->domains[i].text);
  if (host->kind != SHK__HOST_NAME)
    for (size_t i = 0; i < cfg->n_cidrs; i++)
      if (shk__cidr_contains(&cfg->cidrs[i].cidr, &host->ip))
        join(d, cfg->cidrs[i].verdict, cfg->cidrs[i].text);
}

const char *shk__eg_ip_blocked(const shk__eg_config *cfg, const shk__ip *ip)
{
  /* A denied range stays denied when a name leads into it. */
  for (size_t i = 0; i < cfg->n_cidrs; i++)
    if (cfg->cidrs[i].verdict == SHK__DENY && shk__cidr_contains(&cfg->cidrs[i].cidr, ip))
      return "policy-deny-cidr";
  const char *r = shk__ip_nonpublic(ip);
  if (!r)
    return NULL;
  for (size_t i = 0; i < cfg->n_private_ok; i++)
    if (shk__cidr_contains(&cfg->private_ok[i], ip))
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
  shk__eg_config *cfg = shk__xcalloc(1, sizeof *cfg);
  cfg->dns_timeout_ms = 3000;
  return cfg;
}

const char *shk__eg_config_add_domain(shk__eg_config *cfg, const char *pat, shk__verdict v)
{
  shk__domain_rule rule;
  const char *r = shk__pattern_parse(pat, v, cfg->allow_all, &rule);
  if (r)
    return r;
  cfg->domains = shk__xrealloc(cfg->domains, (cfg->n_domains + 1) * sizeof *cfg->domains);
  cfg->domains[cfg->n_domains++] = rule;
  return NULL;
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
  free(cfg);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the proxy's JSON configuration parser. Besides not
 * crashing or leaking, a refusal must say why, and an accepted
 * configuration must hold the invariants the proxy relies on: no deny-all
 * pattern, a bare "*" allow only when dangerously_allow_all was given, and
 * loopback still blocked unless allow_private_cidrs opts it in, and limits
 * that keep every bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  shk__eg_config *cfg = NULL;
  shk_error err = { "" };
  if (shk__eg_config_parse((const char *)data, size, &cfg, &err) < 0) {
    if (cfg || !err.message[0] || !memchr(err.message, 0, sizeof err.message))
      abort();
    return 0;
  }
  if (!cfg)
    abort();
  for (size_t i = 0; i < cfg->n_domains; i++) {
    const shk__domain_rule *r = &cfg->domains[i];
    if (r->pattern.kind == SHK_HOST_PATTERN_ANY &&
        (r->verdict != SHK_EGRESS_ALLOW || !cfg->allow_all))
      abort();
    if (r->verdict != SHK_EGRESS_ALLOW && r->verdict != SHK_EGRESS_DENY)
      abort();
  }
  shk_ip lo = { .family = 4, .b = { 127, 0, 0, 1 } };
  bool opted = false;
  for (size_t i = 0; i < cfg->n_private_ok; i++)
    opted |= shk_cidr_contains(&cfg->private_ok[i], &lo);
  if (!opted && !shk__eg_ip_blocked(cfg, &lo))
    abort();
  shk_host h;
  if (!shk_host_parse("example.test", 12, &h, NULL, NULL)) {
    shk__decision d;
    shk__eg_decide(cfg, &h, 443, &d);
    if (d.verdict > SHK_EGRESS_DENY)
      abort();
  }
  /* The limits in force are never zero where zero would stop the proxy
   * or remove a bound, and the pool's bound holds. */
  shk_egress_limits l;
  shk__eg_limits_resolve(&cfg->limits, NULL, &l);
  if (!l.connections || !l.setup || !l.idle_ms || !l.request_ms || !l.hold_ms ||
      l.dns_names < 16 || l.dns_names > SHK__DNS_POOL_MAX)
    abort();
  shk__eg_config_free(cfg);
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's side of the secret broker: a credentials grant loads the
 * secrets it names from the store (shinken/broker.h) into its data-plane
 * entry, and the proxy's rewrite hook, on each inspected request, hands
 * the session's credentials entries to the pure rewriter, checking each
 * handle live, and records what it brokered or refused: the secret's name
 * and the host, never its value. */
#include "manager/broker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manager/manager-state.h"
#include "shinken/broker.h"

const char *shk__broker_prepare(const uint8_t key[32], const shk_cap_scope *scope, egrant *e, char *why,
                                size_t len)
{
  char dir[4096];
  shk_error err;
  if (shk_broker_default_dir(dir, sizeof dir, &err) ||
      shk_broker_store_open(dir, false, &e->store, &err)) {
    snprintf(why, len, "the secret store: %s", err.message);
    return why;
  }
  size_t n = scope->broker_scopes.n, total = 0;
  e->uses = calloc(n ? n : 1, sizeof *e->uses);
  if (!e->uses)
    return "out of memory";
  for (size_t i = 0; i < n; i++) {
    const shk_broker_secret *s = shk_broker_store_find(e->store, scope->broker_scopes.v[i]);
    /* Why refused: a grant naming a secret that is not there would be
     * "granted" and inject nothing; the person granting it must know. */
    if (!s) {
      snprintf(why, len, "there is no secret named %s in the store (shinken secret add)",
               scope->broker_scopes.v[i]);
      return why;
    }
    e->uses[i].secret = s;
    total += s->env ? s->value_len + 1 : 0;
  }
  e->n_uses = n;
  e->sentinels = calloc(total ? total : 1, 1);
  if (!e->sentinels)
    return "out of memory";
  char *p = e->sentinels;
  for (size_t i = 0; i < n; i++) {
    const shk_broker_secret *s = e->uses[i].secret;
    if (!s->env)
      continue;
    if (shk_broker_sentinel(s, key, p, s->value_len + 1))
      return "a sentinel could not be derived";
    e->uses[i].sentinel = p;
    e->uses[i].sentinel_len = s->value_len;
    p += s->value_len + 1;
  }
  return NULL;
}

void shk__broker_release(egrant *e)
{
  free(e->uses);
  free(e->sentinels);
  shk_broker_store_free(e->store);
  e->uses = NULL;
  e->sentinels = NULL;
  e->store = NULL;
}

json_t *shk__broker_sentinels(const uint8_t key[32])
{
  char dir[4096];
  shk_broker_store *st = NULL;
  json_t *o = json_object();
  if (!o || shk_broker_default_dir(dir, sizeof dir, NULL) || shk_broker_store_open(dir, false, &st, NULL))
    return o;
  for (size_t i = 0; i < shk_broker_store_count(st); i++) {
    const shk_broker_secret *s = shk_broker_store_get(st, i);
    char buf[SHK_BROKER_VALUE_MAX + 1];
    if (s->env && !shk_broker_sentinel(s, key, buf, sizeof buf))
      json_object_set_new(o, s->env, json_string(buf));
  }
  shk_broker_store_free(st);
  return o;
}

static void record(session *s, const char *outcome, const char *secret, const shk_egress_http_request *req,
                   const char *reason)
{
  shk_audit_event e;
  shk_audit_event_init(&e, outcome);
  shk_audit_str(&e, SHK_AUDIT_SESSION, s->id);
  shk_audit_str(&e, SHK_AUDIT_CLASS, shk_cap_class_name(SHK_CAP_CREDENTIALS));
  shk_audit_str(&e, SHK_AUDIT_SCOPE, secret);
  shk_audit_str(&e, SHK_AUDIT_HOST, req->host);
  shk_audit_int(&e, SHK_AUDIT_PORT, req->port);
  shk_audit_str(&e, SHK_AUDIT_HTTP_METHOD, req->method);
  shk_audit_str(&e, SHK_AUDIT_REASON, reason);
  ev_emit(s->m, &e, NULL);
}

/* Why this is safe on the proxy thread without the registry lock: the
 * entries it walks are published with release ordering, never change once
 * published and are freed only after the proxy thread is joined; each
 * handle is checked live in the table, whose read lock is never held
 * across I/O. It never blocks: the audit only copies into a queue. */
int shk__broker_rewrite(void *data, const shk_egress_http_request *req, shk_egress_header **out,
                        size_t *n_out, const char **reason)
{
  session *s = data;
  shk_broker_use uses[64];
  size_t n = 0;
  int64_t now = now_ms();
  for (egrant *g = atomic_load_explicit(&s->egress_grants, memory_order_acquire); g; g = g->next) {
    if (!g->uses)
      continue;
    bool live = !atomic_load(&g->dead) && shk_cap_check(s->m->table, g->id, now) == 0;
    for (size_t i = 0; i < g->n_uses && n < sizeof uses / sizeof uses[0]; i++) {
      /* A secret named by two grants is one use: live if either is. */
      size_t k = 0;
      while (k < n && strcmp(uses[k].secret->name, g->uses[i].secret->name))
        k++;
      if (k < n) {
        uses[k].live = uses[k].live || live;
        uses[k].revoked = !uses[k].live;
        continue;
      }
      uses[n] = g->uses[i];
      uses[n].live = live;
      uses[n].revoked = !live;
      n++;
    }
  }
  *out = NULL;
  *n_out = 0;
  if (n == 0)
    return 0;
  const shk_broker_use *hit = NULL;
  bool injected[sizeof uses / sizeof uses[0]];
  int r = shk_broker_rewrite(uses, n, req, out, n_out, reason, &hit, injected);
  if (r == -ENOMEM) {
    *reason = "broker-out-of-memory";
    return -ECONNABORTED;
  }
  if (r) {
    record(s, "credential-refused", hit ? hit->secret->name : NULL, req, *reason);
    return r;
  }
  /* "credential NAME brokered for scope HOST": the name and the host,
   * never the value. */
  for (size_t i = 0; i < n; i++)
    if (injected[i])
      record(s, "credential-brokered", uses[i].secret->name, req, NULL);
  return 0;
}

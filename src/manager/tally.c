/* SPDX-License-Identifier: Apache-2.0 */
/* The refusals of one session's proxy, by kind (tally.h). The hosts,
 * reasons and rules counted are the proxy's canonical tokens, never a path,
 * query or header value; the list is bounded, so a workload that makes
 * every refusal a new kind costs the manager a fixed amount of memory. */
#include "manager/tally.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* More kinds than a person reads in a summary; the rest are "others". */
#define MAX_KINDS 64

typedef struct kind {
  shk_egress_proto proto;
  char *host, *reason, *rule; /* NULL when the verdict had none */
  unsigned port;
  uint64_t count;
} kind;

struct shk__tally {
  pthread_mutex_t mu;
  kind kinds[MAX_KINDS];
  size_t n;
  uint64_t others;
};

shk__tally *shk__tally_new(void)
{
  shk__tally *t = calloc(1, sizeof *t);
  if (t)
    pthread_mutex_init(&t->mu, NULL);
  return t;
}

void shk__tally_free(shk__tally *t)
{
  if (!t)
    return;
  for (size_t i = 0; i < t->n; i++) {
    free(t->kinds[i].host);
    free(t->kinds[i].reason);
    free(t->kinds[i].rule);
  }
  pthread_mutex_destroy(&t->mu);
  free(t);
}

static bool same(const char *a, const char *b)
{
  return a == b || (a && b && !strcmp(a, b));
}

static char *dup_or_null(const char *s, bool *oom)
{
  char *d = s ? strdup(s) : NULL;
  if (s && !d)
    *oom = true;
  return d;
}

void shk__tally_add(shk__tally *t, const shk_egress_verdict_info *v)
{
  if (!t || !v->decision || strcmp(v->decision, "deny"))
    return;
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; i < t->n; i++) {
    kind *k = &t->kinds[i];
    if (k->proto == v->proto && k->port == v->port && same(k->host, v->host) && same(k->reason, v->reason) &&
        same(k->rule, v->rule)) {
      k->count++;
      pthread_mutex_unlock(&t->mu);
      return;
    }
  }
  bool oom = false, kept = false;
  if (t->n < MAX_KINDS) {
    kind *k = &t->kinds[t->n];
    *k = (kind){ .proto = v->proto, .port = v->port, .count = 1 };
    k->host = dup_or_null(v->host, &oom);
    k->reason = dup_or_null(v->reason, &oom);
    k->rule = dup_or_null(v->rule, &oom);
    if (oom) {
      free(k->host);
      free(k->reason);
      free(k->rule);
    } else {
      t->n++;
      kept = true;
    }
  }
  /* Out of room or of memory, the refusal still counts, as an other. */
  if (!kept)
    t->others++;
  pthread_mutex_unlock(&t->mu);
}

static const char *proto_name(shk_egress_proto p)
{
  switch (p) {
  case SHK_EGRESS_HTTP: return "http";
  case SHK_EGRESS_CONNECT: return "connect";
  case SHK_EGRESS_SOCKS5: return "socks5";
  case SHK_EGRESS_DNS: return "dns";
  }
  return "unknown";
}

json_t *shk__tally_json(shk__tally *t)
{
  json_t *a = json_array();
  pthread_mutex_lock(&t->mu);
  for (size_t i = 0; a && i < t->n; i++) {
    const kind *k = &t->kinds[i];
    if (json_array_append_new(a, json_pack("{s:s, s:s?, s:i, s:s?, s:s?, s:I}", "proto", proto_name(k->proto),
                                           "host", k->host, "port", (int)k->port, "reason", k->reason, "rule",
                                           k->rule, "count", (json_int_t)k->count))) {
      json_decref(a);
      a = NULL;
    }
  }
  if (a && t->others && json_array_append_new(a, json_pack("{s:I}", "count", (json_int_t)t->others))) {
    json_decref(a);
    a = NULL;
  }
  pthread_mutex_unlock(&t->mu);
  return a;
}

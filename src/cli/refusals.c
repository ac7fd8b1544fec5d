/* SPDX-License-Identifier: Apache-2.0 */
/* What `shinken run` says about the refusals of its session: the embedded
 * manager hands over each verdict of the session's egress proxy
 * (shk_manager_opts.on_verdict); they are said live with --verbose, and
 * summed up once the command is gone, one line per destination and reason,
 * on shinken's own stderr (never the workload's). With SHINKEN_EVENT_LOG
 * every verdict is also kept there, one JSON line each. A session a daemon
 * hosts is summed up from the daemon's count (op refusals), asked for
 * before the session ends. The workload's refused writes, which the
 * sandbox's write observer counts by tree, are said the same way, live
 * with --verbose and once at the end. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/egress.h"
#include "shinken/manager.h"
#include "shinken/sandbox.h"

struct kind {
  char *why;    /* the sentence in parentheses */
  const char *noun; /* "connection", "lookup" or "request" */
  char *what;   /* " to HOST:PORT", " of HOST" or "" */
  char *host;   /* for the grant's advice, or NULL */
  unsigned n;
};

struct shk_cli_refusals {
  int log;            /* SHINKEN_EVENT_LOG, or -1 */
  bool live;
  bool hosted;        /* counted by a daemon, whose timeline keeps every verdict */
  unsigned others;    /* refusals a daemon counted past the kinds it keeps */
  pthread_mutex_t lock; /* the proxies' threads hand verdicts over */
  char *session;
  struct kind *kinds;
  size_t n, cap;
};

/* The reason of a refused decision in words, or NULL for a decision that is
 * not a refusal of Shinken's (an unreachable destination, a name that does
 * not exist, a client that sent nothing). */
static char *why_of(const char *reason, const char *rule)
{
  if (!strcmp(reason, "policy-no-match"))
    return shk__xasprintf("not granted");
  if (!strcmp(reason, "policy-deny") && rule)
    return shk__xasprintf("forbidden by the rule '%s'", rule);
  if (!strcmp(reason, "policy-deny") || !strcmp(reason, "held-denied"))
    return shk__xasprintf("denied");
  if (!strcmp(reason, "held-abandoned"))
    return shk__xasprintf("held for a human's answer, and the client gave up waiting");
  if (!strcmp(reason, "policy-deny-cidr"))
    return shk__xasprintf("an address range the administrator blocks");
  if (!strncmp(reason, "ip-", 3))
    return shk__xasprintf("a non-public address; --allow-cidr opens a range");
  if (!strcmp(reason, "session-close") || !strcmp(reason, "session-closed"))
    return shk__xasprintf("the session had ended");
  if (!strcmp(reason, "session-held-limit"))
    return shk__xasprintf("the session's limit of requests waiting for a human");
  if (!strncmp(reason, "session-", 8))
    return shk__xasprintf("the session's limit of open connections");
  if (!strncmp(reason, "chunk-", 6) || !strncmp(reason, "socks5-", 7) || !strncmp(reason, "http-", 5))
    return shk__xasprintf("a request the proxy could not read as %s (%s)",
                          !strncmp(reason, "socks5-", 7) ? "SOCKS5" : "HTTP", reason);
  if (!strncmp(reason, "connect-", 8) || !strncmp(reason, "dns-", 4) || strstr(reason, "timeout"))
    return NULL;
  return shk__xasprintf("the proxy refused the request: %s", reason);
}

static char *what_of(shk_egress_proto proto, const char *host, unsigned port, const char **noun)
{
  if (!host) {
    *noun = "request";
    return shk__xasprintf("%s", "");
  }
  if (proto == SHK_EGRESS_DNS || port == 0) {
    *noun = "lookup";
    return shk__xasprintf(" of %s", host);
  }
  *noun = "connection";
  return shk__xasprintf(strchr(host, ':') ? " to [%s]:%d" : " to %s:%d", host, (int)port);
}

static void advice(const struct shk_cli_refusals *r, const struct kind *k, FILE *out)
{
  if (k->host && !strcmp(k->why, "not granted"))
    fprintf(out, "; 'shinken grant %s net.egress --scope '{\"domains\":[\"%s\"]}'' or approve when asked",
            r->session, k->host);
  else if (k->host && !strncmp(k->why, "held", 4))
    fprintf(out, "; 'shinken approvals' shows what waits, or 'shinken grant %s net.egress --scope "
                 "'{\"domains\":[\"%s\"]}'' grants it ahead", r->session, k->host);
}

static void count(struct shk_cli_refusals *r, const shk_egress_verdict_info *v, unsigned n);

/* Safe on a proxy's thread: it only counts under the lock, and writes the
 * kept line and the live line with one write each; it never calls back into
 * the manager. */
int shk_cli_refusals_take(void *data, const shk_egress_verdict_info *v)
{
  struct shk_cli_refusals *r = data;
  pthread_mutex_lock(&r->lock);
  if (r->log >= 0) {
    char *line = NULL;
    if (shk_egress_verdict_json(v, &line) == 0 && write(r->log, line, strlen(line)) < 0) {
      /* A log that cannot be written loses its line; the summary still counts it. */
    }
    free(line);
  }
  count(r, v, 1);
  pthread_mutex_unlock(&r->lock);
  return 0;
}

/* Caller holds the lock. Counts N refusals like V (a verdict of any kind:
 * only Shinken's own refusals count). */
static void count(struct shk_cli_refusals *r, const shk_egress_verdict_info *v, unsigned n)
{
  char *why = v->decision && v->reason && !strcmp(v->decision, "deny") ? why_of(v->reason, v->rule) : NULL;
  if (!why)
    return;
  if (!r->session && v->session)
    r->session = shk__xstrdup(v->session);
  const char *noun;
  char *what = what_of(v->proto, v->host, v->port, &noun);
  struct kind *k = NULL;
  for (size_t i = 0; i < r->n && !k; i++)
    if (!strcmp(r->kinds[i].why, why) && r->kinds[i].noun == noun && !strcmp(r->kinds[i].what, what))
      k = &r->kinds[i];
  if (k) {
    free(why);
    free(what);
  } else {
    if (r->n == r->cap) {
      r->cap = r->cap ? 2 * r->cap : 8;
      r->kinds = shk__xrealloc(r->kinds, r->cap * sizeof *r->kinds);
    }
    k = &r->kinds[r->n++];
    *k = (struct kind){ why, noun, what, v->host ? shk__xstrdup(v->host) : NULL, 0 };
  }
  k->n += n;
  if (r->live) {
    fprintf(stderr, "shinken: refused a %s%s (%s", k->noun, k->what, k->why);
    advice(r, k, stderr);
    fputs(")\n", stderr);
  }
}

shk_cli_refusals *shk_cli_refusals_new(bool live, const char *log)
{
  int fd = -1;
  if (log && (fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
    return NULL;
  struct shk_cli_refusals *r = shk__xcalloc(1, sizeof *r);
  r->log = fd;
  r->live = live;
  pthread_mutex_init(&r->lock, NULL);
  return r;
}

shk_cli_refusals *shk_cli_refusals_hosted(int fd, const char *session)
{
  json_t *req = json_pack("{s:s, s:s}", "op", "refusals", "session", session);
  char *text = req ? json_dumps(req, JSON_COMPACT) : NULL, *answer = NULL;
  json_decref(req);
  shk_error err;
  int rc = text ? shk_manager_rpc(fd, text, &answer, &err) : -ENOMEM;
  free(text);
  json_t *ans = rc == 0 ? json_loads(answer, 0, NULL) : NULL;
  free(answer);
  json_t *list = json_object_get(ans, "refusals");
  if (!json_is_true(json_object_get(ans, "ok")) || !json_is_array(list)) {
    json_decref(ans);
    return NULL;
  }
  struct shk_cli_refusals *r = shk_cli_refusals_new(false, NULL);
  r->hosted = true;
  size_t i;
  json_t *e;
  json_array_foreach(list, i, e) {
    json_int_t n = json_integer_value(json_object_get(e, "count"));
    const char *proto = json_string_value(json_object_get(e, "proto"));
    if (n <= 0 || n > UINT32_MAX)
      continue;
    if (!proto) {
      r->others += (unsigned)n;
      continue;
    }
    json_int_t port = json_integer_value(json_object_get(e, "port"));
    shk_egress_verdict_info v = {
      .session = session, .proto = !strcmp(proto, "dns") ? SHK_EGRESS_DNS : SHK_EGRESS_CONNECT,
      .host = json_string_value(json_object_get(e, "host")), .port = port > 0 && port < 65536 ? (uint16_t)port : 0,
      .decision = "deny", .reason = json_string_value(json_object_get(e, "reason")),
      .rule = json_string_value(json_object_get(e, "rule")),
    };
    count(r, &v, (unsigned)n);
  }
  json_decref(ans);
  return r;
}

void shk_cli_refusals_print(shk_cli_refusals *r, const char *kept_at)
{
  if (!r)
    return;
  pthread_mutex_lock(&r->lock);
  for (size_t i = 0; i < r->n; i++) {
    struct kind *k = &r->kinds[i];
    fprintf(stderr, "shinken: refused %u %s%s%s (%s", k->n, k->noun, k->n == 1 ? "" : "s", k->what,
            k->why);
    advice(r, k, stderr);
    fputs(")\n", stderr);
  }
  if (r->others)
    fprintf(stderr, "shinken: refused %u more requests of other kinds\n", r->others);
  if (r->n || r->others) {
    if (r->hosted)
      fputs("shinken: every connection of this session is on the manager's audit timeline "
            "(shinken audit tail)\n", stderr);
    else if (kept_at)
      fprintf(stderr, "shinken: every connection of this session is logged in %s\n", kept_at);
    else
      fputs("shinken: SHINKEN_EVENT_LOG=FILE keeps a line for every connection\n", stderr);
  }
  pthread_mutex_unlock(&r->lock);
}

void shk_cli_refusals_free(shk_cli_refusals *r)
{
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++) {
    free(r->kinds[i].why);
    free(r->kinds[i].what);
    free(r->kinds[i].host);
  }
  free(r->kinds);
  free(r->session);
  if (r->log >= 0)
    close(r->log);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

/* Safe to call on the launcher's thread while the workload runs: one line
 * to shinken's own stderr, nothing else. */
void shk_cli_refusals_write_live(void *data, const shk_sandbox_write_refusal *w)
{
  (void)data;
  fprintf(stderr, "shinken: refused a write under %s (%s)\n", w->tree, w->why);
}

void shk_cli_refusals_print_writes(const shk_sandbox_result *res)
{
  for (size_t i = 0; i < res->nwrites_refused; i++) {
    const shk_sandbox_write_refusal *w = &res->writes_refused[i];
    fprintf(stderr, "shinken: refused %u write%s under %s (%s)\n", w->n, w->n == 1 ? "" : "s",
            w->tree, w->why);
  }
  if (res->writes_refused_more)
    fprintf(stderr, "shinken: refused %u more write%s under other trees\n",
            res->writes_refused_more, res->writes_refused_more == 1 ? "" : "s");
}

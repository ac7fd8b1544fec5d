/* What `shinken run` says about the refusals of its session: the egress
 * proxy's verdict lines (JSON lines, one per decision; src/egress/server.c)
 * are read from the session's event log, live with --verbose, and summed up
 * once the command is gone, one line per destination and reason, on
 * shinken's own stderr (never the workload's). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"

struct kind {
  char *why;    /* the sentence in parentheses */
  const char *noun; /* "connection", "lookup" or "request" */
  char *what;   /* " to HOST:PORT", " of HOST" or "" */
  char *host;   /* for the grant's advice, or NULL */
  unsigned n;
};

struct shk_cli_refusals {
  FILE *log;
  char *session;
  bool live;
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t lock;
  bool stop;
  char partial[8192]; /* a line not yet complete */
  size_t npartial;
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
  if (!strcmp(reason, "policy-deny-cidr"))
    return shk__xasprintf("an address range the administrator blocks");
  if (!strncmp(reason, "ip-", 3))
    return shk__xasprintf("a non-public address; --allow-cidr opens a range");
  if (!strncmp(reason, "session-", 8))
    return shk__xasprintf("the session's limit of open connections");
  if (!strncmp(reason, "connect-", 8) || !strncmp(reason, "dns-", 4) || strstr(reason, "timeout"))
    return NULL;
  return shk__xasprintf("the proxy refused the request: %s", reason);
}

static char *what_of(const char *protocol, const char *host, json_int_t port, const char **noun)
{
  if (!host) {
    *noun = "request";
    return shk__xasprintf("%s", "");
  }
  if (!strcmp(protocol, "dns") || port == 0) {
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
}

/* One verdict line: counted (and said, when live) if it is a refusal of
 * this session's. */
static void take_line(struct shk_cli_refusals *r, const char *line)
{
  json_t *o = json_loads(line, 0, NULL);
  const char *session = json_string_value(json_object_get(o, "session"));
  const char *decision = json_string_value(json_object_get(o, "decision"));
  const char *reason = json_string_value(json_object_get(o, "reason"));
  if (!session || !decision || !reason || strcmp(session, r->session) || strcmp(decision, "deny")) {
    json_decref(o);
    return;
  }
  const char *host = json_string_value(json_object_get(o, "host"));
  const char *protocol = json_string_value(json_object_get(o, "protocol"));
  char *why = why_of(reason, json_string_value(json_object_get(o, "rule")));
  if (!why) {
    json_decref(o);
    return;
  }
  const char *noun;
  char *what = what_of(protocol ? protocol : "", host, json_integer_value(json_object_get(o, "port")),
                       &noun);
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
    *k = (struct kind){ why, noun, what, host ? shk__xstrdup(host) : NULL, 0 };
  }
  k->n++;
  if (r->live) {
    fprintf(stderr, "shinken: refused a %s%s (%s", k->noun, k->what, k->why);
    advice(r, k, stderr);
    fputs(")\n", stderr);
  }
  json_decref(o);
}

/* Reads what the log has gained since the last call. */
static void take_new(struct shk_cli_refusals *r)
{
  char buf[4096];
  size_t got;
  clearerr(r->log);
  while ((got = fread(buf, 1, sizeof buf, r->log)) > 0) {
    for (size_t i = 0; i < got; i++) {
      if (buf[i] != '\n') {
        /* A line longer than the buffer is not one of the proxy's; it is
         * dropped rather than read in part. */
        if (r->npartial < sizeof r->partial - 1)
          r->partial[r->npartial++] = buf[i];
        continue;
      }
      r->partial[r->npartial] = '\0';
      if (r->npartial < sizeof r->partial - 1)
        take_line(r, r->partial);
      r->npartial = 0;
    }
  }
}

static void *follow(void *arg)
{
  struct shk_cli_refusals *r = arg;
  for (;;) {
    pthread_mutex_lock(&r->lock);
    bool stop = r->stop;
    if (!stop)
      take_new(r);
    pthread_mutex_unlock(&r->lock);
    if (stop)
      return NULL;
    usleep(100 * 1000);
  }
}

shk_cli_refusals *shk_cli_refusals_start(const char *log, const char *session, bool live)
{
  FILE *f = fopen(log, "re");
  if (!f)
    return NULL;
  /* A log shared with earlier runs (SHINKEN_EVENT_LOG) is read from here on. */
  fseek(f, 0, SEEK_END);
  struct shk_cli_refusals *r = shk__xcalloc(1, sizeof *r);
  r->log = f;
  r->session = shk__xstrdup(session);
  r->live = live;
  pthread_mutex_init(&r->lock, NULL);
  if (live && pthread_create(&r->thread, NULL, follow, r) == 0)
    r->thread_started = true;
  return r;
}

void shk_cli_refusals_finish(shk_cli_refusals *r, const char *kept_at)
{
  if (!r)
    return;
  if (r->thread_started) {
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
  }
  /* The proxy wrote its last lines before the session closed. */
  take_new(r);
  for (size_t i = 0; i < r->n; i++) {
    struct kind *k = &r->kinds[i];
    fprintf(stderr, "shinken: refused %u %s%s%s (%s", k->n, k->noun, k->n == 1 ? "" : "s", k->what,
            k->why);
    advice(r, k, stderr);
    fputs(")\n", stderr);
  }
  if (r->n) {
    if (kept_at)
      fprintf(stderr, "shinken: every connection of this session is logged in %s\n", kept_at);
    else
      fputs("shinken: SHINKEN_EVENT_LOG=FILE keeps a line for every connection\n", stderr);
  }
  for (size_t i = 0; i < r->n; i++) {
    free(r->kinds[i].why);
    free(r->kinds[i].what);
    free(r->kinds[i].host);
  }
  free(r->kinds);
  free(r->session);
  fclose(r->log);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* A host for egress sessions, driven line by line on stdin, for the tests
 * that need what only a session has: the decision hook (grants with a live
 * bit, once or for the session, as the manager's handles are), holding and
 * resuming, the DNS stub's synthetic pool, and several sessions in one
 * process sharing its descriptors. Audit lines go to stderr.
 *
 * Commands (one answer line each, "ok ..." or "err ..."):
 *   open NAME CONFIG          a session; answers "ok DIR"
 *   grant NAME TAG PATTERN once|session
 *                             the hook allows what PATTERN matches, tagged
 *                             TAG (a once grant: the first connection only)
 *   revoke NAME TAG           the grant dies (its bit first), then
 *                             close_tunnels; answers "ok N"
 *   hold NAME PATTERN         the hook holds what PATTERN matches and no
 *                             grant covers
 *   resume NAME ID allow|deny TAG [REASON...]
 *                             answers "ok RC" (0, or a negative errno)
 *   close NAME
 *   fds                       answers "ok N": this process's open descriptors
 *   probe                     the control plane's share: opens a socket
 *                             pair and a file; answers "ok" or "err ERRNO"
 * Events, at any time: "held NAME ID HOST PORT VIA" and "abandoned NAME ID".
 * A line from another thread is written whole with one write(2). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shinken/egress.h"
#include "shinken/match.h"

#define MAX_SESSIONS 8
#define MAX_GRANTS 64

struct grant {
  shk_host_pattern pat;
  uint64_t tag;
  bool once;
  atomic_bool live, used;
  char rule[32];
};

struct session {
  char name[64];
  shk_egress_session *s;
  pthread_mutex_t mu; /* the grant list; the hook takes it briefly */
  struct grant grants[MAX_GRANTS];
  int n_grants;
  shk_host_pattern holds[MAX_GRANTS];
  int n_holds;
};

static struct session sessions[MAX_SESSIONS];

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof line - 2)
    n = sizeof line - 2;
  line[n++] = '\n';
  ssize_t w = write(1, line, (size_t)n);
  (void)w;
}

static struct session *find(const char *name)
{
  for (int i = 0; i < MAX_SESSIONS; i++)
    if (sessions[i].s && !strcmp(sessions[i].name, name))
      return &sessions[i];
  return NULL;
}

/* The proxy's verdicts, as JSON lines on stderr (one write each). */
static int verdict(void *data, const shk_egress_verdict_info *v)
{
  (void)data;
  char *line;
  if (shk_egress_verdict_json(v, &line) < 0)
    return -ENOMEM;
  ssize_t w = write(2, line, strlen(line));
  free(line);
  return w < 0 ? -errno : 0;
}

static shk_egress_verdict hook(void *data, const shk_egress_request *req, uint64_t *tag,
                               const char **rule)
{
  struct session *se = data;
  shk_host h;
  if (shk_host_parse(req->host, strlen(req->host), &h, NULL, NULL) < 0)
    return SHK_EGRESS_NONE;
  shk_egress_verdict v = SHK_EGRESS_NONE;
  pthread_mutex_lock(&se->mu);
  for (int i = 0; i < se->n_grants && v == SHK_EGRESS_NONE; i++) {
    struct grant *g = &se->grants[i];
    if (!atomic_load(&g->live) || !shk_host_pattern_matches(&g->pat, &h, req->port))
      continue;
    if (g->once) {
      /* A lookup is not a use; the connection that follows is. */
      if (req->proto == SHK_EGRESS_DNS ? atomic_load(&g->used)
                                       : atomic_exchange(&g->used, true))
        continue;
    }
    *tag = g->tag;
    *rule = g->rule;
    v = SHK_EGRESS_ALLOW;
  }
  for (int i = 0; i < se->n_holds && v == SHK_EGRESS_NONE; i++)
    if (shk_host_pattern_matches(&se->holds[i], &h, req->port)) {
      *rule = "test-hold";
      v = SHK_EGRESS_HOLD;
    }
  pthread_mutex_unlock(&se->mu);
  if (v == SHK_EGRESS_HOLD && req->proto != SHK_EGRESS_DNS)
    say("held %s %llu %s %u %s", se->name, (unsigned long long)req->conn_id, req->host, req->port,
        req->via ? req->via : "-");
  return v;
}

static void abandoned(void *data, const char *session, uint64_t id)
{
  say("abandoned %s %llu", session, (unsigned long long)id);
}

static int count_fds(void)
{
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return -errno;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

static void command(char *line)
{
  char *argv[16];
  int argc = 0;
  char *save, *rest = NULL;
  for (char *t = strtok_r(line, " \n", &save); t && argc < 16; t = strtok_r(NULL, " \n", &save)) {
    argv[argc++] = t;
    if (argc == 5 && !strcmp(argv[0], "resume")) {
      rest = strtok_r(NULL, "\n", &save);
      break;
    }
  }
  if (argc == 0)
    return;
  const char *cmd = argv[0];
  struct session *se = argc > 1 ? find(argv[1]) : NULL;
  if (!strcmp(cmd, "open") && argc == 3) {
    int i = 0;
    while (i < MAX_SESSIONS && sessions[i].s)
      i++;
    if (i == MAX_SESSIONS || find(argv[1])) {
      say("err no room");
      return;
    }
    se = &sessions[i];
    memset(se, 0, sizeof *se);
    pthread_mutex_init(&se->mu, NULL);
    snprintf(se->name, sizeof se->name, "%s", argv[1]);
    shk_egress_session_opts o = { .name = se->name, .config_path = argv[2], .hook = hook,
                                  .hook_data = se, .on_abandon = abandoned, .on_verdict = verdict };
    shk_error err;
    int r = shk_egress_session_open(&o, &se->s, &err);
    if (r < 0) {
      se->s = NULL;
      say("err %s", err.message);
      return;
    }
    say("ok %s", shk_egress_session_dir(se->s));
  } else if (!se) {
    if (!strcmp(cmd, "fds"))
      say("ok %d", count_fds());
    else if (!strcmp(cmd, "probe")) {
      int sp[2];
      int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      int e = fd < 0 ? errno : 0;
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        e = errno;
      else
        close(sp[0]), close(sp[1]);
      if (fd >= 0)
        close(fd);
      if (e)
        say("err %s", strerror(e));
      else
        say("ok");
    } else
      say("err unknown session or command");
  } else if (!strcmp(cmd, "grant") && argc == 5) {
    pthread_mutex_lock(&se->mu);
    struct grant *g = se->n_grants < MAX_GRANTS ? &se->grants[se->n_grants] : NULL;
    int r = g ? shk_host_pattern_parse(argv[3], strlen(argv[3]), 0, &g->pat, NULL) : -ENOSPC;
    if (r == 0) {
      g->tag = strtoull(argv[2], NULL, 10);
      g->once = !strcmp(argv[4], "once");
      atomic_store(&g->used, false);
      atomic_store(&g->live, true);
      snprintf(g->rule, sizeof g->rule, "grant:%s", argv[2]);
      se->n_grants++;
    }
    pthread_mutex_unlock(&se->mu);
    r == 0 ? say("ok") : say("err %s", strerror(-r));
  } else if (!strcmp(cmd, "revoke") && argc == 3) {
    uint64_t tag = strtoull(argv[2], NULL, 10);
    pthread_mutex_lock(&se->mu);
    for (int i = 0; i < se->n_grants; i++)
      if (se->grants[i].tag == tag)
        atomic_store(&se->grants[i].live, false);
    pthread_mutex_unlock(&se->mu);
    say("ok %d", shk_egress_session_close_tunnels(se->s, tag));
  } else if (!strcmp(cmd, "hold") && argc == 3) {
    pthread_mutex_lock(&se->mu);
    int r = se->n_holds < MAX_GRANTS
              ? shk_host_pattern_parse(argv[2], strlen(argv[2]), 0, &se->holds[se->n_holds], NULL)
              : -ENOSPC;
    if (r == 0)
      se->n_holds++;
    pthread_mutex_unlock(&se->mu);
    r == 0 ? say("ok") : say("err %s", strerror(-r));
  } else if (!strcmp(cmd, "resume") && argc >= 5) {
    shk_egress_verdict v = !strcmp(argv[3], "allow") ? SHK_EGRESS_ALLOW
                           : !strcmp(argv[3], "deny") ? SHK_EGRESS_DENY
                                                      : SHK_EGRESS_HOLD;
    int r = shk_egress_session_resume(se->s, strtoull(argv[2], NULL, 10), v,
                                      argc > 4 ? strtoull(argv[4], NULL, 10) : 0, "test-resume",
                                      rest);
    say("ok %d", r);
  } else if (!strcmp(cmd, "close") && argc == 2) {
    shk_egress_session_close(se->s);
    se->s = NULL;
    pthread_mutex_destroy(&se->mu);
    say("ok");
  } else {
    say("err bad command");
  }
}

int main(void)
{
  char line[4096];
  setvbuf(stdin, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin))
    command(line);
  for (int i = 0; i < MAX_SESSIONS; i++)
    if (sessions[i].s)
      shk_egress_session_close(sessions[i].s);
  return 0;
}

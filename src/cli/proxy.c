/* SPDX-License-Identifier: Apache-2.0 */
/* shinken proxy --config FILE: the egress proxy, standalone. */
#include "cli/cli.h"

#include "common/common.h"
#include "egress/egress-internal.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>


struct proxy {
  const char *path;
  shk__eg_server *srv;
  struct event_base *base;
};

/* SIGHUP: the new policy applies from the next connection; a file that
 * does not parse leaves the running policy in place. Listeners and the
 * audit destination are fixed at start. */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
  struct proxy *p = arg;
  shk__eg_config *cfg;
  shk_error err;
  if (shk__eg_config_load(p->path, &cfg, &err) < 0 ||
      shk__eg_server_set_config(p->srv, cfg, &err) < 0) {
    shk__warn("proxy: reload refused, keeping the running policy: %s", err.message);
    return;
  }
  shk__warn("proxy: reloaded %s", p->path);
}

/* The standalone proxy keeps its verdicts as JSON lines (the
 * configuration's "audit" file, or stderr): it has no manager and no
 * session, so there is no timeline to join. One write per line, so lines
 * never interleave. */
static int write_verdict(void *data, const shk_egress_verdict_info *v)
{
  char *line;
  if (shk_egress_verdict_json(v, &line) < 0)
    return -ENOMEM;
  ssize_t w = write(*(int *)data, line, strlen(line));
  free(line);
  return w < 0 ? -errno : 0;
}

static void on_term(evutil_socket_t sig, short what, void *arg)
{
  event_base_loopexit(((struct proxy *)arg)->base, NULL);
}

int shk_cli_proxy(int argc, char **argv)
{
  struct proxy p = { 0 };
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config") && i + 1 < argc)
      p.path = argv[++i];
    else if (!strncmp(argv[i], "--config=", 9))
      p.path = argv[i] + 9;
    else
      shk_cli_usage_error("proxy", "unexpected argument '%s'", argv[i]);
  }
  if (!p.path)
    shk_cli_usage_error("proxy", "--config FILE is required");
  shk__eg_config *cfg;
  shk_error err;
  int r = shk__eg_config_load(p.path, &cfg, &err);
  if (r < 0)
    shk__die(r == -ENOMEM ? SHK_EXIT_UNAVAILABLE : SHK_EXIT_BAD_INPUT, "proxy: %s", err.message);
  if (!cfg->listen_http && !cfg->listen_socks5) {
    shk__eg_config_free(cfg);
    shk__die(SHK_EXIT_BAD_INPUT, "proxy: %s: listen: needs at least one of http, socks5", p.path);
  }
  int audit_fd = STDERR_FILENO;
  if (cfg->audit_path) {
    audit_fd = open(cfg->audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (audit_fd < 0)
      shk__die_errno(SHK_EXIT_BAD_INPUT, "proxy: %s: audit: cannot open %s", p.path, cfg->audit_path);
  }
  /* A peer that goes away mid-splice must be an EPIPE, not a signal. */
  signal(SIGPIPE, SIG_IGN);
  /* Each tunnel holds six descriptors (two sockets, two pipes): take all
   * the descriptors the hard limit allows. */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &nofile);
  }
  p.base = event_base_new();
  if (!p.base)
    shk__die(SHK_EXIT_UNAVAILABLE, "proxy: cannot create the event loop");
  shk__eg_server_opts o = { .name = "proxy", .on_verdict = write_verdict, .verdict_data = &audit_fd };
  struct sockaddr_storage http = cfg->http_addr, socks = cfg->socks5_addr;
  socklen_t http_len = cfg->listen_http ? cfg->http_addrlen : 0;
  socklen_t socks_len = cfg->listen_socks5 ? cfg->socks5_addrlen : 0;
  if (shk__eg_server_new(p.base, cfg, &o, &p.srv, &err) < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "proxy: %s", err.message);
  char bound[80];
  if (http_len) {
    r = shk__eg_server_listen_tcp(p.srv, SHK__LISTEN_HTTP, (struct sockaddr *)&http, http_len,
                                  bound, sizeof bound);
    if (r < 0)
      shk__die(SHK_EXIT_UNAVAILABLE, "proxy: listen.http: %s", strerror(-r));
    printf("listening http %s\n", bound);
  }
  if (socks_len) {
    r = shk__eg_server_listen_tcp(p.srv, SHK__LISTEN_SOCKS5, (struct sockaddr *)&socks,
                                  socks_len, bound, sizeof bound);
    if (r < 0)
      shk__die(SHK_EXIT_UNAVAILABLE, "proxy: listen.socks5: %s", strerror(-r));
    printf("listening socks5 %s\n", bound);
  }
  fflush(stdout);
  struct event *hup = evsignal_new(p.base, SIGHUP, on_hup, &p);
  struct event *term = evsignal_new(p.base, SIGTERM, on_term, &p);
  struct event *intr = evsignal_new(p.base, SIGINT, on_term, &p);
  if (!hup || !term || !intr || event_add(hup, NULL) || event_add(term, NULL) ||
      event_add(intr, NULL))
    shk__die(SHK_EXIT_UNAVAILABLE, "proxy: cannot install signal handlers");
  event_base_dispatch(p.base);
  event_free(hup);
  event_free(term);
  event_free(intr);
  shk__eg_server_free(p.srv);
  event_base_free(p.base);
  if (audit_fd != STDERR_FILENO)
    close(audit_fd);
  return 0;
}

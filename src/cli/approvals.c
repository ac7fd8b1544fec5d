/* SPDX-License-Identifier: Apache-2.0 */
/* The Ask loop's commands: approvals (the open cards), approve, deny,
 * cancel, and takeover and resume of a session. Each sends one request to the running manager on its control
 * socket, which records this process (its uid, pid and program, from
 * SO_PEERCRED) as the human who answered; --json prints the answer object.
 * Exit status: the table of src/cli/cli.h, as the control commands of
 * grant.c decide it (shk_cli_answer_status): 0 done, 1 bad input (a card
 * that is not open: answered, timed out or never raised), 4 no manager, 64
 * a usage error. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/manager.h"

enum { OPT_JSON = 1, OPT_ONCE, OPT_SESSION, OPT_REASON, OPT_PATTERN, OPT_FOLLOW = 'f' };

static const struct option options[] = {
  { "json", no_argument, NULL, OPT_JSON },
  { "once", no_argument, NULL, OPT_ONCE },
  { "session", no_argument, NULL, OPT_SESSION },
  { "reason", required_argument, NULL, OPT_REASON },
  { "pattern", required_argument, NULL, OPT_PATTERN },
  { "follow", no_argument, NULL, OPT_FOLLOW },
  { NULL, 0, NULL, 0 },
};

typedef struct args {
  bool json, once, session, follow;
  const char *reason, *pattern;
  char **pos;
  int n_pos;
} args;

/* Parses the options `allowed` (a string of OPT_* values) and up to n_pos
 * positional arguments (at least n_min); anything else is a usage error,
 * one line that points to --help. */
static args parse(const char *cmd, int argc, char **argv, const char *allowed, int n_min, int n_pos,
                  const char *usage)
{
  args a = { 0 };
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, strchr(allowed, OPT_FOLLOW) ? "f" : "", options, NULL)) != -1) {
    if (c == '?' || !strchr(allowed, c))
      shk_cli_usage_error(cmd, "unknown or misplaced option '%s'", argv[optind - 1]);
    switch (c) {
    case OPT_JSON: a.json = true; break;
    case OPT_ONCE: a.once = true; break;
    case OPT_SESSION: a.session = true; break;
    case OPT_REASON: a.reason = optarg; break;
    case OPT_PATTERN: a.pattern = optarg; break;
    case OPT_FOLLOW: a.follow = true; break;
    default: break;
    }
  }
  a.pos = argv + optind;
  a.n_pos = argc - optind;
  if (a.n_pos < n_min || a.n_pos > n_pos)
    shk_cli_usage_error(cmd, "expected %s", usage);
  if ((a.once && a.session) || (a.pattern && (a.once || a.session)))
    shk_cli_usage_error(cmd, "--once, --session and --pattern exclude each other");
  return a;
}

/* Sends `req` (stolen) to the manager and returns its answer; dies with
 * one line when there is none. */
static json_t *call(const char *what, json_t *req)
{
  char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (!text)
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: out of memory", what);
  const char *path = shk_manager_socket_path();
  int fd = shk_manager_connect(path);
  if (fd < 0)
    shk_cli_die_no_manager(what, path, -fd);
  char *answer;
  shk_error err;
  int r = shk_manager_rpc(fd, text, &answer, &err);
  close(fd);
  free(text);
  if (r)
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: %s", what, err.message);
  json_t *ans = json_loads(answer, 0, NULL);
  free(answer);
  if (!ans || !json_is_object(ans))
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: the manager's answer is not a JSON object", what);
  return ans;
}

static const char *str(json_t *o, const char *key)
{
  const char *v = json_string_value(json_object_get(o, key));
  return v ? v : "";
}

/* Prints the answer (stolen) as JSON, or its refusal; returns the exit
 * status. */
static int finish(const char *what, json_t *ans, bool as_json)
{
  bool ok = json_is_true(json_object_get(ans, "ok"));
  int status = shk_cli_answer_status(ans);
  if (as_json) {
    char *text = json_dumps(ans, JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
  } else if (!ok) {
    fprintf(stderr, "shinken: %s%s: %s\n", what, status == SHK_EXIT_REFUSED ? " refused" : "", str(ans, "error"));
  } else if (json_object_get(ans, "resolution")) {
    printf("%s: %s\n", str(ans, "card"), str(ans, "resolution"));
    if (json_is_string(json_object_get(ans, "note")))
      printf("%s: %s\n", str(ans, "card"), str(ans, "note"));
  }
  json_decref(ans);
  return status;
}

/* One line per card: id, session, class, scope, the rule that made it
 * Ask, the attempts it stands for and the seconds left. */
static void print_card(json_t *c)
{
  char *scope = json_dumps(json_object_get(c, "scope"), JSON_COMPACT);
  json_t *exp = json_object_get(c, "expires_ms");
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  long long left = exp ? (json_integer_value(exp) - now) / 1000 : -1;
  printf("%s  %s  %s %s  rule %s  attempts %lld  %s\n", str(c, "id"),
         str(json_object_get(c, "session"), "name"), str(c, "class"), scope ? scope : "{}",
         *str(c, "rule") ? str(c, "rule") : "-", (long long)json_integer_value(json_object_get(c, "attempts")),
         left >= 0 ? "" : "paused");
  if (left >= 0)
    printf("    times out in %lld s; answer with shinken approve|deny|cancel %s\n", left, str(c, "id"));
  free(scope);
}

/* -f: subscribes and prints the stream of card events as they come (each
 * line as the manager sends it with --json), until the manager goes away.
 * The stream starts with every open card. */
static int follow(const char *session, bool as_json)
{
  const char *path = shk_manager_socket_path();
  int fd = shk_manager_connect(path);
  if (fd < 0)
    shk_cli_die_no_manager("approvals", path, -fd);
  static const char req[] = "{\"op\":\"subscribe\"}\n";
  if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
    shk__die(SHK_EXIT_UNAVAILABLE, "approvals: the manager at %s: %s", path, strerror(errno));
  FILE *in = fdopen(fd, "r");
  if (!in)
    shk__die(SHK_EXIT_UNAVAILABLE, "approvals: out of memory");
  char *line = NULL;
  size_t cap = 0;
  bool first = true;
  while (getline(&line, &cap, in) > 0) {
    json_t *o = json_loads(line, 0, NULL);
    if (first) {
      first = false;
      if (!json_is_true(json_object_get(o, "ok")))
        shk__die(shk_cli_answer_status(o), "approvals: subscribe: %s", str(o, "error"));
      json_decref(o);
      continue;
    }
    json_t *card = json_object_get(o, "card");
    const char *sess = json_is_object(card) ? str(json_object_get(card, "session"), "name") : str(o, "session");
    if (!o || (session && strcmp(session, sess))) {
      json_decref(o);
      continue;
    }
    if (as_json)
      fputs(line, stdout);
    else if (json_is_object(card))
      print_card(card);
    else if (!strcmp(str(o, "event"), "notice")) {
      char *scope = json_dumps(json_object_get(o, "scope"), JSON_COMPACT);
      printf("%s  notice  %s %s granted with no human (tier notify); undo with: %s\n", str(o, "session"),
             str(o, "class"), scope ? scope : "{}", str(o, "revoke"));
      free(scope);
    }
    else
      printf("%s  %s  %s%s%s\n", str(o, "card"), str(o, "event"), str(o, "result"),
             *str(o, "reason") ? ": " : "", str(o, "reason"));
    fflush(stdout);
    json_decref(o);
  }
  free(line);
  fclose(in);
  return 0;
}

int shk_cli_approvals(int argc, char **argv)
{
  static const char allowed[] = { OPT_JSON, OPT_FOLLOW, 0 };
  args a = parse("approvals", argc, argv, allowed, 0, 1, "shinken approvals [SESSION] [--json] [-f]");
  if (a.follow)
    return follow(a.n_pos ? a.pos[0] : NULL, a.json);
  json_t *req = json_pack("{s:s}", "op", "cards");
  if (req && a.n_pos)
    json_object_set_new(req, "session", json_string(a.pos[0]));
  json_t *ans = call("approvals", req);
  if (a.json || !json_is_true(json_object_get(ans, "ok")))
    return finish("approvals", ans, a.json);
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(ans, "cards"), i, c) print_card(c);
  json_decref(ans);
  return 0;
}

/* approve, deny and cancel: one resolve of one card. */
static int resolve(const char *what, int argc, char **argv, const char *allowed, const char *usage)
{
  args a = parse(what, argc, argv, allowed, 1, 1, usage);
  const char *how = strcmp(what, "approve") ? what : a.pattern ? "pattern" : a.session ? "session" : "once";
  json_t *req = json_pack("{s:s, s:s, s:s}", "op", "resolve", "card", a.pos[0], "resolution", how);
  /* The manager checks that the card offers this pattern at its tier or a
   * stricter one: the CLI only passes it on. */
  if (req && a.pattern)
    json_object_set_new(req, "pattern", json_string(a.pattern));
  if (req && a.reason)
    json_object_set_new(req, "reason", json_string(a.reason));
  return finish(what, call(what, req), a.json);
}

int shk_cli_approve(int argc, char **argv)
{
  static const char allowed[] = { OPT_JSON, OPT_ONCE, OPT_SESSION, OPT_PATTERN, OPT_REASON, 0 };
  return resolve("approve", argc, argv, allowed,
                 "shinken approve CARD [--once|--session|--pattern P] [--reason R] [--json]");
}

int shk_cli_deny(int argc, char **argv)
{
  static const char allowed[] = { OPT_JSON, OPT_REASON, 0 };
  return resolve("deny", argc, argv, allowed, "shinken deny CARD [--reason R] [--json]");
}

int shk_cli_cancel(int argc, char **argv)
{
  static const char allowed[] = { OPT_JSON, 0 };
  return resolve("cancel", argc, argv, allowed, "shinken cancel CARD [--json]");
}

/* takeover and resume: one request about one session. */
static int by_session(const char *what, int argc, char **argv)
{
  static const char allowed[] = { OPT_JSON, 0 };
  char usage[64];
  snprintf(usage, sizeof usage, "shinken %s SESSION [--json]", what);
  args a = parse(what, argc, argv, allowed, 1, 1, usage);
  json_t *req = json_pack("{s:s, s:s}", "op", what, "session", a.pos[0]);
  json_t *ans = call(what, req);
  if (!a.json && json_is_true(json_object_get(ans, "ok")))
    printf("%s: %s\n", str(ans, "session"), json_is_true(json_object_get(ans, "frozen")) ? "frozen" : "resumed");
  return finish(what, ans, a.json);
}

int shk_cli_takeover(int argc, char **argv)
{
  return by_session("takeover", argc, argv);
}

int shk_cli_resume(int argc, char **argv)
{
  return by_session("resume", argc, argv);
}

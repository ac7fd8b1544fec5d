/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's control commands: sessions, grant, grants, revoke,
 * attenuate. Each sends one request to the running manager and prints its
 * answer; --json prints the answer object itself.
 * Exit status (src/cli/cli.h): 0 done, 2 refused by a decision or waiting
 * for a human (the answer says why), 1 bad input (the manager turned the
 * request down without deciding it: an unknown session, a malformed scope),
 * 4 no manager, 64 a usage error. */
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

/* "500ms", "30s", "5m", "2h", "1d" -> milliseconds. */
static long long parse_duration(const char *s)
{
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || v <= 0 || s[0] == '+' || s[0] == '-')
    return -1;
  long long mult = !strcmp(end, "ms") ? 1 : !strcmp(end, "s") ? 1000 : !strcmp(end, "m") ? 60000
                 : !strcmp(end, "h") ? 3600000LL : !strcmp(end, "d") ? 86400000LL : -1;
  if (mult < 0 || v > (1LL << 50) / mult)
    return -1;
  return v * mult;
}

/* A string field of an answer, or "". */
static const char *str(json_t *o, const char *key)
{
  const char *v = json_string_value(json_object_get(o, key));
  return v ? v : "";
}

static void print_grant_line(json_t *g)
{
  char *scope = json_dumps(json_object_get(g, "scope"), JSON_COMPACT);
  printf("%s  %-8s %-18s %-8s %s %s\n", json_string_value(json_object_get(g, "handle")),
         json_is_true(json_object_get(g, "live")) ? "live" : "revoked",
         json_string_value(json_object_get(g, "class")), json_string_value(json_object_get(g, "lifecycle")),
         json_string_value(json_object_get(g, "session")), scope ? scope : "");
  free(scope);
}

/* One line per session, under a header: enough to tell two apart (who
 * opened it, where, with what command, and when), then its state. */
static void print_sessions(json_t *list)
{
  if (!json_array_size(list))
    return;
  printf("%-20s %-8s %-10s %-19s %-8s %-6s %-6s %-24s %s\n", "SESSION", "PID", "USER", "STARTED", "TRUST",
         "GRANTS", "EGRESS", "CWD", "COMMAND");
  size_t i;
  json_t *s;
  json_array_foreach(list, i, s) {
    char started[32] = "-";
    json_int_t ms = json_integer_value(json_object_get(s, "started_ms"));
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms > 0 && localtime_r(&t, &tm))
      strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", &tm);
    const char *cwd = str(s, "cwd"), *cmd = str(s, "command");
    printf("%-20s %-8lld %-10s %-19s %-8s %-6lld %-6s %-24s %s\n", str(s, "session"),
           (long long)json_integer_value(json_object_get(s, "pid")), str(s, "user"), started,
           str(s, "trust_tier"), (long long)json_integer_value(json_object_get(s, "grants")),
           json_is_true(json_object_get(s, "egress")) ? "proxy" : "none", *cwd ? cwd : "-", *cmd ? cmd : "-");
  }
}

/* Sends `req` (stolen) on `fd` and returns the answer; dies with one line
 * when there is none. */
static json_t *rpc(const char *what, int fd, json_t *req)
{
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  if (!text)
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: out of memory", what);
  char *answer;
  shk_error err;
  int r = shk_manager_rpc(fd, text, &answer, &err);
  free(text);
  if (r)
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: %s", what, err.message);
  json_t *ans = json_loads(answer, 0, NULL);
  free(answer);
  if (!ans)
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: the manager's answer is not JSON", what);
  return ans;
}

/* REQ, the request that would have been sent, is freed first (a sanitizer
 * build counts what is left at exit). */
static int connect_or_die(const char *what, json_t *req)
{
  const char *path = shk_manager_socket_path();
  int fd = shk_manager_connect(path);
  if (fd < 0) {
    json_decref(req);
    shk_cli_die_no_manager(what, path, -fd);
  }
  return fd;
}

/* A decision (refused, or waiting for a human) is a refusal; a manager
 * that turned the connection away (at its limits), or an answer that is
 * not one, is unavailable; a request it turned down without deciding it
 * was bad input. */
int shk_cli_answer_status(const json_t *ans)
{
  if (!json_is_object(ans))
    return SHK_EXIT_UNAVAILABLE;
  return json_is_true(json_object_get(ans, "ok"))          ? SHK_EXIT_OK
         : json_object_get(ans, "decision")                ? SHK_EXIT_REFUSED
         : json_is_true(json_object_get(ans, "unavailable")) ? SHK_EXIT_UNAVAILABLE
                                                           : SHK_EXIT_BAD_INPUT;
}

/* Prints the answer (stolen) and returns the exit status. */
static int print_answer(const char *what, json_t *ans, bool as_json)
{
  bool ok = json_is_true(json_object_get(ans, "ok"));
  if (as_json) {
    char *text = json_dumps(ans, JSON_COMPACT);
    puts(text ? text : "{}");
    free(text);
  } else if (!ok && json_object_get(ans, "decision")) {
    shk_cli_say_decision(what, ans);
  } else if (!ok) {
    /* The manager's sentence already names the operation. */
    const char *e = str(ans, "error");
    size_t n = strlen(what);
    fprintf(stderr, "shinken: %s\n", !strncmp(e, what, n) && e[n] == ':' ? e : e[0] ? e : what);
  } else if (!strcmp(what, "grant")) {
    printf("granted %s (tier %s, policy %s, manifest entry %lld)\n", str(ans, "handle"), str(ans, "tier"),
           str(ans, "policy"), (long long)json_integer_value(json_object_get(ans, "manifest_entry")));
    json_t *by = json_object_get(ans, "resolved_by");
    if (by)
      printf("approved by: %s peer uid %lld pid %lld\n", str(by, "channel"),
             (long long)json_integer_value(json_object_get(by, "uid")),
             (long long)json_integer_value(json_object_get(by, "pid")));
    printf("enforced by: %s\n", str(ans, "enforced_by"));
    if (json_is_true(json_object_get(ans, "at_start")))
      printf("applied when the session's sandbox starts, before its command runs (revoked, saying why, if it "
             "cannot be)\n");
  } else if (!strcmp(what, "grants")) {
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(ans, "grants"), i, g) print_grant_line(g);
  } else if (!strcmp(what, "sessions")) {
    print_sessions(json_object_get(ans, "sessions"));
  } else if (!strcmp(what, "revoke")) {
    long long mounts = json_integer_value(json_object_get(ans, "mounts_detached"));
    if (mounts)
      printf("revoked %s (%lld mounts detached, %lld processes holding them stopped)\n", str(ans, "handle"),
             mounts, (long long)json_integer_value(json_object_get(ans, "processes_stopped")));
    else
      printf("revoked %s (%lld open tunnels closed)\n", str(ans, "handle"),
             (long long)json_integer_value(json_object_get(ans, "tunnels_closed")));
  } else {
    printf("%s\n", str(ans, "handle"));
  }
  int status = shk_cli_answer_status(ans);
  json_decref(ans);
  return status;
}

/* A session or handle named by a unique prefix, as git takes a commit id:
 * GIVEN itself when the manager knows it (or knows nothing that begins
 * with it, or it is empty: the answer then says it is unknown), else the one id that
 * begins with it, asked of the manager with OP ("sessions" or "grants",
 * whose answer lists FIELD in LIST). Two or more are one sentence and bad
 * input (REQ, the request, freed first). The answer is malloc'd. */
static char *unique_id(const char *what, int fd, const char *op, const char *list, const char *field,
                       const char *given, json_t *req)
{
  if (!*given)
    return shk__xstrdup(given);
  json_t *ans = rpc(what, fd, json_pack("{s:s}", "op", op));
  const char *found = NULL, *other = NULL;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(ans, list), i, e) {
    const char *id = json_string_value(json_object_get(e, field));
    if (!id || strncmp(id, given, strlen(given)))
      continue;
    if (!strcmp(id, given)) {
      found = id;
      other = NULL;
      break;
    }
    if (found && strcmp(found, id))
      other = id;
    else
      found = id;
  }
  if (other) {
    char msg[512];
    snprintf(msg, sizeof msg, "'%s' is ambiguous: %s and %s both begin with it", given, found, other);
    json_decref(ans);
    json_decref(req);
    shk__die(SHK_EXIT_BAD_INPUT, "%s: %s", what, msg);
  }
  char *id = shk__xstrdup(found ? found : given);
  json_decref(ans);
  return id;
}

/* Sends `req` (stolen) and prints the answer. The manager refuses, with
 * its own sentence, what would otherwise be a silent mistake (the handles
 * of a session it never heard of, a second revoke, a scope that grants
 * nothing), so every client of its socket gets the same answer. */
static int call(const char *what, json_t *req, bool as_json)
{
  int fd = connect_or_die(what, req);
  /* The session or handle the request names may be a prefix of one. */
  const char *key = json_object_get(req, "handle") ? "handle" : json_object_get(req, "session") ? "session" : NULL;
  if (key) {
    bool handle = !strcmp(key, "handle");
    char *id = unique_id(what, fd, handle ? "grants" : "sessions", handle ? "grants" : "sessions", key,
                         json_string_value(json_object_get(req, key)), req);
    json_object_set_new(req, key, json_string(id));
    free(id);
  }
  json_t *ans = rpc(what, fd, req);
  close(fd);
  return print_answer(what, ans, as_json);
}

enum { OPT_SCOPE = 1, OPT_TTL, OPT_ONCE, OPT_JSON, OPT_EXTERNAL, OPT_APPROVE, OPT_STOP };

static const struct option options[] = {
  { "scope", required_argument, NULL, OPT_SCOPE },
  { "ttl", required_argument, NULL, OPT_TTL },
  { "once", no_argument, NULL, OPT_ONCE },
  { "json", no_argument, NULL, OPT_JSON },
  { "external", no_argument, NULL, OPT_EXTERNAL },
  { "approve", no_argument, NULL, OPT_APPROVE },
  { "stop", no_argument, NULL, OPT_STOP },
  { NULL, 0, NULL, 0 },
};

typedef struct args {
  const char *scope;
  long long ttl;
  bool once, json, external, approve, stop;
  char **pos;
  int n_pos;
} args;

/* Parses the options `allowed` (a string of OPT_* values) and the
 * positional arguments; dies with one line on anything else. */
static args parse(const char *cmd, int argc, char **argv, const char *allowed, int n_pos,
                  int n_pos_optional, const char *usage)
{
  args a = { 0 };
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
    if (c == '?' || !strchr(allowed, c))
      shk_cli_usage_error(cmd, "unknown or misplaced option '%s'", argv[optind - 1]);
    switch (c) {
    case OPT_SCOPE: a.scope = optarg; break;
    case OPT_TTL:
      if ((a.ttl = parse_duration(optarg)) < 0)
        shk__die(SHK_EXIT_BAD_INPUT, "%s: --ttl: '%s' is not a duration like 30s, 5m, 2h or 1d", cmd,
                 optarg);
      break;
    case OPT_ONCE: a.once = true; break;
    case OPT_JSON: a.json = true; break;
    case OPT_EXTERNAL: a.external = true; break;
    case OPT_APPROVE: a.approve = true; break;
    case OPT_STOP: a.stop = true; break;
    default: break;
    }
  }
  a.pos = argv + optind;
  a.n_pos = argc - optind;
  if (a.n_pos < n_pos - n_pos_optional || a.n_pos > n_pos)
    shk_cli_usage_error(cmd, "expected %s", usage);
  return a;
}

static json_t *scope_arg(const char *cmd, const char *text)
{
  if (!text)
    shk_cli_usage_error(cmd, "--scope JSON is required");
  json_error_t jerr;
  json_t *s = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(s))
    shk__die(SHK_EXIT_BAD_INPUT, "%s: --scope must be a JSON object (%s)", cmd,
             s ? "not an object" : jerr.text);
  return s;
}

static const char allowed_grant[] = { OPT_SCOPE, OPT_TTL, OPT_ONCE, OPT_JSON, OPT_EXTERNAL, OPT_APPROVE, 0 };
static const char allowed_att[] = { OPT_SCOPE, OPT_TTL, OPT_JSON, 0 };
static const char allowed_json[] = { OPT_JSON, 0 };
static const char allowed_revoke[] = { OPT_JSON, OPT_STOP, 0 };

/* --approve: the person at this terminal is the human channel. The grant
 * goes to the manager as any other; when the policy answers "ask", the
 * pending request it raised is resolved from this same connection, and the
 * manager records this process (its uid and pid) as the one who approved. */
int shk_cli_grant(int argc, char **argv)
{
  args a = parse("grant", argc, argv, allowed_grant, 2, 0,
                 "shinken grant SESSION CLASS --scope JSON [--ttl DURATION] [--once] [--external] [--approve] [--json]");
  json_t *scope = scope_arg("grant", a.scope);
  json_t *req = json_pack("{s:s, s:s, s:s, s:o, s:b, s:s}", "op", "grant", "session", a.pos[0], "class",
                          a.pos[1], "scope", scope, "once", a.once, "provenance",
                          a.external ? "external" : "first-party");
  if (!req)
    shk__die(SHK_EXIT_UNAVAILABLE, "grant: out of memory");
  if (a.ttl > 0)
    json_object_set_new(req, "ttl_ms", json_integer(a.ttl));
  int fd = connect_or_die("grant", req);
  char *sid = unique_id("grant", fd, "sessions", "sessions", "session", a.pos[0], req);
  json_object_set_new(req, "session", json_string(sid));
  free(sid);
  json_t *ans = rpc("grant", fd, req);
  if (a.approve && !strcmp(str(ans, "decision"), "ask")) {
    json_t *res = json_pack("{s:s, s:s, s:s}", "op", "resolve", "pending", str(ans, "pending"), "resolution",
                            "approve");
    json_decref(ans);
    if (!res)
      shk__die(SHK_EXIT_UNAVAILABLE, "grant: out of memory");
    ans = rpc("grant", fd, res);
  }
  close(fd);
  return print_answer("grant", ans, a.json);
}

int shk_cli_attenuate(int argc, char **argv)
{
  args a = parse("attenuate", argc, argv, allowed_att, 1, 0,
                 "shinken attenuate HANDLE --scope JSON [--ttl DURATION] [--json]");
  json_t *req = json_pack("{s:s, s:s, s:o}", "op", "attenuate", "handle", a.pos[0], "scope",
                          scope_arg("attenuate", a.scope));
  if (a.ttl > 0)
    json_object_set_new(req, "ttl_ms", json_integer(a.ttl));
  return call("attenuate", req, a.json);
}

int shk_cli_revoke(int argc, char **argv)
{
  args a = parse("revoke", argc, argv, allowed_revoke, 1, 0, "shinken revoke HANDLE [--stop] [--json]");
  return call("revoke", json_pack("{s:s, s:s, s:b}", "op", "revoke", "handle", a.pos[0], "stop", a.stop), a.json);
}

int shk_cli_grants(int argc, char **argv)
{
  args a = parse("grants", argc, argv, allowed_json, 1, 1, "shinken grants [SESSION] [--json]");
  json_t *req = json_pack("{s:s}", "op", "grants");
  if (a.n_pos)
    json_object_set_new(req, "session", json_string(a.pos[0]));
  return call("grants", req, a.json);
}

int shk_cli_sessions(int argc, char **argv)
{
  args a = parse("sessions", argc, argv, allowed_json, 0, 0, "shinken sessions [--json]");
  return call("sessions", json_pack("{s:s}", "op", "sessions"), a.json);
}

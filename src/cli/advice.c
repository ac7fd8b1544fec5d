/* SPDX-License-Identifier: Apache-2.0 */
/* What the CLI says when it cannot reach a manager, and what a refused
 * grant's next step is. Advice must be right for the person reading it: a
 * manager that is there but belongs to another user is not one to start
 * again, and a grant an administrator forbids is not one to approve. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"

/* The name of UID, or its number, in BUF. */
static const char *user_name(uid_t uid, char *buf, size_t len)
{
  struct passwd pw, *res = NULL;
  char pwbuf[4096];
  if (getpwuid_r(uid, &pw, pwbuf, sizeof pwbuf, &res) == 0 && res)
    snprintf(buf, len, "%s", res->pw_name);
  else
    snprintf(buf, len, "uid %u", (unsigned)uid);
  return buf;
}

/* The nearest of PATH and its parent directories that belongs to another
 * user and is closed to this one (the socket, or a 0700 directory on the
 * way to it); its owner in *OWNER. False when there is none. */
static bool foreign_owner(const char *path, uid_t *owner)
{
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", path);
  uid_t me = shk__self_uid();
  for (;;) {
    struct stat st;
    if (stat(p, &st) == 0 && st.st_uid != me && access(p, S_ISDIR(st.st_mode) ? X_OK : W_OK) != 0) {
      *owner = st.st_uid;
      return true;
    }
    char *slash = strrchr(p, '/');
    if (!slash || slash == p)
      return false;
    *slash = '\0';
  }
}

const char *shk_cli_socket_hint(void)
{
  const char *env = getenv("SHINKEN_SOCKET"), *xdg = getenv("XDG_RUNTIME_DIR");
  if (shk__self_uid() == 0 || (env && *env) || (xdg && *xdg))
    return NULL;
  /* Every client finds the manager at the same computed path, so the
   * daemon cannot fall back to a private directory of its own: the user
   * names one for both. */
  return "without XDG_RUNTIME_DIR a user's manager has no default place (/run/shinken is root's): make a "
         "directory of your own (mkdir -m 0700 DIR) and set SHINKEN_SOCKET=DIR/manager.sock for 'shinken "
         "daemon' and every other command, or set XDG_RUNTIME_DIR";
}

void shk_cli_die_no_manager(const char *what, const char *path, int err)
{
  uid_t owner;
  char name[64];
  if ((err == EACCES || err == EPERM) && foreign_owner(path, &owner))
    shk__die(SHK_EXIT_UNAVAILABLE,
             "%s: the manager at %s belongs to %s, and its socket is closed to other users; run this as %s, "
             "or set SHINKEN_SOCKET to a manager of your own", what, path, user_name(owner, name, sizeof name),
             name);
  if (err == ECONNREFUSED)
    shk__die(SHK_EXIT_UNAVAILABLE,
             "%s: no manager listens at %s (the socket is left from one that ended); start one with "
             "'shinken daemon'", what, path);
  const char *hint = shk_cli_socket_hint();
  if (hint)
    shk__die(SHK_EXIT_UNAVAILABLE, "%s: no manager at %s (%s); %s", what, path, strerror(err), hint);
  shk__die(SHK_EXIT_UNAVAILABLE, "%s: no manager at %s (%s); start one with 'shinken daemon'", what, path,
           strerror(err));
}

static const char *field(const json_t *o, const char *key)
{
  const char *v = json_string_value(json_object_get(o, key));
  return v ? v : "";
}

/* TEXT without PREFIX when it begins with it. */
static const char *after(const char *text, const char *prefix)
{
  size_t n = strlen(prefix);
  return strncmp(text, prefix, n) ? text : text + n;
}

void shk_cli_say_decision(const char *what, const json_t *ans)
{
  const char *dec = field(ans, "decision"), *by = field(ans, "decided_by"), *e = field(ans, "error");
  const char *policy = field(ans, "policy"), *tier = field(ans, "tier");
  if (!strcmp(dec, "ask")) {
    char *scope = json_dumps(json_object_get(ans, "scope"), JSON_COMPACT);
    fprintf(stderr,
            "shinken: %s needs a human's approval (tier %s): %s; pending request %s; a person at a terminal "
            "approves it with: shinken grant %s %s --scope ",
            what, *tier ? tier : "Ask", after(e, "needs a human's approval: "), field(ans, "pending"),
            field(ans, "session"), field(ans, "class"));
    /* Quoted for a POSIX shell, so the line can be pasted as it is. */
    fputc('\'', stderr);
    for (const char *c = scope ? scope : "{}"; *c; c++)
      fputs(*c == '\'' ? "'\\''" : (char[]){ *c, 0 }, stderr);
    fputs("' --approve\n", stderr);
    free(scope);
    return;
  }
  if (!strcmp(by, "manifest")) {
    /* The manager's sentence says "outside the manifest of image X". */
    fprintf(stderr, "shinken: %s refused: %s; no approval grants what the image's manifest leaves out\n", what,
            e);
    return;
  }
  if (!strcmp(by, "policy") && *policy) {
    /* "WHAT: forbidden by POLICY" */
    char suffix[300];
    snprintf(suffix, sizeof suffix, ": forbidden by %s", policy);
    size_t n = strlen(e), k = strlen(suffix);
    int len = n > k && !strcmp(e + n - k, suffix) ? (int)(n - k) : (int)n;
    bool block = !strcmp(tier, "Block");
    fprintf(stderr, "shinken: %s refused: forbidden by admin rule '%s'%s: %.*s; an administrator's rule "
                    "holds against every approval\n", what, policy, block ? " (tier Block)" : "", len, e);
    return;
  }
  if (!strcmp(by, "enforcement")) {
    fprintf(stderr, "shinken: %s refused: %s; 'shinken doctor' says what this host enforces\n", what, e);
    return;
  }
  fprintf(stderr, "shinken: %s refused: %s\n", what, e);
}

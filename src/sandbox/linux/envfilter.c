/* SPDX-License-Identifier: Apache-2.0 */
/* The environment the command gets. The caller's own passes, except the
 * variables that carry a secret (a token, a key, a password) or the way to
 * a socket that would act for the user (an SSH or GPG agent, the session's
 * D-Bus, an X11 or Wayland display, a terminal multiplexer, a Docker
 * daemon, an editor's remote control, Shinken's own control socket): the
 * sandbox would otherwise hand them to the agent it confines. One table
 * below, documented in shinken-run(1); --env NAME passes one explicitly,
 * --env-clean starts from a minimal environment instead. Nothing here
 * reads the process's own environment: the caller's comes in ENV. */
#include "sandbox-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/common.h"

/* Names (compared without regard to case): "*SUFFIX", "PREFIX*", or a
 * whole name. */
static const char *const removed[] = {
  /* Secrets by the shape of their names. */
  "*_TOKEN", "*_AUTHTOKEN", "*_KEY", "*_APIKEY", "*_SECRET", "*_PASSWORD", "*_PASSWD",
  "*_PASS", "*_PWD", "*_CREDENTIALS", "*_CREDENTIAL", "*_CREDS", "*_AUTH", "*_PAT", "*_JWT",
  "*_COOKIE", "*_DSN", "*_CONNECTION_STRING", "*_WEBHOOK_URL",
  /* Cloud SDKs and password managers. */
  "AWS_*", "AZURE_*", "ARM_CLIENT_*", "ARM_TENANT_ID", "GOOGLE_APPLICATION_CREDENTIALS",
  "GOOGLE_GHA_CREDS_PATH", "CLOUDSDK_AUTH_*", "OP_SESSION_*", "BW_SESSION", "DATABASE_URL",
  "MYSQL_PWD",
  /* Agents and sessions that act for the user. */
  "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "GNOME_KEYRING_CONTROL",
  "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "SESSION_MANAGER", "DISPLAY",
  "WAYLAND_DISPLAY", "XAUTHORITY", "KRB5CCNAME", "KRB5_KTNAME", "KRB5_CLIENT_KTNAME",
  "PULSE_SERVER", "PIPEWIRE_REMOTE", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS",
  /* Daemons and remote controls that run commands. */
  "DOCKER_HOST", "CONTAINER_HOST", "TMUX", "TMUX_PANE", "STY", "ZELLIJ*", "KITTY_LISTEN_ON",
  "WEZTERM_UNIX_SOCKET", "NVIM", "NVIM_LISTEN_ADDRESS", "SWAYSOCK", "I3SOCK",
  "HYPRLAND_INSTANCE_SIGNATURE", "NIRI_SOCKET", "VSCODE_IPC_HOOK*", "VSCODE_GIT_IPC_*",
  "VSCODE_GIT_ASKPASS_*",
  /* Shinken's own control socket: the workload reaches no approval channel. */
  "SHINKEN_SOCKET",
  NULL,
};

/* Does the variable named NAME (LEN bytes) match one of the table's
 * entries? */
static bool secret_name(const char *name, size_t len)
{
  for (const char *const *p = removed; *p; p++) {
    size_t n = strlen(*p);
    if ((*p)[0] == '*') {
      if (len >= n - 1 && !strncasecmp(name + len - (n - 1), *p + 1, n - 1))
        return true;
    } else if ((*p)[n - 1] == '*') {
      if (len >= n - 1 && !strncasecmp(name, *p, n - 1))
        return true;
    } else if (len == n && !strncasecmp(name, *p, n)) {
      return true;
    }
  }
  return false;
}

static bool passed(const shk_sandbox_opts *o, const char *name, size_t len)
{
  for (size_t i = 0; i < o->env.n; i++)
    if (strlen(o->env.v[i]) == len && !strncmp(o->env.v[i], name, len))
      return true;
  return false;
}

/* A growing NULL-terminated vector of pointers. */
typedef struct vec {
  char **v;
  size_t n, cap;
} vec;

static int push(vec *s, char *p)
{
  if (s->n + 1 >= s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 32;
    char **v = realloc(s->v, cap * sizeof *v);
    if (!v)
      return -ENOMEM;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = p;
  s->v[s->n] = NULL;
  return 0;
}

/* The minimal environment of --env-clean: a fixed PATH, the caller's home
 * and name, and the terminal and locale variables of ENV's environment.
 * The strings it makes go to KEEP as well, to be freed. */
static int made(vec *out, vec *keep, char *s)
{
  if (!s || push(keep, s) < 0) {
    free(s);
    return -ENOMEM;
  }
  return push(out, s);
}

static char *concat(const char *a, const char *b)
{
  char *s = malloc(strlen(a) + strlen(b) + 1);
  if (s)
    strcat(strcpy(s, a), b);
  return s;
}

static int clean_env(const shk_sandbox_env *env, vec *out, vec *keep)
{
  static const char *const vars[] = { "TERM=", "LANG=", "LC_ALL=", "SHINKEN_SESSION=", NULL };
  const char *home = env->homes[0] ? env->homes[0] : env->homes[1];
  int r = made(out, keep, strdup("PATH=/usr/local/bin:/usr/bin:/bin"));
  if (r == 0 && home)
    r = made(out, keep, concat("HOME=", home));
  if (r == 0 && env->user)
    r = made(out, keep, concat("USER=", env->user));
  if (r == 0 && env->user)
    r = made(out, keep, concat("LOGNAME=", env->user));
  for (const char *const *k = vars; *k && r == 0; k++)
    for (char *const *e = env->environ; e && *e; e++)
      if (!strncmp(*e, *k, strlen(*k))) {
        r = push(out, *e);
        break;
      }
  return r;
}

int shk__env_for_command(const shk_sandbox_env *env, const shk_sandbox_opts *o,
                         shk__env_result *res)
{
  memset(res, 0, sizeof *res);
  vec out = { 0 }, keep = { 0 }, gone = { 0 };
  int r = o->env_clean ? clean_env(env, &out, &keep) : 0;
  for (char *const *e = env->environ; r == 0 && e && *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    if (passed(o, *e, len)) {
      /* --env NAME: passed as the caller has it, also after --env-clean. */
      r = push(&out, *e);
    } else if (o->env_clean) {
      continue;
    } else if (secret_name(*e, len)) {
      char *name = strndup(*e, len);
      r = name ? push(&gone, name) : -ENOMEM;
      if (r < 0)
        free(name);
    } else {
      r = push(&out, *e);
    }
  }
  /* With --net proxy the sudo shim's directory comes first on PATH, so
   * that `sudo CMD` reaches the session's manager. The shim grants
   * nothing itself; a program of the same name elsewhere is simply not
   * found first. */
  if (r == 0 && o->net == SHK_NET_PROXY) {
    size_t i = 0;
    while (i < out.n && strncmp(out.v[i], "PATH=", 5))
      i++;
    char *path = concat("PATH=" SHK_SANDBOX_SUDO_DIR ":", i < out.n ? out.v[i] + 5 : "/usr/local/bin:/usr/bin:/bin");
    if (!path || push(&keep, path) < 0) {
      free(path);
      r = -ENOMEM;
    } else if (i < out.n) {
      out.v[i] = path;
    } else {
      r = push(&out, path);
    }
  }
  if (r == 0 && !out.v && !(out.v = calloc(1, sizeof *out.v)))
    r = -ENOMEM;
  res->environ = out.v;
  res->owned = keep.v;
  res->removed = gone.v;
  res->nremoved = gone.n;
  if (r < 0)
    shk__env_result_free(res);
  return r;
}

void shk__env_result_free(shk__env_result *res)
{
  free(res->environ);
  for (char **p = res->owned; p && *p; p++)
    free(*p);
  free(res->owned);
  for (size_t i = 0; i < res->nremoved; i++)
    free(res->removed[i]);
  free(res->removed);
  memset(res, 0, sizeof *res);
}

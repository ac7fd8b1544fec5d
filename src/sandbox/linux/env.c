/* SPDX-License-Identifier: Apache-2.0 */
/* Who the caller is and where the defaults come from, read from the process
 * once. This is the one place the sandbox module asks the kernel for the
 * caller's identity or reads the process's environment: everything else
 * takes a shk_sandbox_env, so that the plan, the assessment and the launch
 * decide from their inputs alone (and tests can give them any caller). */
#include "shinken/sandbox.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

extern char **environ;

/* The password database's entry for UID: /etc/passwd read directly (a few
 * system calls), and the C library's lookup (NSS: nscd, nsswitch.conf, the
 * modules it names, about 0.1 ms in a static binary) only for a user that
 * file does not list. Fills HOME and NAME (empty when unknown). */
static int passwd_entry(uid_t uid, char *home, size_t nhome, char *name, size_t nname)
{
  home[0] = name[0] = '\0';
  char *text = NULL;
  size_t len;
  if (shk__read_file("/etc/passwd", &text, &len) == 0) {
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
      /* name:password:uid:gid:gecos:home:shell */
      char *f[7];
      int n = 0;
      for (char *p = l; n < 7; n++) {
        f[n] = p;
        char *c = strchr(p, ':');
        if (!c) {
          n++;
          break;
        }
        *c = '\0';
        p = c + 1;
      }
      char *end;
      if (n < 7 || !f[2][0] || strtoul(f[2], &end, 10) != uid || *end)
        continue;
      if ((size_t)snprintf(home, nhome, "%s", f[5]) >= nhome ||
          (size_t)snprintf(name, nname, "%s", f[0]) >= nname)
        home[0] = name[0] = '\0';
      break;
    }
    free(text);
  }
  if (name[0])
    return 0;
  struct passwd pw, *res = NULL;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res)
    return 0;
  if ((size_t)snprintf(home, nhome, "%s", res->pw_dir) >= nhome ||
      (size_t)snprintf(name, nname, "%s", res->pw_name) >= nname)
    home[0] = name[0] = '\0';
  return 0;
}

static const char *nonempty(const char *s)
{
  return s && *s ? s : NULL;
}

/* The XDG base directories count only when absolute, as the specification
 * says. */
static const char *absolute(const char *s)
{
  return s && s[0] == '/' ? s : NULL;
}

int shk_sandbox_env_from_process(shk_sandbox_env *env, shk_error *err)
{
  memset(env, 0, sizeof *env);
  /* One block for every string this function owns: the working directory,
   * and the password database's home and name. */
  enum { CWD = 0, HOME = PATH_MAX, NAME = 2 * PATH_MAX, SIZE = 2 * PATH_MAX + 256 };
  char *s = malloc(SIZE);
  if (!s)
    return shk__error_set(err, -ENOMEM, "out of memory");
  if (!getcwd(s + CWD, PATH_MAX)) {
    int r = -errno;
    free(s);
    return shk__error_set(err, r, "the current directory: %s", strerror(-r));
  }
  /* The effective ids decide what the caller is outside (root or not) and
   * are what the launcher maps into its user namespace; the password
   * database is asked about the real uid, as login does. */
  env->uid = shk__self_uid();
  env->gid = getegid();
  env->root = env->uid == 0;
  passwd_entry(getuid(), s + HOME, PATH_MAX, s + NAME, 256);
  env->cwd = s + CWD;
  env->homes[0] = nonempty(getenv("HOME"));
  env->homes[1] = nonempty(s + HOME);
  env->user = nonempty(s + NAME);
  env->path = getenv("PATH");
  env->cgroup_parent = nonempty(getenv("SHINKEN_CGROUP_PARENT"));
  env->xdg_config = absolute(getenv("XDG_CONFIG_HOME"));
  env->xdg_data = absolute(getenv("XDG_DATA_HOME"));
  env->xdg_state = absolute(getenv("XDG_STATE_HOME"));
  env->xdg_runtime = absolute(getenv("XDG_RUNTIME_DIR"));
  env->environ = environ;
  env->storage_ = s;
  return 0;
}

void shk_sandbox_env_free(shk_sandbox_env *env)
{
  free(env->storage_);
  memset(env, 0, sizeof *env);
}

/* The manager's configuration file, and the one place that says where the
 * policy comes from. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/manager.h"

typedef struct priv {
  char *policy_dir, *manifest, *session_policy, *standing, *event_log, *socket, *exec_path, *state_dir;
} priv;

void shk_manager_config_clear(shk_manager_config *c)
{
  priv *p = c->priv;
  if (p) {
    free(p->policy_dir);
    free(p->manifest);
    free(p->session_policy);
    free(p->standing);
    free(p->event_log);
    free(p->socket);
    free(p->exec_path);
    free(p->state_dir);
    free(p);
  }
  memset(c, 0, sizeof *c);
}

static int read_config(const char *path, priv *p, shk_error *err)
{
  json_error_t jerr;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!root || !json_is_object(root)) {
    json_decref(root);
    return shk__error_at(err, -EINVAL, path, root ? 0 : (unsigned)jerr.line, root ? 0 : (unsigned)jerr.column,
                         "%s: %s", path, root ? "must be a JSON object" : jerr.text);
  }
  const char *key;
  json_t *v;
  int r = 0;
  json_object_foreach(root, key, v) {
    char **slot = !strcmp(key, "policy_dir") ? &p->policy_dir
                : !strcmp(key, "manifest") ? &p->manifest
                : !strcmp(key, "session_policy") ? &p->session_policy
                : !strcmp(key, "standing") ? &p->standing
                : !strcmp(key, "event_log") ? &p->event_log
                : !strcmp(key, "state_dir") ? &p->state_dir
                : !strcmp(key, "socket") ? &p->socket : NULL;
    if (!slot || !json_is_string(v)) {
      r = shk__error_set(err, -EINVAL, "%s: %s '%s'", path, slot ? "expected a string for" : "unknown key", key);
      break;
    }
    if (!(*slot = strdup(json_string_value(v)))) {
      r = shk__error_set(err, -ENOMEM, "out of memory");
      break;
    }
  }
  json_decref(root);
  return r;
}

int shk_manager_config_load(const char *path, shk_manager_config *c, shk_error *err)
{
  memset(c, 0, sizeof *c);
  priv *p = calloc(1, sizeof *p);
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory");
  c->priv = p;
  int r = path ? read_config(path, p, err) : 0;
  /* The policy decides what every agent may do, so it is read only from a
   * place someone chose: the configuration, the environment of whoever
   * started the manager, or the installed copy. Never a path baked in at
   * build time: a binary built in a shared directory would load whatever
   * another user put there. */
  const char *env = getenv("SHINKEN_POLICY_DIR");
  const char *path_env = getenv("PATH");
  if (!r && !p->policy_dir && !(p->policy_dir = strdup(env && *env ? env : SHK_POLICY_DIR_INSTALLED)))
    r = -ENOMEM;
  if (!r && !p->manifest && asprintf(&p->manifest, "%s/manifests/default.json", p->policy_dir) < 0) {
    p->manifest = NULL;
    r = -ENOMEM;
  }
  if (!r && !p->socket && !(p->socket = strdup(shk_manager_socket_path())))
    r = -ENOMEM;
  if (!r && path_env && !(p->exec_path = strdup(path_env)))
    r = -ENOMEM;
  if (r) {
    if (r == -ENOMEM)
      shk__error_set(err, r, "out of memory");
    shk_manager_config_clear(c);
    return r;
  }
  c->opts.policy_dir = p->policy_dir;
  c->opts.manifest = p->manifest;
  c->opts.session_policy = p->session_policy;
  c->opts.standing = p->standing;
  c->opts.event_log = p->event_log;
  c->opts.exec_path = p->exec_path;
  c->opts.state_dir = p->state_dir;
  c->socket = p->socket;
  return 0;
}

int shk_manager_decide_layers(const char *const *layers, size_t n_layers, bool approved,
                              shk_policy_answer *ans, shk_error *err)
{
  memset(ans, 0, sizeof *ans);
  ans->verdict = SHK_POLICY_DENY;
  shk_manager_config mc;
  int r = shk_manager_config_load(NULL, &mc, err);
  if (r)
    return r;
  shk_policy *pol = NULL;
  shk_policy_source src = { mc.opts.policy_dir, mc.opts.manifest, NULL, geteuid() };
  r = shk_policy_load(&src, &pol, err);
  shk_manager_config_clear(&mc);
  if (r)
    return r;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  /* The operator at their own command line: the highest trust tier, for
   * the one command they are starting. */
  shk_policy_session s = { .id = "operator", .trust_tier = "high", .expires_ms = now + 24LL * 3600 * 1000 };
  shk_policy_request req = {
    .kind = SHK_POLICY_DISABLE, .layers = layers, .n_layers = n_layers,
    .approval = approved ? SHK_POLICY_APPROVED : SHK_POLICY_UNASKED, .now_ms = now,
  };
  r = shk_policy_decide(pol, &s, &req, ans, err);
  shk_policy_free(pol);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The manager's configuration file, and the one place that says where the
 * policy comes from. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/audit.h"
#include "manager/manager-internal.h"
#include "shinken/manager.h"

typedef struct priv {
  char *policy_dir, *manifest, *session_policy, *standing, *socket, *exec_path, *state_dir, *audit_db;
  char *device_root;
  char *panel_listen;
  unsigned panel_max_connections;
} priv;

void shk_manager_config_clear(shk_manager_config *c)
{
  priv *p = c->priv;
  if (p) {
    free(p->policy_dir);
    free(p->manifest);
    free(p->session_policy);
    free(p->standing);
    free(p->socket);
    free(p->exec_path);
    free(p->state_dir);
    free(p->device_root);
    free(p->audit_db);
    free(p->panel_listen);
    free(p);
  }
  memset(c, 0, sizeof *c);
}

/* The integer keys: each a positive number up to its bound. */
typedef struct int_key {
  const char *name;
  long long max;
  size_t off;  /* in shk_manager_opts */
  char type;   /* 'u' unsigned, 'l' int64_t, 'z' size_t */
} int_key;

#define INT_KEY(name, field, max, type) { name, max, offsetof(shk_manager_opts, field), type }
static const int_key int_keys[] = {
  INT_KEY("audit_checkpoint_events", audit_checkpoint_events, 1000000000, 'u'),
  INT_KEY("audit_checkpoint_ms", audit_checkpoint_ms, 86400000, 'u'),
  INT_KEY("max_pending", max_pending, 100000, 'u'),
  INT_KEY("pending_timeout_ms", pending_timeout_ms, 31622400000LL, 'l'),
  INT_KEY("card_timeout_ms", card_timeout_ms, 31622400000LL, 'l'),
  INT_KEY("batch_window_ms", batch_window_ms, 3600000, 'l'),
  INT_KEY("control_max_clients", control_max_clients, 1000000, 'u'),
  INT_KEY("control_max_clients_per_uid", control_max_per_uid, 1000000, 'u'),
  INT_KEY("control_idle_ms", control_idle_ms, 31622400000LL, 'l'),
  INT_KEY("control_max_output", control_max_output, 1LL << 32, 'z'),
  INT_KEY("control_fd_reserve", control_fd_reserve, 100000, 'u'),
};

static void set_int(shk_manager_opts *o, const int_key *k, long long v)
{
  char *slot = (char *)o + k->off;
  if (k->type == 'u')
    *(unsigned *)(void *)slot = (unsigned)v;
  else if (k->type == 'l')
    *(int64_t *)(void *)slot = v;
  else
    *(size_t *)(void *)slot = (size_t)v;
}

/* "panel": {"listen": ADDRESS, "max_connections": N}: a loopback address
 * only, checked here so that a configuration that would expose the panel
 * is refused before anything starts. */
static int read_panel(const char *path, json_t *v, priv *p, shk_error *err)
{
  const char *key;
  json_t *x;
  if (!json_is_object(v))
    return shk__error_set(err, -EINVAL, "%s: 'panel' must be an object, such as {\"listen\": \"127.0.0.1:0\"}", path);
  json_object_foreach(v, key, x) {
    if (!strcmp(key, "max_connections")) {
      json_int_t n = json_integer_value(x);
      if (!json_is_integer(x) || n < 1 || n > 100000)
        return shk__error_set(err, -EINVAL, "%s: 'panel.max_connections' must be a whole number from 1 to 100000",
                              path);
      p->panel_max_connections = (unsigned)n;
    } else if (strcmp(key, "listen")) {
      return shk__error_set(err, -EINVAL, "%s: unknown key 'panel.%s'", path, key);
    }
  }
  const char *listen = json_string_value(json_object_get(v, "listen"));
  if (!listen || !*listen)
    return shk__error_set(err, -EINVAL, "%s: 'panel.listen' must be an address, such as \"127.0.0.1:0\"", path);
  shk_error lerr;
  if (shk_manager_panel_listen_check(listen, &lerr))
    return shk__error_set(err, -EINVAL, "%s: %s", path, lerr.message);
  free(p->panel_listen);
  if (!(p->panel_listen = strdup(listen)))
    return shk__error_set(err, -ENOMEM, "out of memory");
  return 0;
}

static int read_config(const char *path, priv *p, shk_manager_opts *o, shk_error *err)
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
    if (!strcmp(key, "panel")) {
      if ((r = read_panel(path, v, p, err)))
        break;
      continue;
    }
    char **slot = !strcmp(key, "policy_dir") ? &p->policy_dir
                : !strcmp(key, "manifest") ? &p->manifest
                : !strcmp(key, "session_policy") ? &p->session_policy
                : !strcmp(key, "standing") ? &p->standing
                : !strcmp(key, "state_dir") ? &p->state_dir
                : !strcmp(key, "device_root") ? &p->device_root
                : !strcmp(key, "audit_db") ? &p->audit_db
                : !strcmp(key, "socket") ? &p->socket : NULL;
    const int_key *ik = NULL;
    for (size_t i = 0; !slot && !ik && i < sizeof int_keys / sizeof int_keys[0]; i++)
      if (!strcmp(key, int_keys[i].name))
        ik = &int_keys[i];
    if (ik) {
      if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > ik->max) {
        r = shk__error_set(err, -EINVAL, "%s: '%s' must be a whole number from 1 to %lld", path, key, ik->max);
        break;
      }
      set_int(o, ik, json_integer_value(v));
      continue;
    }
    if (!slot || !json_is_string(v) || !*json_string_value(v)) {
      r = shk__error_set(err, -EINVAL, "%s: %s '%s'", path, slot ? "expected a non-empty string for" : "unknown key",
                         key);
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

/* The policy decides what every agent may do, so it is read only from a
 * place someone chose: the configuration, the environment of whoever
 * started the manager, or the installed copy. Never a path baked in at
 * build time: a binary built in a shared directory would load whatever
 * another user put there. 0 or -ENOMEM. */
static int policy_place(priv *p)
{
  const char *env = getenv("SHINKEN_POLICY_DIR");
  if (!p->policy_dir && !(p->policy_dir = strdup(env && *env ? env : SHK_POLICY_DIR_INSTALLED)))
    return -ENOMEM;
  if (!p->manifest && asprintf(&p->manifest, "%s/manifests/default.json", p->policy_dir) < 0) {
    p->manifest = NULL;
    return -ENOMEM;
  }
  return 0;
}

int shk_manager_config_load(const char *path, shk_manager_config *c, shk_error *err)
{
  memset(c, 0, sizeof *c);
  priv *p = calloc(1, sizeof *p);
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory");
  c->priv = p;
  int r = path ? read_config(path, p, &c->opts, err) : 0;
  if (!r)
    r = policy_place(p);
  if (!r && !p->socket && !(p->socket = strdup(shk_manager_socket_path())))
    r = -ENOMEM;
  const char *path_env = getenv("PATH");
  if (!r && path_env && !(p->exec_path = strdup(path_env)))
    r = -ENOMEM;
  /* No home, no default store: audit_db stays NULL, and the caller says
   * whether it can run without one (the daemon cannot). */
  char db[4096];
  if (!r && !p->audit_db && shk_audit_default_path(false, db, sizeof db, NULL) == 0 && !(p->audit_db = strdup(db)))
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
  c->opts.exec_path = p->exec_path;
  c->opts.state_dir = p->state_dir;
  c->opts.device_root = p->device_root;
  c->opts.audit_db = p->audit_db;
  c->opts.socket = p->socket;
  c->opts.panel_listen = p->panel_listen;
  c->opts.panel_max_connections = p->panel_max_connections;
  c->socket = p->socket;
  return 0;
}

void shk__layers_request(const char *const *layers, size_t n_layers, bool on_command_line, int64_t now,
                         shk_policy_session *s, shk_policy_request *req)
{
  /* The operator at their own command line: the highest trust tier, for
   * the one command they are starting. */
  *s = (shk_policy_session){ .id = "operator", .trust_tier = "high", .expires_ms = now + 24LL * 3600 * 1000 };
  *req = (shk_policy_request){
    .kind = SHK_POLICY_DISABLE, .layers = layers, .n_layers = n_layers,
    .approval = on_command_line ? SHK_POLICY_APPROVED : SHK_POLICY_UNASKED, .now_ms = now,
  };
}

int shk_manager_decide_layers(const char *const *layers, size_t n_layers, bool approved,
                              shk_policy_answer *ans, shk_error *err)
{
  memset(ans, 0, sizeof *ans);
  ans->verdict = SHK_POLICY_DENY;
  priv p = { 0 };
  int r = policy_place(&p);
  shk_policy *pol = NULL;
  shk_policy_source src = { p.policy_dir, p.manifest, NULL, shk__self_uid() };
  r = r ? shk__error_set(err, r, "out of memory") : shk_policy_load(&src, &pol, err);
  free(p.policy_dir);
  free(p.manifest);
  if (r)
    return r;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  shk_policy_session s;
  shk_policy_request req;
  shk__layers_request(layers, n_layers, approved, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, &s, &req);
  r = shk_policy_decide(pol, &s, &req, ans, err);
  shk_policy_free(pol);
  return r;
}

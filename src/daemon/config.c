/* The manager's configuration file. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/daemon.h"

typedef struct priv {
  char *policy_dir, *manifest, *session_policy, *standing, *event_log, *socket;
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
    free(p);
  }
  memset(c, 0, sizeof *c);
}

int shk_manager_config_load(const char *path, shk_manager_config *c, char *err, size_t errlen)
{
  memset(c, 0, sizeof *c);
  priv *p = shk__xcalloc(1, sizeof *p);
  c->priv = p;
  if (path) {
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
      snprintf(err, errlen, "%s: %s", path, root ? "must be a JSON object" : jerr.text);
      json_decref(root);
      shk_manager_config_clear(c);
      return -EINVAL;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
      char **slot = !strcmp(key, "policy_dir") ? &p->policy_dir
                  : !strcmp(key, "manifest") ? &p->manifest
                  : !strcmp(key, "session_policy") ? &p->session_policy
                  : !strcmp(key, "standing") ? &p->standing
                  : !strcmp(key, "event_log") ? &p->event_log
                  : !strcmp(key, "socket") ? &p->socket : NULL;
      if (!slot || !json_is_string(v)) {
        snprintf(err, errlen, "%s: %s '%s'", path, slot ? "expected a string for" : "unknown key", key);
        json_decref(root);
        shk_manager_config_clear(c);
        return -EINVAL;
      }
      *slot = shk__xstrdup(json_string_value(v));
    }
    json_decref(root);
  }
  if (!p->policy_dir) {
    /* The source tree's policies when this binary was built there and can
     * read them, else the installed copy. */
    const char *env = getenv("SHINKEN_POLICY_DIR");
    const char *dir = env && *env ? env
                    : access(SHK_POLICY_DIR "/schema.cedarschema", R_OK) == 0 ? SHK_POLICY_DIR
                    : SHK_POLICY_DIR_INSTALLED;
    p->policy_dir = shk__xstrdup(dir);
  }
  if (!p->manifest)
    p->manifest = shk__xasprintf("%s/manifests/default.json", p->policy_dir);
  if (!p->socket)
    p->socket = shk__xstrdup(shk_manager_socket_path());
  c->opts.policy_dir = p->policy_dir;
  c->opts.manifest = p->manifest;
  c->opts.session_policy = p->session_policy;
  c->opts.standing = p->standing;
  c->opts.event_log = p->event_log;
  c->socket = p->socket;
  return 0;
}

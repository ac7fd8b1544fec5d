/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken run`'s side of live filesystem unlocks: the Landlock ceiling
 * (what the image manifest lets any fs.scope or persistence grant ever
 * make writable),
 * read before the sandbox starts, and the report of the started sandbox
 * that the session's manager mounts grants into. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "shinken/manager.h"
#include "shinken/policy.h"
#include "shinken/sandbox.h"

/* Safe because it only widens Landlock to what the manifest says a grant
 * may ever reach (entries of tier Block grant nothing and are skipped),
 * never to more; the manifest is read like every file that decides
 * authority (shk_policy_read_file: no one but root and this user could
 * have written it). Any failure leaves the ceiling empty: Landlock then
 * allows the writable roots alone and a live write grant is refused by
 * Landlock inside, which fails closed. */
void shk_cli_fs_ceiling(shk_sandbox_opts *o)
{
  shk_manager_config mc;
  shk_error err;
  if (shk_manager_config_load(NULL, &mc, &err) < 0)
    return;
  char *text = NULL;
  int r = mc.opts.manifest ? shk_policy_read_file(mc.opts.manifest, getuid(), &text, &err) : -ENOENT;
  shk_manager_config_clear(&mc);
  if (r < 0)
    return;
  json_t *root = json_loads(text, 0, NULL);
  free(text);
  json_t *caps = json_object_get(root, "capabilities"), *c;
  size_t i;
  json_array_foreach(caps, i, c) {
    const char *cls = json_string_value(json_object_get(c, "class"));
    const char *tier = json_string_value(json_object_get(c, "tier"));
    /* A persistence grant writes too (into its overlay): its paths are
     * part of the ceiling like fs.scope's write paths. */
    bool fs = cls && !strcmp(cls, "fs.scope"), persist = cls && !strcmp(cls, "persistence");
    if ((!fs && !persist) || !tier || !strcmp(tier, "Block"))
      continue;
    json_t *w = json_object_get(json_object_get(c, "scope"), fs ? "write" : "paths"), *p;
    size_t j;
    json_array_foreach(w, j, p) {
      const char *path = json_string_value(p);
      char **nv = path && path[0] == '/' ? realloc(o->ceiling.v, (o->ceiling.n + 1) * sizeof *nv) : NULL;
      if (!nv)
        continue;
      o->ceiling.v = nv;
      if ((nv[o->ceiling.n] = strdup(path)))
        o->ceiling.n++;
    }
  }
  json_decref(root);
}

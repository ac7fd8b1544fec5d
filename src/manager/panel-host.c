/* SPDX-License-Identifier: Apache-2.0 */
/* The panel's Host view: what this host enforces for a sandbox started
 * with the defaults (the same assessment `shinken doctor` and `shinken
 * run` make), and which capability classes the manager can grant to a
 * running sandbox, and by what. A class with no mechanism is said to have
 * none: the page never implies a guarantee the host cannot keep. */
#include <stdio.h>
#include <string.h>

#include "manager/manager-internal.h"
#include "manager/panel-internal.h"
#include "shinken/cap.h"
#include "shinken/sandbox.h"

json_t *shk__panel_host(void)
{
  shk_sandbox_env env;
  shk_error err;
  if (shk_sandbox_env_from_process(&env, &err))
    return json_pack("{s:b, s:s}", "ok", 0, "error", err.message);
  shk_sandbox_features f;
  if (shk_sandbox_features_detect(&f, &env, SHK_DETECT_CGROUP | SHK_DETECT_USERNS_TRY) < 0) {
    shk_sandbox_env_free(&env);
    return NULL;
  }
  shk_sandbox_assessment a;
  shk_sandbox_assess(&f, &env, NULL, &a);
  json_t *classes = json_array(), *live = json_array();
  bool ok = classes && live;
  for (int i = 0; ok && i < SHK_SANDBOX_CLASS_N; i++) {
    const shk_sandbox_class *c = &a.classes[i];
    ok = !json_array_append_new(classes, json_pack("{s:s, s:s, s:s?, s:s?}", "class", c->name, "level",
                                                   shk_sandbox_level_name(c->level), "mechanism",
                                                   c->mechanism[0] ? c->mechanism : NULL, "missing",
                                                   c->missing[0] ? c->missing : NULL));
  }
  /* The same answer a grant gets (shk_manager_class_mechanism): the page
   * never shows a class as grantable that the manager would refuse. */
  for (int i = 0; ok && i < SHK_CAP__COUNT; i++) {
    char buf[256];
    int has = shk_manager_class_mechanism((shk_cap_class)i, buf, sizeof buf);
    ok = !json_array_append_new(live, json_pack("{s:s, s:s?, s:s?}", "class", shk_cap_class_name((shk_cap_class)i),
                                                "mechanism", has > 0 ? buf : NULL, "missing",
                                                has > 0 ? NULL : buf));
  }
  json_t *ans = NULL;
  if (ok)
    ans = json_pack("{s:b, s:o, s:o, s:s?, s:b}", "ok", 1, "sandbox", classes, "live", live, "fatal",
                    a.fatal[0] ? a.fatal : NULL, "can_run", !a.fatal[0] && a.ngaps == 0);
  else {
    json_decref(classes);
    json_decref(live);
  }
  shk_sandbox_features_free(&f);
  shk_sandbox_env_free(&env);
  return ans;
}

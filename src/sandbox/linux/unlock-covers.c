/* SPDX-License-Identifier: Apache-2.0 */
/* What stays protected inside a tree granted to a running sandbox: the
 * same protections a sandbox started with that tree as a root would get,
 * taken from the one plan builder (plan.c, repos.c, protected.c), so a
 * live grant can never expose what a fresh run would hide. */
#include "sandbox-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "shinken/match.h"
#include "shinken/sandbox.h"

int shk_sandbox_unlock_covers(const char *path, bool write, const shk_sandbox_env *env,
                              shk_sandbox_plan *plan, shk_sandbox_cover **covers, size_t *n,
                              shk_error *err)
{
  *covers = NULL;
  *n = 0;
  memset(plan, 0, sizeof *plan);
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  char *v[1] = { (char *)path };
  if (write)
    o.write = (shk_sandbox_paths){ v, 1 };
  else
    o.read = (shk_sandbox_paths){ v, 1 };
  int r = shk_sandbox_plan_build(&o, env, plan, err);
  if (r < 0)
    return r;
  shk_sandbox_cover *c = calloc(plan->n + 1, sizeof *c);
  if (!c) {
    shk_sandbox_plan_free(plan);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < plan->n; i++) {
    const shk_sandbox_rule *rule = &plan->rules[i];
    /* A protection on the path itself, or above it, refuses the grant: a
     * denied tree is never mounted in, whatever the grant says. */
    if (rule->access == SHK_ACCESS_DENY && shk_path_within(path, rule->path)) {
      free(c);
      r = shk__error_set(err, -EPERM, "%s is protected (%s is hidden from every sandbox) and cannot be granted",
                         path, rule->path);
      shk_sandbox_plan_free(plan);
      return r;
    }
    if (!strcmp(rule->path, path) || !shk_path_within(rule->path, path))
      continue;
    /* In a read-only tree only what is hidden matters; in a writable one
     * also what must stay read-only or in place. */
    if (rule->access != SHK_ACCESS_DENY && !write)
      continue;
    shk_sandbox_cover *k = &c[*n];
    switch (rule->kind) {
    case SHK_MOUNT_TMPFS: k->kind = SHK_SANDBOX_COVER_MASK; k->dir = true; break;
    case SHK_MOUNT_DEV_NULL: k->kind = SHK_SANDBOX_COVER_MASK; break;
    case SHK_MOUNT_FILE: k->kind = SHK_SANDBOX_COVER_TEXT; k->text = rule->text ? rule->text : ""; break;
    case SHK_MOUNT_PIN: k->kind = SHK_SANDBOX_COVER_PIN; break;
    case SHK_MOUNT_BIND_RO: k->kind = SHK_SANDBOX_COVER_RO; break;
    case SHK_MOUNT_BIND_RW: continue;
    }
    /* Only a writable grant lets the workload create what is missing. */
    k->create = write && rule->created;
    k->path = rule->path;
    (*n)++;
  }
  *covers = c;
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Policy metadata for embedders: ids, effects and annotations. The
 * capability manager names the deciding policy by its @id annotation. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cedar/cedar-internal.h"

static const shk__policy *at(const shk_cedar_policy_set *ps, size_t i)
{
  size_t n;
  shk__policy *const *v = shk__policy_set_policies(ps, &n);
  return i < n ? v[i] : NULL;
}

const char *shk_cedar_policy_id(const shk_cedar_policy_set *ps, size_t i)
{
  const shk__policy *p = at(ps, i);
  /* Ids are made by the engine ("policyN") or given by the linker as C
   * strings, so they are NUL-terminated in their arena. */
  return p ? p->id.p : NULL;
}

bool shk_cedar_policy_is_forbid(const shk_cedar_policy_set *ps, size_t i)
{
  const shk__policy *p = at(ps, i);
  return p && p->is_forbid;
}

int shk_cedar_policy_annotation(const shk_cedar_policy_set *ps, const char *policy_id,
                                const char *key, char *buf, size_t len)
{
  size_t n;
  shk__policy *const *v = shk__policy_set_policies(ps, &n);
  shk__str k = { key, strlen(key) }, id = { policy_id, strlen(policy_id) };
  for (size_t i = 0; i < n; i++) {
    if (!shk__str_eq(v[i]->id, id))
      continue;
    for (size_t j = 0; j < v[i]->n_annots; j++) {
      shk__str val = v[i]->annots[j].value;
      if (!shk__str_eq(v[i]->annots[j].key, k))
        continue;
      if (val.n && memchr(val.p, 0, val.n))
        return -EINVAL;
      if (len) {
        size_t c = val.n < len - 1 ? val.n : len - 1;
        if (c)
          memcpy(buf, val.p, c);
        buf[c] = '\0';
      }
      return (int)(val.n > INT32_MAX ? INT32_MAX : val.n);
    }
    return -ENOENT;
  }
  return -ENOENT;
}

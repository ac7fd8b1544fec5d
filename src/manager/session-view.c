/* SPDX-License-Identifier: Apache-2.0 */
/* The sessions listing's start report and frozen flag (session-view.h). */
#include "manager/session-view.h"

#include <errno.h>
#include <string.h>

#include "manager/manager-state.h"

static json_t *strarray(const char *const *v, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, json_string(v[i]))) {
      json_decref(a);
      return NULL;
    }
  return a;
}

bool shk__sandbox_limits_valid(json_t *limits)
{
  if (!json_is_object(limits))
    return false;
  const char *key;
  json_t *v;
  json_object_foreach(limits, key, v) {
    if (!strcmp(key, "net")) {
      const char *n = json_string_value(v);
      if (!n || (strcmp(n, "none") && strcmp(n, "proxy") && strcmp(n, "host")))
        return false;
    } else if (!strcmp(key, "cgroup")) {
      if (!json_is_boolean(v))
        return false;
    } else if (!strcmp(key, "memory") || !strcmp(key, "pids") || !strcmp(key, "cpu_milli")) {
      if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    } else {
      return false;
    }
  }
  return true;
}

void shk__sandbox_report_set(json_t **report, const char *const *enforced, size_t ne,
                             const char *const *degraded, size_t nd, json_t *limits,
                             const char *const *ceiling, size_t n_ceiling)
{
  json_decref(*report);
  json_t *e = strarray(enforced, ne), *d = strarray(degraded, nd), *c = strarray(ceiling, n_ceiling);
  json_t *l = limits ? json_deep_copy(limits) : json_null();
  /* json_pack's "o" takes every reference, also when it fails. */
  *report = e && d && c && l ? json_pack("{s:o, s:o, s:o, s:o}", "enforced", e, "degraded", d, "limits", l,
                                         "ceiling", c)
                             : NULL;
  if (!e || !d || !c || !l) {
    json_decref(e);
    json_decref(d);
    json_decref(c);
    json_decref(l);
  }
}

int shk__ask_sessions_frozen(shk_manager *m, json_t *a)
{
  size_t i;
  json_t *o;
  json_array_foreach(a, i, o) {
    const char *sid = json_string_value(json_object_get(o, "session"));
    /* A session the approve module does not know (none opened there) has
     * no breaker and cannot be taken over: it is not frozen. */
    int r = m->approve && sid ? shk_approve_session_frozen(m->approve, sid) : 0;
    if (json_object_set_new(o, "frozen", json_boolean(r > 0)))
      return -ENOMEM;
  }
  return 0;
}

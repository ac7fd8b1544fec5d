/* Shinken's grant decisions: the capability schema, the admin forbid tier,
 * and the question "may this grant be issued?" put to the Cedar engine.
 *
 * Three tiers of policy are loaded into one Cedar policy set: managed (the
 * admin tier, policies/admin.cedar), project, and session. Cedar's
 * forbid-overrides-permit makes every admin forbid final. A session's own
 * policies may only narrow, so the session tier accepts forbid policies
 * only: a permit there is an error, not a warning. */
#ifndef SHINKEN_POLICY_H
#define SHINKEN_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/cap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shk_policy shk_policy;

/* Loads schema.cedarschema, admin.cedar and project.cedar from `dir` (the
 * shipped policies/ directory, or the operator's copy), plus optional
 * session policy text. Every policy is validated against the schema; an
 * invalid policy is an error naming it. */
int shk_policy_load(const char *dir, const char *session_text, shk_policy **out,
                    char *err, size_t errlen);
void shk_policy_free(shk_policy *p);

typedef struct shk_policy_session {
  const char *id;           /* the session id */
  const char *trust_tier;   /* "low", "standard" or "high" */
  const char *model;        /* the agent's model, informational */
  int64_t expires_ms;       /* the session's end, ms since the epoch */
} shk_policy_session;

typedef struct shk_policy_grant {
  const shk_cap_scope *scope;
  shk_cap_tier tier;        /* from the manifest, after provenance promotion */
  const char *approval;     /* "none", "approved" or "denied" */
  bool external;            /* provenance: the request derives from external data */
  int64_t now_ms;
} shk_policy_grant;

typedef struct shk_policy_answer {
  bool allow;
  char policy[128];         /* the deciding policy's @id (or its Cedar id) */
  char why[512];            /* one line: what decided it */
} shk_policy_answer;

/* Decides a grant element by element: each domain, CIDR, port, path,
 * device, broker scope and flag of the scope is one Cedar request, and the
 * grant is allowed only when every element is. An empty scope is one
 * request about the class alone. Returns 0 when a decision was made (see
 * ans->allow), or a negative errno when the question could not be put (and
 * then nothing may be granted). */
int shk_policy_decide(shk_policy *p, const shk_policy_session *s, const shk_policy_grant *g,
                      shk_policy_answer *ans);

/* Decides whether a session may turn a layer of enforcement off
 * ("net-host", "degraded"). */
int shk_policy_decide_disable(shk_policy *p, const shk_policy_session *s, const char *setting,
                              int64_t now_ms, shk_policy_answer *ans);

#ifdef __cplusplus
}
#endif
#endif

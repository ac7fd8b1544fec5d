/* SPDX-License-Identifier: Apache-2.0 */
/* The authorizer: deny by default, forbid overrides permit, and a policy
 * whose evaluation errors is skipped and reported.
 *
 * Why this is safe: a decision is ALLOW only when at least one permit
 * policy was satisfied and no forbid policy was; an error in any policy can
 * only remove that policy's vote, never add one, so a malformed request or
 * store fails closed. Running out of memory is not a policy's error: it
 * ends the whole decision with -ENOMEM and DENY, so a forbid whose
 * evaluation could not finish is never skipped. */
#include <errno.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"

/* What a response keeps between calls, so that deciding allocates nothing
 * once the arrays have grown to the policy set. */
typedef struct resp_priv {
  shk__arena *scratch;
  size_t cap_reasons, cap_errors;
  const char **forbids;  /* satisfied forbids; the reasons hold permits */
  size_t n_forbids, cap_forbids;
  shk__cands cands;
} resp_priv;

static void push_id(const char ***v, size_t *n, size_t *cap, const char *id)
{
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 8;
    *v = shk__urealloc(*v, c, sizeof **v);
    *cap = c;
  }
  (*v)[(*n)++] = id;
}

static const shk_cedar_entities empty_store;

static void add_error(shk_cedar_response *resp, resp_priv *pv, const char *id, const char *msg)
{
  const char *copy = shk__arena_strndup(pv->scratch, msg, strlen(msg));
  if (resp->n_errors == pv->cap_errors) {
    size_t cap = pv->cap_errors ? pv->cap_errors * 2 : 8;
    resp->errors = shk__urealloc(resp->errors, cap, sizeof *resp->errors);
    pv->cap_errors = cap;
  }
  resp->errors[resp->n_errors++] = (shk_cedar_policy_error){ .policy_id = id, .message = copy };
}

typedef struct decision {
  const shk_cedar_policy_set *ps;
  const shk_cedar_entities *es;
  const shk_cedar_request *req;
  shk_cedar_response *resp;
} decision;

static int decide(void *ctx)
{
  const decision *d = ctx;
  const shk_cedar_policy_set *ps = d->ps;
  shk_cedar_response *resp = d->resp;
  resp_priv *pv = resp->priv;
  const shk_cedar_request *req = d->req;
  shk__eval ev = { .es = d->es ? d->es : &empty_store, .folds = &ps->folds, .scratch = pv->scratch };
  ev.vars[SHK__VAR_PRINCIPAL] = (shk__value){ .kind = SHK__V_ENTITY, .uid = &req->principal };
  ev.vars[SHK__VAR_ACTION] = (shk__value){ .kind = SHK__V_ENTITY, .uid = &req->action };
  ev.vars[SHK__VAR_RESOURCE] = (shk__value){ .kind = SHK__V_ENTITY, .uid = &req->resource };
  ev.vars[SHK__VAR_CONTEXT] = req->context;
  memcpy(ev.var_hash, req->hash, sizeof ev.var_hash);
  for (int v = 0; v < 3; v++)
    ev.var_ent[v] = shk__entities_find(ev.es, ev.vars[v].uid, ev.var_hash[v]);

  pv->n_forbids = 0;
  shk__policy_set_candidates(ps, &ev, &pv->cands);
  for (uint32_t k = 0; k < pv->cands.n; k++) {
    uint32_t i = pv->cands.v[k];
    int r = shk__eval_policy(&ev, ps->pols[i], &ps->hashes[i]);
    if (r == 1 && ps->pols[i]->is_forbid)
      push_id(&pv->forbids, &pv->n_forbids, &pv->cap_forbids, ps->ids[i]);
    else if (r == 1)
      push_id(&resp->reasons, &resp->n_reasons, &pv->cap_reasons, ps->ids[i]);
    else if (r < 0)
      add_error(resp, pv, ps->ids[i], ev.err.msg);
  }

  /* A satisfied forbid decides, and the forbids are then the reasons. */
  if (pv->n_forbids) {
    resp->n_reasons = 0;
    for (size_t k = 0; k < pv->n_forbids; k++)
      push_id(&resp->reasons, &resp->n_reasons, &pv->cap_reasons, pv->forbids[k]);
    return 0;
  }
  resp->decision = resp->n_reasons ? SHK_CEDAR_ALLOW : SHK_CEDAR_DENY;
  return 0;
}

int shk_cedar_is_authorized(const shk_cedar_policy_set *ps, const shk_cedar_entities *es,
                            const shk_cedar_request *req, shk_cedar_response *resp)
{
  resp->decision = SHK_CEDAR_DENY;
  resp->n_reasons = 0;
  resp->n_errors = 0;
  resp_priv *pv = resp->priv;
  if (!pv) {
    pv = shk__calloc(1, sizeof *pv);
    if (!pv || !(pv->scratch = shk__arena_new())) {
      free(pv);
      return -ENOMEM;
    }
    resp->priv = pv;
    resp->reasons = NULL;
    resp->errors = NULL;
  } else {
    shk__arena_reset(pv->scratch);
  }
  decision d = { ps, es, req, resp };
  int r = shk__oom_guard(decide, &d, NULL);
  if (r < 0) {
    /* Whatever was decided before memory ran out is not an answer. */
    resp->decision = SHK_CEDAR_DENY;
    resp->n_reasons = 0;
    resp->n_errors = 0;
  }
  return r;
}

void shk_cedar_response_clear(shk_cedar_response *resp)
{
  resp_priv *pv = resp->priv;
  if (pv) {
    shk__arena_free(pv->scratch);
    free(pv->forbids);
    free(pv->cands.v);
  }
  free(pv);
  free(resp->reasons);
  free(resp->errors);
  memset(resp, 0, sizeof *resp);
}

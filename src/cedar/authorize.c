/* The authorizer: deny by default, forbid overrides permit, and a policy
 * whose evaluation errors is skipped and reported.
 *
 * Why this is safe: a decision is ALLOW only when at least one permit
 * policy was satisfied and no forbid policy was; an error in any policy can
 * only remove that policy's vote, never add one, so a malformed request or
 * store fails closed. */
#include <string.h>

#include "cedar/cedar-eval-internal.h"

typedef struct resp_priv {
  shk__arena *scratch;
  size_t cap_reasons, cap_errors;
} resp_priv;

static const shk_cedar_entities empty_store;

static void add_error(shk_cedar_response *resp, resp_priv *pv, const char *id, const char *msg)
{
  if (resp->n_errors == pv->cap_errors) {
    pv->cap_errors = pv->cap_errors ? pv->cap_errors * 2 : 8;
    resp->errors = shk__xrealloc(resp->errors, pv->cap_errors * sizeof *resp->errors);
  }
  resp->errors[resp->n_errors++] = (shk_cedar_policy_error){
    .policy_id = id,
    .message = shk__arena_strndup(pv->scratch, msg, strlen(msg)),
  };
}

int shk_cedar_is_authorized(const shk_cedar_policy_set *ps, const shk_cedar_entities *es,
                            const shk_cedar_request *req, shk_cedar_response *resp)
{
  resp_priv *pv = resp->priv;
  if (!pv) {
    pv = shk__xcalloc(1, sizeof *pv);
    pv->scratch = shk__arena_new();
    resp->priv = pv;
    resp->reasons = NULL;
    resp->errors = NULL;
  } else {
    shk__arena_reset(pv->scratch);
  }
  resp->decision = SHK_CEDAR_DENY;
  resp->n_reasons = 0;
  resp->n_errors = 0;

  shk__eval ev = { .es = es ? es : &empty_store, .scratch = pv->scratch };
  ev.vars[SHK__VAR_PRINCIPAL] = (shk__value){ .kind = SHK__V_ENTITY, .uid = &req->principal };
  ev.vars[SHK__VAR_ACTION] = (shk__value){ .kind = SHK__V_ENTITY, .uid = &req->action };
  ev.vars[SHK__VAR_RESOURCE] = (shk__value){ .kind = SHK__V_ENTITY, .uid = &req->resource };
  ev.vars[SHK__VAR_CONTEXT] = req->context;
  memcpy(ev.var_hash, req->hash, sizeof ev.var_hash);

  /* Satisfied permits are listed from the front of `hit`, satisfied
   * forbids from the back. */
  size_t n_permit = 0, n_forbid = 0;
  uint32_t *hit = shk__arena_alloc(pv->scratch, (ps->n ? ps->n : 1) * sizeof *hit);
  size_t words = (ps->n + 63) / 64;
  uint64_t *cand = shk__arena_calloc(pv->scratch, (words ? words : 1) * sizeof *cand);
  shk__policy_set_candidates(ps, ev.es, req, cand);
  for (size_t w = 0; w < words; w++) {
    for (uint64_t bits = cand[w]; bits; bits &= bits - 1) {
      size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
      int r = shk__eval_policy(&ev, ps->pols[i], &ps->hashes[i]);
      if (r == 1 && ps->pols[i]->is_forbid)
        hit[ps->n - 1 - n_forbid++] = (uint32_t)i;
      else if (r == 1)
        hit[n_permit++] = (uint32_t)i;
      else if (r < 0)
        add_error(resp, pv, ps->ids[i], ev.err.msg);
    }
  }

  size_t n = n_forbid ? n_forbid : n_permit;
  if (n > pv->cap_reasons) {
    pv->cap_reasons = n * 2;
    resp->reasons = shk__xrealloc(resp->reasons, pv->cap_reasons * sizeof *resp->reasons);
  }
  for (size_t k = 0; k < n; k++)
    resp->reasons[k] = ps->ids[n_forbid ? hit[ps->n - 1 - k] : hit[k]];
  resp->n_reasons = n;
  resp->decision = !n_forbid && n_permit ? SHK_CEDAR_ALLOW : SHK_CEDAR_DENY;
  return 0;
}

void shk_cedar_response_clear(shk_cedar_response *resp)
{
  resp_priv *pv = resp->priv;
  if (pv)
    shk__arena_free(pv->scratch);
  free(pv);
  free(resp->reasons);
  free(resp->errors);
  memset(resp, 0, sizeof *resp);
}

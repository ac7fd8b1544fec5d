/* The policy set: policies, templates and template links in order, with
 * NUL-terminated ids ready for responses. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"

static void append(shk_cedar_policy_set *ps, shk__policy *p)
{
  if (ps->n == ps->cap) {
    ps->cap = ps->cap ? ps->cap * 2 : 16;
    ps->pols = shk__xrealloc(ps->pols, ps->cap * sizeof *ps->pols);
    ps->ids = shk__xrealloc(ps->ids, ps->cap * sizeof *ps->ids);
  }
  ps->pols[ps->n] = p;
  ps->ids[ps->n] = shk__arena_strndup(ps->arena, p->id.p, p->id.n);
  ps->n++;
}

int shk_cedar_policy_set_parse(const char *text, size_t len, shk_cedar_policy_set **out,
                               shk_cedar_error *err)
{
  *out = NULL;
  shk_cedar_policy_set *ps = shk__xcalloc(1, sizeof *ps);
  ps->arena = shk__arena_new();
  shk__policy **pols;
  size_t n;
  int r = shk__parse_policies(ps->arena, text, len, &pols, &n, err);
  if (r < 0) {
    shk_cedar_policy_set_free(ps);
    return r;
  }
  for (size_t i = 0; i < n; i++)
    append(ps, pols[i]);
  *out = ps;
  return 0;
}

void shk_cedar_policy_set_free(shk_cedar_policy_set *ps)
{
  if (!ps)
    return;
  free(ps->pols);
  free(ps->ids);
  shk__arena_free(ps->arena);
  free(ps);
}

size_t shk_cedar_policy_set_count(const shk_cedar_policy_set *ps)
{
  return ps->n;
}

shk__policy *const *shk__policy_set_policies(const shk_cedar_policy_set *ps, size_t *n)
{
  *n = ps->n;
  return ps->pols;
}

static int set_err(shk_cedar_error *err, const char *what, const char *id)
{
  if (err) {
    snprintf(err->message, sizeof err->message, "%s: %.200s", what, id);
    err->line = err->column = 0;
  }
  return -EINVAL;
}

int shk_cedar_policy_set_link(shk_cedar_policy_set *ps, const char *template_id,
                              const char *new_id, const char *principal,
                              const char *resource, shk_cedar_error *err)
{
  const shk__policy *tmpl = NULL;
  for (size_t i = 0; i < ps->n; i++) {
    if (strcmp(ps->ids[i], new_id) == 0)
      return set_err(err, "a policy with this id already exists", new_id);
    if (strcmp(ps->ids[i], template_id) == 0)
      tmpl = ps->pols[i];
  }
  if (!tmpl || !tmpl->is_template)
    return set_err(err, "no template with this id", template_id);
  shk__uid pu, ru;
  int r;
  if (principal &&
      (r = shk__parse_entity_ref(ps->arena, principal, strlen(principal), &pu, err)) < 0)
    return r;
  if (resource && (r = shk__parse_entity_ref(ps->arena, resource, strlen(resource), &ru, err)) < 0)
    return r;
  shk__str id = { shk__arena_strndup(ps->arena, new_id, strlen(new_id)), strlen(new_id) };
  shk__policy *linked;
  r = shk__link_template(ps->arena, tmpl, id, principal ? &pu : NULL, resource ? &ru : NULL,
                         &linked, err);
  if (r < 0)
    return r;
  append(ps, linked);
  return 0;
}

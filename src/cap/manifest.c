/* Tiers, provenance promotion and image manifests. */
#include "shinken/cap.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static const char *const tier_names[] = { "Auto", "Notify", "Ask", "Block" };

const char *shk_cap_tier_name(shk_cap_tier t)
{
  return (unsigned)t <= SHK_CAP_BLOCK ? tier_names[t] : NULL;
}

int shk_cap_tier_parse(const char *name, shk_cap_tier *out)
{
  for (int i = 0; i <= SHK_CAP_BLOCK; i++)
    if (!strcmp(name, tier_names[i])) {
      *out = (shk_cap_tier)i;
      return 0;
    }
  return -EINVAL;
}

/* Why: an agent that read attacker-controlled text may have been told what
 * to ask for. Promoting such a request puts a human (or at least a notice)
 * between the injected instruction and the effect. The combination of
 * untrusted input, sensitive data and a way out is the exfiltration shape,
 * so a data-leaving action of such a session always needs a human. */
shk_cap_tier shk_cap_effective_tier(shk_cap_tier base, bool external_provenance,
                                    const shk_cap_taint *taint, bool data_leaving)
{
  shk_cap_tier t = base;
  if (external_provenance && t < SHK_CAP_BLOCK)
    t = (shk_cap_tier)(t + 1);
  if (data_leaving && taint && taint->ingested_external && taint->touched_sensitive &&
      t < SHK_CAP_ASK)
    t = SHK_CAP_ASK;
  return t;
}

typedef struct entry {
  shk_cap_scope scope;
  shk_cap_tier tier;
} entry;

struct shk_cap_manifest {
  char *image;
  entry *entries;
  size_t n;
};

void shk_cap_manifest_free(shk_cap_manifest *m)
{
  if (!m)
    return;
  for (size_t i = 0; i < m->n; i++)
    shk_cap_scope_clear(&m->entries[i].scope);
  free(m->entries);
  free(m->image);
  free(m);
}

const char *shk_cap_manifest_image(const shk_cap_manifest *m)
{
  return m->image;
}

int shk_cap_manifest_parse(const char *json, shk_cap_manifest **out, char *err, size_t errlen)
{
  *out = NULL;
  json_error_t jerr;
  json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    snprintf(err, errlen, "manifest is not valid JSON: %s (line %d, column %d)", jerr.text,
             jerr.line, jerr.column);
    return -EINVAL;
  }
  shk_cap_manifest *m = shk__xcalloc(1, sizeof *m);
  int r = -EINVAL;
  const char *key;
  json_t *v, *caps = NULL;
  if (!json_is_object(root)) {
    snprintf(err, errlen, "manifest must be a JSON object");
    goto out;
  }
  json_object_foreach(root, key, v) {
    if (!strcmp(key, "image") && json_is_string(v)) {
      m->image = shk__xstrdup(json_string_value(v));
    } else if (!strcmp(key, "capabilities") && json_is_array(v)) {
      caps = v;
    } else {
      snprintf(err, errlen, strcmp(key, "image") && strcmp(key, "capabilities")
                              ? "manifest: unknown field '%s'" : "manifest: '%s' has the wrong type",
               key);
      goto out;
    }
  }
  if (!m->image || !caps) {
    snprintf(err, errlen, "manifest: 'image' and 'capabilities' are required");
    goto out;
  }
  m->entries = shk__xcalloc(json_array_size(caps) + 1, sizeof(entry));
  size_t i;
  json_t *e;
  json_array_foreach(caps, i, e) {
    const char *cls = NULL, *tier = NULL;
    json_t *scope = NULL;
    if (!json_is_object(e)) {
      snprintf(err, errlen, "capabilities[%zu]: expected an object", i);
      goto out;
    }
    json_object_foreach(e, key, v) {
      if (!strcmp(key, "class") && json_is_string(v))
        cls = json_string_value(v);
      else if (!strcmp(key, "tier") && json_is_string(v))
        tier = json_string_value(v);
      else if (!strcmp(key, "scope") && json_is_object(v))
        scope = v;
      else {
        snprintf(err, errlen, "capabilities[%zu]: unknown or mistyped field '%s'", i, key);
        goto out;
      }
    }
    shk_cap_class c;
    entry *en = &m->entries[m->n];
    if (!cls || shk_cap_class_parse(cls, &c)) {
      snprintf(err, errlen, "capabilities[%zu].class: expected one of the eight classes", i);
      goto out;
    }
    if (!tier || shk_cap_tier_parse(tier, &en->tier)) {
      snprintf(err, errlen, "capabilities[%zu].tier: expected Auto, Notify, Ask or Block", i);
      goto out;
    }
    char *text = scope ? json_dumps(scope, JSON_COMPACT) : shk__xstrdup("{}");
    shk_error serr;
    int pr = shk_cap_scope_parse(c, text, &en->scope, &serr);
    free(text);
    if (pr) {
      snprintf(err, errlen, "capabilities[%zu].scope: %s", i, serr.message);
      goto out;
    }
    m->n++;
  }
  r = 0;
out:
  json_decref(root);
  if (r)
    shk_cap_manifest_free(m);
  else
    *out = m;
  return r;
}

int shk_cap_manifest_check(const shk_cap_manifest *m, const shk_cap_scope *req,
                           shk_cap_tier *tier, char *why, size_t whylen)
{
  char last[256] = "the manifest lists no capability of this class";
  for (size_t i = 0; i < m->n; i++) {
    if (m->entries[i].scope.cls != req->cls)
      continue;
    shk_error serr;
    if (shk_cap_scope_subset(req, &m->entries[i].scope, &serr)) {
      *tier = m->entries[i].tier;
      return (int)i;
    }
    snprintf(last, sizeof last, "%.255s", serr.message);
  }
  snprintf(why, whylen, "outside the manifest of image %s: %s", m->image, last);
  return -EPERM;
}

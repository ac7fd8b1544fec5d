/* SPDX-License-Identifier: Apache-2.0 */
/* Image manifests: what an image may ever request, and at which tier. */
#include "policy/policy-internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

typedef struct entry {
  shk_cap_scope scope;
  shk_policy_tier tier;
} entry;

struct shk__manifest {
  char *image;
  entry *entries;
  size_t n;
};

void shk__manifest_free(shk__manifest *m)
{
  if (!m)
    return;
  for (size_t i = 0; i < m->n; i++)
    shk_cap_scope_clear(&m->entries[i].scope);
  free(m->entries);
  free(m->image);
  free(m);
}

const char *shk__manifest_image(const shk__manifest *m)
{
  return m->image;
}

/* One entry of "capabilities"; `i` is its index, for messages. */
static int parse_entry(json_t *e, size_t i, entry *en, shk_error *err)
{
  const char *cls = NULL, *tier = NULL, *key;
  json_t *v, *scope = NULL;
  if (!json_is_object(e))
    return shk__error_set(err, -EINVAL, "manifest: capabilities[%zu]: expected an object", i);
  json_object_foreach(e, key, v) {
    if (!strcmp(key, "class") && json_is_string(v))
      cls = json_string_value(v);
    else if (!strcmp(key, "tier") && json_is_string(v))
      tier = json_string_value(v);
    else if (!strcmp(key, "scope") && json_is_object(v))
      scope = v;
    else
      return shk__error_set(err, -EINVAL, "manifest: capabilities[%zu]: unknown or mistyped field '%s'",
                            i, key);
  }
  shk_cap_class c;
  if (!cls || shk_cap_class_parse(cls, &c))
    return shk__error_set(err, -EINVAL, "manifest: capabilities[%zu].class: expected one of the eight classes", i);
  if (!tier || shk_policy_tier_parse(tier, &en->tier))
    return shk__error_set(err, -EINVAL, "manifest: capabilities[%zu].tier: expected Auto, Notify, Ask or Block", i);
  char *text = scope ? json_dumps(scope, JSON_COMPACT) : strdup("{}");
  if (!text)
    return shk__error_set(err, -ENOMEM, "manifest: out of memory");
  shk_error serr;
  int r = shk_cap_scope_parse(c, text, &en->scope, &serr);
  free(text);
  if (r)
    return shk__error_set(err, r, "manifest: capabilities[%zu].scope: %s", i,
                          r == -ENOMEM ? "out of memory" : serr.message);
  return 0;
}

int shk__manifest_parse(const char *json, shk__manifest **out, shk_error *err)
{
  *out = NULL;
  json_error_t jerr;
  json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return shk__error_at(err, -EINVAL, NULL, (unsigned)jerr.line, (unsigned)jerr.column,
                         "manifest is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                         jerr.column);
  shk__manifest *m = calloc(1, sizeof *m);
  int r = m ? 0 : shk__error_set(err, -ENOMEM, "manifest: out of memory");
  const char *key;
  json_t *v, *caps = NULL;
  if (!r && !json_is_object(root))
    r = shk__error_set(err, -EINVAL, "manifest must be a JSON object");
  if (!r) {
    json_object_foreach(root, key, v) {
      if (!strcmp(key, "image") && json_is_string(v)) {
        if (!(m->image = strdup(json_string_value(v)))) {
          r = shk__error_set(err, -ENOMEM, "manifest: out of memory");
          break;
        }
      } else if (!strcmp(key, "capabilities") && json_is_array(v)) {
        caps = v;
      } else {
        r = shk__error_set(err, -EINVAL, strcmp(key, "image") && strcmp(key, "capabilities")
                                         ? "manifest: unknown field '%s'" : "manifest: '%s' has the wrong type",
                           key);
        break;
      }
    }
  }
  if (!r && (!m->image || !caps))
    r = shk__error_set(err, -EINVAL, "manifest: 'image' and 'capabilities' are required");
  if (!r && !(m->entries = calloc(json_array_size(caps) + 1, sizeof(entry))))
    r = shk__error_set(err, -ENOMEM, "manifest: out of memory");
  size_t i;
  json_t *e;
  if (!r) {
    json_array_foreach(caps, i, e) {
      if ((r = parse_entry(e, i, &m->entries[m->n], err)))
        break;
      m->n++;
    }
  }
  json_decref(root);
  if (r)
    shk__manifest_free(m);
  else
    *out = m;
  return r;
}

/* Whether a net.egress request whose domains hold a pattern admits a name
 * that Block entry E lists: each of E's names (a pattern's base, and one
 * name below it) is probed at the request's ports and E's. */
static bool pattern_reaches_block(const shk_cap_scope *req, const shk_cap_scope *e)
{
  uint16_t ports[16];
  size_t np = 0;
  ports[np++] = 0;
  for (size_t i = 0; i < req->n_ports && np < 8; i++)
    ports[np++] = req->ports[i].lo;
  for (size_t i = 0; i < e->n_ports && np < 16; i++)
    ports[np++] = e->ports[i].lo;
  for (size_t i = 0; i < e->domains.n; i++) {
    const char *d = e->domains.v[i];
    d += !strncmp(d, "**.", 3) ? 3 : !strncmp(d, "*.", 2) ? 2 : 0;
    char base[300], below[320];
    const char *colon = strchr(d, ':');
    size_t n = colon ? (size_t)(colon - d) : strlen(d);
    uint16_t own = colon ? (uint16_t)strtoul(colon + 1, NULL, 10) : 0;
    if (n >= sizeof base)
      continue;
    memcpy(base, d, n);
    base[n] = '\0';
    snprintf(below, sizeof below, "shinken-probe.%s", base);
    for (size_t k = 0; k <= np; k++) {
      uint16_t port = k < np ? ports[k] : own;
      if (shk_cap_scope_allows_host(req, base, port) || shk_cap_scope_allows_host(req, below, port))
        return true;
    }
  }
  return false;
}

static bool has_domain_pattern(const shk_cap_scope *req)
{
  for (size_t i = 0; i < req->domains.n; i++)
    if (strchr(req->domains.v[i], '*'))
      return true;
  return false;
}

int shk__manifest_check(const shk__manifest *m, const shk_cap_scope *req, shk_policy_tier *tier,
                        shk_error *err)
{
  /* A pattern is granted whole: if it admits any name a Block entry lists,
   * it is at Block, whichever entry comes first. Why: entries are matched
   * first to last, so an exact name listed at Block after a wider Ask entry
   * is the administrator's exception only for requests that name it; a
   * pattern that covers it would otherwise let it through under a handle
   * that no later check looks past. */
  if (req->cls == SHK_CAP_NET_EGRESS && has_domain_pattern(req))
    for (size_t i = 0; i < m->n; i++)
      if (m->entries[i].scope.cls == req->cls && m->entries[i].tier == SHK_POLICY_TIER_BLOCK &&
          pattern_reaches_block(req, &m->entries[i].scope)) {
        *tier = SHK_POLICY_TIER_BLOCK;
        return (int)i;
      }

  shk_error last;
  snprintf(last.message, sizeof last.message, "the manifest lists no capability of this class");
  for (size_t i = 0; i < m->n; i++) {
    if (m->entries[i].scope.cls != req->cls)
      continue;
    if (shk_cap_scope_subset(req, &m->entries[i].scope, &last)) {
      *tier = m->entries[i].tier;
      return (int)i;
    }
  }
  return shk__error_set(err, -EPERM, "outside the manifest of image %s: %s", m->image, last.message);
}

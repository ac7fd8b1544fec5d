/* SPDX-License-Identifier: Apache-2.0 */
/* Round trips over a directory of Cedar files (the conformance corpus):
 *   policies: text -> JSON -> text -> parse gives the same policies, and
 *             the formatter's output parses to the same policies;
 *   schemas:  text -> JSON -> text gives the same entity types and actions.
 * "The same" is judged on the JSON form of each, with sets of names
 * compared as sets. Prints the counts and exits 1 on any difference.
 *
 * usage: roundtrip DIR */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cedar/cedar-eval-internal.h"
#include "cli/die.h"
#include "common/common.h"
#include "shinken/cedar.h"

static int failed, passed;

static void fail(const char *file, const char *what, const char *detail)
{
  if (failed++ < 20)
    fprintf(stderr, "FAIL %s: %s%s%s\n", file, what, detail ? ": " : "", detail ? detail : "");
}

/* A canonical text of a JSON tree: object keys sorted, and arrays sorted
 * too, because the order of a schema's name lists carries no meaning. */
static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *canon(json_t *j)
{
  size_t n = json_is_object(j) ? json_object_size(j) : json_is_array(j) ? json_array_size(j) : 0;
  if (!json_is_object(j) && !json_is_array(j))
    return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
  char **parts = calloc(n + 1, sizeof *parts);
  size_t k = 0, total = 3;
  if (json_is_object(j)) {
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
      json_t *ks = json_stringn(key, json_object_iter_key_len(json_object_key_to_iter(key)));
      char *kt = json_dumps(ks, JSON_ENCODE_ANY), *vt = canon(v);
      parts[k] = shk__xasprintf("%s:%s", kt, vt);
      free(kt);
      free(vt);
      json_decref(ks);
      total += strlen(parts[k++]) + 1;
    }
  } else {
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) {
      parts[k] = canon(v);
      total += strlen(parts[k++]) + 1;
    }
  }
  qsort(parts, k, sizeof *parts, cmp_str);
  char *out = calloc(total, 1);
  strcat(out, json_is_object(j) ? "{" : "[");
  for (size_t i = 0; i < k; i++) {
    strcat(out, parts[i]);
    strcat(out, ",");
    free(parts[i]);
  }
  strcat(out, json_is_object(j) ? "}" : "]");
  free(parts);
  return out;
}

static char *canon_text(const char *json)
{
  json_t *j = shk__json_load(json, strlen(json), "schema JSON", NULL);
  char *s = j ? canon(j) : NULL;
  json_decref(j);
  return s;
}

static void policies(const char *path, const char *text, size_t len)
{
  shk_cedar_error err;
  shk_cedar_policy_set *p1 = NULL, *p2 = NULL, *p3 = NULL, *pf = NULL;
  char *j1 = NULL, *t2 = NULL, *j3 = NULL, *tf = NULL, *jf = NULL;
  if (shk_cedar_policy_set_parse(text, len, &p1, &err)) {
    fail(path, "does not parse", err.message);
    return;
  }
  j1 = shk_cedar_policy_set_to_json(p1);
  if (shk_cedar_policy_set_parse_json(j1, strlen(j1), &p2, &err)) {
    fail(path, "its JSON does not read back", err.message);
    goto out;
  }
  t2 = shk_cedar_policy_set_to_text(p2);
  if (shk_cedar_policy_set_parse(t2, strlen(t2), &p3, &err)) {
    fail(path, "text from its JSON does not parse", err.message);
    goto out;
  }
  j3 = shk_cedar_policy_set_to_json(p3);
  if (strcmp(j1, j3)) {
    fail(path, "text -> JSON -> text changed the policies", NULL);
    goto out;
  }
  tf = shk_cedar_policy_set_to_text(p1);
  if (shk_cedar_policy_set_parse(tf, strlen(tf), &pf, &err)) {
    fail(path, "formatted text does not parse", err.message);
    goto out;
  }
  jf = shk_cedar_policy_set_to_json(pf);
  if (strcmp(j1, jf)) {
    fail(path, "formatting changed the policies", NULL);
    goto out;
  }
  passed++;
out:
  free(j1);
  free(t2);
  free(j3);
  free(tf);
  free(jf);
  shk_cedar_policy_set_free(p1);
  shk_cedar_policy_set_free(p2);
  shk_cedar_policy_set_free(p3);
  shk_cedar_policy_set_free(pf);
}

static void schema(const char *path, const char *text, size_t len)
{
  shk_cedar_error err;
  shk_cedar_schema *s1 = NULL, *s2 = NULL, *s3 = NULL;
  char *j1 = NULL, *t2 = NULL, *j3 = NULL, *c1 = NULL, *c3 = NULL;
  if (shk_cedar_schema_parse(text, len, SHK_CEDAR_SCHEMA_TEXT, &s1, &err)) {
    fail(path, "schema does not parse", err.message);
    return;
  }
  j1 = shk_cedar_schema_to_json(s1);
  if (shk_cedar_schema_parse(j1, strlen(j1), SHK_CEDAR_SCHEMA_JSON, &s2, &err)) {
    fail(path, "schema JSON does not read back", err.message);
    goto out;
  }
  t2 = shk_cedar_schema_to_text(s2);
  if (shk_cedar_schema_parse(t2, strlen(t2), SHK_CEDAR_SCHEMA_TEXT, &s3, &err)) {
    fail(path, "schema text from its JSON does not parse", err.message);
    goto out;
  }
  j3 = shk_cedar_schema_to_json(s3);
  c1 = canon_text(j1);
  c3 = canon_text(j3);
  if (!c1 || !c3 || strcmp(c1, c3)) {
    fail(path, "schema text -> JSON -> text changed the schema", NULL);
    goto out;
  }
  passed++;
out:
  free(j1);
  free(t2);
  free(j3);
  free(c1);
  free(c3);
  shk_cedar_schema_free(s1);
  shk_cedar_schema_free(s2);
  shk_cedar_schema_free(s3);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: roundtrip DIR\n");
    return 2;
  }
  DIR *d = opendir(argv[1]);
  if (!d) {
    perror(argv[1]);
    return 2;
  }
  int n_pol = 0, n_sch = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t n = strlen(de->d_name);
    bool pol = n > 6 && !strcmp(de->d_name + n - 6, ".cedar");
    bool sch = n > 12 && !strcmp(de->d_name + n - 12, ".cedarschema");
    if (!pol && !sch)
      continue;
    char *path = shk__xasprintf("%s/%s", argv[1], de->d_name);
    char *text;
    size_t len;
    if (shk__read_file(path, &text, &len)) {
      fail(path, "unreadable", NULL);
    } else {
      if (pol) {
        n_pol++;
        policies(path, text, len);
      } else {
        n_sch++;
        schema(path, text, len);
      }
      free(text);
    }
    free(path);
  }
  closedir(d);
  printf("round trips: %d policy files, %d schema files: %d passed, %d failed\n", n_pol, n_sch, passed, failed);
  return failed || n_pol + n_sch == 0 ? 1 : 0;
}

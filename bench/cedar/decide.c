/* SPDX-License-Identifier: Apache-2.0 */
/* The decision alone: loads a workload directory (policies.cedar,
 * entities.json, optional schema.cedarschema, requests.jsonl), builds every
 * request once, then times shk_cedar_is_authorized over all of them, several
 * passes, and prints {"decisions","seconds","allow"}: CPU seconds for all
 * passes, allows in one pass. Uses only the public API, as an embedding
 * program would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shinken/cedar.h"

static char *slurp(const char *dir, const char *name, size_t *len)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0, r;
  char *buf = malloc(cap + 1);
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0)
    if ((n += r) == cap)
      buf = realloc(buf, (cap *= 2) + 1);
  fclose(f);
  if (!buf)
    return NULL;
  buf[n] = '\0';
  *len = n;
  return buf;
}

static void die(const char *what, const shk_error *err)
{
  fprintf(stderr, "decide: %s: %u:%u: %s\n", what, err->line, err->column, err->message);
  exit(1);
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: decide DIR PASSES\n");
    return 2;
  }
  const char *dir = argv[1];
  int passes = atoi(argv[2]);
  shk_error err = { 0 };
  size_t len;
  shk_cedar_schema *schema = NULL;
  char *text = slurp(dir, "schema.cedarschema", &len);
  if (text && shk_cedar_schema_parse(text, len, SHK_CEDAR_SCHEMA_TEXT, &schema, &err) < 0)
    die("schema", &err);
  free(text);
  shk_cedar_policy_set *ps = NULL;
  if (!(text = slurp(dir, "policies.cedar", &len)) || shk_cedar_policy_set_parse(text, len, &ps, &err) < 0)
    die("policies", &err);
  free(text);
  shk_cedar_entities *es = NULL;
  if (!(text = slurp(dir, "entities.json", &len)) || shk_cedar_entities_parse(text, len, schema, &es, &err) < 0)
    die("entities", &err);
  free(text);
  if (!(text = slurp(dir, "requests.jsonl", &len)))
    die("requests.jsonl", &err);
  size_t n = 0, cap = 1024;
  shk_cedar_request **reqs = malloc(cap * sizeof *reqs);
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (n == cap)
      reqs = realloc(reqs, (cap *= 2) * sizeof *reqs);
    if (shk_cedar_request_from_json(line, strlen(line), schema, schema != NULL, &reqs[n++], &err) < 0)
      die("request", &err);
  }
  free(text);

  shk_cedar_response resp = { 0 };
  size_t allow = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  for (int p = 0; p < passes; p++)
    for (size_t i = 0; i < n; i++) {
      if (shk_cedar_is_authorized(ps, es, reqs[i], &resp) < 0) {
        fprintf(stderr, "decide: request %zu could not be decided\n", i);
        return 1;
      }
      allow += p == 0 && resp.decision == SHK_CEDAR_ALLOW;
    }
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("{\"decisions\":%zu,\"seconds\":%.6f,\"allow\":%zu}\n", n * (size_t)passes, secs, allow);
  shk_cedar_response_clear(&resp);
  for (size_t i = 0; i < n; i++)
    shk_cedar_request_free(reqs[i]);
  free(reqs);
  shk_cedar_entities_free(es);
  shk_cedar_policy_set_free(ps);
  shk_cedar_schema_free(schema);
  return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's side of the scale benchmark. Loads a workload directory written
 * by scale-gen.js (policies.cedar, links.tsv, entities.json,
 * requests.jsonl), links the templates through the public API, builds every
 * request once, then times shk_cedar_is_authorized over them for PASSES
 * passes. Prints {"policies","load_seconds","decisions","seconds","allow",
 * "reasons"}: CPU seconds to parse the entity store, CPU seconds for all
 * passes, and the allows and reasons of the first CHECK requests (the same
 * requests the official engine decided, so the answers can be compared).
 *
 *   scale-decide DIR PASSES CHECK */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shinken/cedar.h"

static void fatal(const char *what, const char *why)
{
  fprintf(stderr, "scale-decide: %s: %s\n", what, why);
  exit(1);
}

/* The whole of DIR/NAME, NUL-terminated. */
static char *read_all(const char *dir, const char *name, size_t *len)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f || fseek(f, 0, SEEK_END) < 0)
    fatal(path, "cannot open");
  long size = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)size + 1);
  if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size)
    fatal(path, "cannot read");
  fclose(f);
  buf[size] = '\0';
  *len = (size_t)size;
  return buf;
}

static double cpu_now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
  if (argc != 4)
    fatal("usage", "scale-decide DIR PASSES CHECK");
  const char *dir = argv[1];
  int passes = atoi(argv[2]);
  size_t check = (size_t)atol(argv[3]);
  shk_error err = { 0 };
  size_t len;

  char *text = read_all(dir, "policies.cedar", &len);
  shk_cedar_policy_set *ps = NULL;
  if (shk_cedar_policy_set_parse(text, len, &ps, &err) < 0)
    fatal("policies", err.message);
  free(text);

  /* One link a line: template id, new id, principal, resource ("-": none). */
  text = read_all(dir, "links.tsv", &len);
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char *f[4], *s2 = NULL;
    for (int i = 0; i < 4; i++)
      if (!(f[i] = strtok_r(i ? NULL : line, "\t", &s2)))
        fatal("links.tsv", "a line needs four fields");
    if (shk_cedar_policy_set_link(ps, f[0], f[1], f[2], strcmp(f[3], "-") ? f[3] : NULL, &err) < 0)
      fatal("link", err.message);
  }
  free(text);

  text = read_all(dir, "entities.json", &len);
  shk_cedar_entities *es = NULL;
  double t0 = cpu_now();
  if (shk_cedar_entities_parse(text, len, NULL, &es, &err) < 0)
    fatal("entities", err.message);
  double load = cpu_now() - t0;
  free(text);

  text = read_all(dir, "requests.jsonl", &len);
  size_t n = 0, cap = 1024;
  shk_cedar_request **reqs = malloc(cap * sizeof *reqs);
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (n == cap && !(reqs = realloc(reqs, (cap *= 2) * sizeof *reqs)))
      fatal("requests", "out of memory");
    if (shk_cedar_request_from_json(line, strlen(line), NULL, false, &reqs[n++], &err) < 0)
      fatal("request", err.message);
  }
  free(text);

  shk_cedar_response resp = { 0 };
  size_t allow = 0, reasons = 0;
  t0 = cpu_now();
  for (int p = 0; p < passes; p++)
    for (size_t i = 0; i < n; i++) {
      if (shk_cedar_is_authorized(ps, es, reqs[i], &resp) < 0)
        fatal("decide", "a request could not be decided");
      if (p == 0 && i < check) {
        allow += resp.decision == SHK_CEDAR_ALLOW;
        reasons += resp.n_reasons;
      }
    }
  double secs = cpu_now() - t0;
  printf("{\"policies\":%zu,\"load_seconds\":%.6f,\"decisions\":%zu,\"seconds\":%.6f,"
         "\"allow\":%zu,\"reasons\":%zu}\n",
         shk_cedar_policy_set_count(ps), load, n * (size_t)passes, secs, allow, reasons);
  shk_cedar_response_clear(&resp);
  for (size_t i = 0; i < n; i++)
    shk_cedar_request_free(reqs[i]);
  free(reqs);
  shk_cedar_entities_free(es);
  shk_cedar_policy_set_free(ps);
  return 0;
}

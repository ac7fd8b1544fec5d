/* SPDX-License-Identifier: Apache-2.0 */
/* How much of the Cedar conformance corpus the analyzer covers.
 *
 * usage: bench-analysis-coverage ROOT LIST [--check MS]
 *
 * LIST names the corpus's test files (JSON, relative to ROOT), one per
 * line. For each test whose policies validate against its schema, the
 * policy set is prepared for analysis: covered, or refused with the
 * construct named (the refusals are tallied by message). With --check,
 * every covered set is also asked always-allows, always-denies and, for
 * each policy, never-errors, with a time limit of MS per check: every
 * counterexample found is decided by the engine before it is counted, so
 * a defect in the encoder shows as an error here. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "shinken/cedar.h"
#include "shinken/policy.h"

typedef struct tally {
  char *msg;
  unsigned n;
} tally;

static tally reasons[512];
static size_t n_reasons;

/* Refusal messages name the policy first; the tally keeps the rest. */
static void count(const char *msg)
{
  const char *p = strstr(msg, "): ");
  p = p ? p + 3 : msg;
  const char *q = strstr(p, ": ");
  if (q && strstr(msg, "policy") == msg && !strstr(msg, "("))
    p = q + 2;
  for (size_t i = 0; i < n_reasons; i++)
    if (!strcmp(reasons[i].msg, p)) {
      reasons[i].n++;
      return;
    }
  if (n_reasons < sizeof reasons / sizeof reasons[0])
    reasons[n_reasons++] = (tally){ strdup(p), 1 };
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: %s ROOT LIST [--check MS]\n", argv[0]);
    return 1;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *root = argv[1];
  unsigned check_ms = argc > 4 && !strcmp(argv[3], "--check") ? (unsigned)atoi(argv[4]) : 0;
  FILE *list = fopen(argv[2], "r");
  if (!list) {
    perror(argv[2]);
    return 1;
  }
  shk_analysis *an = NULL;
  shk_error err = { 0 };
  if (check_ms) {
    shk_analysis_options o = { .timeout_ms = check_ms };
    if (shk_analysis_open(&o, &an, &err) < 0) {
      fprintf(stderr, "%s\n", err.message);
      return 1;
    }
  }
  unsigned total = 0, invalid = 0, covered = 0, refused = 0, checks = 0, holds = 0, fails = 0,
           timeouts = 0, defects = 0, other = 0;
  double t0 = now();
  char line[4096];
  while (fgets(line, sizeof line, list)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0])
      continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", root, line);
    char *ttext = NULL;
    json_t *t = NULL;
    size_t tlen = 0;
    if (shk__read_file(path, &ttext, &tlen) == 0)
      t = shk_cedar_json_parse(ttext, tlen, &err);
    free(ttext);
    if (!t) {
      printf("ERROR %s: cannot read the test file\n", line);
      total++;
      invalid++;
      continue;
    }
    total++;
    const char *pp = json_string_value(json_object_get(t, "policies"));
    const char *sp = json_string_value(json_object_get(t, "schema"));
    char *ptext = NULL, *stext = NULL;
    snprintf(path, sizeof path, "%s/%s", root, pp ? pp : "");
    int r = pp ? shk__read_file(path, &ptext, NULL) : -ENOENT;
    snprintf(path, sizeof path, "%s/%s", root, sp ? sp : "");
    if (r == 0)
      r = sp ? shk__read_file(path, &stext, NULL) : -ENOENT;
    shk_cedar_schema *s = NULL;
    shk_cedar_policy_set *ps = NULL;
    size_t sn = sp ? strlen(sp) : 0;
    bool json_schema = sn > 5 && !strcmp(sp + sn - 5, ".json");
    if (r == 0)
      r = shk_cedar_schema_parse(stext, strlen(stext), json_schema ? SHK_CEDAR_SCHEMA_JSON : SHK_CEDAR_SCHEMA_TEXT,
                                 &s, &err);
    if (r == 0)
      r = shk_cedar_policy_set_parse(ptext, strlen(ptext), &ps, &err);
    shk_analysis_set *set = NULL;
    if (r == 0)
      r = shk_analysis_set_new(s, ps, &set, &err);
    if (r == -EINVAL || (r < 0 && r != -EOPNOTSUPP)) {
      invalid++;
    } else if (r == -EOPNOTSUPP) {
      refused++;
      count(err.message);
    } else {
      covered++;
      for (size_t q = 0; an && q < 2 + shk_cedar_policy_set_count(ps); q++) {
        shk_analysis_result res;
        shk_analysis_query query = q == 0 ? SHK_ANALYSIS_ALWAYS_ALLOWS : q == 1 ? SHK_ANALYSIS_ALWAYS_DENIES
                                                                       : SHK_ANALYSIS_NEVER_ERRORS;
        const char *pid = q >= 2 ? shk_cedar_policy_id(ps, q - 2) : NULL;
        r = shk_analysis_check(an, query, set, pid, NULL, NULL, NULL, &res, &err);
        checks++;
        if (r == 0) {
          if (res.holds)
            holds++;
          else
            fails++;
          shk_analysis_result_clear(&res);
        } else if (r == -ETIMEDOUT) {
          timeouts++;
        } else if (r == -EPROTO) {
          defects++;
          printf("DEFECT %s %s: %s\n", line, shk_analysis_query_name(query), err.message);
        } else {
          other++;
          printf("ERROR %s %s: %s\n", line, shk_analysis_query_name(query), err.message);
        }
      }
    }
    shk_analysis_set_free(set);
    shk_cedar_policy_set_free(ps);
    shk_cedar_schema_free(s);
    free(ptext);
    free(stext);
    json_decref(t);
  }
  fclose(list);
  double t1 = now();
  printf("corpus: %u test policy sets\n", total);
  printf("  invalid (do not parse or validate; nothing to analyse): %u\n", invalid);
  printf("  covered by the encoder: %u\n", covered);
  printf("  refused with the construct named: %u\n", refused);
  for (size_t i = 0; i < n_reasons; i++)
    printf("    %5u  %s\n", reasons[i].n, reasons[i].msg);
  if (an)
    printf("checks: %u (%u hold, %u counterexamples confirmed by the engine, %u timeouts, %u defects, "
           "%u other errors) in %.1f s\n", checks, holds, fails, timeouts, defects, other, t1 - t0);
  else
    printf("prepared in %.1f s\n", t1 - t0);
  shk_analysis_close(an);
  return defects || other ? 1 : 0;
}

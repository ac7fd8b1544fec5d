/* SPDX-License-Identifier: Apache-2.0 */
/* The panel's Timeline: the manager's audit store, read-only, as JSON for
 * the page: the latest events, one event's inclusion proof, and the
 * chain's verification. Nothing here writes to the store; the reader runs
 * beside the one writer (shinken/audit.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "manager/panel-internal.h"

static void hex32(const unsigned char b[32], char out[65])
{
  for (size_t i = 0; i < 32; i++)
    snprintf(out + 2 * i, 3, "%02x", b[i]);
}

typedef struct collect {
  json_t *events;
} collect;

static int one(void *data, uint64_t seq, const char *entry, size_t len, const unsigned char leaf[32])
{
  collect *c = data;
  json_t *o = json_loadb(entry, len, JSON_REJECT_DUPLICATES, NULL);
  /* An entry that is not JSON is shown as what it is: verification says
   * what is wrong with it. */
  if (!o)
    o = json_pack("{s:s}", "unreadable", "this entry is not valid JSON (the chain's verification says more)");
  json_t *row = o ? json_pack("{s:I, s:o}", "seq", (json_int_t)seq, "event", o) : NULL;
  if (!row || json_array_append_new(c->events, row))
    return -ENOMEM;
  return 0;
}

json_t *shk__panel_timeline(shk_audit_reader *r, uint64_t since, unsigned max)
{
  uint64_t count = 0;
  shk_error err;
  if (shk_audit_reader_count(r, &count, &err))
    return json_pack("{s:b, s:s}", "ok", 0, "error", err.message);
  uint64_t from = since;
  if (count > max && count - max > from)
    from = count - max;
  collect c = { json_array() };
  if (!c.events)
    return NULL;
  int rc = shk_audit_reader_scan(r, from, one, &c, &err);
  if (rc) {
    json_decref(c.events);
    return rc == -ENOMEM ? NULL : json_pack("{s:b, s:s}", "ok", 0, "error", err.message);
  }
  char *note = NULL;
  shk_audit_reader_checkpoint(r, &note, NULL);
  json_t *ans = json_pack("{s:b, s:I, s:I, s:o, s:s?}", "ok", 1, "count", (json_int_t)count, "from",
                          (json_int_t)from, "events", c.events, "checkpoint", note);
  free(note);
  return ans;
}

json_t *shk__panel_proof(shk_audit_reader *r, uint64_t seq)
{
  shk_audit_proof p;
  shk_error err;
  if (shk_audit_prove(r, seq, &p, &err))
    return json_pack("{s:b, s:s}", "ok", 0, "error", err.message);
  json_t *path = json_array();
  char h[65];
  for (size_t i = 0; path && i < p.path_len; i++) {
    hex32(p.path[i], h);
    if (json_array_append_new(path, json_string(h))) {
      json_decref(path);
      path = NULL;
    }
  }
  hex32(p.leaf, h);
  json_t *ans = path ? json_pack("{s:b, s:I, s:I, s:s, s:o, s:s}", "ok", 1, "seq", (json_int_t)p.seq, "tree_size",
                                 (json_int_t)p.tree_size, "leaf_hash", h, "path", path, "checkpoint", p.checkpoint)
                     : NULL;
  shk_audit_proof_clear(&p);
  return ans;
}

json_t *shk__panel_verify(const char *db)
{
  shk_audit_verify_opts o = { .db_path = db };
  shk_audit_report rep;
  shk_error err;
  if (shk_audit_verify(&o, &rep, &err))
    return json_pack("{s:b, s:s}", "ok", 0, "error", err.message);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return json_pack("{s:b, s:I, s:I, s:I, s:b, s:s?, s:I, s:I}", "ok", 1, "events", (json_int_t)rep.events,
                   "checkpoints", (json_int_t)rep.checkpoints, "checked_size", (json_int_t)rep.checked_size,
                   "tampered", rep.tampered, "problem", rep.tampered ? rep.problem : NULL, "problems",
                   (json_int_t)rep.problems, "verified_ms", (json_int_t)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000));
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Verification of a whole log (docs/audit.md, "Verifying").
 *
 * Every problem implicates a sequence number: the event itself for a bad
 * row, and for a checkpoint that fails the first event it was to vouch for
 * (the size of the last good checkpoint before it). The report names the
 * smallest. */
#include "audit/audit-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/common.h"

typedef struct vctx {
  const shk_audit_verify_opts *o;
  shk_audit_report *rep;
  shk__mt_tree tree;
  shk__hash prev, prev2;   /* the recomputed leaves of the rows one and two before */
  uint64_t expect;
  uint64_t *rowbad;        /* the seqs row checks implicated, ascending */
  size_t nrowbad;
  int err;
} vctx;

/* Whether a row check implicated an event in [from, to). */
static bool explained(const vctx *c, uint64_t from, uint64_t to)
{
  size_t lo = 0, hi = c->nrowbad;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->rowbad[mid] < from)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < c->nrowbad && c->rowbad[lo] < to;
}

/* One problem implicating seq. A row check's problem (row) names its event
 * and is remembered. A checkpoint's root or consistency problem spans
 * [seq, to): when a row check already named an event in that span, the
 * report keeps that precise name (the problem is still counted and shown).
 * A checkpoint's own damage (its signature, its size) passes to = seq,
 * which nothing explains. */
SHK_PRINTF(5, 6) static void problem(vctx *c, uint64_t seq, uint64_t to, bool row,
                                     const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  shk_audit_report *r = c->rep;
  if (row && !c->err) {
    size_t i = c->nrowbad;
    uint64_t *n = realloc(c->rowbad, (i + 1) * sizeof *n);
    if (!n) {
      c->err = -ENOMEM;
      return;
    }
    for (; i > 0 && n[i - 1] > seq; i--)
      n[i] = n[i - 1];
    n[i] = seq;
    c->rowbad = n;
    c->nrowbad++;
  }
  bool precise = row || !explained(c, seq, to);
  if (precise && (!r->tampered || seq < r->first_bad)) {
    r->first_bad = seq;
    snprintf(r->problem, sizeof r->problem, "%s", msg);
  }
  r->tampered = true;
  r->problems++;
  if (c->o->on_problem)
    c->o->on_problem(c->o->data, seq, msg);
}

static int row(void *data, uint64_t seq, const char *entry, size_t len, const unsigned char leaf[32])
{
  vctx *c = data;
  unsigned long long s = seq;
  c->rep->events++;
  if (seq != c->expect) {
    if (seq > c->expect)
      problem(c, c->expect, 0, true, "event %llu is missing (the next stored event is %llu)",
              (unsigned long long)c->expect, s);
    c->expect = seq;
  }
  c->expect++;
  shk__hash mine;
  shk__mt_leaf(entry, len, mine);
  bool leaf_ok = memcmp(mine, leaf, SHK__HASH) == 0;
  if (!leaf_ok)
    problem(c, seq, 0, true, "event %llu's leaf hash does not match its entry", s);
  shk_error e = { 0 };
  uint64_t inner = 0;
  shk__hash prev;
  if (shk__audit_entry_check(entry, len, &inner, prev, &e) < 0) {
    problem(c, seq, 0, true, "event %llu: %s", s, e.message);
  } else {
    if (inner != seq) {
      /* An event out of place names its place, unless it is the one
       * before's and links to the one before that: then everything from
       * the place before moved up, and that is where the log changed. */
      bool moved_up = inner + 1 == seq && !memcmp(prev, c->prev2, SHK__HASH);
      problem(c, moved_up ? seq - 1 : seq, 0, true, "event %llu's entry says it is event %llu",
              s, (unsigned long long)inner);
    } else if (memcmp(prev, c->prev, SHK__HASH)) {
      /* A broken link names the event before it, unless this event's own
       * bytes changed (its leaf hash says so). */
      problem(c, leaf_ok && seq ? seq - 1 : seq, 0, true,
              "event %llu's hash is not the one event %llu recorded", seq ? s - 1 : 0, s);
    }
  }
  memcpy(c->prev2, c->prev, SHK__HASH);
  memcpy(c->prev, mine, SHK__HASH);
  /* The tree is built from the entries as they are, so that a change no
   * row check sees (an entry rewritten with its hashes) still shows in the
   * checkpoints. */
  int r = shk__mt_tree_append(&c->tree, mine);
  return r ? (c->err = r) : 0;
}

/* Checks one checkpoint against the tree and its consistency with `good`,
 * the last checkpoint that held (size 0: none). A problem implicates
 * `from`, the first event it alone vouches for. Returns whether it holds. */
static bool check_cp(vctx *c, const char *what, const char *note, size_t n, int64_t size_col,
                     const shk__note_key *k, const char *origin, uint64_t from,
                     const shk__checkpoint *good, shk__checkpoint *cp)
{
  shk_error e = { 0 };
  if (shk__checkpoint_open(note, n, k, cp, &e) < 0) {
    problem(c, from, from, false, "%s: %s", what, e.message);
    return false;
  }
  unsigned long long sz = cp->size;
  if (size_col >= 0 && (uint64_t)size_col != cp->size) {
    problem(c, from, from, false, "%s is stored as size %lld but its note says %llu", what,
            (long long)size_col,
            sz);
    return false;
  }
  if (strcmp(cp->origin, origin)) {
    problem(c, from, from, false, "%s is for the log '%s', not '%s'", what, cp->origin, origin);
    return false;
  }
  if (cp->size > c->tree.size) {
    problem(c, c->tree.size, cp->size, false,
            "the log was truncated: it has %llu events but %s covers %llu",
            (unsigned long long)c->tree.size, what, sz);
    return false;
  }
  shk__hash root;
  shk__mt_tree_root(&c->tree, cp->size, root);
  if (memcmp(root, cp->root, SHK__HASH)) {
    problem(c, from, cp->size, false,
            "%s (size %llu) does not match the events: one of events %llu to %llu was "
            "changed, inserted or removed", what, sz, (unsigned long long)from, sz - 1);
    return false;
  }
  /* RFC 6962 consistency from the last good checkpoint, checked with the
   * verifier's algorithm against the two signed roots. */
  if (good->size > 0) {
    shk__hash *proof = NULL;
    size_t pn = 0;
    bool ok;
    if (good->size <= cp->size) {
      if (shk__mt_tree_consistency(&c->tree, good->size, cp->size, &proof, &pn) < 0) {
        c->err = -ENOMEM;
        return false;
      }
      ok = shk__mt_verify_consistency(good->size, cp->size, good->root, cp->root, proof, pn);
    } else {
      if (shk__mt_tree_consistency(&c->tree, cp->size, good->size, &proof, &pn) < 0) {
        c->err = -ENOMEM;
        return false;
      }
      ok = shk__mt_verify_consistency(cp->size, good->size, cp->root, good->root, proof, pn);
    }
    free(proof);
    if (!ok) {
      problem(c, from, cp->size, false, "%s is not consistent with the checkpoint of size %llu", what,
              (unsigned long long)good->size);
      return false;
    }
  }
  return true;
}

int shk_audit_verify(const shk_audit_verify_opts *o, shk_audit_report *rep, shk_error *err)
{
  memset(rep, 0, sizeof *rep);
  vctx c = { .o = o, .rep = rep };
  shk__note_key trusted;
  char keyp[4096];
  int r;
  if (o->verifier_key) {
    if ((r = shk__note_key_parse(o->verifier_key, strlen(o->verifier_key), &trusted, err)) < 0)
      return r;
  } else {
    if ((r = shk__audit_key_path(o->db_path, o->key_path, keyp, sizeof keyp, err)) < 0)
      return r;
    if ((r = shk__note_key_load(keyp, &trusted, err)) < 0)
      return r;
  }
  explicit_bzero(trusted.seed, sizeof trusted.seed);
  trusted.has_seed = false;

  shk__checkpoint outside = { 0 };
  if (o->checkpoint) {
    /* Malformed is bad input; well-formed but not signed by the key is a
     * finding, judged below. */
    if ((r = shk__checkpoint_open(o->checkpoint, strlen(o->checkpoint), NULL, &outside, err)) < 0)
      return r;
  }

  sqlite3 *db = NULL;
  if ((r = shk__audit_db_open(o->db_path, false, true, &db, err)) < 0)
    return r;
  char *origin = NULL, *vkey = NULL, *mine = NULL;
  uint64_t *sizes = NULL; /* the sizes of the good stored checkpoints, ascending */
  size_t nsizes = 0;
  r = shk__audit_meta_get(db, "origin", &origin, err);
  if (r == 0)
    r = shk__audit_meta_get(db, "key", &vkey, err);
  if (r == -ENOENT)
    r = shk__error_set(err, -EINVAL, "%s has no origin or key: it is not an audit log", o->db_path);
  if (r == 0 && shk__note_key_verifier(&trusted, &mine) < 0)
    r = -ENOMEM;
  if (r < 0)
    goto out;
  if (strcmp(vkey, mine))
    problem(&c, 0, 0, false, "the log records the key %s, but the trusted key is %s", vkey, mine);

  /* One read transaction: the events and the checkpoints are read from the
   * same snapshot even while a writer appends. */
  if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
    r = shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(db));
    goto out;
  }

  /* The events. */
  r = shk__audit_scan_db(db, 0, row, &c, err);
  if (r == 0 && c.err)
    r = c.err;
  if (r < 0)
    goto out;

  /* The stored checkpoints, in order of size. */
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT size, note FROM checkpoints ORDER BY size", -1, &st, NULL) !=
      SQLITE_OK) {
    r = shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(db));
    goto out;
  }
  shk__checkpoint good = { 0 }, cp;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && !c.err) {
    int64_t size = sqlite3_column_int64(st, 0);
    const char *note = sqlite3_column_blob(st, 1);
    char what[64];
    snprintf(what, sizeof what, "the checkpoint stored as size %lld", (long long)size);
    rep->checkpoints++;
    if (check_cp(&c, what, note ? note : "", (size_t)sqlite3_column_bytes(st, 1), size, &trusted,
                 origin, good.size, &good, &cp)) {
      uint64_t *ns = realloc(sizes, (nsizes + 1) * sizeof *sizes);
      if (!ns) {
        c.err = -ENOMEM;
        break;
      }
      sizes = ns;
      sizes[nsizes++] = cp.size;
      good = cp;
    }
  }
  sqlite3_finalize(st);
  if (c.err) {
    r = c.err;
    goto out;
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    r = shk__error_set(err, -EIO, "cannot read the audit log: %s", sqlite3_errmsg(db));
    goto out;
  }
  rep->checked_size = good.size;

  /* The checkpoint kept elsewhere: the log must still extend it, and the
   * latest stored checkpoint must be consistent with it. A problem
   * implicates the events after the last good stored checkpoint it
   * covers. */
  if (o->checkpoint) {
    uint64_t from = 0;
    for (size_t i = 0; i < nsizes && sizes[i] <= outside.size; i++)
      from = sizes[i];
    check_cp(&c, "the checkpoint kept elsewhere", o->checkpoint, strlen(o->checkpoint), -1,
             &trusted, origin, from, &good, &cp);
  }
  r = c.err;

out:
  free(origin);
  free(vkey);
  free(mine);
  free(sizes);
  free(c.rowbad);
  sqlite3_close(db);
  shk__mt_tree_free(&c.tree);
  return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The audit module's internals: the canonical serializer, the RFC 6962
 * tree, the signed-note format and the store, shared by its files, its unit
 * tests and its fuzzers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/audit.h"

#define SHK__HASH 32
typedef unsigned char shk__hash[SHK__HASH];

/* ------------------------------------------------------------------------
 * A growable byte buffer; every append returns 0 or -ENOMEM.
 */
typedef struct shk__abuf {
  char *p;
  size_t len, cap;
} shk__abuf;

int shk__abuf_add(shk__abuf *b, const void *p, size_t n);
int shk__abuf_str(shk__abuf *b, const char *s);
void shk__abuf_free(shk__abuf *b);

/* ------------------------------------------------------------------------
 * Canonical JSON (docs/audit.md, "Entries")
 */

/* Whether s[0..n) is valid UTF-8 (no overlong form, no surrogate, nothing
 * past U+10FFFF). */
bool shk__audit_utf8_valid(const char *s, size_t n);
/* Appends s as a canonical JSON string (RFC 8785 escaping). */
int shk__json_string(shk__abuf *b, const char *s, size_t n);

/* Serializes one packed event (the builder's buffer) with the envelope the
 * writer adds: its sequence number, its time and the previous leaf hash.
 * Returns 0, -ENOMEM, or -EINVAL for a buffer the builder did not make. */
int shk__audit_serialize(const unsigned char *rec, size_t len, int64_t time_ns, uint64_t seq,
                         const shk__hash prev, shk__abuf *out);

/* Checks that entry[0..n) is one canonical entry (a flat object of sorted,
 * distinct keys whose values are strings, integers, booleans or lists of
 * strings, in canonical form) and returns its "seq" and "prev". */
int shk__audit_entry_check(const char *entry, size_t n, uint64_t *seq, shk__hash prev,
                           shk_error *err);

/* The field table: name in the log and type ('s', 'i', 'a'). */
const char *shk__audit_field_name(int f);

/* RFC 3339 UTC with nanoseconds: "2006-01-02T15:04:05.000000000Z" (30 bytes
 * and a NUL). */
void shk__audit_time(int64_t ns, char out[31]);

/* ------------------------------------------------------------------------
 * RFC 6962 Merkle tree
 */
void shk__sha256(const void *p, size_t n, shk__hash out);
void shk__mt_leaf(const void *entry, size_t n, shk__hash out);
void shk__mt_node(const shk__hash l, const shk__hash r, shk__hash out);

/* The compact range of a tree: the roots of its perfect subtrees, largest
 * first (one per bit of size). Enough to append and to compute the root. */
typedef struct shk__mt_compact {
  uint64_t size;
  unsigned n;
  shk__hash h[64];
} shk__mt_compact;

void shk__mt_compact_append(shk__mt_compact *c, const shk__hash leaf);
void shk__mt_compact_root(const shk__mt_compact *c, shk__hash out);

/* A whole tree in memory: every perfect subtree's hash, level by level, so
 * that any root and any proof costs O(log n) lookups. */
typedef struct shk__mt_tree {
  uint64_t size;
  unsigned levels;
  shk__hash *level[64];
  uint64_t cap0;
} shk__mt_tree;

int shk__mt_tree_append(shk__mt_tree *t, const shk__hash leaf);
/* The root of the first `size` leaves (size <= t->size). */
void shk__mt_tree_root(const shk__mt_tree *t, uint64_t size, shk__hash out);
/* RFC 6962 PATH(index, D[0:size]) and PROOF(m, D[0:size]); *out is
 * malloc'd (NULL when empty). -EINVAL for indices out of range. */
int shk__mt_tree_inclusion(const shk__mt_tree *t, uint64_t index, uint64_t size,
                           shk__hash **out, size_t *n);
int shk__mt_tree_consistency(const shk__mt_tree *t, uint64_t m, uint64_t size, shk__hash **out,
                             size_t *n);
void shk__mt_tree_free(shk__mt_tree *t);

/* RFC 9162 section 2.1.3.2 and 2.1.4.2: true when the proof holds. */
bool shk__mt_verify_inclusion(uint64_t index, uint64_t size, const shk__hash leaf,
                              const shk__hash *path, size_t n, const shk__hash root);
bool shk__mt_verify_consistency(uint64_t size1, uint64_t size2, const shk__hash root1,
                                const shk__hash root2, const shk__hash *proof, size_t n);

/* ------------------------------------------------------------------------
 * Signed notes and checkpoints (C2SP signed-note, tlog-checkpoint)
 */

/* Standard base64 (RFC 4648 section 4) with padding. Decoding is strict:
 * no whitespace, canonical padding bits. Returns the decoded length or
 * -EINVAL. */
size_t shk__b64_encode(const unsigned char *p, size_t n, char *out);
long shk__b64_decode(const char *s, size_t n, unsigned char *out, size_t cap);

typedef struct shk__note_key {
  char name[256];
  uint32_t id;
  unsigned char pub[32];
  unsigned char seed[32];
  bool has_seed;
} shk__note_key;

/* key ID = SHA-256(name || 0x0A || 0x01 || public key)[:4], big-endian. */
uint32_t shk__note_key_id(const char *name, const unsigned char pub[32]);
/* Whether name is a valid key name: non-empty, no space, no '+', no
 * control character, UTF-8. */
bool shk__note_name_ok(const char *name, size_t n);
/* Parses a verifier key (NAME+HEX8+BASE64(0x01||pub)) or a signer key
 * (PRIVATE+KEY+NAME+HEX8+BASE64(0x01||seed)), checking the key ID. */
int shk__note_key_parse(const char *text, size_t n, shk__note_key *k, shk_error *err);
/* Formats the verifier key into a malloc'd string. */
int shk__note_key_verifier(const shk__note_key *k, char **out);
/* Generates a new key named name. */
int shk__note_key_generate(const char *name, shk__note_key *k, shk_error *err);
/* Loads a signer key file, refusing one that others may read. */
int shk__note_key_load(const char *path, shk__note_key *k, shk_error *err);
/* Writes a signer key file, 0600, failing if it exists. */
int shk__note_key_save(const char *path, const shk__note_key *k, shk_error *err);

/* Signs text (which ends in a newline) and appends the signed note (the
 * text, a blank line, one signature line) to out. */
int shk__note_sign(const shk__note_key *k, const char *text, size_t n, shk__abuf *out,
                   shk_error *err);

/* Parses a signed note and verifies the signature of key k (which must be
 * among its signatures; others are ignored; k NULL: parse only). The
 * signed text is note[0..*text_len). -EINVAL: malformed (err says where);
 * -EACCES: no valid signature by k. */
int shk__note_open(const char *note, size_t n, const shk__note_key *k, size_t *text_len,
                   shk_error *err);

/* A parsed checkpoint: its text (up to the blank line) and body. */
typedef struct shk__checkpoint {
  char origin[256];
  uint64_t size;
  shk__hash root;
  size_t text_len;           /* the signed text is note[0..text_len) */
} shk__checkpoint;

/* shk__note_open, and the checkpoint body in the note's text. */
int shk__checkpoint_open(const char *note, size_t n, const shk__note_key *k,
                         shk__checkpoint *cp, shk_error *err);
/* The checkpoint text for origin, size and root. */
int shk__checkpoint_text(const char *origin, uint64_t size, const shk__hash root,
                         shk__abuf *out);

/* ------------------------------------------------------------------------
 * The store
 */
typedef struct sqlite3 sqlite3;

/* Opens the SQLite store (creating its tables when create is true). */
int shk__audit_db_open(const char *path, bool create, bool readonly, sqlite3 **out,
                       shk_error *err);
/* The key file beside a database: DIR/audit.key. */
int shk__audit_key_path(const char *db_path, const char *key_path, char *out, size_t len,
                        shk_error *err);
/* Reads a meta value (malloc'd); -ENOENT when absent. */
int shk__audit_meta_get(sqlite3 *db, const char *key, char **out, shk_error *err);
/* shk_audit_reader_scan over an open database. */
int shk__audit_scan_db(sqlite3 *db, uint64_t from, shk_audit_read_fn fn, void *data,
                       shk_error *err);

/* For tests: holds the writer (it takes nothing from the queue) or lets it
 * go, so that a full queue can be made on purpose. */
void shk__audit_pause(shk_audit *a, bool paused);

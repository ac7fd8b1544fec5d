/* SPDX-License-Identifier: Apache-2.0 */
/* The secret broker: credentials the agent uses without holding them.
 *
 * A secret is a value (a token), the host pattern it is bound to, the header
 * that carries it ("Authorization: Bearer {}"), and optionally the name of
 * an environment variable in which sandboxes get a sentinel: a value of the
 * secret's shape, derived per session, that the proxy replaces with the
 * secret on the secret's hosts only.
 *
 * The store is one file encrypted with ChaCha20-Poly1305 under a key in a
 * 0600 file beside it (the format is in docs/broker.md). Decrypted values
 * live in memory that is locked (mlock), excluded from core dumps
 * (MADV_DONTDUMP) and wiped (OPENSSL_cleanse) when the store is freed; no
 * function here puts a value into an error message.
 *
 * The header rewriter, shk_broker_rewrite, is a pure function of the
 * request's headers and the secrets the request's session may use. */
#ifndef SHINKEN_BROKER_H
#define SHINKEN_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/common.h"
#include "shinken/egress.h"
#include "shinken/match.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SHK_BROKER_NAME_MAX 64    /* [A-Za-z0-9_.:-], first a letter or digit */
#define SHK_BROKER_VALUE_MAX 4096 /* printable ASCII without spaces */
#define SHK_BROKER_KEY_LEN 32     /* a per-session sentinel key */

typedef struct shk_broker_secret {
  const char *name;
  const char *host;        /* the pattern as given, canonical */
  shk_host_pattern pattern;
  const char *header_name; /* "Authorization" */
  const char *header_tmpl; /* "Bearer {}": the value's place is the one "{}" */
  const char *env;         /* the sentinel's variable; NULL: no sentinel */
  bool allow_plain_http;   /* inject over plain HTTP too (the operator opted in) */
  const char *value;       /* in locked memory; not NUL-terminated */
  size_t value_len;
} shk_broker_secret;

/* What shk_broker_store_add takes: the same fields as text. */
typedef struct shk_broker_spec {
  const char *name;
  const char *host;
  const char *header; /* "Name: template with {}" */
  const char *env;    /* NULL: none */
  bool allow_plain_http;
} shk_broker_spec;

typedef struct shk_broker_store shk_broker_store;

/* The store's directory: $XDG_STATE_HOME/shinken/broker (or
 * ~/.local/state/shinken/broker), /var/lib/shinken/broker for root; the
 * sandbox masks all three. */
int shk_broker_default_dir(char *buf, size_t len, shk_error *err);
/* Opens the store in DIR (created 0700 when CREATE is true; missing and not
 * CREATE: an empty store that cannot be saved). The key file is made on the
 * first save. Refuses a key or store file that is not a regular file owned
 * by the caller with mode 0600, or one that does not decrypt. */
int shk_broker_store_open(const char *dir, bool create, shk_broker_store **out, shk_error *err);
void shk_broker_store_free(shk_broker_store *st);
size_t shk_broker_store_count(const shk_broker_store *st);
const shk_broker_secret *shk_broker_store_get(const shk_broker_store *st, size_t i);
const shk_broker_secret *shk_broker_store_find(const shk_broker_store *st, const char *name);
/* Adds (or, with REPLACE, replaces) a secret; VALUE is copied into locked
 * memory. -EEXIST for a name already there without REPLACE, -EINVAL with
 * one sentence for a bad field (never quoting the value). */
int shk_broker_store_add(shk_broker_store *st, const shk_broker_spec *spec, const char *value,
                         size_t value_len, bool replace, shk_error *err);
/* -ENOENT when there is no such secret. */
int shk_broker_store_rm(shk_broker_store *st, const char *name, shk_error *err);
/* Writes the store atomically (a 0600 temporary file renamed over it). */
int shk_broker_store_save(shk_broker_store *st, shk_error *err);

/* Memory for a secret: locked, out of core dumps; NULL on failure (errno).
 * shk_broker_secure_free wipes it before it lets it go. */
void *shk_broker_secure_alloc(size_t len);
void shk_broker_secure_free(void *p, size_t len);

/* The sentinel of S under the session's KEY: as long as the value, with
 * the same leading prefix (up to the last '_' or '-' of its first 12
 * bytes, as in "ghp_" or "npm_"), and every other byte replaced by one of
 * its own class (digit, lower, upper; other bytes kept), from
 * HMAC-SHA256(KEY, name). OUT holds value_len + 1 bytes. -EINVAL when the
 * value is too short to give a sentinel that cannot be the secret. */
int shk_broker_sentinel(const shk_broker_secret *s, const uint8_t key[SHK_BROKER_KEY_LEN], char *out,
                        size_t out_len);

/* One secret a session may use, as the rewriter sees it: LIVE is false once
 * the credentials handle that gave it is revoked (its sentinel is still
 * recognized, and refused, but never replaced). */
typedef struct shk_broker_use {
  const shk_broker_secret *secret;
  const char *sentinel; /* NULL: the secret has no --env */
  size_t sentinel_len;
  bool live;
  bool revoked; /* was live, and its handle is revoked or expired */
} shk_broker_use;

/* The header rewriter: for REQ (its host, port, tls and headers) and the
 * secrets the session may use, as shk_egress_rewrite_fn defines the
 * result. For every live secret whose pattern matches the request's
 * host and port it drops the client's Authorization and the secret's own
 * header, replaces its sentinel wherever it stands and adds the secret's
 * header. Refused (-EACCES, *reason a static token; *hit the use that
 * caused it): a sentinel in a field name, or sent to a host its secret is
 * not bound to, or of a use that is not live ("broker-sentinel-refused"), and an injection over plain
 * HTTP the secret was not opted in for ("broker-plain-http"); and with
 * -ECONNABORTED ("broker-revoked") a request to the host of a revoked use
 * (the connection is closed). Nothing to do:
 * 0 with *out NULL. INJECTED (may be NULL, else n_uses entries) says,
 * on success, which uses were injected. */
int shk_broker_rewrite(const shk_broker_use *uses, size_t n_uses, const shk_egress_http_request *req,
                       shk_egress_header **out, size_t *n_out, const char **reason,
                       const shk_broker_use **hit, bool *injected);

#ifdef __cplusplus
}
#endif
#endif

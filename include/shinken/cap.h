/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's caretaker layer: the capability grammar every layer shares and
 * the table of live handles. (Tiers, provenance and image manifests are
 * part of the decision: shinken/policy.h.)
 *
 * A handle is the switch: it is issued only after policy said yes, it can
 * be narrowed (attenuated) but never widened, and revoking it flips one bit
 * that every enforcement point reads at the moment of use. */
#ifndef SHINKEN_CAP_H
#define SHINKEN_CAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/common.h"
#include "shinken/match.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- classes and scopes ---- */

typedef enum shk_cap_class {
  SHK_CAP_NET_EGRESS,
  SHK_CAP_FS_SCOPE,
  SHK_CAP_CLIPBOARD,
  SHK_CAP_GPU,
  SHK_CAP_INSTALL_PRIVILEGED,
  SHK_CAP_PERSISTENCE,
  SHK_CAP_CREDENTIALS,
  SHK_CAP_PERIPHERAL,
  SHK_CAP__COUNT
} shk_cap_class;

/* "net.egress", "fs.scope", ...; NULL for an unknown class. */
const char *shk_cap_class_name(shk_cap_class c);
/* 0, or -EINVAL when `name` is not one of the eight classes. */
int shk_cap_class_parse(const char *name, shk_cap_class *out);

/* The scope of one capability. Only the fields of its class are used; every
 * field defaults to empty (no authority). The lists hold canonical text
 * (shinken/match.h), so one grant has one spelling: a host pattern with its
 * host lowercased ("**.example.test:443"), a CIDR range in its canonical
 * form ("2001:db8::/32"), a path as shk_path_check accepts it. */
typedef struct shk_cap_scope {
  shk_cap_class cls;
  /* net.egress */
  shk_strv domains;          /* host, *.host or **.host, each with an optional :port */
  shk_strv cidrs;            /* ADDRESS/PREFIX */
  shk_port_range *ports;     /* a further restriction; empty: ports as the patterns say */
  size_t n_ports;
  bool tls_inspect;
  bool limited;              /* only GET, HEAD and OPTIONS (with tls_inspect, or plain HTTP) */
  /* fs.scope */
  shk_strv read, write, deny;
  /* clipboard */
  bool paste_in, copy_out;
  /* gpu */
  shk_strv device_ids;
  bool gpu_exclusive;        /* mode "exclusive" (else "shared") */
  /* install.privileged */
  bool install_any;          /* scope "any" (else "pkg") */
  /* persistence */
  shk_strv paths;
  bool survives_session;
  /* credentials (never_raw is always true: a raw credential is never granted) */
  shk_strv broker_scopes;
  /* peripheral */
  bool camera, mic, usb, input_inject;
} shk_cap_scope;

/* Parses a scope given as a JSON object for class `cls`. An unknown field, a
 * field of the wrong type, a malformed pattern/CIDR/path/port, or
 * credentials with never_raw other than true is an error: -EINVAL with a
 * sentence naming the field (for example "domains[1]: the host name
 * contains '_', ..."). -ENOMEM. On failure *out is empty. Host patterns are
 * stored lowercased (DNS names are case-insensitive), CIDRs in canonical
 * form; paths must already be canonical, and are refused otherwise. */
int shk_cap_scope_parse(shk_cap_class cls, const char *json, shk_cap_scope *out,
                        shk_error *err);
/* A deep copy of src into dst (overwritten, not freed). 0, or -ENOMEM with
 * dst empty. */
int shk_cap_scope_copy(shk_cap_scope *dst, const shk_cap_scope *src);
void shk_cap_scope_clear(shk_cap_scope *s);
/* The scope as a JSON object (malloc'd), which shk_cap_scope_parse reads
 * back to the same scope; NULL when out of memory. */
char *shk_cap_scope_to_json(const shk_cap_scope *s);

/* True when `child` grants nothing `parent` does not. On false, `why` (if
 * given) names the first field that widens. */
bool shk_cap_scope_subset(const shk_cap_scope *child, const shk_cap_scope *parent,
                          shk_error *why);

/* True when a net.egress scope lets a connection reach `host` on `port`:
 * a name against the domain patterns, an address (dotted quad or bare
 * IPv6) against the CIDRs only. `host` is read as shk_host_parse reads it
 * (the egress proxy passes canonical text). Port 0 asks about the name
 * alone (a DNS lookup). */
bool shk_cap_scope_allows_host(const shk_cap_scope *s, const char *host, uint16_t port);

/* ---- handles ---- */

#define SHK_CAP_ID_BYTES 32
#define SHK_CAP_ID_HEX (SHK_CAP_ID_BYTES * 2 + 1)

typedef enum shk_cap_lifecycle {
  SHK_CAP_ONCE,     /* dies after one use */
  SHK_CAP_SESSION,  /* dies when the session ends or at its expiry */
  SHK_CAP_STANDING, /* only from admin policy */
} shk_cap_lifecycle;

typedef struct shk_cap_table shk_cap_table;

typedef struct shk_cap_info {
  char id[SHK_CAP_ID_HEX];
  char parent[SHK_CAP_ID_HEX];  /* "" for a root grant */
  char session[128];
  shk_cap_lifecycle lifecycle;
  int64_t expires_ms;            /* 0: no expiry of its own */
  bool revoked;                  /* this handle or an ancestor */
  const shk_cap_scope *scope;    /* the table's copy: valid during the callback only */
} shk_cap_info;

/* Who owns what: the table owns every handle and its scope. A scope
 * pointer it hands out (shk_cap_scope_of) stays valid until that handle
 * leaves the table, by shk_cap_remove, shk_cap_remove_session or
 * shk_cap_table_free, and no longer. The table's own lock makes each call
 * safe from any thread; a caller that keeps a scope pointer while another
 * thread may remove the handle must order the two itself (the manager does
 * both under its registry lock). */

/* 0, or -ENOMEM. */
int shk_cap_table_new(shk_cap_table **out);
void shk_cap_table_free(shk_cap_table *t);

/* Issues a root handle. The id is 256 bits from the kernel's CSPRNG and
 * nothing in it derives from the session or the class. The table takes a
 * copy of `scope`. -EINVAL (no session, a session name of 128 bytes or
 * more, a negative expiry), -ENOMEM, or -EIO (no randomness). */
int shk_cap_issue(shk_cap_table *t, const char *session, const shk_cap_scope *scope,
                  shk_cap_lifecycle lc, int64_t expires_ms, char id_out[SHK_CAP_ID_HEX]);
/* Derives a child of `parent_id` whose scope must be a subset of the
 * parent's (-EPERM otherwise, err naming the field that widens). The child
 * never outlives its parent: it expires no later and dies with it. Also
 * -ENOENT (no such parent), -EACCES (the parent is no longer live), -EINVAL,
 * -ENOMEM, -EIO. */
int shk_cap_attenuate(shk_cap_table *t, const char *parent_id, const shk_cap_scope *scope,
                      int64_t expires_ms, char id_out[SHK_CAP_ID_HEX], shk_error *err);
/* Removes a handle that was just issued and has no children, as if it had
 * never been: the undo of a grant whose later step failed. -ENOENT if
 * unknown, -EBUSY if something derives from it. */
int shk_cap_remove(shk_cap_table *t, const char *id);
/* Removes every handle of a session, children included, and returns how
 * many: a closed session leaves nothing in the table (its history lives in
 * the manager's events). */
size_t shk_cap_remove_session(shk_cap_table *t, const char *session);
/* How many handles the table holds. */
size_t shk_cap_count(shk_cap_table *t);

/* Flips the handle's revoked bit: O(1), synchronous, idempotent. Every
 * handle derived from it fails from its next use on. -ENOENT if unknown. */
int shk_cap_revoke(shk_cap_table *t, const char *id);
/* Revokes every handle of a session (the session ended). */
void shk_cap_revoke_session(shk_cap_table *t, const char *session);

/* The check at the moment of use: 0 when the handle, and every handle it
 * derives from, is live and unexpired at `now_ms`; a once handle is consumed
 * by a successful use. -EACCES (revoked/expired/used) or -ENOENT. */
int shk_cap_use(shk_cap_table *t, const char *id, int64_t now_ms);
/* Like shk_cap_use, but does not consume a once handle. */
int shk_cap_check(shk_cap_table *t, const char *id, int64_t now_ms);

/* The scope of a handle (live or not), or NULL. See above for how long the
 * pointer stays valid. */
const shk_cap_scope *shk_cap_scope_of(shk_cap_table *t, const char *id);
/* The lifecycle of a handle; -ENOENT when unknown. */
int shk_cap_lifecycle_of(shk_cap_table *t, const char *id, shk_cap_lifecycle *out);

/* True when the handle or one it derives from was revoked (not merely
 * used up or expired); unknown handles count as revoked. */
bool shk_cap_is_revoked(shk_cap_table *t, const char *id);

/* Calls fn for each handle (of `session`, or all when NULL), under the
 * table's read lock: fn must not call back into the table's writers. */
void shk_cap_foreach(shk_cap_table *t, const char *session,
                     void (*fn)(const shk_cap_info *info, void *ud), void *ud);

#ifdef __cplusplus
}
#endif
#endif

/* Shinken's decision layer: the one answer to "what happens to this
 * request?" — allow, ask a human, or deny — with the deciding policy, the
 * tier and one line of why.
 *
 * The decision is made in this order, from pure inputs (nothing here reads
 * the process's environment; the session, the request and the manager's
 * approval state are all the caller's):
 *   1. the image manifest: what the image may ever request, at which tier
 *      (no entry: deny, asking nobody);
 *   2. provenance promotion: a request that derives from external data goes
 *      up one tier, and a data-leaving request of a session that ingested
 *      external content and touched sensitive data is never below Ask;
 *   3. Cedar, over the managed (admin), project and session tiers of policy
 *      in one set: deny by default, and forbid overrides permit, so every
 *      admin forbid is final. A session's own policies may only narrow: the
 *      session tier accepts forbid policies only.
 * The answer is ask when no policy permits the request now but one would
 * once a human approved it, and nothing forbids it either way. */
#ifndef SHINKEN_POLICY_H
#define SHINKEN_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shinken/cap.h"
#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tiers and provenance ---- */

typedef enum shk_policy_tier {
  SHK_POLICY_TIER_AUTO,   /* granted and recorded */
  SHK_POLICY_TIER_NOTIFY, /* granted, recorded, and the human is told */
  SHK_POLICY_TIER_ASK,    /* granted once a human approved it */
  SHK_POLICY_TIER_BLOCK,  /* never granted */
} shk_policy_tier;

/* "Auto", "Notify", "Ask", "Block"; NULL for anything else. */
const char *shk_policy_tier_name(shk_policy_tier t);
/* 0, or -EINVAL when `name` is not one of the four. */
int shk_policy_tier_parse(const char *name, shk_policy_tier *out);

/* What a session has been exposed to; it only ever grows. */
typedef struct shk_policy_taint {
  bool ingested_external;   /* read content from outside (web, issue text, ...) */
  bool touched_sensitive;   /* read secrets, private code, personal data */
} shk_policy_taint;

/* ---- loading ---- */

typedef struct shk_policy shk_policy;

typedef struct shk_policy_source {
  /* schema.cedarschema, admin.cedar and project.cedar. */
  const char *dir;
  /* The image manifest (JSON): {"image": NAME, "capabilities": [{"class":
   * C, "scope": {...}, "tier": T}, ...]}. NULL: DIR/manifests/default.json. */
  const char *manifest;
  /* Optional session-tier policy text (forbids only), or NULL. */
  const char *session_text;
  /* The user besides root who may own (and write) the policy files: the
   * manager's own. */
  uid_t owner;
} shk_policy_source;

/* Loads the tiers and the manifest. Every file is read through
 * shk_policy_read_file, so a policy directory that someone other than root
 * and `owner` could change is refused. Every policy is validated against
 * the schema; an invalid policy, a permit in the session tier (-EPERM) or a
 * malformed manifest is an error naming it. -EINVAL, -EPERM, -ENOENT,
 * -ENOMEM, or the error of reading a file. */
int shk_policy_load(const shk_policy_source *src, shk_policy **out, shk_error *err);
void shk_policy_free(shk_policy *p);

/* Reads a file that decides authority (a policy, a manifest, a list of
 * standing grants) into a malloc'd NUL-terminated *text, refusing (-EPERM,
 * err saying which path and why) one that anyone but root and `owner` could
 * have written: the file must be owned by one of them and not writable by
 * group or others, and so must every directory on its resolved path, except
 * that a directory above may be world-writable when it is sticky (as /tmp
 * is), since then no one else can replace what is in it. */
int shk_policy_read_file(const char *path, uid_t owner, char **text, shk_error *err);

/* ---- the decision ---- */

/* The layers of enforcement a run can turn off, by name:
 *   "network"          the network namespace and the egress filter (--net host)
 *   "user-separation"  the caller's own files stay the caller's (a root caller)
 *   "landlock"         the Landlock file and TCP rules
 *   "seccomp"          the system call filter
 *   "connect-guard"    the mediation of unix socket connect()
 *   "cgroup"           the memory, process and CPU limits
 * Each is the id of a Shinken::Layer entity in the policies. */
extern const char *const shk_policy_layers[];

typedef struct shk_policy_session {
  const char *id;           /* the session id */
  const char *trust_tier;   /* "low", "standard" or "high" */
  const char *model;        /* the agent's model, informational; may be NULL */
  int64_t expires_ms;       /* the session's end, ms since the epoch */
  shk_policy_taint taint;
  /* The directories of the human's $PATH, absolute, as the caller resolved
   * them (a write into, or above, one of them is "in_exec_path"). */
  const char *const *exec_path;
  size_t n_exec_path;
} shk_policy_session;

typedef enum shk_policy_kind {
  SHK_POLICY_GRANT,    /* an image asks for a capability: manifest, promotion, Cedar */
  SHK_POLICY_STANDING, /* the admin's standing grant: no manifest, tier Auto, Cedar */
  SHK_POLICY_DISABLE,  /* turning layers of enforcement off */
} shk_policy_kind;

/* Where a request stands with the humans: the manager's state, never a
 * field a requester sets. */
typedef enum shk_policy_approval {
  SHK_POLICY_UNASKED,  /* no human has answered */
  SHK_POLICY_APPROVED, /* a human channel approved this request */
  SHK_POLICY_DENIED,   /* a human channel denied it */
} shk_policy_approval;

/* "none", "approved", "denied": the values of context.approval_state. */
const char *shk_policy_approval_name(shk_policy_approval a);

typedef struct shk_policy_request {
  shk_policy_kind kind;
  const shk_cap_scope *scope; /* GRANT and STANDING */
  bool external;              /* GRANT: the request derives from external data */
  const char *const *layers;  /* DISABLE: names from shk_policy_layers */
  size_t n_layers;
  shk_policy_approval approval;
  int64_t now_ms;
} shk_policy_request;

typedef enum shk_policy_verdict {
  SHK_POLICY_ALLOW, /* issue it (tier Auto or Notify, or an approved Ask) */
  SHK_POLICY_ASK,   /* a human must approve it first; nothing forbids it */
  SHK_POLICY_DENY,  /* refused: Block, no manifest entry, a forbid, or no permit */
} shk_policy_verdict;

/* "allow", "ask", "deny". */
const char *shk_policy_verdict_name(shk_policy_verdict v);

typedef enum shk_policy_decider {
  SHK_POLICY_BY_MANIFEST, /* no manifest entry covers the request */
  SHK_POLICY_BY_CEDAR,    /* the tiers of policy */
} shk_policy_decider;

typedef struct shk_policy_answer {
  shk_policy_verdict verdict;
  shk_policy_decider decided_by;
  shk_policy_tier tier;     /* the tier after promotion (Auto for standing
                             * grants; Ask for disabling a layer) */
  shk_policy_tier base_tier; /* the manifest entry's tier, before promotion */
  int manifest_entry;       /* the covering entry's index, or -1 */
  /* The deciding policy's @id (or its Cedar id): for allow the permit, for
   * deny the forbid ("" when nothing permits it: deny by default), for ask
   * the permit a human's approval would satisfy. */
  char policy[128];
  char why[512];            /* one line: what decided it, and for ask, what made it Ask */
} shk_policy_answer;

/* Decides one request. A scope is decided element by element: for
 * net.egress each destination (a host pattern without its port, or a CIDR)
 * with each port range it may reach (context.request.ports, {lo, hi}); for
 * the other classes each path, device, broker scope and flag; an empty
 * scope is one request about the class alone. The request is allowed only
 * when every element is, and denied when a human's approval could not make
 * every element allowed. Disabling layers is one request per layer, on the
 * same terms.
 * Returns 0 when a decision was made (see ans), or a negative errno when
 * the question could not be put: -EINVAL (a malformed request, an unknown
 * layer) or -ENOMEM, with err filled; then ans says deny, and nothing may be
 * granted. */
int shk_policy_decide(const shk_policy *p, const shk_policy_session *s,
                      const shk_policy_request *r, shk_policy_answer *ans, shk_error *err);

#ifdef __cplusplus
}
#endif
#endif

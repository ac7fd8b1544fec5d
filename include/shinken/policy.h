/* SPDX-License-Identifier: Apache-2.0 */
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
  /* The analysis behind pattern grants and policy edits: the solver (NULL:
   * "cvc5" on $PATH) and the time limit of one of its checks (0: 5000 ms).
   * The solver is started at the first question that needs it. */
  const char *solver;
  unsigned solver_timeout_ms;
  /* Policy edits. The manager's state directory (created 0700 when
   * missing), where the last accepted project and session tiers are
   * recorded (policy-project.cedar and policy-session.cedar, each with its
   * SHA-256 in a .sha256 file beside it, mode 0600), or NULL: nothing is
   * recorded and nothing compared. A tier that differs from its record is
   * compared with it (with the admin tier, over every request the schema
   * admits); one that is more permissive, or that cannot be compared (no
   * solver, a timeout, a record that is damaged or no longer validates) is
   * refused (-EPERM, err naming the tier and one example request) unless
   * accept_widening says the operator accepts it. The record is written
   * only after a load that succeeds. */
  const char *state_dir;
  bool accept_widening;
  /* When not NULL and a load is refused for a widening: *widening_report
   * gets every example request, one per line (malloc'd; the caller frees
   * it). */
  char **widening_report;
} shk_policy_source;

/* Loads the tiers and the manifest. Every file is read through
 * shk_policy_read_file, so a policy directory that someone other than root
 * and `owner` could change is refused. Every policy is validated against
 * the schema; an invalid policy, a permit in the session tier (-EPERM),
 * a widening the operator did not accept (-EPERM, see state_dir) or a
 * malformed manifest is an error naming it. -EINVAL, -EPERM, -ENOENT,
 * -ENOMEM, -EIO (the record could not be written), or the error of reading
 * a file. */
int shk_policy_load(const shk_policy_source *src, shk_policy **out, shk_error *err);
void shk_policy_free(shk_policy *p);
/* The name of the image whose manifest P was loaded with (its "image"). */
const char *shk_policy_image(const shk_policy *p);

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

/* A narrower grant a human may approve instead of a refused pattern: the
 * element's pattern with the parts in `except` left out. Every element the
 * narrowed pattern covers is allowed once a human approves, and every part
 * left out is denied throughout. For fs.scope the narrowed grant is the
 * same scope with each exception added to "deny" (a denied path is left out
 * of every read and write prefix above it); net.egress has no grammar for
 * exceptions yet, so there the offer only says what could be granted. */
#define SHK_POLICY_MAX_EXCEPT 4
typedef struct shk_policy_offer {
  bool offered;
  char element[200];        /* the element it narrows: "write on /home/u" */
  size_t n_except;
  struct {
    char field[16];         /* "path", "domain", "ip", "ports" */
    char text[256];         /* a subtree in the pattern's syntax, or one value */
    bool exact;             /* a path alone, not its subtree */
  } except[SHK_POLICY_MAX_EXCEPT];
  char why[512];            /* "write on /home/u without /home/u/.ssh, /home/u/.aws" */
} shk_policy_offer;

typedef struct shk_policy_answer {
  shk_policy_verdict verdict;
  shk_policy_decider decided_by;
  shk_policy_tier tier;     /* the tier after promotion (Auto for standing
                             * grants; Ask for disabling a layer) */
  shk_policy_tier base_tier; /* the manifest entry's tier, before promotion */
  int manifest_entry;       /* the covering entry's index, or -1 */
  /* The deciding policy's @id (or its Cedar id): for allow the permit, for
   * deny the forbid ("" when nothing permits it: deny by default, or when a
   * pattern could not be proven), for ask the permit a human's approval
   * would satisfy. */
  char policy[128];
  char why[512];            /* one line: what decided it, and for ask, what made it Ask */
  /* For a pattern refused with a counterexample: the concrete element the
   * pattern covers that is refused ("/home/u/.ssh/authorized_keys",
   * "x.evil.org port 22"), else "". */
  char counterexample[512];
  shk_policy_offer offer;   /* deny only */
} shk_policy_answer;

/* Decides one request. A scope is decided element by element: for
 * net.egress each destination (a host pattern without its port, or a CIDR)
 * with each port range it may reach (context.request.ports, {lo, hi}); for
 * the other classes each path, device, broker scope and flag; an empty
 * scope is one request about the class alone. The request is allowed only
 * when every element is, and denied when a human's approval could not make
 * every element allowed. Disabling layers is one request per layer, on the
 * same terms.
 *
 * An element that is a pattern stands for every concrete element it
 * covers, and is allowed (or askable) only when the policies allow every
 * one of them (or would, once a human approved): a host pattern (*.host,
 * **.host) or a CIDR wider than one address, with every port of its range
 * (a range is every port in it); a path of fs.scope read or write or of
 * persistence (every path is the prefix of everything beneath it, less the
 * scope's deny paths beneath it). The literal element is still decided as
 * well. Exact elements (one host on one port, an fs.scope deny, a device,
 * a flag) are decided by the engine alone. The proof is the analyzer's
 * (cvc5, started at the first pattern): it holds for every instant from
 * now_ms to the session's expiry, and is cached per loaded policy, context
 * and element, so a repeated pattern costs a lookup. A pattern that is not
 * wholly allowed is refused naming a counterexample and the policy that
 * forbids it, and when the forbidden part is a few subtrees or names the
 * answer offers the narrowed grant (ans->offer). When the solver is
 * missing, fails or runs out of time, the pattern is refused and the why
 * says which: nothing is granted that was not proven.
 *
 * Who may call it: anyone with pure inputs and any thread (the solver
 * session is the policy's own, behind its lock). A pattern can take tens of
 * milliseconds (a refusal with a narrowing, hundreds), so patterns are for
 * the control plane only: grants, standing grants, approvals. The egress
 * data plane never asks about a pattern: it asks about one exact host and
 * one port, which the engine decides in microseconds.
 *
 * Returns 0 when a decision was made (see ans), or a negative errno when
 * the question could not be put: -EINVAL (a malformed request, an unknown
 * layer) or -ENOMEM, with err filled; then ans says deny, and nothing may be
 * granted. */
int shk_policy_decide(const shk_policy *p, const shk_policy_session *s,
                      const shk_policy_request *r, shk_policy_answer *ans, shk_error *err);

/* The analyzer's counters of the policy's solver session (check-sat calls
 * and processes started) and of its cache (hits, proofs stored); for tests
 * and benchmarks. */
void shk_policy_analysis_counters(const shk_policy *p, uint64_t *checks, uint64_t *starts, uint64_t *hits,
                                  uint64_t *stored);

/* ==================================================================
 * Analysis (src/policy/analysis*.c): questions about every request at
 * once, answered by encoding the policies as SMT-LIB and asking cvc5.
 *
 * A set is analysed against the schema it validates against (strict
 * mode), one request environment (an action with one principal type and
 * one resource type it applies to) at a time, over every request and
 * entity store that conform to the schema. A property that does not hold
 * comes with a counterexample: a concrete request and entity store, which
 * the engine (shk_cedar_is_authorized) has decided the way the analysis
 * says before it is returned. A counterexample the engine disagrees with
 * is not returned: the call fails with -EPROTO, a defect of the analysis.
 *
 * Besides the common errors these functions return:
 *   -EOPNOTSUPP  a policy uses a construct the encoder does not encode
 *                (the message names it and the policy); never approximated
 *   -ENOENT      the solver is not installed
 *   -ETIMEDOUT   the solver found no answer within the time limit
 *   -EIO         the solver failed or answered what cvc5 would not
 *   -EPROTO      a counterexample the engine decides otherwise
 * Every failure means "not shown to hold": callers fail closed.
 * ================================================================== */

/* The Cedar objects analysed (shinken/cedar.h). */
typedef struct shk_cedar_schema shk_cedar_schema;
typedef struct shk_cedar_policy_set shk_cedar_policy_set;
typedef struct shk_error shk_error;

/* A solver session: one cvc5 process, kept for many questions (its
 * assertion stack holds what a repeated question shares). Not for use by
 * two threads at once. */
typedef struct shk_analysis shk_analysis;

typedef struct shk_analysis_options {
  const char *solver;      /* the cvc5 binary; NULL: "cvc5" on $PATH */
  unsigned timeout_ms;     /* per check; 0: 10000 */
  bool fresh;              /* a new solver process for every check (for measurements) */
} shk_analysis_options;

/* Starts the solver, so that a missing one is reported here. */
int shk_analysis_open(const shk_analysis_options *opt, shk_analysis **out, shk_error *err);
void shk_analysis_close(shk_analysis *an);
/* "cvc5 1.0.3", or NULL. */
const char *shk_analysis_solver_version(const shk_analysis *an);
/* check-sat calls and solver processes started so far. */
void shk_analysis_counters(const shk_analysis *an, uint64_t *checks, uint64_t *starts);

/* A policy set prepared for analysis: validated against the schema and
 * encoded once, so that constructs the encoder refuses are reported here.
 * It borrows SCHEMA and PS, which must outlive it and not change. */
typedef struct shk_analysis_set shk_analysis_set;
int shk_analysis_set_new(const shk_cedar_schema *schema, const shk_cedar_policy_set *ps,
                         shk_analysis_set **out, shk_error *err);
void shk_analysis_set_free(shk_analysis_set *set);

typedef enum shk_analysis_query {
  /* one policy (policy_a), or two (policy_a of set a, policy_b of set b) */
  SHK_ANALYSIS_NEVER_ERRORS,
  SHK_ANALYSIS_ALWAYS_MATCHES,
  SHK_ANALYSIS_NEVER_MATCHES,
  SHK_ANALYSIS_MATCHES_EQUIVALENT,
  SHK_ANALYSIS_MATCHES_IMPLIES,
  SHK_ANALYSIS_MATCHES_DISJOINT,
  /* one set (a), or two (a and b) */
  SHK_ANALYSIS_ALWAYS_ALLOWS,
  SHK_ANALYSIS_ALWAYS_DENIES,
  SHK_ANALYSIS_EQUIVALENT,
  SHK_ANALYSIS_IMPLIES,
  SHK_ANALYSIS_DISJOINT,
} shk_analysis_query;

/* "never-errors", ..., "disjoint"; and back (-1 for an unknown name). */
const char *shk_analysis_query_name(shk_analysis_query q);
int shk_analysis_query_parse(const char *name);

/* Restricts the requests a question is about. */
typedef struct shk_analysis_scope {
  const char *assume;      /* a Cedar expression over the request that must
                              hold (type-checked like a policy), or NULL */
  const char *action;      /* only this action (Ns::Action::"id"), or NULL */
  const char *principal_type, *resource_type; /* or NULL */
} shk_analysis_scope;

/* One concrete request where a property fails. */
typedef struct shk_analysis_example {
  char *env;               /* the request environment */
  char *what;              /* what happens, in one line */
  char *request;           /* {"principal", "action", "resource", "context"} */
  char *entities;          /* the entity store, a JSON array */
  char *decisions;         /* what the engine decided, in one line */
} shk_analysis_example;

typedef struct shk_analysis_result {
  bool holds;
  size_t n_envs;           /* environments examined */
  shk_analysis_example *examples; /* one per environment where it fails */
  size_t n_examples;
} shk_analysis_result;
void shk_analysis_result_clear(shk_analysis_result *r);

/* Decides QUERY about set a (and b; b may be a itself). policy_a and
 * policy_b name policies by their Cedar id ("policy0") or their @id. */
int shk_analysis_check(shk_analysis *an, shk_analysis_query query, const shk_analysis_set *a,
                       const char *policy_a, const shk_analysis_set *b, const char *policy_b,
                       const shk_analysis_scope *scope, shk_analysis_result *out,
                       shk_error *err);

typedef enum shk_analysis_relation {
  SHK_ANALYSIS_SAME,         /* allow exactly the same requests */
  SHK_ANALYSIS_NARROWER,     /* NEW allows a subset of what OLD allows */
  SHK_ANALYSIS_WIDER,        /* NEW allows a superset */
  SHK_ANALYSIS_INCOMPARABLE, /* each allows something the other denies */
} shk_analysis_relation;
const char *shk_analysis_relation_name(shk_analysis_relation r);

typedef struct shk_analysis_env_comparison {
  char *env;
  shk_analysis_relation rel;
  shk_analysis_example *wider;    /* NEW allows, OLD denies; NULL when none */
  shk_analysis_example *narrower; /* OLD allows, NEW denies; NULL when none */
} shk_analysis_env_comparison;

typedef struct shk_analysis_comparison {
  shk_analysis_relation rel;      /* over all environments */
  shk_analysis_env_comparison *envs;
  size_t n_envs;
} shk_analysis_comparison;
void shk_analysis_comparison_clear(shk_analysis_comparison *c);

/* Compares two sets over the same schema, environment by environment. */
int shk_analysis_compare(shk_analysis *an, const shk_analysis_set *old_set,
                         const shk_analysis_set *new_set, const shk_analysis_scope *scope,
                         shk_analysis_comparison *out, shk_error *err);

/* ---- the grant-time question ----
 * "For every concrete value of the context fields a pattern covers, with
 * everything else of the request and the store as given, is the request
 * allowed?" Several fields are covered together (a host pattern with every
 * port of a range is every pair of a host and a port). */
typedef enum shk_analysis_cover_kind {
  SHK_ANALYSIS_PATH_PREFIX,  /* "/home/u": the path and every canonical absolute path below it */
  SHK_ANALYSIS_HOST_PATTERN, /* "api.example", "*.example" (names strictly below), "**.example" (it and below) */
  SHK_ANALYSIS_CIDR,         /* "10.0.0.0/8": every single address in it */
  SHK_ANALYSIS_PORT_RANGE,   /* "8000-8100" or "443": each port, on a Long field or, on a
                              * {lo: Long, hi: Long} field, as the range {lo: P, hi: P} */
  SHK_ANALYSIS_TIME_RANGE,   /* "LO-HI", ms since the epoch: every instant of a datetime field */
} shk_analysis_cover_kind;

/* A part of a pattern left out of the grant: a subtree in the pattern's
 * own syntax (a path prefix, a host pattern, a CIDR, a port range), or with
 * `exact`, one path alone. In a narrowing's answer, `field` says which of
 * the query's fields it belongs to. */
typedef struct shk_analysis_except {
  const char *text;
  bool exact;
  unsigned field;
} shk_analysis_except;

/* One covered field. */
typedef struct shk_analysis_cover_field {
  const char *field;       /* the context field, dotted: "request.path" */
  shk_analysis_cover_kind kind;
  const char *pattern;
  const shk_analysis_except *except; /* left out of this field's pattern */
  size_t n_except;
  /* PATH_PREFIX: a context field (an optional String) that follows the
   * path: for a path in a home directory (/root, or /home/NAME) the rest of
   * the path below it ("" for the home itself, as shk_policy_home_rest
   * says), absent for any other path. NULL: none. */
  const char *home_field;
} shk_analysis_cover_field;

/* The rest of PATH below the home directory it lies in (/root, or
 * /home/NAME): ".ssh/id_rsa" for "/home/u/.ssh/id_rsa", "" for "/home/u";
 * NULL for a path in no home. */
const char *shk_policy_home_rest(const char *path);

/* At most this many fields, each of a different kind. */
#define SHK_ANALYSIS_MAX_COVER 4

typedef struct shk_analysis_cover_query {
  const char *request;     /* the concrete request as JSON; the covered fields' values are replaced */
  const char *entities;    /* the concrete entity store (JSON array), or NULL for none */
  const shk_analysis_cover_field *fields;
  size_t n_fields;
  /* An element where a policy errors counts as not allowed (Cedar skips
   * such a policy; the one decision refuses instead). */
  bool errors_deny;
} shk_analysis_cover_query;

typedef struct shk_analysis_cover_result {
  bool allowed;            /* every covered element is allowed */
  /* Else an element that is not: each field's value, in the query's order
   * (a path, a host, an address, a port, a datetime). */
  char witness[SHK_ANALYSIS_MAX_COVER][512];
  char policy[128];        /* the policy that forbids it (@id), "" when no permit applies */
  char why[768];           /* one line, naming both */
} shk_analysis_cover_result;

int shk_analysis_cover(shk_analysis *an, const shk_analysis_set *set,
                       const shk_analysis_cover_query *q, shk_analysis_cover_result *out,
                       shk_error *err);

/* When the patterns are not wholly allowed: the parts to leave out (at
 * most MAX_EXCEPT subtrees or names, each the widest found around a
 * witness, every one of them denied throughout) that make the rest wholly
 * allowed. out->found is false when no such list exists within the bound
 * (the forbidden part is not a finite set of subtrees). A time range is
 * never narrowed. The texts are malloc'd; clear with
 * shk_analysis_narrowing_clear. */
typedef struct shk_analysis_narrowing {
  bool found;
  shk_analysis_except *except;
  size_t n_except;
  shk_analysis_cover_result first; /* the first refusal, as shk_analysis_cover gives it */
} shk_analysis_narrowing;
int shk_analysis_narrow(shk_analysis *an, const shk_analysis_set *set,
                        const shk_analysis_cover_query *q, size_t max_except,
                        shk_analysis_narrowing *out, shk_error *err);
void shk_analysis_narrowing_clear(shk_analysis_narrowing *n);
/* ==================================================================
 * end of the analysis block
 * ================================================================== */

#ifdef __cplusplus
}
#endif
#endif

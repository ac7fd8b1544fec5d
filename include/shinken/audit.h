/* SPDX-License-Identifier: Apache-2.0 */
/* The authority timeline: one signed, hash-chained log of every authority
 * event of a manager (decisions, grants, revokes, approvals, proxy
 * verdicts, sandbox starts and exits).
 *
 * Producers build an event on their own stack with the typed builder below
 * and hand it to shk_audit_emit(), which copies it into a bounded queue and
 * returns at once: the caller never waits for the disk. One writer thread
 * per log serializes each event to canonical JSON, hashes it into an
 * RFC 6962 Merkle tree, appends it to SQLite (WAL) in batches, and signs
 * checkpoints in the C2SP tlog-checkpoint format. docs/audit.md states the
 * formats precisely enough to verify a log with SHA-256 and Ed25519 alone.
 *
 * Secrets never enter the log: the builder has no field for a header value,
 * a URL path or query, a request body or a credential. A parameter that
 * could be sensitive is recorded as its SHA-256 (shk_audit_hashed). */
#ifndef SHINKEN_AUDIT_H
#define SHINKEN_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The attributes an event may carry: the only ones. Each has one name in
 * the log (OpenTelemetry's where it has one, else shinken.*) and one type
 * (s: string, i: integer, a: list of strings). */
typedef enum shk_audit_field {
  /* the agent */
  SHK_AUDIT_SESSION,        /* s gen_ai.conversation.id: the Shinken session */
  SHK_AUDIT_AGENT_ID,       /* s gen_ai.agent.id */
  SHK_AUDIT_AGENT_NAME,     /* s gen_ai.agent.name */
  SHK_AUDIT_MODEL,          /* s gen_ai.request.model */
  SHK_AUDIT_OPERATION,      /* s gen_ai.operation.name ("execute_tool" when TOOL is set) */
  SHK_AUDIT_TOOL,           /* s gen_ai.tool.name: the tool or command that asked */
  SHK_AUDIT_ERROR_TYPE,     /* s error.type: why an action failed, as a short class */
  /* the human who authorized */
  SHK_AUDIT_HUMAN_UID,      /* i shinken.human.uid */
  SHK_AUDIT_HUMAN_NAME,     /* s shinken.human.name */
  SHK_AUDIT_HUMAN_SURFACE,  /* s shinken.human.surface: panel, cli, prompt, harness */
  /* the authority */
  SHK_AUDIT_CLASS,          /* s shinken.class: net.egress, fs.scope, ... */
  SHK_AUDIT_SCOPE,          /* s shinken.scope: the scope's canonical text */
  SHK_AUDIT_DECISION,       /* s shinken.decision: allow, ask, deny */
  SHK_AUDIT_POLICY,         /* s shinken.policy.id: the deciding policy */
  SHK_AUDIT_TIER,           /* s shinken.tier: admin, project, session */
  SHK_AUDIT_PROVENANCE,     /* s shinken.provenance */
  SHK_AUDIT_OUTCOME,        /* s shinken.outcome: granted, refused, approved, timed-out, ... */
  SHK_AUDIT_LIFETIME,       /* s shinken.lifetime: once, session, or an ISO 8601 duration */
  SHK_AUDIT_REASON,         /* s shinken.reason: one line of why */
  SHK_AUDIT_HANDLE,         /* s shinken.handle.id */
  SHK_AUDIT_HANDLE_PARENT,  /* s shinken.handle.parent: what an attenuation derived from */
  SHK_AUDIT_CARD,           /* s shinken.card.id: an approval card */
  SHK_AUDIT_COUNT,          /* i shinken.count: requests on a card, refusals counted, ... */
  /* the egress proxy: a destination, never a path, a query, a header or a body */
  SHK_AUDIT_PROTOCOL,       /* s shinken.egress.protocol: http, connect, socks5, dns */
  SHK_AUDIT_CONNECTION,     /* i shinken.egress.connection */
  SHK_AUDIT_HOST,           /* s server.address: a canonical host name or address */
  SHK_AUDIT_PORT,           /* i server.port */
  SHK_AUDIT_RULE,           /* s shinken.egress.rule: the rule or handle that decided */
  /* the sandbox */
  SHK_AUDIT_PID,            /* i process.pid */
  SHK_AUDIT_EXIT_CODE,      /* i process.exit.code */
  SHK_AUDIT_SIGNAL,         /* s shinken.sandbox.signal: SIGKILL, ... */
  SHK_AUDIT_LIMIT,          /* s shinken.sandbox.limit: the limit that killed it (memory, pids) */
  SHK_AUDIT_ENFORCED,       /* a shinken.sandbox.enforced: what the sandbox reported it enforced */
  SHK_AUDIT_DEGRADED,       /* a shinken.sandbox.degraded: what it could not enforce */
  /* added after the first release of the table: new fields go last */
  SHK_AUDIT_EXECUTABLE,     /* s process.executable.path: the program of PID (a peer that
                             * resolved a pending request, say) */
  /* one request on an inspected connection: never its target, a header or a body */
  SHK_AUDIT_HTTP_METHOD,    /* s http.request.method */
  SHK_AUDIT_HTTP_STATUS,    /* i http.response.status_code */
  SHK_AUDIT_HTTP_BYTES,     /* i http.response.body.size */
  SHK_AUDIT_DURATION_US,    /* i shinken.egress.duration_us */
  SHK_AUDIT_FIELD_COUNT
} shk_audit_field;

/* The largest event, as the builder packs it. */
#define SHK_AUDIT_EVENT_MAX 4096

/* An event under construction. It lives on the producer's stack; every
 * member is private. The setters never fail on the spot: the first problem
 * (a field set twice, a string that is not UTF-8, a field of another type,
 * an event too large) is kept and returned by shk_audit_emit, so a producer
 * checks once. */
typedef struct shk_audit_event {
  int64_t time_ns;          /* CLOCK_REALTIME at shk_audit_event_init */
  int error;                /* the first problem, or 0 */
  int error_field;          /* its field, or -1 */
  const char *error_what;   /* a static sentence */
  uint64_t set;             /* the fields set so far, one bit each */
  size_t len;
  unsigned char buf[SHK_AUDIT_EVENT_MAX];
} shk_audit_event;

/* Starts an event named `name` ([a-z0-9.-]+, e.g. "grant", "proxy-verdict",
 * "sandbox-exit"; docs/audit.md lists the names producers use), stamped with
 * the current time. */
void shk_audit_event_init(shk_audit_event *e, const char *name);
/* Sets a string field; a NULL value sets nothing. */
void shk_audit_str(shk_audit_event *e, shk_audit_field f, const char *value);
/* Sets an integer field (|v| < 2^53, so that every JSON reader reads it
 * exactly). */
void shk_audit_int(shk_audit_event *e, shk_audit_field f, int64_t v);
/* Sets a list field from a NULL-terminated array; NULL sets nothing. */
void shk_audit_strv(shk_audit_event *e, shk_audit_field f, const char *const *values);
/* Records a parameter that could be sensitive as
 * shinken.param.NAME.sha256 = hex(SHA-256(value)), never the value itself.
 * NAME is [a-z0-9_]{1,32}. An unsalted hash of a guessable value can be
 * guessed: a secret (a token, a password) is never a parameter at all. */
void shk_audit_hashed(shk_audit_event *e, const char *name, const void *value, size_t len);

/* The log: its store, its queue and its writer thread. */
typedef struct shk_audit shk_audit;

typedef struct shk_audit_opts {
  const char *db_path;         /* NULL: shk_audit_default_path(false) */
  const char *key_path;        /* NULL: audit.key in the database's directory */
  const char *origin;          /* the checkpoint origin and key name of a new log;
                                * NULL: shinken.audit/ and 16 random hex digits.
                                * An existing log keeps its own. */
  unsigned checkpoint_events;  /* a checkpoint after this many events; 0: 1000 */
  unsigned checkpoint_ms;      /* and at least this often while events arrive; 0: 1000 */
  size_t queue_bytes;          /* the queue's size; 0: 4 MiB */
  bool no_fsync;               /* commit without fsync (SQLite synchronous=NORMAL):
                                * a process crash still loses nothing committed,
                                * a power loss may lose the last commits */
  /* A log of its own signed by a key that signs other logs too (the
   * user's key: key_path, else audit.key beside db_path), such as one
   * `shinken run`'s: NAME is [a-z0-9-]{1,64}, new for every log, and the
   * log's origin is the key's name, "/run/" and NAME. The key must exist
   * (shk_audit_ensure_key). NULL: the key's own log, whose origin is the
   * key's name. */
  const char *log_name;
} shk_audit_opts;

/* The default store: $XDG_STATE_HOME/shinken/audit.db (or
 * ~/.local/state/shinken/audit.db), or /var/lib/shinken/audit.db for a
 * system manager. Returns 0, or -ENOENT when no home is known, -EINVAL
 * when len is too small. */
int shk_audit_default_path(bool system, char *buf, size_t len, shk_error *err);

/* The directory of the per-run logs: "runs" beside the store DB_PATH
 * (NULL: the default store, so $XDG_STATE_HOME/shinken/runs or
 * ~/.local/state/shinken/runs). */
int shk_audit_runs_dir(const char *db_path, char *buf, size_t len, shk_error *err);

/* A new log name for one run ([a-z0-9-]: its UTC start, the pid and random
 * digits, so that names sort by time and never repeat). */
int shk_audit_run_name(char *buf, size_t len, shk_error *err);

/* Makes sure the signing key beside DB_PATH (the user's log) exists, so
 * that named logs can be signed with it: when neither the key nor the log
 * exists, the log is created (with its key, as shk_audit_open does) and
 * closed again. 0, or the errno of shk_audit_open. */
int shk_audit_ensure_key(const char *db_path, shk_error *err);

/* Opens (or creates, with its directory 0700 and a new signing key 0600)
 * the log and starts its writer, which records an "audit-start" event. A
 * log that exists is continued: its tree is rebuilt from the stored leaf
 * hashes and checked against its last checkpoint; a log that does not match
 * its last checkpoint, or whose key does not match, is refused (-EIO) and
 * `shinken audit verify` tells why. A log has one writer: while one holds
 * it (in any process), opening it again is -EBUSY. Errors: -EINVAL, -ENOMEM,
 * -EIO, -EBUSY, and the errno of a failed open or mkdir. */
int shk_audit_open(const shk_audit_opts *o, shk_audit **out, shk_error *err);

/* Hands one event to the writer and returns without waiting for the disk.
 * -EBUSY: the queue is full; the caller must refuse the action the event
 * records, and the refusal is counted (an "audit-overflow" event with the
 * count is written once the queue drains). -EINVAL: the event is malformed
 * (err says which field). -EIO: the writer has failed (the disk is full, the
 * store is gone); every later call fails too, so the caller refuses. The
 * sequence number is assigned by the writer. Safe from any thread. */
int shk_audit_emit(shk_audit *a, const shk_audit_event *e, shk_error *err);

/* Waits until every event emitted before the call is committed (and, with
 * checkpoint true, covered by a signed checkpoint). -EIO if the writer
 * failed. */
int shk_audit_flush(shk_audit *a, bool checkpoint, shk_error *err);

/* How many events were refused because the queue was full, since open. */
uint64_t shk_audit_refused(const shk_audit *a);

/* Drains the queue, records "audit-stop", makes a last checkpoint, stops the
 * writer and closes the store. Returns the writer's error, if any. NULL is
 * allowed. */
int shk_audit_close(shk_audit *a, shk_error *err);

/* Parses an RFC 3339 time ("2025-01-02T03:04:05.5Z", any offset, any
 * number of fraction digits) into nanoseconds since the epoch. -EINVAL. */
int shk_audit_parse_time(const char *s, int64_t *ns);

/* Reading a log, for the tools. A reader opens the store read-only and
 * may run while the writer writes. */
typedef struct shk_audit_reader shk_audit_reader;

int shk_audit_reader_open(const char *db_path, shk_audit_reader **out, shk_error *err);
void shk_audit_reader_close(shk_audit_reader *r);
/* The number of events in the store (one more than the last seq). */
int shk_audit_reader_count(shk_audit_reader *r, uint64_t *out, shk_error *err);
/* Calls fn for each stored event with from <= seq, in order, with its
 * canonical JSON (not NUL-terminated) and leaf hash, until fn returns
 * nonzero (which is returned) or the events end (0). */
typedef int (*shk_audit_read_fn)(void *data, uint64_t seq, const char *entry, size_t len,
                                 const unsigned char leaf[32]);
int shk_audit_reader_scan(shk_audit_reader *r, uint64_t from, shk_audit_read_fn fn, void *data,
                          shk_error *err);
/* The latest stored checkpoint (a signed note), malloc'd; -ENOENT when the
 * log has none yet. */
int shk_audit_reader_checkpoint(shk_audit_reader *r, char **note, shk_error *err);

/* An inclusion proof of one event against the latest checkpoint. */
typedef struct shk_audit_proof {
  uint64_t seq;               /* the leaf index */
  uint64_t tree_size;         /* the checkpoint's size */
  char *entry;                /* the event's canonical JSON (NUL-terminated) */
  unsigned char leaf[32];     /* SHA-256(0x00 || entry) */
  unsigned char (*path)[32];  /* the RFC 6962 audit path, leaf to root */
  size_t path_len;
  char *checkpoint;           /* the signed note */
} shk_audit_proof;

/* -ENOENT: no such event, or no checkpoint covers it yet. */
int shk_audit_prove(shk_audit_reader *r, uint64_t seq, shk_audit_proof *out, shk_error *err);
void shk_audit_proof_clear(shk_audit_proof *p);

/* The log's public key in the signed-note verifier-key format
 * (NAME+KEYID+BASE64(0x01||PUBLIC)), read from the signing key file
 * (key_path, or NULL: audit.key beside db_path), into a malloc'd string. */
int shk_audit_verifier_key(const char *db_path, const char *key_path, char **out,
                           shk_error *err);

/* What verification found. */
typedef struct shk_audit_report {
  uint64_t events;           /* events in the store */
  uint64_t checkpoints;      /* stored checkpoints checked */
  uint64_t checked_size;     /* the size of the latest good checkpoint */
  bool tampered;
  uint64_t first_bad;        /* when tampered: the first sequence number not vouched for */
  char problem[512];         /* when tampered: the first problem, one sentence */
  unsigned problems;         /* how many problems were found in all */
} shk_audit_report;

typedef struct shk_audit_verify_opts {
  const char *db_path;
  const char *key_path;      /* NULL: audit.key beside the database */
  const char *verifier_key;  /* a trusted verifier key (text); overrides the key file */
  const char *checkpoint;    /* a signed checkpoint kept elsewhere (its text), or NULL */
  /* Called for every problem after the first too; may be NULL. */
  void (*on_problem)(void *data, uint64_t seq, const char *sentence);
  void *data;
} shk_audit_verify_opts;

/* Verifies the whole log: every entry's form, sequence number, chain link
 * and leaf hash; the Merkle tree; every checkpoint's signature, and that each
 * checkpoint is consistent with the one before it (RFC 6962 consistency
 * proofs); the outside checkpoint, if given, is extended by the log. Returns
 * 0 with the report filled (tampered or not), or -EINVAL (a bad checkpoint
 * file or key), -ENOENT, -ENOMEM, -EIO when the store cannot be read. */
int shk_audit_verify(const shk_audit_verify_opts *o, shk_audit_report *rep, shk_error *err);

#ifdef __cplusplus
}
#endif
#endif

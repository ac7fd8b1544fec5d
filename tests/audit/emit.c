/* SPDX-License-Identifier: Apache-2.0 */
/* A producer for the audit tests: appends events to a log through the
 * public builder at full speed, the way the manager, the egress proxy and
 * the sandbox launcher will, and retries an event the full queue refused
 * (counting the refusals, which the writer records).
 *
 *   audit-emit --db FILE [--count N | --forever] [--cp-events N] [--cp-ms N]
 *              [--queue BYTES] [--no-fsync] [--secret S [--leak]]
 *
 * --secret hands S to the builder as a sensitive parameter (hashed);
 * --leak also puts it in a plain field, the control that shows the
 * secrets test can find a value that did get in. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shinken/audit.h"

static void one(shk_audit_event *e, unsigned long i, const char *secret, int leak)
{
  static const char *const enforced[] = { "mount-namespace", "seccomp", "landlock", NULL };
  char session[32], handle[32];
  snprintf(session, sizeof session, "s-%lu", i % 7);
  snprintf(handle, sizeof handle, "h-%08lx", i * 2654435761u);
  switch (i % 4) {
  case 0:
    shk_audit_event_init(e, "grant");
    shk_audit_str(e, SHK_AUDIT_SESSION, session);
    shk_audit_str(e, SHK_AUDIT_AGENT_ID, "agent-1");
    shk_audit_str(e, SHK_AUDIT_MODEL, "model-x");
    shk_audit_str(e, SHK_AUDIT_CLASS, "net.egress");
    shk_audit_str(e, SHK_AUDIT_SCOPE, "{\"domains\":[\"example.com\"]}");
    shk_audit_str(e, SHK_AUDIT_DECISION, "allow");
    shk_audit_str(e, SHK_AUDIT_POLICY, "admin-allow-egress");
    shk_audit_str(e, SHK_AUDIT_TIER, "admin");
    shk_audit_str(e, SHK_AUDIT_OUTCOME, "granted");
    shk_audit_str(e, SHK_AUDIT_LIFETIME, "session");
    shk_audit_str(e, SHK_AUDIT_HANDLE, handle);
    break;
  case 1:
    shk_audit_event_init(e, "proxy-verdict");
    shk_audit_str(e, SHK_AUDIT_SESSION, session);
    shk_audit_str(e, SHK_AUDIT_PROTOCOL, "connect");
    shk_audit_int(e, SHK_AUDIT_CONNECTION, (int64_t)i);
    shk_audit_str(e, SHK_AUDIT_HOST, "example.com");
    shk_audit_int(e, SHK_AUDIT_PORT, 443);
    shk_audit_str(e, SHK_AUDIT_DECISION, i % 8 == 1 ? "deny" : "allow");
    shk_audit_str(e, SHK_AUDIT_REASON, i % 8 == 1 ? "no live handle covers it" : "allowed");
    break;
  case 2:
    shk_audit_event_init(e, "approval");
    shk_audit_str(e, SHK_AUDIT_SESSION, session);
    shk_audit_str(e, SHK_AUDIT_TOOL, "pip");
    shk_audit_int(e, SHK_AUDIT_HUMAN_UID, 1000);
    shk_audit_str(e, SHK_AUDIT_HUMAN_NAME, "ana");
    shk_audit_str(e, SHK_AUDIT_HUMAN_SURFACE, "panel");
    shk_audit_str(e, SHK_AUDIT_CARD, "c-12");
    shk_audit_str(e, SHK_AUDIT_OUTCOME, "approved");
    break;
  default:
    shk_audit_event_init(e, "sandbox-exit");
    shk_audit_str(e, SHK_AUDIT_SESSION, session);
    shk_audit_int(e, SHK_AUDIT_PID, 4242);
    shk_audit_int(e, SHK_AUDIT_EXIT_CODE, 137);
    shk_audit_str(e, SHK_AUDIT_SIGNAL, "SIGKILL");
    shk_audit_str(e, SHK_AUDIT_LIMIT, "memory");
    shk_audit_strv(e, SHK_AUDIT_ENFORCED, enforced);
  }
  if (secret) {
    shk_audit_hashed(e, "token", secret, strlen(secret));
    if (leak && i % 4 != 1)
      shk_audit_str(e, SHK_AUDIT_REASON, secret);
  }
}

int main(int argc, char **argv)
{
  shk_audit_opts o = { 0 };
  unsigned long count = 1000;
  int forever = 0, leak = 0;
  const char *secret = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--forever")) {
      forever = 1;
    } else if (!strcmp(a, "--no-fsync")) {
      o.no_fsync = true;
    } else if (!strcmp(a, "--leak")) {
      leak = 1;
    } else if (v && !strcmp(a, "--db")) {
      o.db_path = v, i++;
    } else if (v && !strcmp(a, "--count")) {
      count = strtoul(v, NULL, 10), i++;
    } else if (v && !strcmp(a, "--cp-events")) {
      o.checkpoint_events = (unsigned)strtoul(v, NULL, 10), i++;
    } else if (v && !strcmp(a, "--cp-ms")) {
      o.checkpoint_ms = (unsigned)strtoul(v, NULL, 10), i++;
    } else if (v && !strcmp(a, "--queue")) {
      o.queue_bytes = strtoul(v, NULL, 10), i++;
    } else if (v && !strcmp(a, "--secret")) {
      secret = v, i++;
    } else {
      fprintf(stderr, "audit-emit: bad argument '%s'\n", a);
      return 1;
    }
  }
  shk_audit *log;
  shk_error err;
  if (shk_audit_open(&o, &log, &err) < 0) {
    fprintf(stderr, "audit-emit: %s\n", err.message);
    return 1;
  }
  unsigned long busy = 0;
  for (unsigned long i = 0; forever || i < count; i++) {
    shk_audit_event e;
    one(&e, i, secret, leak);
    int r;
    while ((r = shk_audit_emit(log, &e, &err)) == -EBUSY) {
      busy++;
      sched_yield();
    }
    if (r < 0) {
      fprintf(stderr, "audit-emit: %s\n", err.message);
      shk_audit_close(log, NULL);
      return 1;
    }
  }
  int r = shk_audit_close(log, &err);
  if (r < 0) {
    fprintf(stderr, "audit-emit: %s\n", err.message);
    return 1;
  }
  printf("emitted %lu refused %lu\n", count, busy);
  return 0;
}

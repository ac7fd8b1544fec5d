/* SPDX-License-Identifier: Apache-2.0 */
/* What a refused client reads: the body of the proxy's 4xx and 5xx
 * answers. The reader is usually a model driving a tool, so each text says
 * what was refused, why, and whether trying again can help, in one short
 * paragraph. A caller that knows better (the manager, with a human's
 * reason) gives its own text instead; these are the proxy's defaults. Pure:
 * no I/O, no global state. */
#include "egress/egress-internal.h"

#include <stdio.h>
#include <string.h>

static bool starts(const char *s, const char *prefix)
{
  return !strncmp(s, prefix, strlen(prefix));
}

size_t shk__eg_refusal_text(const shk__eg_refusal *r, char *out, size_t cap)
{
  char what[SHK_HOST_MAX + 48];
  if (r->host && r->host[0] && r->port)
    snprintf(what, sizeof what, strchr(r->host, ':') ? "the connection to [%s]:%u"
                                                     : "the connection to %s:%u",
             r->host, r->port);
  else if (r->host && r->host[0])
    snprintf(what, sizeof what, "the lookup of %s", r->host);
  else
    snprintf(what, sizeof what, "the request");
  const char *why = r->reason;
  const char *rule = r->rule ? r->rule : "";
  int n;
  if (!strcmp(why, "policy-no-match"))
    n = snprintf(out, cap,
                 "Shinken refused %s: it is not granted to this session (no rule and no live grant "
                 "covers it). Retrying will not help; if the task needs it, ask the user to grant "
                 "access.",
                 what);
  else if (!strcmp(why, "policy-deny") && r->rule_is_config)
    n = snprintf(out, cap,
                 "Shinken refused %s: it is blocked by the administrator's rule \"%s\". Retrying or "
                 "asking again will not help.",
                 what, rule);
  else if (!strcmp(why, "policy-deny") || !strcmp(why, "held-denied"))
    n = snprintf(out, cap, "Shinken refused %s: it was denied%s%s%s. Retrying will not help.", what,
                 r->rule ? " (" : "", rule, r->rule ? ")" : "");
  else if (!strcmp(why, "policy-deny-cidr"))
    n = snprintf(out, cap,
                 "Shinken refused %s: its address is in a range the administrator blocks. Retrying "
                 "will not help.",
                 what);
  else if (starts(why, "ip-"))
    n = snprintf(out, cap,
                 "Shinken refused %s: the destination is a non-public address (%s), which this "
                 "session may not reach. Retrying will not help.",
                 what, why);
  else if (!strcmp(why, "dns-synthetic-unknown"))
    n = snprintf(out, cap,
                 "Shinken refused %s: that address was not handed out by this sandbox's DNS "
                 "resolver, or it has been forgotten. Look the name up again, or connect by name.",
                 what);
  else if (starts(why, "dns-"))
    n = snprintf(out, cap,
                 "Shinken could not complete %s: the name could not be resolved (%s). Retrying may "
                 "help if the name exists.",
                 what, why);
  else if (!strcmp(why, "connect-refused") || !strcmp(why, "connect-unreachable") ||
           !strcmp(why, "connect-timeout") || !strcmp(why, "connect-failed"))
    n = snprintf(out, cap,
                 "Shinken allowed %s, but the destination could not be reached (%s). Retrying "
                 "later may help.",
                 what, why);
  else if (!strcmp(why, "session-connection-limit") || !strcmp(why, "session-setup-limit") ||
           !strcmp(why, "session-held-limit"))
    n = snprintf(out, cap,
                 "Shinken refused %s: this session already has %u %s open, its limit (%s). Close "
                 "connections you no longer need or wait for some to finish, then retry.",
                 what, r->limit,
                 !strcmp(why, "session-held-limit")    ? "connections waiting for approval"
                 : !strcmp(why, "session-setup-limit") ? "connections being set up"
                                                       : "sockets",
                 why);
  else if (!strcmp(why, "proxy-descriptor-reserve") || !strcmp(why, "proxy-out-of-memory"))
    n = snprintf(out, cap,
                 "Shinken refused %s: the proxy is short of resources (%s). Retry in a moment.", what,
                 why);
  else if (!strcmp(why, "proxy-audit-refused"))
    n = snprintf(out, cap,
                 "Shinken refused %s: the audit log could not record it (this session has used its "
                 "share for now, or the log is full), and nothing unrecorded is let through. Retry in "
                 "a moment, and make fewer connections at once.",
                 what);
  else if (!strcmp(why, "hold-timeout"))
    n = snprintf(out, cap,
                 "Shinken refused %s: it waited for approval longer than the proxy holds a "
                 "connection. Asking again helps only when someone is there to answer.",
                 what);
  else if (!strcmp(why, "session-closed"))
    n = snprintf(out, cap, "Shinken refused %s: the session is ending.", what);
  else if (!strcmp(why, "mode-connect-only"))
    n = snprintf(out, cap,
                 "Shinken refused %s: this proxy carries only tunnels (CONNECT and SOCKS5); plain "
                 "http:// requests are refused. Use https:// or a tunnel.",
                 what);
  else if (starts(why, "request-"))
    n = snprintf(out, cap,
                 "Shinken closed %s: the request did not arrive in time (%s). Send the whole "
                 "request at once and retry.",
                 what, why);
  else
    n = snprintf(out, cap,
                 "Shinken refused %s: it is malformed or of a kind the proxy does not carry (%s). "
                 "Retrying the same request will not help.",
                 what, why);
  return n < 0 ? 0 : (size_t)n;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's shared grammar: host names and host patterns, IP addresses and
 * CIDR ranges, ports and port ranges, absolute paths and path prefixes.
 *
 * Each concept has one parser, which yields one canonical form, and one
 * matcher. The caretaker layer (capability scopes), the egress proxy (its
 * configuration and every connection) and the sandbox (its filesystem
 * plan) all read these concepts through this header, so a pattern means the
 * same thing wherever it is read, and a check and a grant can never
 * disagree about what a text says.
 *
 * The case rule, decided here and only here: DNS names are
 * case-insensitive (RFC 4343), so a host name and the host of a pattern are
 * canonicalized to lowercase when parsed; everything after parsing
 * compares canonical text bytewise. IPv6 addresses are canonicalized to
 * RFC 5952 text (lowercase hex). Paths are case-sensitive and are never
 * folded.
 *
 * The library contract (shinken/common.h) holds: every parser returns 0 or
 * -EINVAL and fills an optional shk_error with one sentence naming the
 * problem; the functions that allocate return -ENOMEM when memory runs
 * out. Nothing here prints, exits or keeps global state, so any thread may
 * call anything. */
#ifndef SHINKEN_MATCH_H
#define SHINKEN_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- string vectors ---- */

/* A list of malloc'd strings. Zero-initialized is empty. Whenever v is not
 * NULL, v[n] is NULL, so v can be passed where an argv is expected. */
typedef struct shk_strv {
  char **v;
  size_t n;
} shk_strv;

/* Appends a copy of s. 0, or -ENOMEM with v unchanged. */
int shk_strv_push(shk_strv *v, const char *s);
/* A deep copy of src into dst (which is overwritten, not freed). 0, or
 * -ENOMEM with dst empty. */
int shk_strv_copy(shk_strv *dst, const shk_strv *src);
/* Frees every string and the array; v is empty afterwards. */
void shk_strv_clear(shk_strv *v);

/* ---- IP addresses, CIDR ranges and the non-public classes ---- */

/* An IPv4 or IPv6 address. family is 4 or 6; an IPv4 address uses b[0..3]
 * in network order and leaves the rest zero. */
typedef struct shk_ip {
  uint8_t family;
  uint8_t b[16];
} shk_ip;

/* Room for the text of an address (RFC 5952 IPv6 at most), and of a range. */
#define SHK_IP_TEXT_MAX 46
#define SHK_CIDR_TEXT_MAX (SHK_IP_TEXT_MAX + 4)

/* The strict textual forms only: dotted-quad IPv4 with four decimal parts
 * and no leading zeros, or IPv6 without a zone id. The other IPv4
 * spellings (2130706433, 0177.0.0.1, 127.1) are host spellings, which
 * shk_host_parse normalizes; an address written in a policy has one form. */
int shk_ip_parse(const char *s, size_t len, shk_ip *out, shk_error *err);
/* The canonical text: a dotted quad, or RFC 5952 IPv6 without brackets. */
void shk_ip_format(const shk_ip *ip, char buf[SHK_IP_TEXT_MAX]);

typedef struct shk_cidr {
  shk_ip ip; /* host bits are zero */
  uint8_t prefix;
} shk_cidr;

/* "ADDRESS/PREFIX" with ADDRESS as shk_ip_parse takes it and PREFIX a
 * decimal 0..32 (IPv4) or 0..128 (IPv6) without leading zeros. The prefix
 * is required (one address is /32 or /128) and the address must have no
 * bits set past it: "10.0.0.1/8" and a bare "10.0.0.0" are both more
 * likely a mistake than a wish, and in a deny rule either would silently
 * deny less than was meant. */
int shk_cidr_parse(const char *s, size_t len, shk_cidr *out, shk_error *err);
/* The canonical text: "10.0.0.0/8", "2001:db8::/32". */
void shk_cidr_format(const shk_cidr *c, char buf[SHK_CIDR_TEXT_MAX]);
/* True when ip lies in c. An IPv4 address never lies in an IPv6 range or
 * the reverse: the IPv4-mapped forms are judged by shk_ip_nonpublic, not
 * here. */
bool shk_cidr_contains(const shk_cidr *c, const shk_ip *ip);
/* True when every address of inner lies in outer. */
bool shk_cidr_covers(const shk_cidr *outer, const shk_cidr *inner);

/* NULL when the address is public, else the name of its class
 * ("ip-loopback", "ip-private", "ip-link-local", ...; the words the egress
 * proxy's audit lines carry). IANA's special-purpose registries, reduced to
 * what must never be dialed from a sandbox. IPv6 forms that embed an IPv4
 * address (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4
 * 2002::/16) are judged by the embedded address. */
const char *shk_ip_nonpublic(const shk_ip *ip);

/* ---- ports and port ranges ---- */

/* A decimal port 1..65535: no sign, no leading zero, nothing around it. */
int shk_port_parse(const char *s, size_t len, uint16_t *out, shk_error *err);

/* A port range; a single port has lo == hi. */
typedef struct shk_port_range {
  uint16_t lo, hi;
} shk_port_range;

#define SHK_PORT_RANGE_TEXT_MAX 12

/* "PORT" or "LO-HI", each port as shk_port_parse takes it, LO <= HI. */
int shk_port_range_parse(const char *s, size_t len, shk_port_range *out, shk_error *err);
/* The canonical text: "443" or "8000-8080". */
void shk_port_range_format(const shk_port_range *r, char buf[SHK_PORT_RANGE_TEXT_MAX]);
bool shk_port_range_contains(const shk_port_range *r, uint16_t port);
/* True when every port of inner lies in outer. */
bool shk_port_range_covers(const shk_port_range *outer, const shk_port_range *inner);

/* ---- hosts ---- */

typedef enum shk_host_kind {
  SHK_HOST_NAME = 1,
  SHK_HOST_IPV4,
  SHK_HOST_IPV6,
} shk_host_kind;

#define SHK_HOST_MAX 253 /* the longest DNS name in text form, no trailing dot */

typedef struct shk_host {
  shk_host_kind kind;
  /* Canonical text: a lowercase name without trailing dot, a dotted-quad
   * IPv4 address, or an RFC 5952 IPv6 address without brackets. */
  char text[SHK_HOST_MAX + 1];
  shk_ip ip; /* for SHK_HOST_IPV4 and SHK_HOST_IPV6 */
} shk_host;

/* Canonicalizes LEN bytes (not NUL-terminated; they may hold anything)
 * that stand where a host is expected: a DNS name, a bracketed or bare
 * IPv6 literal, or an IPv4 address in any of its historical spellings
 * (2130706433, 0177.0.0.1, 0x7f.1, 127.1), which become the dotted quad
 * they mean. A name is lowercased and loses one trailing dot. Refused:
 * NUL, control characters, CR and LF, spaces, '%', '_', non-ASCII (an
 * internationalized name must arrive as punycode), empty or over-long
 * labels and names, a label that begins or ends with '-', and a name whose
 * last label is numeric but which is no valid IPv4 address (such a name is
 * never handed to a resolver, which could read it differently).
 *
 * On refusal, *reason (when reason is not NULL) is the refusal's stable
 * token ("host-underscore", "host-bad-ipv4", ...): the word the egress
 * proxy puts in its audit lines and its X-Shinken-Decision header. */
int shk_host_parse(const char *in, size_t len, shk_host *out, const char **reason,
                   shk_error *err);

/* ---- host patterns ---- */

typedef enum shk_host_pattern_kind {
  SHK_HOST_PATTERN_EXACT = 1, /* host: that name only */
  SHK_HOST_PATTERN_SUB,       /* *.host: the names strictly below host */
  SHK_HOST_PATTERN_APEX_SUB,  /* **.host: host and the names below it */
  SHK_HOST_PATTERN_ANY,       /* *: every host (only when the caller allows it) */
} shk_host_pattern_kind;

typedef struct shk_host_pattern {
  shk_host_pattern_kind kind;
  char host[SHK_HOST_MAX + 1]; /* canonical name; empty for SHK_HOST_PATTERN_ANY */
  uint16_t port;               /* 0: any port */
} shk_host_pattern;

#define SHK_HOST_PATTERN_TEXT_MAX (3 + SHK_HOST_MAX + 6 + 1)

/* Flags of shk_host_pattern_parse. */
#define SHK_HOST_PATTERN_ALLOW_ANY 0x1u /* accept a bare "*" */

/* "host", "*.host" or "**.host", each with an optional ":PORT" (as
 * shk_port_parse takes it), and, with SHK_HOST_PATTERN_ALLOW_ANY, a bare
 * "*". The host is a DNS name as shk_host_parse reads it (so it is
 * lowercased); an IP address is not a pattern (ranges are CIDRs), and '*'
 * stands nowhere but as the whole first label. */
int shk_host_pattern_parse(const char *s, size_t len, unsigned flags, shk_host_pattern *out,
                           shk_error *err);
/* The canonical text: "**.example.test:443". */
void shk_host_pattern_format(const shk_host_pattern *p, char buf[SHK_HOST_PATTERN_TEXT_MAX]);
/* True when p admits the canonical host h on port. Port 0 asks about the
 * name alone (a DNS lookup names no port), so the pattern's port is not
 * consulted. Only SHK_HOST_PATTERN_ANY admits an IP address: a name
 * pattern never does, whatever the name resolves to. */
bool shk_host_pattern_matches(const shk_host_pattern *p, const shk_host *h, uint16_t port);
/* True when every host and port inner admits, outer admits too. */
bool shk_host_pattern_covers(const shk_host_pattern *outer, const shk_host_pattern *inner);

/* ---- paths ---- */

/* 0 when path is canonical: absolute, without ".", ".." or empty
 * components, and without a trailing '/' (except "/" itself). A prefix test
 * on canonical paths is a test on directories, so "/w" never covers
 * "/work". Checking refuses instead of normalizing: a path in a grant says
 * exactly what it grants, and "/a/../etc" only means "/etc" when /a is not
 * a symbolic link. */
int shk_path_check(const char *path, shk_error *err);
/* The canonical form of path (made absolute against cwd when relative),
 * with ".", ".." and repeated '/' removed lexically, into *out (malloc'd).
 * ".." at the root stays at the root. Lexical on purpose, for paths that
 * need not exist: a caller that must follow symbolic links resolves them
 * first. -EINVAL when path is empty or relative while cwd is NULL or not
 * absolute; -ENOMEM. */
int shk_path_normalize(const char *path, const char *cwd, char **out, shk_error *err);
/* True when path is prefix or lies beneath it, on component boundaries;
 * both canonical. */
bool shk_path_within(const char *path, const char *prefix);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Shinken's library contract, shared by every module's header.
 *
 * Every library function that can fail returns 0 (or a count) on success
 * and a negative errno from the set below on failure. Where a person must
 * read why, the function takes an optional `shk_error *` (NULL is allowed)
 * and fills it with one sentence, and for errors in a text also the file,
 * line and column. Library code never prints and never exits, out of memory
 * included: it returns -ENOMEM.
 *
 * The errors every module may return:
 *   -EINVAL     bad input: a malformed text, an unknown field, a bad value
 *   -ENOMEM     out of memory
 *   -ENOENT     no such object (file, session, handle, policy)
 *   -EEXIST     the object is already there
 *   -EACCES     refused by policy, by a revoked or expired handle, or by a human
 *   -EPERM      refused because the caller may not ask for this at all
 *   -EBUSY      the object is in use
 *   -ENOSYS     this host has no mechanism that could enforce it
 *   -ETIMEDOUT  a bounded wait ran out
 *   -EIO        the system failed underneath (a write, a socket, a child)
 * Other negative errno values pass through from the system calls that
 * produced them and are documented where a function can return them. */
#ifndef SHINKEN_COMMON_H
#define SHINKEN_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong, for a person: one sentence, and for an error in a text
 * its place (file as the caller named it, or ""; 1-based line and column,
 * 0 when the error has no place). */
typedef struct shk_error {
  char message[512];
  char file[256];
  unsigned line;
  unsigned column;
} shk_error;

/* A short description of one of the codes above (negative or positive);
 * never NULL. */
const char *shk_strerror(int code);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *shk_version(void);

#ifdef __cplusplus
}
#endif
#endif

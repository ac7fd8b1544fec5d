/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers that print and exit: for the CLI (src/cli/) and the sandbox's
 * stage 2 program only, where ending the process is the right answer to an
 * error. Library code returns errors instead (include/shinken/common.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"

/* Prints "shinken: MESSAGE" on stderr and exits with status CODE. */
SHK_NORETURN SHK_PRINTF(2, 3) void shk__die(int code, const char *fmt, ...);
/* Same, with ": strerror(errno)" appended. */
SHK_NORETURN SHK_PRINTF(2, 3) void shk__die_errno(int code, const char *fmt, ...);
/* After shk__die_json(true), shk__die also prints {"ok": false, "error":
 * MESSAGE, "status": CODE} on stdout: a command given --json answers in
 * JSON even when it fails. */
void shk__die_json(bool on);
/* Prints "shinken: MESSAGE" on stderr and goes on. */
SHK_PRINTF(1, 2) void shk__warn(const char *fmt, ...);

/* Allocation that cannot fail: out of memory ends the process, which is the
 * only sensible reaction in a command-line program. */
void *shk__xmalloc(size_t n);
void *shk__xcalloc(size_t n, size_t m);
void *shk__xrealloc(void *p, size_t n);
char *shk__xstrdup(const char *s);
SHK_PRINTF(1, 2) char *shk__xasprintf(const char *fmt, ...);

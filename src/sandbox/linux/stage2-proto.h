/* SPDX-License-Identifier: Apache-2.0 */
/* The stage-2 protocol: what the launcher tells stage 2 (its command line)
 * and what stage 2 tells the launcher back (one message on the sync socket,
 * just before it execs the command). Both directions live in
 * stage2-proto.c, writer beside parser, so they cannot drift apart. The
 * parser and the report run inside the sandbox, in a program that may have
 * no C library: they use nothing but what this header and sys.h give. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shinken/sandbox.h"

typedef struct shk__stage2_list {
  const char *const *v;
  size_t n;
} shk__stage2_list;

typedef struct shk__stage2_args {
  shk_net_mode net;
  bool landlock, seccomp, guard; /* false only when degraded mode was allowed */
  /* The write observer: a second seccomp filter hands the workload's
   * write-intent calls to the launcher, which reports the refused ones
   * (observe.c); only with seccomp. */
  bool observe;
  int sync_fd;                   /* the launcher's socket */
  int exe_fd;                    /* the descriptor stage 2 was run from, or -1 */
  /* After its mounts, stage 2 enters a user namespace of its own that maps
   * these ids (the caller's, outside) to the uid and gid 0 bwrap set it up
   * with, so that the workload sees its own ids; -1: it does not. */
  long map_uid, map_gid;
  /* stdin is the workload's pseudo-terminal: stage 2 makes it the
   * controlling terminal of its session, so that the workload's shell has
   * job control. */
  bool ctty;
  /* Masks stage 2 makes itself, in order, while it still may mount:
   * /dev/null over a file, an empty read-only tmpfs over a directory, a
   * read-only bind of a file onto itself. A path marked created did not
   * exist on the host: stage 2 makes the mount point first. */
  shk__stage2_list mask_files, mask_dirs, ro_files, create_files, create_dirs;
  /* Read-only binds of directories onto themselves, pins (writable binds
   * onto themselves, which cannot be renamed or removed), and /dev/null
   * over symlinks the plan found where a protected path should be. */
  shk__stage2_list ro_dirs, pins, mask_links;
  /* The sandbox's own files: data_texts[i] is bound read-only onto the
   * regular file data_paths[i] (the same count); the create_ ones did not
   * exist on the host, and stage 2 makes them first, holding the text. */
  shk__stage2_list data_paths, data_texts, create_data_paths, create_data_texts;
  /* Lines stage 2 prints on stderr just before it execs the command (the
   * plan's warnings), so that they come before anything the command says. */
  shk__stage2_list warnings;
  /* The private tmpfs mounts whose size stage 2 bounds to tmpfs_size. */
  shk__stage2_list tmpfs;
  uint64_t tmpfs_size;
  /* Landlock: read-only, full, and device access beneath these. */
  shk__stage2_list ll_ro, ll_rw, ll_dev;
  char *const *command; /* NULL-terminated */
  size_t ncommand;
} shk__stage2_args;

/* Writes A as stage 2's arguments (after its program path, from
 * "__stage2" on) through PUSH,
 * which copies each string; stops at the first nonzero PUSH and returns
 * it. */
int shk__stage2_args_write(const shk__stage2_args *a, int (*push)(void *ctx, const char *arg),
                           void *ctx);

/* Parses ARGV (ARGC entries from the "__stage2" the writer wrote first;
 * the program's own path comes before it) into A, whose lists then
 * point into ARGV: each list is written as its name, a count and that many
 * paths. Returns 0, or -1 with *WHY naming the problem. */
int shk__stage2_args_parse(int argc, char **argv, shk__stage2_args *a, const char **why);

/* What stage 2 applied: sent as one message of exactly this size on the
 * sync socket, with the seccomp listener attached when SHK__APPLIED_GUARD
 * or SHK__APPLIED_OBSERVE is set, and after it the connect() guard's
 * sock_diag socket with the guard. */
enum {
  SHK__APPLIED_KEYRING = 1 << 0,
  SHK__APPLIED_BRIDGE = 1 << 1,
  SHK__APPLIED_CAPS = 1 << 2,
  SHK__APPLIED_NNP = 1 << 3,
  SHK__APPLIED_LANDLOCK_NET = 1 << 4,
  SHK__APPLIED_LANDLOCK_SCOPE = 1 << 5,
  SHK__APPLIED_GUARD = 1 << 6,
  SHK__APPLIED_SECCOMP = 1 << 7,
  SHK__APPLIED_USERNS = 1 << 8,
  SHK__APPLIED_CTTY = 1 << 9,
  SHK__APPLIED_OBSERVE = 1 << 10,
};

#define SHK__STAGE2_MAGIC 0x326b6873u /* "shk2" */

typedef struct shk__stage2_report {
  uint32_t magic;
  uint32_t size;         /* sizeof (shk__stage2_report), checked by the launcher */
  int32_t landlock_abi;  /* the ABI Landlock was applied at; 0: not applied */
  uint32_t flags;        /* SHK__APPLIED_* */
  uint32_t masks;        /* mounts stage 2 made (bwrap made the others), its own
                          * files and bounded tmpfs mounts included */
} shk__stage2_report;

/* The launcher's side: checks a received message (LEN bytes) against what
 * was asked (A) and fills OUT. Returns 0, or -1 with *WHY when the message
 * is malformed or says less was applied than asked. LISTENER and DIAG: the
 * descriptors that came with it. */
int shk__stage2_report_read(const void *msg, size_t len, bool listener, bool diag,
                            const shk__stage2_args *a, shk_sandbox_applied *out, const char **why);

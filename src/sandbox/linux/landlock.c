/* SPDX-License-Identifier: Apache-2.0 */
/* Landlock in stage 2: a second, independent fence around the same view the
 * mount namespace builds, so that a mistake in one does not open the other.
 * The UAPI header of an older distribution may predate the newer ABIs, so
 * their values are spelled out here from the kernel's documentation. Stage
 * 2 code: system calls only (sys.h). */
#include "sandbox-internal.h"

#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/landlock.h>
#include <linux/stat.h>

#include "sys.h"

#define LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)  /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

/* The ruleset attribute as of ABI 6; an older kernel accepts it as long as
 * the fields it does not know are zero. */
struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

#define LL_FS_READ                                                                       \
  (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

static uint64_t fs_all(int abi)
{
  uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0-12 */
  if (abi >= 2)
    all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3)
    all |= LL_FS_TRUNCATE;
  if (abi >= 5)
    all |= LL_FS_IOCTL_DEV;
  return all;
}

static int add_rules(int ruleset, const shk__stage2_list *paths, uint64_t access)
{
  for (size_t i = 0; i < paths->n; i++) {
    long fd = shk__sys(__NR_openat, AT_FDCWD, paths->v[i], O_PATH | O_CLOEXEC);
    if (fd < 0) {
      /* A path that is not in the view grants nothing; skipping it is the
       * closed choice. */
      if (fd == -ENOENT)
        continue;
      return (int)fd;
    }
    struct landlock_path_beneath_attr pb = { .allowed_access = access, .parent_fd = (int)fd };
    struct statx stx;
    /* Directory-only rights on a file are rejected by the kernel. */
    if (shk__sys(__NR_statx, fd, "", AT_EMPTY_PATH, STATX_TYPE, &stx) == 0 &&
        (stx.stx_mode & SHK__S_IFMT) != SHK__S_IFDIR)
      pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                           LANDLOCK_ACCESS_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    long r = shk__sys(__NR_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    shk__sys(__NR_close, fd);
    if (r < 0)
      return (int)r;
  }
  return 0;
}

/* Safe because Landlock can only take access away from this process and its
 * children; every failure is returned so the caller refuses to run. */
int shk__landlock_apply(const shk__stage2_args *a, unsigned *flags)
{
  long abi = shk__sys(__NR_landlock_create_ruleset, 0, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1)
    return -EOPNOTSUPP;
  uint64_t all = fs_all((int)abi);
  struct ll_ruleset_attr attr = { .handled_access_fs = all };
  if (abi >= 4 && a->net == SHK_NET_NONE) {
    attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    *flags |= SHK__APPLIED_LANDLOCK_NET;
  }
  if (abi >= 6) {
    attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
    *flags |= SHK__APPLIED_LANDLOCK_SCOPE;
  }
  long rs = shk__sys(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (rs < 0)
    return (int)rs;
  int r;
  if ((r = add_rules((int)rs, &a->ll_ro, LL_FS_READ & all)) == 0 &&
      (r = add_rules((int)rs, &a->ll_rw, all)) == 0 &&
      (r = add_rules((int)rs, &a->ll_dev,
                     (LL_FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LL_FS_IOCTL_DEV) & all)) == 0)
    r = (int)shk__sys(__NR_landlock_restrict_self, rs, 0);
  shk__sys(__NR_close, rs);
  return r < 0 ? r : (int)abi;
}

/* Landlock in stage 2: a second, independent fence around the same view the
 * mount namespace builds, so that a mistake in one does not open the other.
 * The UAPI header of an older distribution may predate the newer ABIs, so
 * their values are spelled out here from the kernel's documentation. */
#include "sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common/common.h"

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

static int add_rules(int ruleset, const char *const *paths, size_t n, uint64_t access)
{
  for (size_t i = 0; i < n; i++) {
    shk_autoclose int fd = open(paths[i], O_PATH | O_CLOEXEC);
    if (fd < 0) {
      /* A path that is not in the view grants nothing; skipping it is the
       * closed choice. */
      if (errno == ENOENT)
        continue;
      return -errno;
    }
    struct landlock_path_beneath_attr pb = { .allowed_access = access, .parent_fd = fd };
    struct stat st;
    /* Directory-only rights on a file are rejected by the kernel. */
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
      pb.allowed_access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                           LANDLOCK_ACCESS_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
      return -errno;
  }
  return 0;
}

/* Safe because Landlock can only take access away from this process and its
 * children; every failure is returned so the caller refuses to run. */
int shk__landlock_apply(const char *const *ro, size_t nro, const char *const *rw,
                               size_t nrw, const char *const *dev, size_t ndev, bool deny_tcp)
{
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1)
    return -ENOTSUP;
  uint64_t all = fs_all((int)abi);
  struct ll_ruleset_attr attr = { .handled_access_fs = all };
  if (abi >= 4 && deny_tcp)
    attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
  if (abi >= 6)
    attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
  shk_autoclose int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (rs < 0)
    return -errno;
  int r;
  if ((r = add_rules(rs, ro, nro, LL_FS_READ & all)) < 0 ||
      (r = add_rules(rs, rw, nrw, all)) < 0 ||
      (r = add_rules(rs, dev, ndev,
                     (LL_FS_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LL_FS_IOCTL_DEV) & all)) < 0)
    return r;
  if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
    return -errno;
  return (int)abi;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The stage-2 protocol (stage2-proto.h): the command line the launcher
 * writes and stage 2 parses, and the report stage 2 sends back. Nothing
 * here calls the C library: the parser runs in stage 2 before anything
 * else. */
#include "stage2-proto.h"

#include "sys.h"

/* The lists, by their names on the command line. */
static const struct {
  const char *name;
  size_t offset;
} lists[] = {
  { "--mask-files", offsetof(shk__stage2_args, mask_files) },
  { "--mask-dirs", offsetof(shk__stage2_args, mask_dirs) },
  { "--ro-files", offsetof(shk__stage2_args, ro_files) },
  { "--create-files", offsetof(shk__stage2_args, create_files) },
  { "--create-dirs", offsetof(shk__stage2_args, create_dirs) },
  { "--ro-dirs", offsetof(shk__stage2_args, ro_dirs) },
  { "--pins", offsetof(shk__stage2_args, pins) },
  { "--mask-links", offsetof(shk__stage2_args, mask_links) },
  { "--data-paths", offsetof(shk__stage2_args, data_paths) },
  { "--data-texts", offsetof(shk__stage2_args, data_texts) },
  { "--create-data-paths", offsetof(shk__stage2_args, create_data_paths) },
  { "--create-data-texts", offsetof(shk__stage2_args, create_data_texts) },
  { "--tmpfs", offsetof(shk__stage2_args, tmpfs) },
  { "--warnings", offsetof(shk__stage2_args, warnings) },
  { "--ll-ro", offsetof(shk__stage2_args, ll_ro) },
  { "--ll-rw", offsetof(shk__stage2_args, ll_rw) },
  { "--ll-dev", offsetof(shk__stage2_args, ll_dev) },
};
#define NLISTS (sizeof lists / sizeof lists[0])

static shk__stage2_list *list_at(shk__stage2_args *a, size_t i)
{
  return (shk__stage2_list *)((char *)a + lists[i].offset);
}

static const char *const net_names[] = { [SHK_NET_NONE] = "none", [SHK_NET_PROXY] = "proxy",
                                         [SHK_NET_HOST] = "host" };

int shk__stage2_args_write(const shk__stage2_args *a, int (*push)(void *ctx, const char *arg),
                           void *ctx)
{
  char num[24];
  int r;
#define PUSH(s)                \
  do {                         \
    if ((r = push(ctx, (s)))) \
      return r;                \
  } while (0)
  PUSH("__stage2");
  PUSH("--net");
  PUSH(net_names[a->net]);
  PUSH("--sync-fd");
  PUSH(shk__s_utoa((uint64_t)a->sync_fd, num));
  if (a->exe_fd >= 0) {
    PUSH("--exe-fd");
    PUSH(shk__s_utoa((uint64_t)a->exe_fd, num));
  }
  if (a->map_uid >= 0) {
    PUSH("--map-uid");
    PUSH(shk__s_utoa((uint64_t)a->map_uid, num));
    PUSH("--map-gid");
    PUSH(shk__s_utoa((uint64_t)a->map_gid, num));
  }
  if (a->tmpfs.n) {
    char size[24];
    PUSH("--tmpfs-size");
    PUSH(shk__s_utoa(a->tmpfs_size, size));
  }
  if (!a->landlock)
    PUSH("--no-landlock");
  if (!a->seccomp)
    PUSH("--no-seccomp");
  if (!a->guard)
    PUSH("--no-guard");
  if (a->ctty)
    PUSH("--ctty");
  if (a->observe)
    PUSH("--observe");
  for (size_t i = 0; i < NLISTS; i++) {
    const shk__stage2_list *l = list_at((shk__stage2_args *)a, i);
    if (!l->n)
      continue;
    PUSH(lists[i].name);
    PUSH(shk__s_utoa(l->n, num));
    for (size_t k = 0; k < l->n; k++)
      PUSH(l->v[k]);
  }
  PUSH("--");
  for (size_t i = 0; i < a->ncommand; i++)
    PUSH(a->command[i]);
#undef PUSH
  return 0;
}

/* A descriptor number the launcher wrote: above stderr. */
static int fd_arg(const char *s)
{
  long v = shk__s_atou(s);
  return v >= 3 && v < 1 << 20 ? (int)v : -1;
}

int shk__stage2_args_parse(int argc, char **argv, shk__stage2_args *a, const char **why)
{
  *a = (shk__stage2_args){ .net = SHK_NET_NONE, .landlock = true, .seccomp = true,
                           .guard = true, .sync_fd = -1, .exe_fd = -1, .map_uid = -1,
                           .map_gid = -1 };
  bool net = false;
  int i = 1;
  *why = "stage 2 is run by 'shinken run' only";
  if (argc < 1 || !shk__s_eq(argv[0], "__stage2"))
    return -1;
  for (; i < argc && !shk__s_eq(argv[i], "--"); i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (shk__s_eq(o, "--no-landlock")) {
      a->landlock = false;
      continue;
    }
    if (shk__s_eq(o, "--no-seccomp")) {
      a->seccomp = false;
      continue;
    }
    if (shk__s_eq(o, "--no-guard")) {
      a->guard = false;
      continue;
    }
    if (shk__s_eq(o, "--ctty")) {
      a->ctty = true;
      continue;
    }
    if (shk__s_eq(o, "--observe")) {
      a->observe = true;
      continue;
    }
    if (!v)
      return -1;
    i++;
    if (shk__s_eq(o, "--net")) {
      net = true;
      size_t m = 0;
      while (m < 3 && !shk__s_eq(v, net_names[m]))
        m++;
      if (m == 3)
        return -1;
      a->net = (shk_net_mode)m;
    } else if (shk__s_eq(o, "--sync-fd")) {
      if ((a->sync_fd = fd_arg(v)) < 0)
        return -1;
    } else if (shk__s_eq(o, "--exe-fd")) {
      if ((a->exe_fd = fd_arg(v)) < 0)
        return -1;
    } else if (shk__s_eq(o, "--map-uid")) {
      if ((a->map_uid = shk__s_atou(v)) < 0)
        return -1;
    } else if (shk__s_eq(o, "--map-gid")) {
      if ((a->map_gid = shk__s_atou(v)) < 0)
        return -1;
    } else if (shk__s_eq(o, "--tmpfs-size")) {
      uint64_t size = 0;
      size_t k = 0;
      for (; v[k] >= '0' && v[k] <= '9' && k < 19; k++)
        size = size * 10 + (uint64_t)(v[k] - '0');
      if (k == 0 || v[k] || size == 0)
        return -1;
      a->tmpfs_size = size;
    } else {
      size_t l = 0;
      while (l < NLISTS && !shk__s_eq(o, lists[l].name))
        l++;
      long n = shk__s_atou(v);
      if (l == NLISTS || n < 1 || n > argc - i - 1 || list_at(a, l)->n)
        return -1;
      *list_at(a, l) = (shk__stage2_list){ (const char *const *)argv + i + 1, (size_t)n };
      i += (int)n;
    }
  }
  if (i + 1 >= argc || !net || a->sync_fd < 0 || (a->map_uid < 0) != (a->map_gid < 0) ||
      a->data_paths.n != a->data_texts.n || a->create_data_paths.n != a->create_data_texts.n ||
      (a->tmpfs.n > 0) != (a->tmpfs_size > 0) || (a->observe && !a->seccomp))
    return -1;
  a->command = argv + i + 1;
  a->ncommand = (size_t)(argc - i - 1);
  return 0;
}

int shk__stage2_report_read(const void *msg, size_t len, bool listener, bool diag,
                            const shk__stage2_args *a, shk_sandbox_applied *out, const char **why)
{
  shk__stage2_report rep;
  *why = "stage 2's report is malformed";
  if (len != sizeof rep)
    return -1;
  const unsigned char *src = msg;
  unsigned char *dst = (unsigned char *)&rep;
  for (size_t k = 0; k < len; k++)
    dst[k] = src[k];
  if (rep.magic != SHK__STAGE2_MAGIC || rep.size != sizeof rep || rep.landlock_abi < 0)
    return -1;
  unsigned f = rep.flags;
  *out = (shk_sandbox_applied){
    .landlock_abi = rep.landlock_abi,
    .landlock_net = f & SHK__APPLIED_LANDLOCK_NET,
    .landlock_scope = f & SHK__APPLIED_LANDLOCK_SCOPE,
    .seccomp = f & SHK__APPLIED_SECCOMP,
    .guard = f & SHK__APPLIED_GUARD,
    .caps_dropped = f & SHK__APPLIED_CAPS,
    .no_new_privs = f & SHK__APPLIED_NNP,
    .keyring = f & SHK__APPLIED_KEYRING,
    .bridge = f & SHK__APPLIED_BRIDGE,
    .userns = f & SHK__APPLIED_USERNS,
    .observe = f & SHK__APPLIED_OBSERVE,
    .masks = rep.masks,
  };
  /* Stage 2 stops rather than run the command with less; a report of less
   * is a broken stage 2, and the launcher treats it as one. */
  size_t masks = a->mask_files.n + a->mask_dirs.n + a->ro_files.n + a->create_files.n +
                 a->create_dirs.n + a->ro_dirs.n + a->pins.n + a->mask_links.n + a->data_paths.n +
                 a->create_data_paths.n + a->tmpfs.n;
  *why = "stage 2 applied less than it was asked to";
  if ((a->landlock && !rep.landlock_abi) || (a->seccomp && !out->seccomp) ||
      (a->seccomp && a->guard) != out->guard || (a->seccomp && a->observe) != out->observe ||
      (out->guard || out->observe) != listener || out->guard != diag || !out->caps_dropped ||
      !out->no_new_privs || !out->keyring || (a->net == SHK_NET_PROXY) != out->bridge ||
      (a->map_uid >= 0) != out->userns || a->ctty != ((f & SHK__APPLIED_CTTY) != 0) ||
      rep.masks != masks)
    return -1;
  return 0;
}

/* Stage 2 (`shinken __stage2`): run by bwrap inside the new namespaces, it
 * applies the layers bwrap does not (a fresh keyring, the egress bridge,
 * dropping every capability, no-new-privs, Landlock, seccomp last) and execs
 * the workload. Every failure exits 125 before the workload runs: nothing
 * runs with less than what was asked. Its command line is written by the
 * launcher only. This is the one program of the module that may die. */
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/egress.h"
#include "sandbox-internal.h"

#define STAGE2_FAIL 125

typedef struct list {
  const char **v;
  size_t n;
} list;

static void list_add(list *l, const char *s)
{
  l->v = shk__xrealloc(l->v, (l->n + 1) * sizeof *l->v);
  l->v[l->n++] = s;
}

/* Safe because it only replaces this process's session keyring with a new,
 * empty one: keys of the caller's session are never reachable inside. */
static void fresh_keyring(void)
{
  if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0)
    shk__die_errno(STAGE2_FAIL, "stage 2: a fresh session keyring");
}

/* The one byte that tells the launcher the sandbox is complete, with the
 * connect() guard's listener when there is one. */
static int send_ready(int sock, int listener)
{
  char b = '1';
  struct iovec iov = { &b, 1 };
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
  if (listener >= 0) {
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof u.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &listener, sizeof listener);
  }
  return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

int shk_sandbox_stage2(int argc, char **argv)
{
  shk_net_mode net = SHK_NET_NONE;
  bool net_given = false, landlock = true, seccomp = true, guard = true;
  int sync_fd = -1;
  list ro = { 0 }, rw = { 0 }, dev = { 0 }, mask = { 0 };
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (!strcmp(a, "--no-landlock")) {
      landlock = false;
    } else if (!strcmp(a, "--no-seccomp")) {
      seccomp = false;
    } else if (!strcmp(a, "--no-guard")) {
      guard = false;
    } else if (v && !strcmp(a, "--net")) {
      net_given = true;
      if (!strcmp(v, "none"))
        net = SHK_NET_NONE;
      else if (!strcmp(v, "proxy"))
        net = SHK_NET_PROXY;
      else if (!strcmp(v, "host"))
        net = SHK_NET_HOST;
      else
        shk__die(STAGE2_FAIL, "stage 2: bad --net %s", v);
      i++;
    } else if (v && !strcmp(a, "--sync-fd")) {
      sync_fd = atoi(v);
      i++;
    } else if (v && !strcmp(a, "--ll-ro")) {
      list_add(&ro, argv[++i]);
    } else if (v && !strcmp(a, "--ll-rw")) {
      list_add(&rw, argv[++i]);
    } else if (v && !strcmp(a, "--ll-dev")) {
      list_add(&dev, argv[++i]);
    } else if (v && !strcmp(a, "--mask")) {
      list_add(&mask, argv[++i]);
    } else {
      shk__die(STAGE2_FAIL, "stage 2 is run by 'shinken run' only (unexpected '%s')", a);
    }
  }
  if (i >= argc || !net_given || sync_fd < 3)
    shk__die(STAGE2_FAIL, "stage 2 is run by 'shinken run' only");
  /* The workload must never inherit the socket that tells the launcher it
   * started. */
  if (fcntl(sync_fd, F_SETFD, FD_CLOEXEC) < 0)
    shk__die_errno(STAGE2_FAIL, "stage 2: sync fd");
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
    shk__die_errno(STAGE2_FAIL, "stage 2: PR_SET_PDEATHSIG");

  /* The masks bwrap left to stage 2 (bwrap.c), while it still may mount. */
  for (size_t m = 0; m < mask.n; m++) {
    int r = shk__mask_file(mask.v[m]);
    if (r < 0)
      shk__die(STAGE2_FAIL, "stage 2: masking %s: %s", mask.v[m], strerror(-r));
  }
  free(mask.v);
  fresh_keyring();
  if (net == SHK_NET_PROXY) {
    /* The bridge helper keeps running beside the workload: nothing inside
     * may ptrace it or read its memory. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
      shk__die_errno(STAGE2_FAIL, "stage 2: PR_SET_DUMPABLE");
    int r = shk_egress_bridge_start(SHK_SANDBOX_EGRESS_DIR);
    if (r < 0)
      shk__die(STAGE2_FAIL, "stage 2: egress bridge: %s", strerror(-r));
    if ((r = shk_egress_apply_env()) < 0)
      shk__die(STAGE2_FAIL, "stage 2: proxy environment: %s", strerror(-r));
  }
  int r = shk__drop_caps();
  if (r < 0)
    shk__die(STAGE2_FAIL, "stage 2: dropping capabilities: %s", strerror(-r));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    shk__die_errno(STAGE2_FAIL, "stage 2: PR_SET_NO_NEW_PRIVS");
  if (landlock) {
    r = shk__landlock_apply(ro.v, ro.n, rw.v, rw.n, dev.v, dev.n, net == SHK_NET_NONE);
    if (r < 0)
      shk__die(STAGE2_FAIL, "stage 2: Landlock: %s", strerror(-r));
  }
  free(ro.v);
  free(rw.v);
  free(dev.v);
  int listener = -1;
  if (seccomp && guard && (listener = shk__guard_install()) < 0)
    shk__die(STAGE2_FAIL, "stage 2: connect() guard: %s", strerror(-listener));
  if (seccomp && (r = shk__seccomp_apply(net)) < 0)
    shk__die(STAGE2_FAIL, "stage 2: seccomp: %s", strerror(-r));
  if (send_ready(sync_fd, listener) < 0)
    shk__die_errno(STAGE2_FAIL, "stage 2: sync socket");
  if (listener >= 0)
    close(listener);
  execvp(argv[i], argv + i);
  int err = errno;
  shk__warn("%s: %s", argv[i], strerror(err));
  /* _exit: past seccomp, exit-time hooks (sanitizers') may not work. */
  _exit(err == ENOENT ? 127 : 126);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Stage-2 side: inside the sandbox's own network namespace, the only way
 * out is the loopback listeners below, and each of them leads to one of the
 * session's unix sockets. The relay runs in a helper process that is not
 * dumpable, so the workload (same uid, no capabilities) cannot ptrace it or
 * read its memory, and that dies with stage 2's process, i.e. with the
 * workload. */
#include "shinken/egress.h"

#include "common/common.h"
#include "egress/egress-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define DNS_SECONDS 10
/* The helper's own descriptor bound, soft and hard: a relayed connection
 * takes six (two sockets, two pipes), so this carries the session's
 * default limit of sockets with room to spare, and the hard limit cannot
 * be raised again without CAP_SYS_RESOURCE, which the workload does not
 * have. */
#define HELPER_NOFILE 8192
/* UDP queries in flight at once; each holds a stream to the stub. */
#define UDP_MAX 256
/* After accept() fails for want of descriptors, the listener rests. */
#define PAUSE_MS 100

enum { L_HTTP, L_SOCKS5, L_DNS_TCP, L_DNS_UDP, L_SUDO, L_COUNT };

static const struct {
  uint16_t port;
  int type;
  const char *sock;
} bridge_ports[L_COUNT] = {
  [L_HTTP] = { 3128, SOCK_STREAM, "http.sock" },
  [L_SOCKS5] = { 1080, SOCK_STREAM, "socks5.sock" },
  [L_DNS_TCP] = { 53, SOCK_STREAM, "dns.sock" },
  [L_DNS_UDP] = { 53, SOCK_DGRAM, "dns.sock" },
  /* The sudo shim's way to the manager (a privileged command is a request
   * like a connection: decided, maybe asked, outside the sandbox). */
  [L_SUDO] = { SHK_EGRESS_SUDO_PORT, SOCK_STREAM, SHK_EGRESS_SUDO_SOCK },
};

struct helper {
  struct event_base *base;
  char paths[L_COUNT][PATH_MAX];
  unsigned udp_inflight;
};

/* Safe: it only raises the flags of "lo" in the caller's own, fresh network
 * namespace, which holds no other interface. */
static int lo_up(void)
{
  shk_autoclose int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  struct ifreq ifr = { 0 };
  strcpy(ifr.ifr_name, "lo");
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
    return -errno;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  return ioctl(fd, SIOCSIFFLAGS, &ifr) < 0 ? -errno : 0;
}

/* Adds ADDR (one address, a /32 or /128) to "lo" with rtnetlink; 0 or a
 * negative errno. */
static int lo_add_address(const shk_ip *addr)
{
  shk_autoclose int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0)
    return -errno;
  unsigned idx = if_nametoindex("lo");
  if (!idx)
    return -errno;
  size_t alen = addr->family == 4 ? 4 : 16;
  struct {
    struct nlmsghdr nh;
    struct ifaddrmsg ifa;
    char attrs[2 * RTA_SPACE(16)];
  } req = { 0 };
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof req.ifa);
  req.nh.nlmsg_type = RTM_NEWADDR;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  req.ifa.ifa_family = addr->family == 4 ? AF_INET : AF_INET6;
  req.ifa.ifa_prefixlen = (unsigned char)(alen * 8);
  req.ifa.ifa_flags = IFA_F_NODAD | IFA_F_PERMANENT;
  req.ifa.ifa_scope = RT_SCOPE_HOST;
  req.ifa.ifa_index = idx;
  const unsigned short types[] = { IFA_LOCAL, IFA_ADDRESS };
  for (size_t i = 0; i < 2; i++) {
    struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
    rta->rta_type = types[i];
    rta->rta_len = (unsigned short)RTA_LENGTH(alen);
    memcpy(RTA_DATA(rta), addr->b, alen);
    req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
  }
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
    return -errno;
  char buf[512];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
    return -EIO;
  struct nlmsghdr *nh = (struct nlmsghdr *)buf;
  if (nh->nlmsg_type != NLMSG_ERROR)
    return -EIO;
  return ((struct nlmsgerr *)NLMSG_DATA(nh))->error;
}

/* Programs that ask getaddrinfo for AI_ADDRCONFIG (curl among them) get
 * no address at all on a host with nothing but 127.0.0.1 and ::1: glibc
 * counts an address family as configured only for an address other than
 * those two. The sandbox's lo gets one more address of each family, the
 * first of the DNS stub's synthetic ranges, which the stub never hands
 * out; it is local to the sandbox's own namespace and leads nowhere.
 * Best effort: without it, only those programs are affected. Safe: it
 * changes the sandbox's own, fresh network namespace, nothing else. */
static void lo_add_synthetic(void)
{
  for (int family = 4; family <= 6; family += 2) {
    shk_ip ip;
    shk__dns_pool_address(0, family, &ip);
    (void)lo_add_address(&ip);
  }
}

static int bind_loopback(uint16_t port, int type)
{
  int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (bind(fd, (struct sockaddr *)&sin, sizeof sin) < 0 ||
      (type == SOCK_STREAM && listen(fd, 128) < 0)) {
    int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

static int connect_unix(const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen(path) >= sizeof sun.sun_path)
    return -ENAMETOOLONG;
  strcpy(sun.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  /* A non-blocking connect to a listening unix socket completes at once,
   * or fails at once with EAGAIN when the proxy's backlog is full: the
   * helper never waits for the proxy, so one slow listener cannot stall
   * the others (DNS among them). */
  if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

struct stream_ctx {
  struct helper *h;
  const char *path;
  struct event *ev, *pause;
};

static void resume_listener(evutil_socket_t fd, short what, void *arg)
{
  struct stream_ctx *sc = arg;
  event_add(sc->ev, NULL);
}

/* Out of descriptors: the listening socket stays readable, and accepting
 * again at once would spin; it rests for a moment instead. */
static void pause_listener(struct stream_ctx *sc)
{
  struct timeval tv = { 0, PAUSE_MS * 1000 };
  event_del(sc->ev);
  event_add(sc->pause, &tv);
}

static void relay_done(void *arg)
{
  shk__relay_free(*(shk__relay **)arg);
  free(arg);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
  struct stream_ctx *sc = arg;
  int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (cfd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
      pause_listener(sc);
    return;
  }
  int ufd = connect_unix(sc->path);
  if (ufd < 0) {
    close(cfd);
    return;
  }
  shk__relay **slot = calloc(1, sizeof *slot);
  if (!slot) {
    close(cfd);
    close(ufd);
    return;
  }
  shk__relay_opts o = { .client_fd = cfd, .up_fd = ufd, .c2u_limit = UINT64_MAX,
                        .done = relay_done, .arg = slot };
  *slot = shk__relay_new(sc->h->base, &o);
  if (!*slot)
    free(slot);
}

/* One UDP query: framed onto a fresh stream to dns.sock, and the framed
 * answer sent back to the address it came from. */
struct udp_query {
  struct helper *h;
  int ufd, udp;
  struct sockaddr_storage from;
  socklen_t fromlen;
  struct event *ev;
  uint8_t buf[2 + 65535];
  size_t len;
};

static void udp_query_free(struct udp_query *q)
{
  q->h->udp_inflight--;
  event_free(q->ev);
  close(q->ufd);
  free(q);
}

static void on_udp_answer(evutil_socket_t fd, short what, void *arg)
{
  struct udp_query *q = arg;
  if (what & EV_TIMEOUT) {
    udp_query_free(q);
    return;
  }
  ssize_t n = recv(q->ufd, q->buf + q->len, sizeof q->buf - q->len, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n > 0)
    q->len += (size_t)n;
  if (q->len >= 2) {
    size_t want = (size_t)(q->buf[0] << 8 | q->buf[1]);
    if (q->len >= 2 + want) {
      ssize_t w = sendto(q->udp, q->buf + 2, want, 0, (struct sockaddr *)&q->from, q->fromlen);
      (void)w;
      udp_query_free(q);
      return;
    }
  }
  if (n <= 0)
    udp_query_free(q);
}

static void on_udp(evutil_socket_t udp, short what, void *arg)
{
  struct helper *h = arg;
  uint8_t msg[2 + 65535];
  struct sockaddr_storage from;
  socklen_t fromlen = sizeof from;
  ssize_t n = recvfrom(udp, msg + 2, sizeof msg - 2, 0, (struct sockaddr *)&from, &fromlen);
  if (n <= 0)
    return;
  /* A flood of queries is dropped beyond a bound, as a busy resolver
   * would: each one in flight holds a stream and a buffer. */
  if (h->udp_inflight >= UDP_MAX)
    return;
  msg[0] = (uint8_t)(n >> 8);
  msg[1] = (uint8_t)n;
  int ufd = connect_unix(h->paths[L_DNS_UDP]);
  if (ufd < 0)
    return;
  if (send(ufd, msg, (size_t)n + 2, MSG_NOSIGNAL) != n + 2) {
    close(ufd);
    return;
  }
  struct udp_query *q = calloc(1, sizeof *q);
  if (!q) {
    close(ufd);
    return;
  }
  q->h = h;
  q->ufd = ufd;
  q->udp = udp;
  q->from = from;
  q->fromlen = fromlen;
  q->ev = event_new(h->base, ufd, EV_READ | EV_PERSIST, on_udp_answer, q);
  if (!q->ev) {
    close(ufd);
    free(q);
    return;
  }
  h->udp_inflight++;
  struct timeval tv = { DNS_SECONDS, 0 };
  event_add(q->ev, &tv);
}

struct helper_args {
  struct helper *h;
  const int *fds; /* L_COUNT listeners */
  pid_t parent;
};

/* The helper is a process of its own, forked by shk_egress_bridge_start
 * (shk__fork_call): what it returns ends the helper, never the caller. */
static int helper_main(void *arg)
{
  struct helper_args *a = arg;
  struct helper *h = a->h;
  const int *fds = a->fds;
  pid_t parent = a->parent;
  /* Not dumpable: no ptrace attach and no /proc/PID/mem from the workload,
   * which runs as the same user. Dies with stage 2 (the workload). */
  if (prctl(PR_SET_DUMPABLE, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
      getppid() != parent)
    return 1;
  /* The listeners are bound; nothing here needs a capability any more, so
   * a bug in the relay cannot lend one to anybody. */
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct none[2] = { { 0 } };
  if (syscall(SYS_capset, &hdr, none) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return 1;
  /* Bounded, soft and hard: the workload (same uid, no CAP_SYS_RESOURCE)
   * may lower these with prlimit but never raise them past this. */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
    return 1;
  rlim_t bound = nofile.rlim_max < HELPER_NOFILE ? nofile.rlim_max : HELPER_NOFILE;
  nofile.rlim_cur = nofile.rlim_max = bound;
  if (setrlimit(RLIMIT_NOFILE, &nofile) < 0)
    return 1;
  signal(SIGPIPE, SIG_IGN);
  /* Nothing of stage 2 but the listeners stays open here, not even the
   * workload's stdio (which would keep its pipes open). */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; fd++)
    if (null < 0 || dup2(null, fd) < 0)
      close(fd);
  int maxfd = (int)sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < maxfd && fd < 65536; fd++) {
    bool keep = false;
    for (int i = 0; i < L_COUNT; i++)
      keep |= fd == fds[i];
    if (!keep)
      close(fd);
  }
  h->base = event_base_new();
  if (!h->base)
    return 1;
  struct stream_ctx sc[L_COUNT];
  for (int i = 0; i < L_COUNT; i++) {
    sc[i] = (struct stream_ctx){ h, h->paths[i], NULL, NULL };
    sc[i].ev = event_new(h->base, fds[i], EV_READ | EV_PERSIST,
                         bridge_ports[i].type == SOCK_DGRAM ? on_udp : on_accept,
                         bridge_ports[i].type == SOCK_DGRAM ? (void *)h : (void *)&sc[i]);
    sc[i].pause = evtimer_new(h->base, resume_listener, &sc[i]);
    if (!sc[i].ev || !sc[i].pause || event_add(sc[i].ev, NULL) < 0)
      return 1;
  }
  event_base_dispatch(h->base);
  return 0;
}

/* Safe to run with the sandbox's capabilities: it binds loopback addresses
 * only, in the sandbox's own namespace, and everything it forks drops them
 * at once (see helper_main); the workload inherits no descriptor of it. */
int shk_egress_bridge_start(const char *dir)
{
  struct helper h = { 0 };
  for (int i = 0; i < L_COUNT; i++)
    if ((size_t)snprintf(h.paths[i], sizeof h.paths[i], "%s/%s", dir, bridge_ports[i].sock) >=
        sizeof h.paths[i])
      return -ENAMETOOLONG;
  int r = lo_up();
  if (r < 0)
    return r;
  lo_add_synthetic();
  int fds[L_COUNT];
  for (int i = 0; i < L_COUNT; i++) {
    fds[i] = bind_loopback(bridge_ports[i].port, bridge_ports[i].type);
    if (fds[i] < 0) {
      r = fds[i];
      while (i-- > 0)
        close(fds[i]);
      return r;
    }
  }
  struct helper_args a = { &h, fds, getpid() };
  pid_t pid = shk__fork_call(helper_main, &a);
  r = pid < 0 ? pid : 0;
  /* The listeners are the helper's alone: the workload cannot accept on
   * them and steal connections. */
  for (int i = 0; i < L_COUNT; i++)
    close(fds[i]);
  return r;
}

/* NAME set to its value, a space and WORDS; to WORDS alone when it is
 * unset or empty. */
static int append_words(const char *name, const char *words)
{
  const char *old = getenv(name);
  if (!old || !*old)
    return setenv(name, words, 1) < 0 ? -errno : 0;
  size_t n = strlen(old) + 1 + strlen(words) + 1;
  char *v = malloc(n);
  if (!v)
    return -ENOMEM;
  snprintf(v, n, "%s %s", old, words);
  int r = setenv(name, v, 1) < 0 ? -errno : 0;
  free(v);
  return r;
}

/* One more entry of git's configuration from the environment
 * (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<i>, GIT_CONFIG_VALUE_<i>), after the
 * caller's own: git takes the last value of a key, so this one wins, and
 * the caller's other entries stay. A count git itself would reject (not a
 * number) is replaced, since git would then refuse to run at all. */
static int add_git_config(const char *key, const char *value)
{
  const char *c = getenv("GIT_CONFIG_COUNT");
  char *end = NULL;
  errno = 0;
  long n = c && *c ? strtol(c, &end, 10) : 0;
  if (!c || !*c || errno || *end || n < 0 || n > 100000)
    n = 0;
  char name[64], count[32];
  snprintf(name, sizeof name, "GIT_CONFIG_KEY_%ld", n);
  if (setenv(name, key, 1) < 0)
    return -errno;
  snprintf(name, sizeof name, "GIT_CONFIG_VALUE_%ld", n);
  if (setenv(name, value, 1) < 0)
    return -errno;
  snprintf(count, sizeof count, "%ld", n + 1);
  return setenv("GIT_CONFIG_COUNT", count, 1) < 0 ? -errno : 0;
}

int shk_egress_apply_env(void)
{
  static const char http[] = "http://127.0.0.1:3128", socks[] = "socks5h://127.0.0.1:1080",
                    no[] = "localhost,127.0.0.1,::1";
  /* Java and Gradle read system properties, not the environment. */
  static const char java[] =
    "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 "
    "-Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=localhost|127.0.0.1";
  const char *const vars[][2] = {
    { "HTTP_PROXY", http }, { "http_proxy", http }, { "HTTPS_PROXY", http },
    { "https_proxy", http }, { "ALL_PROXY", socks }, { "all_proxy", socks },
    { "NO_PROXY", no }, { "no_proxy", no },
    /* npm (and yarn 1, which reads npm's config) */
    { "npm_config_proxy", http }, { "npm_config_https_proxy", http },
    { "npm_config_noproxy", no },
    /* yarn 2+ */
    { "YARN_HTTP_PROXY", http }, { "YARN_HTTPS_PROXY", http },
    /* pip */
    { "PIP_PROXY", http },
    /* cargo */
    { "CARGO_HTTP_PROXY", http },
    /* Node's built-in fetch and http honour the variables only with this */
    { "NODE_USE_ENV_PROXY", "1" },
    /* gRPC */
    { "grpc_proxy", http },
    /* rsync daemon connections: host:port */
    { "RSYNC_PROXY", "127.0.0.1:3128" },
    /* Google Cloud SDK (the docker CLI and the AWS and Azure CLIs read the
     * standard variables above) */
    { "CLOUDSDK_PROXY_TYPE", "http" }, { "CLOUDSDK_PROXY_ADDRESS", "127.0.0.1" },
    { "CLOUDSDK_PROXY_PORT", "3128" },
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (setenv(vars[i][0], vars[i][1], 1) < 0)
      return -errno;
  /* Java, Gradle, Maven: after the caller's own options (a heap size, an
   * agent), which they keep; a later -D wins, so the proxy's do. */
  static const char *const java_vars[] = { "JAVA_TOOL_OPTIONS", "GRADLE_OPTS", "MAVEN_OPTS" };
  for (size_t i = 0; i < sizeof java_vars / sizeof java_vars[0]; i++) {
    int r = append_words(java_vars[i], java);
    if (r < 0)
      return r;
  }
  return add_git_config("http.proxy", http);
}

int shk_egress_apply_java_trust(const char *store)
{
  char opts[PATH_MAX + 160];
  int n = snprintf(opts, sizeof opts,
                   "-Djavax.net.ssl.trustStore=%s -Djavax.net.ssl.trustStoreType=PKCS12 "
                   "-Djavax.net.ssl.trustStorePassword=" SHK_EGRESS_JAVA_STORE_PASSWORD,
                   store);
  if (n < 0 || (size_t)n >= sizeof opts || strchr(store, ' '))
    return -EINVAL;
  /* After the caller's options, as the proxy's: a later -D wins. */
  static const char *const java_vars[] = { "JAVA_TOOL_OPTIONS", "GRADLE_OPTS", "MAVEN_OPTS" };
  for (size_t i = 0; i < sizeof java_vars / sizeof java_vars[0]; i++) {
    int r = append_words(java_vars[i], opts);
    if (r < 0)
      return r;
  }
  return 0;
}

int shk_egress_apply_ca_env(const char *bundle)
{
  /* Most tools read the system path, where the bundle is bound; these
   * variables reach the ones that carry a store of their own (Python's
   * requests and pip use certifi's, Node its compiled-in list). */
  static const char *const vars[] = { "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS",
                                      "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
                                      "PIP_CERT", "npm_config_cafile" };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (setenv(vars[i], bundle, 1) < 0)
      return -errno;
  return 0;
}

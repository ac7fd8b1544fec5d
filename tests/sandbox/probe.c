/* SPDX-License-Identifier: Apache-2.0 */
/* shk-probe: the escape suite's probes and the host-side fixtures that judge
 * them.
 *
 * A probe (`shk-probe CASE ARGS...`) runs inside `shinken run` and attempts
 * one forbidden action, by every route this file knows. For each route it
 * prints one line, "attempted ROUTE: blocked (REASON)" or "attempted ROUTE:
 * SUCCEEDED", so the driver can tell a blocked action from a probe that never
 * got to try. Exit status: 0 every route was refused, 10 some route that is an
 * escape by itself succeeded, 2 the probe could not attempt anything (broken).
 * Routes whose success is not an escape by itself (a UDP datagram leaves the
 * socket even when nobody can receive it) are printed but judged only from
 * outside.
 *
 * A fixture (`shk-probe host-...`) runs outside the sandbox: listeners that
 * log every connection, a process holding a secret and a canary in memory, a
 * pseudo-terminal that reports injected input, a session keyring holding a
 * secret. The driver judges each case from what the fixtures saw, never from
 * the probe's word alone.
 *
 * Probes aim only at the test's own listeners on 127.0.0.1 and never at any
 * other address. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/io_uring.h>
#include <linux/landlock.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ipc.h>
#include <sys/io.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/reboot.h>
#include <sys/shm.h>
#include <sys/swap.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pthread.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define EXIT_BLOCKED 0
#define EXIT_BROKEN 2
#define EXIT_ESCAPED 10

/* Fixtures stop by themselves after this long, so a test that dies never
 * leaves one behind for long. */
#define FIXTURE_LIFETIME_S 180

static int attempts;
static int escapes;

/* note: one route was attempted. err is 0 when the call succeeded, else the
 * errno it failed with. decisive says whether success is an escape in
 * itself. */
static void note(const char *route, int err, int decisive)
{
  attempts++;
  if (err == 0) {
    printf("attempted %s: %s\n", route, decisive ? "SUCCEEDED" : "done (judged outside)");
    if (decisive)
      escapes++;
  } else {
    printf("attempted %s: blocked (%s)\n", route, strerror(err));
  }
  fflush(stdout);
}

static int verdict(void)
{
  if (!attempts) {
    printf("probe broken: nothing attempted\n");
    return EXIT_BROKEN;
  }
  return escapes ? EXIT_ESCAPED : EXIT_BLOCKED;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("shk-probe: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(EXIT_BROKEN);
}

static long num(const char *s)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (errno || end == s || *end)
    die("not a number: '%s'", s);
  return v;
}

static unsigned long unum(const char *s)
{
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 0);
  if (errno || end == s || *end)
    die("not a number: '%s'", s);
  return v;
}

/* Appends a line to a log file; fixtures record what they saw this way. */
static void log_line(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(const char *path, const char *fmt, ...)
{
  FILE *f = fopen(path, "a");
  if (!f)
    die("cannot open log %s: %s", path, strerror(errno));
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static void write_file(const char *path, const char *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    die("cannot create %s: %s", path, strerror(errno));
  if (write(fd, data, len) != (ssize_t)len)
    die("cannot write %s: %s", path, strerror(errno));
  close(fd);
}

static struct sockaddr_in loopback(int port)
{
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sin;
}

/* ---- network probes ------------------------------------------------------ */

static void try_tcp_to(const char *route, struct sockaddr_in sin, const void *msg, size_t len)
{
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    note(route, errno, 0);
    return;
  }
  if (connect(s, (struct sockaddr *)&sin, sizeof sin) < 0) {
    note(route, errno, 0);
  } else {
    ssize_t n = send(s, msg, len, MSG_NOSIGNAL);
    note(route, n < 0 ? errno : 0, 0);
  }
  close(s);
}

static void try_udp_to(const char *route, struct sockaddr_in sin, const void *msg, size_t len)
{
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    note(route, errno, 0);
    return;
  }
  ssize_t n = sendto(s, msg, len, 0, (struct sockaddr *)&sin, sizeof sin);
  note(route, n < 0 ? errno : 0, 0);
  close(s);
}

static void try_tcp(const char *route, int port, const void *msg, size_t len)
{
  try_tcp_to(route, loopback(port), msg, len);
}

static void try_udp(const char *route, int port, const void *msg, size_t len)
{
  try_udp_to(route, loopback(port), msg, len);
}

/* TCP and UDP to a test host in a network namespace the test made. Only
 * 10.79.0.0/16, the test's own range, is accepted: a probe never aims at any
 * other address. */
static int probe_egress(int argc, char **argv)
{
  if (argc != 2)
    die("usage: egress 10.79.X.Y PORT");
  struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)num(argv[1])) };
  if (inet_pton(AF_INET, argv[0], &sin.sin_addr) != 1 ||
      (ntohl(sin.sin_addr.s_addr) & 0xffff0000u) != 0x0a4f0000u)
    die("refusing to aim at %s: only the test's own 10.79.0.0/16", argv[0]);
  try_tcp_to("tcp connect to the test host", sin, "PROBE\n", 6);
  for (int i = 0; i < 3; i++)
    try_udp_to("udp datagram to the test host", sin, "PROBE\n", 6);
  return verdict();
}

/* Sends REQ over a TCP connection to 127.0.0.1:PORT and prints the first
 * line of the answer. */
static void ask_loopback(const char *route, int port, const void *req, size_t len,
                         const void *req2, size_t len2)
{
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sin = loopback(port);
  if (s < 0 || connect(s, (struct sockaddr *)&sin, sizeof sin) < 0) {
    note(route, errno, 0);
    if (s >= 0)
      close(s);
    return;
  }
  struct timeval tv = { 3, 0 };
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  unsigned char buf[256];
  ssize_t n = send(s, req, len, MSG_NOSIGNAL);
  if (n >= 0 && req2) {
    /* SOCKS5: the method answer first, then the request. */
    n = recv(s, buf, 2, 0);
    if (n == 2)
      n = send(s, req2, len2, MSG_NOSIGNAL);
  }
  n = n < 0 ? n : recv(s, buf, sizeof buf - 1, 0);
  if (n > 0) {
    buf[n] = 0;
    printf("  answer: %.60s\n", req2 ? (buf[1] == 0 ? "SOCKS5 granted" : "SOCKS5 refused") : (char *)buf);
  }
  note(route, n < 0 ? errno : 0, 0);
  close(s);
}

/* Asks Shinken's proxies inside the sandbox (HTTP 127.0.0.1:3128, SOCKS5
 * 127.0.0.1:1080) for the host's loopback listener at PORT: nothing was
 * granted, and loopback is never a destination. */
static int probe_proxy_loopback(int argc, char **argv)
{
  if (argc != 1)
    die("usage: proxy-loopback PORT");
  int port = (int)num(argv[0]);
  char req[256];
  int n = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port, port);
  ask_loopback("HTTP CONNECT 127.0.0.1:PORT through 127.0.0.1:3128", 3128, req, (size_t)n, NULL, 0);
  n = snprintf(req, sizeof req, "GET http://localhost:%d/ HTTP/1.1\r\nHost: localhost:%d\r\n\r\n", port, port);
  ask_loopback("HTTP GET http://localhost:PORT/ through 127.0.0.1:3128", 3128, req, (size_t)n, NULL, 0);
  static const unsigned char hello[] = { 5, 1, 0 };
  unsigned char ip4[10] = { 5, 1, 0, 1, 127, 0, 0, 1, (unsigned char)(port >> 8), (unsigned char)port };
  ask_loopback("SOCKS5 CONNECT 127.0.0.1:PORT through 127.0.0.1:1080", 1080, hello, sizeof hello, ip4, sizeof ip4);
  unsigned char dom[32] = { 5, 1, 0, 3, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't' };
  dom[14] = (unsigned char)(port >> 8);
  dom[15] = (unsigned char)port;
  ask_loopback("SOCKS5 CONNECT localhost:PORT through 127.0.0.1:1080", 1080, hello, sizeof hello, dom, 16);
  return verdict();
}

static int probe_tcp(int argc, char **argv)
{
  if (argc != 1)
    die("usage: tcp PORT");
  try_tcp("tcp connect to the host's 127.0.0.1 listener", (int)num(argv[0]), "PROBE\n", 6);
  return verdict();
}

static int probe_udp(int argc, char **argv)
{
  if (argc != 1)
    die("usage: udp PORT");
  for (int i = 0; i < 3; i++)
    try_udp("udp datagram to the host's 127.0.0.1 listener", (int)num(argv[0]), "PROBE\n", 6);
  return verdict();
}

/* A DNS query for a name under .invalid, sent to 127.0.0.1:53 only: over UDP
 * and over TCP (two-byte length prefix). */
static int probe_dns(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: dns");
  static const unsigned char query[] = {
    0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    6, 'e', 's', 'c', 'a', 'p', 'e', 7, 's', 'h', 'i', 'n', 'k', 'e', 'n',
    7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0, 0x00, 0x01, 0x00, 0x01,
  };
  unsigned char tcpq[2 + sizeof query];
  tcpq[0] = 0;
  tcpq[1] = sizeof query;
  memcpy(tcpq + 2, query, sizeof query);
  try_udp("dns query over udp to 127.0.0.1:53", 53, query, sizeof query);
  try_tcp("dns query over tcp to 127.0.0.1:53", 53, tcpq, sizeof tcpq);
  return verdict();
}

static uint16_t ip_checksum(const void *data, size_t len)
{
  const uint8_t *p = data;
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2)
    sum += (uint32_t)(p[i] << 8 | p[i + 1]);
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return htons((uint16_t)~sum);
}

/* Builds IPv4 + UDP (checksum 0, which IPv4 allows) to 127.0.0.1:port. */
static size_t udp_packet(unsigned char *buf, int port)
{
  static const char payload[] = "PROBE\n";
  struct iphdr ip = {
    .version = 4, .ihl = 5, .ttl = 64, .protocol = IPPROTO_UDP,
    .tot_len = htons(20 + 8 + sizeof payload - 1),
    .saddr = htonl(INADDR_LOOPBACK), .daddr = htonl(INADDR_LOOPBACK),
  };
  ip.check = ip_checksum(&ip, sizeof ip);
  uint16_t udp[4] = { htons(40000), htons((uint16_t)port), htons(8 + sizeof payload - 1), 0 };
  memcpy(buf, &ip, 20);
  memcpy(buf + 20, udp, 8);
  memcpy(buf + 28, payload, sizeof payload - 1);
  return 28 + sizeof payload - 1;
}

/* A raw Ethernet frame on lo, and a raw IPv4 packet, each carrying a UDP
 * datagram for the host's listener. Opening either socket is an escape in
 * itself: it needs CAP_NET_RAW. */
static int probe_packet(int argc, char **argv)
{
  if (argc != 1)
    die("usage: packet PORT");
  int port = (int)num(argv[0]);
  unsigned char frame[14 + 64] = { 0 };
  size_t len = udp_packet(frame + 14, port);
  frame[12] = 0x08; /* ETH_P_IP */

  int s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  note("socket(AF_PACKET, SOCK_RAW)", s < 0 ? errno : 0, 1);
  if (s >= 0) {
    struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
                               .sll_ifindex = (int)if_nametoindex("lo"), .sll_halen = 6 };
    ssize_t n = sendto(s, frame, 14 + len, 0, (struct sockaddr *)&sll, sizeof sll);
    note("send an Ethernet frame on lo", n < 0 ? errno : 0, 0);
    close(s);
  }
  s = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
  note("socket(AF_INET, SOCK_RAW)", s < 0 ? errno : 0, 1);
  if (s >= 0) {
    struct sockaddr_in sin = loopback(port);
    ssize_t n = sendto(s, frame + 14, len, 0, (struct sockaddr *)&sin, sizeof sin);
    note("send a raw IPv4 packet to 127.0.0.1", n < 0 ? errno : 0, 0);
    close(s);
  }
  return verdict();
}

/* rtnetlink: sets lo's MTU to 1280. The socket may be allowed (the C library
 * uses netlink to list interfaces), but the change must be refused; the
 * driver also checks the host's lo. */
static int probe_netlink(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: netlink");
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  note("socket(AF_NETLINK, NETLINK_ROUTE)", s < 0 ? errno : 0, 0);
  if (s < 0)
    return verdict();
  struct {
    struct nlmsghdr nh;
    struct ifinfomsg ifi;
    struct rtattr rta;
    uint32_t mtu;
  } req = {
    .nh = { .nlmsg_len = sizeof req, .nlmsg_type = RTM_SETLINK,
            .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK, .nlmsg_seq = 1 },
    .ifi = { .ifi_family = AF_UNSPEC, .ifi_index = (int)if_nametoindex("lo") },
    .rta = { .rta_len = RTA_LENGTH(sizeof(uint32_t)), .rta_type = IFLA_MTU },
    .mtu = 1280,
  };
  struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
  if (sendto(s, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
    note("RTM_SETLINK lo mtu 1280", errno, 1);
  } else {
    char buf[4096];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    struct nlmsghdr *nh = (struct nlmsghdr *)buf;
    if (n < (ssize_t)(sizeof *nh + sizeof(struct nlmsgerr)) || nh->nlmsg_type != NLMSG_ERROR)
      die("unexpected netlink answer");
    struct nlmsgerr *e = NLMSG_DATA(nh);
    note("RTM_SETLINK lo mtu 1280", -e->error, 1);
  }
  close(s);
  return verdict();
}

/* AF_VSOCK reaches the hypervisor. Only the socket is opened and bound to a
 * local port: nothing is ever sent to another machine. */
static int probe_vsock(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: vsock");
  int s = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  note("socket(AF_VSOCK, SOCK_STREAM)", s < 0 ? errno : 0, 1);
  if (s >= 0)
    close(s);
  s = socket(AF_VSOCK, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  note("socket(AF_VSOCK, SOCK_DGRAM)", s < 0 ? errno : 0, 1);
  if (s >= 0)
    close(s);
  return verdict();
}

static void try_unix(const char *route, const struct sockaddr_un *sun, socklen_t len)
{
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    note(route, errno, 0);
    return;
  }
  if (connect(s, (const struct sockaddr *)sun, len) < 0) {
    note(route, errno, 1);
  } else {
    note(route, 0, 1);
    (void)!send(s, "PROBE\n", 6, MSG_NOSIGNAL);
  }
  close(s);
}

static int probe_unix(int argc, char **argv)
{
  if (argc != 1)
    die("usage: unix PATH");
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen(argv[0]) >= sizeof sun.sun_path)
    die("path too long");
  strcpy(sun.sun_path, argv[0]);
  try_unix("connect to the host's unix socket", &sun, sizeof sun);
  /* The same socket named through /proc's magic links, which a path check
   * may follow differently from the kernel. */
  static const char *const via[] = { "/proc/self/root", "/proc/1/root", "/proc/thread-self/root" };
  for (size_t i = 0; i < sizeof via / sizeof via[0]; i++) {
    char route[160];
    if (snprintf(sun.sun_path, sizeof sun.sun_path, "%s%s", via[i], argv[0]) >= (int)sizeof sun.sun_path)
      continue;
    snprintf(route, sizeof route, "connect to it through %s", via[i]);
    try_unix(route, &sun, sizeof sun);
  }
  return verdict();
}

/* A datagram needs no connect(): sendto() and sendmsg() carry the address
 * themselves. */
static int probe_unix_dgram(int argc, char **argv)
{
  if (argc != 1)
    die("usage: unix-dgram PATH");
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen(argv[0]) >= sizeof sun.sun_path)
    die("path too long");
  strcpy(sun.sun_path, argv[0]);
  /* SOCK_RAW on AF_UNIX is a datagram socket by another name. */
  int raw = socket(AF_UNIX, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (raw < 0) {
    note("socket(AF_UNIX, SOCK_RAW)", errno, 0);
  } else {
    ssize_t n = sendto(raw, "PROBE\n", 6, 0, (struct sockaddr *)&sun, sizeof sun);
    note("sendto the host's unix datagram socket through SOCK_RAW", n < 0 ? errno : 0, 1);
    close(raw);
  }
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    note("socket(AF_UNIX, SOCK_DGRAM)", errno, 0);
    return verdict();
  }
  ssize_t n = sendto(s, "PROBE\n", 6, 0, (struct sockaddr *)&sun, sizeof sun);
  note("sendto the host's unix datagram socket", n < 0 ? errno : 0, 1);
  struct iovec iov = { (void *)"PROBE\n", 6 };
  struct msghdr mh = { .msg_name = &sun, .msg_namelen = sizeof sun, .msg_iov = &iov, .msg_iovlen = 1 };
  n = sendmsg(s, &mh, 0);
  note("sendmsg to the host's unix datagram socket", n < 0 ? errno : 0, 1);
  struct mmsghdr mm = { .msg_hdr = mh };
  n = sendmmsg(s, &mm, 1, 0);
  note("sendmmsg to the host's unix datagram socket", n < 0 ? errno : 0, 1);
  close(s);
  return verdict();
}

static int probe_abstract(int argc, char **argv)
{
  if (argc != 1)
    die("usage: abstract NAME");
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  size_t n = strlen(argv[0]);
  if (n + 1 >= sizeof sun.sun_path)
    die("name too long");
  memcpy(sun.sun_path + 1, argv[0], n);
  try_unix("connect to the host's abstract unix socket", &sun,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n));
  return verdict();
}

/* io_uring performs socket operations without passing through the seccomp
 * filter, so a ring is an escape in itself. With one, the probe connects to
 * the host's listener through IORING_OP_CONNECT. */
static int probe_iouring(int argc, char **argv)
{
  if (argc != 1)
    die("usage: iouring PORT");
  struct io_uring_params p = { 0 };
  int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
  note("io_uring_setup", ring < 0 ? errno : 0, 1);
  if (ring < 0)
    return verdict();
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  uint8_t *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                     IORING_OFF_SQ_RING);
  uint8_t *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                     IORING_OFF_CQ_RING);
  struct io_uring_sqe *sqes = mmap(NULL, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
                                   MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
    die("cannot map the rings: %s", strerror(errno));
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    die("socket: %s", strerror(errno));
  struct sockaddr_in sin = loopback((int)num(argv[0]));
  memset(&sqes[0], 0, sizeof sqes[0]);
  sqes[0].opcode = IORING_OP_CONNECT;
  sqes[0].fd = s;
  sqes[0].addr = (uint64_t)(uintptr_t)&sin;
  sqes[0].off = sizeof sin;
  sqes[0].user_data = 1;
  unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
  unsigned mask = *(unsigned *)(sq + p.sq_off.ring_mask);
  unsigned t = *tail;
  ((unsigned *)(sq + p.sq_off.array))[t & mask] = 0;
  __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
  long rc = syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
  if (rc < 0) {
    note("IORING_OP_CONNECT to the host's 127.0.0.1 listener", errno, 0);
  } else {
    unsigned head = __atomic_load_n((unsigned *)(cq + p.cq_off.head), __ATOMIC_ACQUIRE);
    unsigned cmask = *(unsigned *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqe = (struct io_uring_cqe *)(cq + p.cq_off.cqes) + (head & cmask);
    note("IORING_OP_CONNECT to the host's 127.0.0.1 listener", cqe->res < 0 ? -cqe->res : 0, 0);
    if (cqe->res >= 0)
      (void)!send(s, "PROBE\n", 6, MSG_NOSIGNAL);
  }
  close(s);
  close(ring);
  return verdict();
}

/* ---- other processes ----------------------------------------------------- */

/* The host fixture's pid and the address of its canary word. */
static int probe_ptrace(int argc, char **argv)
{
  if (argc != 2)
    die("usage: ptrace PID CANARY-ADDR");
  pid_t pid = (pid_t)num(argv[0]);
  unsigned long addr = unum(argv[1]);
  if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
    note("ptrace(PTRACE_ATTACH) the host process", 0, 1);
    waitpid(pid, NULL, __WALL);
    errno = 0;
    long rc = ptrace(PTRACE_POKEDATA, pid, (void *)addr, (void *)0x4b4b4b4bL);
    note("ptrace(PTRACE_POKEDATA) its canary", rc < 0 ? errno : 0, 1);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
  } else {
    note("ptrace(PTRACE_ATTACH) the host process", errno, 1);
  }
  if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0) {
    note("ptrace(PTRACE_SEIZE) the host process", 0, 1);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
  } else {
    note("ptrace(PTRACE_SEIZE) the host process", errno, 1);
  }
  return verdict();
}

/* Reads the fixture's secret into OUT (in the workspace) and overwrites its
 * canary. */
static int probe_vmread(int argc, char **argv)
{
  if (argc != 5)
    die("usage: vmread PID SECRET-ADDR LEN CANARY-ADDR OUT");
  pid_t pid = (pid_t)num(argv[0]);
  char buf[256];
  size_t len = unum(argv[2]);
  if (len > sizeof buf)
    die("secret too long");
  struct iovec local = { buf, len };
  struct iovec remote = { (void *)unum(argv[1]), len };
  ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  note("process_vm_readv the host process's secret", n < 0 ? errno : 0, 1);
  if (n > 0)
    write_file(argv[4], buf, (size_t)n);
  uint32_t bad = 0x4b4b4b4b;
  struct iovec lw = { &bad, sizeof bad };
  struct iovec rw = { (void *)unum(argv[3]), sizeof bad };
  n = process_vm_writev(pid, &lw, 1, &rw, 1, 0);
  note("process_vm_writev its canary", n < 0 ? errno : 0, 1);
  return verdict();
}

static int probe_kill(int argc, char **argv)
{
  if (argc != 1)
    die("usage: kill PID");
  pid_t pid = (pid_t)num(argv[0]);
  note("kill(SIGKILL) the host process", kill(pid, SIGKILL) < 0 ? errno : 0, 1);
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
  note("pidfd_open the host process", pfd < 0 ? errno : 0, 1);
  if (pfd >= 0) {
    long rc = syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
    note("pidfd_send_signal(SIGKILL)", rc < 0 ? errno : 0, 1);
    close(pfd);
  }
  return verdict();
}

/* Pushes "SHKINJ" and a newline into the input of every terminal the probe
 * holds, and of /dev/tty; the host side of the pseudo-terminal reports what
 * arrived. */
static int probe_tiocsti(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: tiocsti");
  static const char inject[] = "SHKINJ\n";
  int fds[4] = { 0, 1, 2, open("/dev/tty", O_RDWR | O_CLOEXEC) };
  if (fds[3] < 0)
    note("open /dev/tty", errno, 0);
  for (int i = 0; i < 4; i++) {
    if (fds[i] < 0 || !isatty(fds[i]))
      continue;
    char route[64];
    snprintf(route, sizeof route, "ioctl(%d, TIOCSTI)", i);
    int err = 0;
    for (const char *c = inject; *c && !err; c++)
      if (ioctl(fds[i], TIOCSTI, c) < 0)
        err = errno;
    note(route, err, 1);
  }
  /* Taking the terminal as the controlling one would make TIOCSTI legal.
   * On a terminal, shinken run gives the workload a pseudo-terminal of its
   * own, already its controlling one: whether the caller's terminal got
   * anything is judged outside, by the host fixture's log. */
  if (isatty(0)) {
    note("ioctl(0, TIOCSCTTY)", ioctl(0, TIOCSCTTY, 0) < 0 ? errno : 0, 0);
    int err = 0;
    for (const char *c = inject; *c && !err; c++)
      if (ioctl(0, TIOCSTI, c) < 0)
        err = errno;
    note("ioctl(0, TIOCSTI) after TIOCSCTTY", err, 1);
  }
  return verdict();
}

/* Opens PATH again for reading and writing (a terminal the probe does not
 * hold, reached through a /proc magic link) and, when it is a terminal,
 * changes its window size to 33x77, its settings (no echo) and pushes
 * "SHKINJ" into its input: the host side of the caller's pseudo-terminal
 * reports which of these reached it. */
static void try_tty(const char *path)
{
  char route[128];
  int fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
  snprintf(route, sizeof route, "reopen %s", path);
  if (fd < 0) {
    note(route, errno, 0);
    return;
  }
  if (!isatty(fd)) {
    close(fd);
    return;
  }
  note(route, 0, 0);
  struct winsize ws = { .ws_row = 33, .ws_col = 77 };
  snprintf(route, sizeof route, "TIOCSWINSZ 33x77 through %s", path);
  note(route, ioctl(fd, TIOCSWINSZ, &ws) < 0 ? errno : 0, 0);
  struct termios tio;
  if (tcgetattr(fd, &tio) == 0) {
    tio.c_lflag &= ~(tcflag_t)ECHO;
    snprintf(route, sizeof route, "tcsetattr -echo through %s", path);
    note(route, tcsetattr(fd, TCSANOW, &tio) < 0 ? errno : 0, 0);
  }
  static const char inject[] = "SHKINJ\n";
  int err = 0;
  for (const char *c = inject; *c && !err; c++)
    if (ioctl(fd, TIOCSTI, c) < 0)
      err = errno;
  snprintf(route, sizeof route, "TIOCSTI through %s", path);
  note(route, err, 0);
  close(fd);
}

/* The caller's terminal reached again through /proc: the probe's own
 * descriptors 0 to 2 reopened by path, and those of every ancestor it can
 * see (its parent, bwrap's pid 1 inside, shinken run outside). Whether the
 * caller's terminal changed is judged outside (host-pty). */
static int probe_tty_reopen(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: tty-reopen");
  char path[64];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", i);
    try_tty(path);
  }
  int n = 0;
  for (pid_t p = getppid(); p > 0 && n < 16; n++) {
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)p, i);
      try_tty(path);
    }
    char stat_path[64], line[256];
    snprintf(stat_path, sizeof stat_path, "/proc/%d/status", (int)p);
    FILE *f = fopen(stat_path, "re");
    pid_t up = 0;
    while (f && fgets(line, sizeof line, f))
      if (sscanf(line, "PPid: %d", &up) == 1)
        break;
    if (f)
      fclose(f);
    p = up;
  }
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "/proc/1/fd/%d", i);
    try_tty(path);
  }
  return verdict();
}

/* Connects to another session's egress socket (its HTTP proxy) and asks
 * it for a tunnel to HOST:443: that session's proxy, outside, would judge
 * and log the request as its own session's. */
static int probe_egress_cross(int argc, char **argv)
{
  if (argc != 2)
    die("usage: egress-cross SOCKET HOST");
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (strlen(argv[0]) >= sizeof sun.sun_path)
    die("path too long");
  strcpy(sun.sun_path, argv[0]);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    note("socket(AF_UNIX)", errno, 0);
    return verdict();
  }
  if (connect(s, (struct sockaddr *)&sun, sizeof sun) < 0) {
    note("connect to the other session's egress socket", errno, 1);
    close(s);
    return verdict();
  }
  note("connect to the other session's egress socket", 0, 1);
  char req[512];
  int n = snprintf(req, sizeof req, "CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n", argv[1],
                   argv[1]);
  (void)!send(s, req, (size_t)n, MSG_NOSIGNAL);
  struct pollfd p = { s, POLLIN, 0 };
  char ans[256] = "";
  if (poll(&p, 1, 5000) > 0) {
    ssize_t got = recv(s, ans, sizeof ans - 1, 0);
    ans[got > 0 ? got : 0] = '\0';
  }
  printf("the other session's proxy answered: %.40s\n", ans);
  close(s);
  return verdict();
}

/* ---- files ------------------------------------------------------------- */

static void try_append(const char *route, const char *path)
{
  int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    note(route, errno, 1);
    return;
  }
  ssize_t n = write(fd, "ESCAPED\n", 8);
  note(route, n < 0 ? errno : 0, 1);
  close(fd);
}

static void try_create(const char *route, const char *path)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  if (fd < 0) {
    note(route, errno, 1);
    return;
  }
  ssize_t n = write(fd, "#!/bin/sh\necho ESCAPED\n", 23);
  note(route, n < 0 ? errno : 0, 1);
  close(fd);
}

static char *join(const char *dir, const char *name)
{
  char *p;
  if (asprintf(&p, "%s/%s", dir, name) < 0)
    die("out of memory");
  return p;
}

/* Every way to change FILE or its directory that the driver can see. */
static void try_all_writes(const char *what, const char *file)
{
  char route[512];
  snprintf(route, sizeof route, "append to %s", what);
  try_append(route, file);
  snprintf(route, sizeof route, "open(O_TRUNC) %s", what);
  int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
  note(route, fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close(fd);
  snprintf(route, sizeof route, "truncate %s", what);
  note(route, truncate(file, 1) < 0 ? errno : 0, 1);
  snprintf(route, sizeof route, "chmod %s", what);
  note(route, chmod(file, 0777) < 0 ? errno : 0, 1);
  char *moved = join(file, "..moved");
  moved[strlen(file)] = '.';
  snprintf(route, sizeof route, "rename %s", what);
  if (rename(file, moved) == 0) {
    note(route, 0, 1);
    (void)!rename(moved, file);
  } else {
    note(route, errno, 1);
  }
  free(moved);
}

static int probe_write(int argc, char **argv)
{
  if (argc != 1)
    die("usage: write FILE");
  try_all_writes("the file outside the writable roots", argv[0]);
  char *dir = strdup(argv[0]);
  char *slash = strrchr(dir, '/');
  if (!slash)
    die("FILE must be an absolute path");
  *slash = 0;
  char *sib = join(dir, "planted");
  try_create("create a file beside it", sib);
  free(sib);
  free(dir);
  return verdict();
}

/* LINK is a symlink the test planted in the workspace, pointing at the
 * sentinel; DIRLINK points at the sentinel's directory. The probe also
 * plants its own symlink to TARGET. */
static int probe_symlink(int argc, char **argv)
{
  if (argc != 3)
    die("usage: symlink TARGET LINK DIRLINK");
  try_append("append through the planted symlink", argv[1]);
  char *through = join(argv[2], "planted");
  try_create("create a file through the planted directory symlink", through);
  free(through);
  (void)!unlink("own-link");
  if (symlink(argv[0], "own-link") < 0)
    die("cannot plant a symlink in the workspace: %s", strerror(errno));
  try_append("append through the probe's own symlink", "own-link");
  int fd = open("own-link", O_WRONLY | O_TRUNC | O_CLOEXEC);
  note("open(O_TRUNC) through the probe's own symlink", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close(fd);
  unlink("own-link");
  return verdict();
}

/* A hard link to the sentinel, made inside the workspace, then written. */
static int probe_hardlink(int argc, char **argv)
{
  if (argc != 1)
    die("usage: hardlink TARGET");
  (void)!unlink("hard-link");
  if (link(argv[0], "hard-link") == 0) {
    note("link() the sentinel into the workspace", 0, 1);
    try_append("append through the hard link", "hard-link");
    unlink("hard-link");
  } else {
    note("link() the sentinel into the workspace", errno, 1);
  }
  int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, "hard-link2", AT_SYMLINK_FOLLOW) == 0) {
      note("linkat(/proc/self/fd/N) into the workspace", 0, 1);
      try_append("append through that hard link", "hard-link2");
      unlink("hard-link2");
    } else {
      note("linkat(/proc/self/fd/N) into the workspace", errno, 1);
    }
    close(fd);
  }
  return verdict();
}

/* In each repository (the workspace, or each REPO-DIR): writes hooks and
 * config directly, and by moving the protected directories out of the way
 * first. */
static void git_writes(void);

static int probe_git(int argc, char **argv)
{
  char start[PATH_MAX];
  if (!getcwd(start, sizeof start))
    die("getcwd: %s", strerror(errno));
  for (int i = 0; i < (argc ? argc : 1); i++) {
    if (chdir(start) < 0 || (argc && chdir(argv[i]) < 0))
      die("cd %s: %s", argc ? argv[i] : start, strerror(errno));
    git_writes();
  }
  return verdict();
}

static void git_writes(void)
{
  try_all_writes(".git/hooks/pre-commit", ".git/hooks/pre-commit");
  try_create("create .git/hooks/post-checkout", ".git/hooks/post-checkout");
  try_all_writes(".git/config", ".git/config");
  note("rename .git/hooks", rename(".git/hooks", ".git/hooks.moved") < 0 ? errno : 0, 1);
  if (rename(".git", ".git.moved") == 0) {
    note("rename .git", 0, 1);
    if (mkdir(".git", 0755) == 0 && mkdir(".git/hooks", 0755) == 0)
      try_create("create .git/hooks/pre-commit in a new .git", ".git/hooks/pre-commit");
  } else {
    note("rename .git", errno, 1);
  }
}

/* Run with HOME as the working directory (so HOME is a writable root), or
 * through a writable root that resolves there: the files a shell, a login,
 * git, Python, systemd or a desktop session reads and runs, present or
 * not, and ~/.ssh. */
static int probe_rc(int argc, char **argv)
{
  if (argc < 1)
    die("usage: rc FILE...");
  for (int i = 0; i < argc; i++) {
    if (access(argv[i], F_OK) == 0) {
      try_all_writes(argv[i], argv[i]);
    } else {
      /* Its missing parents first (~/.config/systemd/user/...), as an
       * installer would. */
      char route[512], dir[PATH_MAX];
      snprintf(dir, sizeof dir, "%s", argv[i]);
      for (char *sl = strchr(dir + 1, '/'); sl; sl = strchr(sl + 1, '/')) {
        *sl = '\0';
        (void)mkdir(dir, 0755);
        *sl = '/';
      }
      snprintf(route, sizeof route, "create %s", argv[i]);
      try_create(route, argv[i]);
    }
  }
  return verdict();
}

/* Reads each FILE and copies what it read into OUT (in the workspace).
 * DECISIVE: reading is an escape in itself (a secret); else what was read
 * is judged outside (the sandbox's own files). */
static int read_files(int argc, char **argv, int decisive)
{
  if (argc < 2)
    die("usage: read|copy OUT FILE...");
  int out = open(argv[0], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0)
    die("cannot create %s: %s", argv[0], strerror(errno));
  for (int i = 1; i < argc; i++) {
    char route[512], buf[4096];
    snprintf(route, sizeof route, "read %s", argv[i]);
    int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      note(route, errno, decisive);
      continue;
    }
    ssize_t n = read(fd, buf, sizeof buf);
    note(route, n < 0 ? errno : n == 0 ? ENODATA : 0, decisive);
    if (n > 0)
      (void)!write(out, buf, (size_t)n);
    close(fd);
  }
  close(out);
  return verdict();
}

static int probe_read(int argc, char **argv)
{
  return read_files(argc, argv, 1);
}

static int probe_copy(int argc, char **argv)
{
  return read_files(argc, argv, 0);
}

/* The sentinel's file handle, opened through the writable workspace mount
 * of the same file system: the way out of a read-only bind mount that
 * CAP_DAC_READ_SEARCH gives. */
static int probe_handle(int argc, char **argv)
{
  if (argc != 1)
    die("usage: handle TARGET");
  struct {
    struct file_handle fh;
    unsigned char space[MAX_HANDLE_SZ];
  } h;
  h.fh.handle_bytes = MAX_HANDLE_SZ;
  int mnt;
  if (name_to_handle_at(AT_FDCWD, argv[0], &h.fh, &mnt, 0) < 0) {
    note("name_to_handle_at the sentinel", errno, 1);
    return verdict();
  }
  int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (here < 0)
    die("open .: %s", strerror(errno));
  int fd = open_by_handle_at(here, &h.fh, O_WRONLY | O_APPEND | O_CLOEXEC);
  note("open_by_handle_at(the workspace's mount, O_WRONLY)", fd < 0 ? errno : 0, 1);
  if (fd >= 0) {
    (void)!write(fd, "ESCAPED\n", 8);
    close(fd);
  }
  close(here);
  return verdict();
}

/* DIR holds a denied NAME: moves DIR aside and puts its own NAME in a new
 * DIR, so the host finds the denied file moved and replaced. */
static int probe_deny_rename(int argc, char **argv)
{
  if (argc != 2)
    die("usage: deny-rename DIR NAME");
  char *moved = join(argv[0], "..moved");
  moved[strlen(argv[0])] = '.';
  if (rename(argv[0], moved) < 0) {
    note("rename the directory that holds the denied file", errno, 1);
  } else {
    note("rename the directory that holds the denied file", 0, 1);
    char *f = join(argv[0], argv[1]);
    if (mkdir(argv[0], 0755) == 0) {
      /* Every directory down to NAME, then NAME itself. */
      for (char *c = f + strlen(argv[0]) + 1; (c = strchr(c, '/')); c++) {
        *c = 0;
        (void)!mkdir(f, 0755);
        *c = '/';
      }
      try_create("create a replacement for the denied file", f);
    }
    free(f);
  }
  free(moved);
  return verdict();
}

/* Whether this process lives in a pid namespace below the initial one. */
static int in_child_pid_ns(void)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int nested = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "NSpid:", 6))
      nested = strchr(line + 6, '\t') != strrchr(line + 6, '\t');
  if (f)
    fclose(f);
  return nested;
}

struct via {
  int tried, err;
};

/* Opens SENTINEL through LINK (a /proc magic link to a directory) when the
 * directory LINK names is one of SENTINEL's ancestors, and appends to it. */
static void try_via(struct via *v, const char *link, const char *sentinel, int whole_root)
{
  char target[PATH_MAX], path[PATH_MAX * 2];
  const char *rest = sentinel;
  if (!whole_root) {
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
      return;
    target[n] = 0;
    size_t tl = strlen(target);
    if (target[0] != '/' || strncmp(sentinel, target, tl) || (sentinel[tl] != '/' && tl > 1))
      return;
    rest = sentinel + (tl > 1 ? tl : 0);
  }
  snprintf(path, sizeof path, "%s%s", link, rest);
  v->tried++;
  int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    if (!v->err)
      v->err = errno;
    return;
  }
  char route[PATH_MAX * 2 + 32];
  snprintf(route, sizeof route, "append to the sentinel through %s", path);
  note(route, write(fd, "ESCAPED\n", 8) < 0 ? errno : 0, 1);
  close(fd);
}

/* Every process the probe can see: its root, its working directory and its
 * open directories, each a door to the sentinel if it leads outside the
 * sandbox's view. */
static int probe_proc(int argc, char **argv)
{
  if (argc != 1)
    die("usage: proc SENTINEL");
  DIR *d = opendir("/proc");
  if (!d)
    die("opendir /proc: %s", strerror(errno));
  struct via roots = { 0, 0 }, dirs = { 0, 0 };
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    char link[600];
    snprintf(link, sizeof link, "/proc/%s/root", e->d_name);
    try_via(&roots, link, argv[0], 1);
    snprintf(link, sizeof link, "/proc/%s/cwd", e->d_name);
    try_via(&dirs, link, argv[0], 0);
    char fddir[300];
    snprintf(fddir, sizeof fddir, "/proc/%s/fd", e->d_name);
    DIR *fds = opendir(fddir);
    struct dirent *f;
    while (fds && (f = readdir(fds))) {
      if (f->d_name[0] == '.')
        continue;
      snprintf(link, sizeof link, "%s/%s", fddir, f->d_name);
      try_via(&dirs, link, argv[0], 0);
    }
    if (fds)
      closedir(fds);
  }
  closedir(d);
  /* The memory of the parent (stage 2 or the sandbox's init) and, inside a
   * pid namespace, of its init: opening it is the power of a debugger. Only
   * opened, never written; outside a sandbox (the control) pid 1 is the
   * host's and is left alone. */
  char route[128];
  pid_t targets[2] = { getppid(), in_child_pid_ns() ? 1 : 0 };
  for (int i = 0; i < 2; i++) {
    if (targets[i] <= 0 || (i == 1 && targets[0] == 1))
      continue;
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", (int)targets[i]);
    int fd = open(mem, O_RDWR | O_CLOEXEC);
    snprintf(route, sizeof route, "open %s (%s) for writing", mem, i ? "init" : "parent");
    note(route, fd < 0 ? errno : 0, 1);
    if (fd >= 0)
      close(fd);
  }
  snprintf(route, sizeof route, "open the sentinel through /proc/PID/root of %d processes", roots.tried);
  if (roots.tried)
    note(route, roots.err ? roots.err : EROFS, 1);
  snprintf(route, sizeof route, "open the sentinel through %d working or open directories", dirs.tried);
  if (dirs.tried)
    note(route, dirs.err ? dirs.err : EROFS, 1);
  return verdict();
}

/* Writes to descriptor FD, which the test opened on the sentinel in the
 * caller. Other descriptors are only listed: they belong to whoever started
 * the test, and nothing is written to them. */
static int probe_fds(int argc, char **argv)
{
  if (argc != 1)
    die("usage: fds FD");
  int fd = (int)num(argv[0]);
  for (int i = 3; i < 1024; i++)
    if (i != fd && fcntl(i, F_GETFD) >= 0)
      printf("inherited descriptor %d (not touched)\n", i);
  if (fcntl(fd, F_GETFD) < 0) {
    note("use the caller's descriptor on the sentinel", errno, 1);
    return verdict();
  }
  note("write to the caller's descriptor on the sentinel", write(fd, "ESCAPED\n", 8) < 0 ? errno : 0, 1);
  return verdict();
}

/* Kernel memory and the kernel's own secrets: /proc/kcore, /dev/mem,
 * /dev/port, the kernel log, and real addresses in /proc/kallsyms. */
static int probe_kmem(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: kmem");
  static const char *const devs[] = { "/proc/kcore", "/dev/mem", "/dev/kmem", "/dev/port" };
  for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
    char route[64], b;
    snprintf(route, sizeof route, "read %s", devs[i]);
    int fd = open(devs[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      note(route, errno, 1);
      continue;
    }
    note(route, read(fd, &b, 1) < 0 ? errno : 0, 1);
    close(fd);
  }
  char buf[256];
  note("read the kernel log", klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf) < 0 ? errno : 0, 1);
  FILE *f = fopen("/proc/kallsyms", "r");
  if (!f) {
    note("read /proc/kallsyms", errno, 1);
  } else {
    unsigned long addr = 0;
    int got = fscanf(f, "%lx", &addr) == 1;
    fclose(f);
    note("read a real kernel address from /proc/kallsyms", got && addr ? 0 : EPERM, 1);
  }
  return verdict();
}

/* Device nodes in the workspace: /dev/null's numbers and the first virtio
 * and SCSI disks'. */
static int probe_mknod(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: mknod");
  note("mknod a character device (1,3)", mknod("dev-null", S_IFCHR | 0666, makedev(1, 3)) < 0 ? errno : 0, 1);
  note("mknod a block device (253,0)", mknod("dev-vda", S_IFBLK | 0666, makedev(253, 0)) < 0 ? errno : 0, 1);
  note("mknod a block device (8,0)", mknod("dev-sda", S_IFBLK | 0666, makedev(8, 0)) < 0 ? errno : 0, 1);
  return verdict();
}

/* A tmpfs over ./mnt then a file in it: the file reaches the workspace only
 * when the mount failed. Also tries to make / writable. */
static int probe_mount(int argc, char **argv)
{
  if (argc != 1)
    die("usage: mount SENTINEL");
  if (mkdir("mnt", 0755) < 0 && errno != EEXIST)
    die("mkdir mnt: %s", strerror(errno));
  note("mount tmpfs on ./mnt", mount("shk", "mnt", "tmpfs", 0, NULL) < 0 ? errno : 0, 1);
  write_file("mnt/file", "x", 1);
  note("remount / read-write", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL) < 0 ? errno : 0, 1);
  char *dir = strdup(argv[0]);
  *strrchr(dir, '/') = 0;
  note("bind mount over the sentinel's directory",
       mount(".", dir, NULL, MS_BIND, NULL) < 0 ? errno : 0, 1);
  free(dir);
  try_append("append to the sentinel after the mounts", argv[0]);
  note("mount a new proc", mount("proc", "mnt", "proc", 0, NULL) < 0 ? errno : 0, 1);
  /* The new mount API reaches the same power by other system calls. */
  long fs = syscall(SYS_fsopen, "tmpfs", 0);
  note("fsopen(tmpfs)", fs < 0 ? errno : 0, 1);
  if (fs >= 0)
    close((int)fs);
  long tree = syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */ | O_CLOEXEC);
  note("open_tree(/, OPEN_TREE_CLONE)", tree < 0 ? errno : 0, 1);
  if (tree >= 0)
    close((int)tree);
  return verdict();
}

/* chroot into ./jail, then create /marker: it lands in ./jail/marker only
 * when the chroot worked. Then the classic climb out. */
static int probe_chroot(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: chroot");
  if (mkdir("jail", 0755) < 0 && errno != EEXIST)
    die("mkdir jail: %s", strerror(errno));
  if (chroot("jail") < 0) {
    note("chroot ./jail", errno, 1);
    return verdict();
  }
  note("chroot ./jail", 0, 1);
  write_file("/marker", "x", 1);
  return verdict();
}

/* Writes VALUE to each kernel setting FILE. */
static int probe_sysctl(int argc, char **argv)
{
  if (argc < 2)
    die("usage: sysctl VALUE FILE...");
  for (int i = 1; i < argc; i++) {
    char route[512];
    snprintf(route, sizeof route, "write %s", argv[i]);
    int fd = open(argv[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      note(route, errno, 1);
      continue;
    }
    ssize_t n = write(fd, argv[0], strlen(argv[0]));
    note(route, n < 0 ? errno : 0, 1);
    close(fd);
  }
  return verdict();
}

/* Executes a set-user-ID copy of this program, which records its real and
 * effective user ids in OUT. */
static int probe_suid(int argc, char **argv)
{
  if (argc != 2)
    die("usage: suid SUID-PROGRAM OUT");
  pid_t pid = fork();
  if (pid < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    execl(argv[0], argv[0], "suid-report", argv[1], (char *)NULL);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(126);
  }
  int st;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 126)
    note("exec the set-user-ID program", EACCES, 1);
  else
    note("exec the set-user-ID program", 0, 0);
  return verdict();
}

static int suid_report(int argc, char **argv)
{
  if (argc != 1)
    die("usage: suid-report OUT");
  char buf[64];
  int n = snprintf(buf, sizeof buf, "uid=%u euid=%u\n", getuid(), geteuid());
  /* Written with the effective ids, into the workspace. */
  write_file(argv[0], buf, (size_t)n);
  return 0;
}

static long keyctl(int op, unsigned long a, unsigned long b, unsigned long c, unsigned long d)
{
  return syscall(SYS_keyctl, op, a, b, c, d);
}

static long add_key(const char *type, const char *desc, const void *payload, size_t len, int32_t ring)
{
  return syscall(SYS_add_key, type, desc, payload, len, ring);
}

/* The caller's keys: reads them by serial and by search, then plants one in
 * the caller's session and user keyrings. What it read goes to OUT. */
static int probe_keys(int argc, char **argv)
{
  if (argc != 4)
    die("usage: keys SESSION-KEYRING KEY USER-KEY OUT");
  long session = num(argv[0]);
  long ids[2] = { num(argv[1]), num(argv[2]) };
  int out = open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0)
    die("cannot create %s: %s", argv[3], strerror(errno));
  char buf[256];
  for (int i = 0; i < 2; i++) {
    long n = keyctl(KEYCTL_READ, (unsigned long)ids[i], (unsigned long)buf, sizeof buf, 0);
    note(i ? "read the caller's user-keyring key by serial" : "read the caller's session key by serial",
         n < 0 ? errno : 0, 1);
    if (n > 0)
      (void)!write(out, buf, (size_t)(n < (long)sizeof buf ? n : (long)sizeof buf));
  }
  static const char *const names[2] = { "shk-secret", "shk-secret-u" };
  static const int32_t rings[2] = { KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING };
  for (int i = 0; i < 2; i++) {
    long k = keyctl(KEYCTL_SEARCH, (unsigned long)(long)rings[i], (unsigned long)"user",
                    (unsigned long)names[i], 0);
    if (k < 0) {
      note("search the keyrings for the caller's key", errno, 1);
      continue;
    }
    long n = keyctl(KEYCTL_READ, (unsigned long)k, (unsigned long)buf, sizeof buf, 0);
    note("read the caller's key found by search", n < 0 ? errno : 0, 1);
    if (n > 0)
      (void)!write(out, buf, (size_t)(n < (long)sizeof buf ? n : (long)sizeof buf));
  }
  close(out);
  long k = add_key("user", "shk-planted", "x", 1, (int32_t)session);
  note("add a key to the caller's session keyring", k < 0 ? errno : 0, 1);
  k = add_key("user", "shk-planted", "x", 1, KEY_SPEC_USER_KEYRING);
  /* Inside a new user namespace the user keyring is the namespace's own:
   * the host fixture checks the caller's. */
  note("add a key to the user keyring", k < 0 ? errno : 0, 0);
  return verdict();
}

static int probe_userns(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: userns");
  pid_t pid = fork();
  if (pid == 0)
    _exit(unshare(CLONE_NEWUSER) < 0 ? errno : 0);
  int st;
  waitpid(pid, &st, 0);
  note("unshare(CLONE_NEWUSER)", WIFEXITED(st) ? WEXITSTATUS(st) : EINTR, 1);
  pid = fork();
  if (pid == 0)
    _exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) < 0 ? errno : 0);
  waitpid(pid, &st, 0);
  note("unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWNET)", WIFEXITED(st) ? WEXITSTATUS(st) : EINTR, 1);
  return verdict();
}

static int probe_bpf(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: bpf");
  union bpf_attr a;
  memset(&a, 0, sizeof a);
  a.map_type = BPF_MAP_TYPE_ARRAY;
  a.key_size = 4;
  a.value_size = 4;
  a.max_entries = 1;
  long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
  note("bpf(BPF_MAP_CREATE)", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close((int)fd);
  struct bpf_insn prog[2] = {
    { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },
    { .code = BPF_JMP | BPF_EXIT },
  };
  memset(&a, 0, sizeof a);
  a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  a.insns = (uint64_t)(uintptr_t)prog;
  a.insn_cnt = 2;
  a.license = (uint64_t)(uintptr_t)"GPL";
  fd = syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof a);
  note("bpf(BPF_PROG_LOAD)", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close((int)fd);
  return verdict();
}

static int probe_perf(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: perf");
  struct perf_event_attr a = { .type = PERF_TYPE_SOFTWARE, .size = sizeof a,
                               .config = PERF_COUNT_SW_TASK_CLOCK, .disabled = 1,
                               .exclude_kernel = 1, .exclude_hv = 1 };
  long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
  note("perf_event_open(task clock, self)", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close((int)fd);
  return verdict();
}

static int probe_userfaultfd(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: userfaultfd");
  long fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  note("userfaultfd(UFFD_USER_MODE_ONLY)", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close((int)fd);
  fd = syscall(SYS_userfaultfd, O_CLOEXEC);
  note("userfaultfd()", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close((int)fd);
  int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev < 0) {
    note("open /dev/userfaultfd", errno, 0);
  } else {
    int u = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC);
    note("USERFAULTFD_IOC_NEW", u < 0 ? errno : 0, 1);
    if (u >= 0)
      close(u);
    close(dev);
  }
  return verdict();
}

/* The host's System V message queue and shared memory segment, by key. */
static int probe_ipc(int argc, char **argv)
{
  if (argc != 1)
    die("usage: ipc KEY");
  key_t key = (key_t)num(argv[0]);
  int q = msgget(key, 0);
  note("msgget the host's queue", q < 0 ? errno : 0, 1);
  if (q >= 0) {
    struct { long type; char text[8]; } m = { 1, "PROBE" };
    note("msgsnd to it", msgsnd(q, &m, sizeof m.text, IPC_NOWAIT) < 0 ? errno : 0, 1);
  }
  int shm = shmget(key, 0, 0);
  note("shmget the host's segment", shm < 0 ? errno : 0, 1);
  if (shm >= 0) {
    char *p = shmat(shm, NULL, 0);
    note("shmat it", p == (void *)-1 ? errno : 0, 1);
    if (p != (void *)-1) {
      memcpy(p, "ESCAPED", 8);
      shmdt(p);
    }
  }
  return verdict();
}

static int probe_hostname(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: hostname");
  note("sethostname", sethostname("shk-escape", 10) < 0 ? errno : 0, 1);
  note("setdomainname", setdomainname("shk-escape", 10) < 0 ? errno : 0, 1);
  return verdict();
}

/* Each call has harmless arguments that fail only after the kernel's
 * permission check: EPERM (or a filter's ENOSYS/EACCES) means refused,
 * any other answer means the caller held the privilege. */
static void past_check(const char *route, long rc)
{
  int err = rc < 0 ? errno : 0;
  note(route, err == EPERM || err == EACCES || err == ENOSYS ? err : 0, 1);
}

static int probe_kernel(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: kernel");
  past_check("finit_module(-1)", syscall(SYS_finit_module, -1, "", 0));
  past_check("kexec_load with bad flags", syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000UL));
  past_check("reboot with a bad magic", syscall(SYS_reboot, 0x12345678, 0x9abcdef0, LINUX_REBOOT_CMD_CAD_OFF, NULL));
  past_check("swapon a missing file", swapon("/nonexistent/shk-swap", 0));
  long rc = syscall(SYS_iopl, 3);
  past_check("iopl(3)", rc);
  if (rc == 0)
    syscall(SYS_iopl, 0);
  return verdict();
}

/* Runs one attempt in a child, which a seccomp filter may kill: returns 0
 * when the call succeeded, else the errno (EPERM when killed by a signal). */
static int in_child(long (*fn)(void))
{
  pid_t pid = fork();
  if (pid < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    long rc = fn();
    _exit(rc == 0 ? 0 : rc < 0 && rc > -256 ? (int)-rc : EINVAL);
  }
  int st;
  waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) {
    printf("  (the child was killed by signal %d)\n", WTERMSIG(st));
    return EPERM;
  }
  return WEXITSTATUS(st);
}

#if defined(__x86_64__)
/* unshare(CLONE_NEWUSER) through the 32-bit entry (i386 number 310). */
static long unshare_i386(void)
{
  long rc;
  __asm__ volatile("int $0x80" : "=a"(rc) : "a"(310L), "b"((long)CLONE_NEWUSER) : "memory");
  return rc;
}

/* The same through the x32 numbering (the x86_64 number with bit 30). */
static long unshare_x32(void)
{
  long rc = syscall(0x40000000L | SYS_unshare, CLONE_NEWUSER);
  return rc < 0 ? -errno : rc;
}
#endif

/* A forbidden call through the other system call ABIs of the machine: a
 * filter that checks numbers but not the architecture lets it through. */
static int probe_compat(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: compat");
#if defined(__x86_64__)
  note("unshare(CLONE_NEWUSER) through int $0x80 (i386)", in_child(unshare_i386), 1);
  int err = in_child(unshare_x32);
  /* Without the x32 ABI in the kernel the number is simply unknown. */
  note("unshare(CLONE_NEWUSER) through the x32 ABI", err, 1);
#else
  printf("no other ABI on this architecture\n");
#endif
  return verdict();
}

/* Forks children that wait, up to CAP, and records in OUT how many were
 * alive at once; then kills them. The cap keeps an unconfined run harmless. */
static int probe_forkbomb(int argc, char **argv)
{
  if (argc != 2)
    die("usage: forkbomb CAP OUT");
  long cap = num(argv[0]);
  pid_t *kids = calloc((size_t)cap, sizeof *kids);
  if (!kids)
    die("out of memory");
  long n = 0;
  int err = 0;
  pid_t self = getpid();
  while (n < cap) {
    pid_t pid = fork();
    if (pid < 0) {
      err = errno;
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != self)
        _exit(0);
      for (;;)
        pause();
    }
    kids[n++] = pid;
  }
  char buf[64];
  int len = snprintf(buf, sizeof buf, "%ld\n", n);
  write_file(argv[1], buf, (size_t)len);
  printf("forked %ld children of at most %ld\n", n, cap);
  note("fork without limit", n >= cap ? 0 : err, 1);
  for (long i = 0; i < n; i++)
    kill(kids[i], SIGKILL);
  for (long i = 0; i < n; i++)
    waitpid(kids[i], NULL, 0);
  free(kids);
  return verdict();
}

/* Touches memory in 8 MiB steps up to CAP MiB, recording the total in OUT
 * after each step (the page cache keeps it if the process is killed). */
static int probe_memhog(int argc, char **argv)
{
  if (argc != 2)
    die("usage: memhog CAP-MIB OUT");
  long cap = num(argv[0]);
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    die("cannot create %s: %s", argv[1], strerror(errno));
  long mib = 0;
  int err = 0;
  while (mib < cap) {
    char *p = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      err = errno;
      break;
    }
    memset(p, 0x5a, 8 << 20);
    mib += 8;
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%-12ld\n", mib);
    if (pwrite(fd, buf, (size_t)len, 0) != len)
      die("cannot record progress: %s", strerror(errno));
  }
  printf("touched %ld MiB of at most %ld\n", mib, cap);
  note("allocate without limit", mib >= cap ? 0 : err, 1);
  close(fd);
  return verdict();
}

/* ---- host-side fixtures ------------------------------------------------ */

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
  (void)sig;
  stop = 1;
}

static void fixture_signals(void)
{
  struct sigaction sa = { .sa_handler = on_term };
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  alarm(FIXTURE_LIFETIME_S);
  signal(SIGALRM, SIG_DFL);
}

static int bound(int fd, const struct sockaddr *sa, socklen_t len, const char *what)
{
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, sa, len) < 0)
    die("cannot bind %s: %s", what, strerror(errno));
  return fd;
}

/* Logs every datagram or connection queued on a non-blocking socket. */
static void drain(int fd, const char *log)
{
  int type;
  socklen_t tl = sizeof type;
  getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl);
  for (;;) {
    if (type == SOCK_DGRAM) {
      char buf[512];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n < 0)
        return;
      log_line(log, "datagram %zd bytes", n);
    } else {
      int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
      if (c < 0)
        return;
      log_line(log, "connection");
      close(c);
    }
  }
}

/* host-listen KIND WHERE LOG READY: KIND is tcp or udp (WHERE is a port on
 * 127.0.0.1, 0 for any), dns (127.0.0.1:53, udp and tcp), any (tcp and udp
 * on every address, for the test host inside a network namespace the test
 * made), unix or unix-dgram (WHERE is a path) or abstract (a name). Writes the port to READY when listening, and a
 * line to LOG for every connection or datagram. */
static int host_listen(int argc, char **argv)
{
  if (argc != 4)
    die("usage: host-listen tcp|udp|dns|unix|abstract WHERE LOG READY");
  const char *kind = argv[0], *log = argv[2];
  struct pollfd pfd[2];
  int nfd = 0, port = 0;
  if (!strcmp(kind, "tcp") || !strcmp(kind, "udp") || !strcmp(kind, "dns") || !strcmp(kind, "any")) {
    int dns = !strcmp(kind, "dns"), any = !strcmp(kind, "any");
    struct sockaddr_in sin = loopback(dns ? 53 : (int)num(argv[1]));
    if (any)
      sin.sin_addr.s_addr = htonl(INADDR_ANY);
    if (dns || any || !strcmp(kind, "tcp")) {
      int s = bound(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), (struct sockaddr *)&sin,
                    sizeof sin, "tcp");
      if (listen(s, 16) < 0)
        die("listen: %s", strerror(errno));
      pfd[nfd++] = (struct pollfd){ .fd = s, .events = POLLIN };
      socklen_t sl = sizeof sin;
      getsockname(s, (struct sockaddr *)&sin, &sl);
    }
    if (dns || any || !strcmp(kind, "udp")) {
      int s = bound(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), (struct sockaddr *)&sin,
                    sizeof sin, "udp");
      pfd[nfd++] = (struct pollfd){ .fd = s, .events = POLLIN };
    }
    socklen_t len = sizeof sin;
    getsockname(pfd[0].fd, (struct sockaddr *)&sin, &len);
    port = ntohs(sin.sin_port);
  } else if (!strcmp(kind, "unix") || !strcmp(kind, "abstract") || !strcmp(kind, "unix-dgram")) {
    int dgram = !strcmp(kind, "unix-dgram");
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    size_t n = strlen(argv[1]);
    if (n + 1 >= sizeof sun.sun_path)
      die("name too long");
    socklen_t len = sizeof sun;
    if (strcmp(kind, "abstract")) {
      strcpy(sun.sun_path, argv[1]);
      unlink(argv[1]);
    } else {
      memcpy(sun.sun_path + 1, argv[1], n);
      len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    }
    int s = bound(socket(AF_UNIX, (dgram ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0),
                  (struct sockaddr *)&sun, len, "unix");
    if (strcmp(kind, "abstract"))
      chmod(argv[1], 0777);
    if (!dgram && listen(s, 16) < 0)
      die("listen: %s", strerror(errno));
    pfd[nfd++] = (struct pollfd){ .fd = s, .events = POLLIN };
  } else {
    die("unknown listener kind '%s'", kind);
  }
  fixture_signals();
  char ready[16];
  int len = snprintf(ready, sizeof ready, "%d\n", port);
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
  write_file(tmp, ready, (size_t)len);
  rename(tmp, argv[3]);
  while (!stop)
    if (poll(pfd, (nfds_t)nfd, 200) > 0)
      for (int i = 0; i < nfd; i++)
        if (pfd[i].revents & POLLIN)
          drain(pfd[i].fd, log);
  /* After SIGTERM, what is still queued is logged too: the driver stops the
   * listener before it judges, so nothing that arrived is missed. */
  for (int i = 0; i < nfd; i++)
    drain(pfd[i].fd, log);
  return 0;
}

/* host-hold INFO LOG: holds a secret and a canary word in memory, writes
 * "PID SECRET-ADDR LEN CANARY-ADDR SECRET" to INFO, and logs to LOG any
 * tracer that attaches and any change of the canary. */
static int host_hold(int argc, char **argv)
{
  if (argc != 2)
    die("usage: host-hold INFO LOG");
  static char secret[33];
  static volatile uint32_t canary = 0x600dcafe;
  unsigned char rnd[16];
  int r = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (r < 0 || read(r, rnd, sizeof rnd) != sizeof rnd)
    die("no randomness");
  close(r);
  for (int i = 0; i < 16; i++)
    snprintf(secret + 2 * i, 3, "%02x", rnd[i]);
  fixture_signals();
  char info[256], tmp[PATH_MAX];
  int len = snprintf(info, sizeof info, "%d %p %zu %p %s\n", getpid(), (void *)secret,
                     strlen(secret), (void *)&canary, secret);
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[0]);
  write_file(tmp, info, (size_t)len);
  rename(tmp, argv[0]);
  int traced = 0, tampered = 0;
  /* One more look after SIGTERM: the canary keeps what was done to it. */
  for (int last = 0; !last;) {
    last = stop;
    if (!tampered && canary != 0x600dcafe) {
      tampered = 1;
      log_line(argv[1], "canary changed");
    }
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
      if (!strncmp(line, "TracerPid:", 10) && atoi(line + 10) != 0 && !traced) {
        traced = 1;
        log_line(argv[1], "traced by %d", atoi(line + 10));
      }
    if (f)
      fclose(f);
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    if (!last)
      nanosleep(&ts, NULL);
  }
  return 0;
}

/* host-churn FROM TO: binds FROM onto TO and unmounts it again, over and
 * over until killed: a host whose mount table changes all the time (network
 * namespaces made and deleted, containers started). Run by the tests only
 * in a mount namespace of their own. */
static int host_churn(int argc, char **argv)
{
  if (argc != 2)
    die("usage: host-churn FROM TO");
  if (mount(argv[0], argv[1], NULL, MS_BIND, NULL) < 0)
    die("bind %s on %s: %s", argv[0], argv[1], strerror(errno));
  for (;;) {
    umount2(argv[1], 0);
    mount(argv[0], argv[1], NULL, MS_BIND, NULL);
  }
}

/* host-pty LOG -- CMD...: runs CMD with a new pseudo-terminal as its
 * controlling terminal and standard streams, copies its output to ours, and
 * after it exits logs to LOG any input that was pushed into the terminal,
 * and a change of its window size or of its echo. */
static int host_pty(int argc, char **argv)
{
  if (argc < 3 || strcmp(argv[1], "--"))
    die("usage: host-pty LOG -- CMD...");
  int master, slave;
  struct termios tio;
  if (openpty(&master, &slave, NULL, NULL, NULL) < 0)
    die("openpty: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    close(master);
    setsid();
    if (ioctl(slave, TIOCSCTTY, 0) < 0)
      die("TIOCSCTTY: %s", strerror(errno));
    dup2(slave, 0);
    dup2(slave, 1);
    dup2(slave, 2);
    if (slave > 2)
      close(slave);
    execvp(argv[2], argv + 2);
    die("exec %s: %s", argv[2], strerror(errno));
  }
  struct winsize ws0 = { 0 }, ws1 = { 0 };
  struct termios tio0;
  bool have_tio = tcgetattr(slave, &tio0) == 0;
  ioctl(slave, TIOCGWINSZ, &ws0);
  int st = 0;
  for (;;) {
    struct pollfd p = { .fd = master, .events = POLLIN };
    if (poll(&p, 1, 100) > 0) {
      char buf[4096];
      ssize_t n = read(master, buf, sizeof buf);
      if (n > 0)
        (void)!write(1, buf, (size_t)n);
    }
    if (waitpid(pid, &st, WNOHANG) == pid)
      break;
  }
  /* What the command wrote last may still be on its way through the
   * terminal (the kernel hands it to this side asynchronously, later under
   * load): copy until the terminal has been quiet for half a second, so
   * that the driver sees the probe's whole report. */
  for (;;) {
    struct pollfd p = { .fd = master, .events = POLLIN };
    char buf[4096];
    ssize_t n = poll(&p, 1, 500) > 0 ? read(master, buf, sizeof buf) : 0;
    if (n <= 0)
      break;
    (void)!write(1, buf, (size_t)n);
  }
  /* The terminal's own state, which only a process holding it can change. */
  if (ioctl(slave, TIOCGWINSZ, &ws1) == 0 && (ws1.ws_row != ws0.ws_row || ws1.ws_col != ws0.ws_col))
    log_line(argv[0], "the terminal's window size changed");
  struct termios tio1;
  if (have_tio && tcgetattr(slave, &tio1) == 0 && (tio0.c_lflag & ECHO) && !(tio1.c_lflag & ECHO))
    log_line(argv[0], "the terminal's echo was turned off");
  /* What was injected is queued as input on the terminal: read it from our
   * own descriptor of the slave side. */
  if (tcgetattr(slave, &tio) == 0) {
    cfmakeraw(&tio);
    tio.c_cc[VMIN] = 0;
    tio.c_cc[VTIME] = 0;
    tcsetattr(slave, TCSANOW, &tio);
  }
  fcntl(slave, F_SETFL, O_NONBLOCK);
  char in[4096];
  ssize_t n = read(slave, in, sizeof in - 1);
  if (n > 0) {
    in[n] = 0;
    if (strstr(in, "SHKINJ"))
      log_line(argv[0], "injected input arrived");
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* host-keys SECRET LOG -- CMD...: joins a new session keyring holding a key
 * with SECRET ("shk-secret"), adds "shk-secret-u" to the user keyring, both
 * readable by the owner without possession, runs CMD with "@S", "@K" and "@U"
 * replaced by the serials, then logs any key planted by CMD and removes its
 * own key from the user keyring. */
static int host_keys(int argc, char **argv)
{
  if (argc < 4 || strcmp(argv[2], "--"))
    die("usage: host-keys SECRET LOG -- CMD...");
  const char *secret = argv[0], *log = argv[1];
  long s = keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0);
  if (s < 0)
    die("cannot join a session keyring: %s", strerror(errno));
  /* As a login session does (pam_keyinit), the session keyring links the
   * user keyring, so the caller possesses the keys in both. */
  if (keyctl(KEYCTL_LINK, (unsigned long)(long)KEY_SPEC_USER_KEYRING,
             (unsigned long)(long)KEY_SPEC_SESSION_KEYRING, 0, 0) < 0)
    die("cannot link the user keyring: %s", strerror(errno));
  long k = add_key("user", "shk-secret", secret, strlen(secret), KEY_SPEC_SESSION_KEYRING);
  long u = add_key("user", "shk-secret-u", secret, strlen(secret), KEY_SPEC_USER_KEYRING);
  if (k < 0 || u < 0)
    die("cannot add keys: %s", strerror(errno));
  /* Possessor and owner may do everything: only the sandbox stands between
   * the command and the keys. */
  unsigned long perm = 0x3f3f0000;
  if (keyctl(KEYCTL_SETPERM, (unsigned long)k, perm, 0, 0) < 0 ||
      keyctl(KEYCTL_SETPERM, (unsigned long)u, perm, 0, 0) < 0 ||
      keyctl(KEYCTL_SETPERM, (unsigned long)s, perm, 0, 0) < 0)
    die("cannot set key permissions: %s", strerror(errno));
  char ids[3][24];
  snprintf(ids[0], sizeof ids[0], "%ld", s);
  snprintf(ids[1], sizeof ids[1], "%ld", k);
  snprintf(ids[2], sizeof ids[2], "%ld", u);
  char **cmd = argv + 3;
  for (int i = 0; cmd[i]; i++) {
    if (!strcmp(cmd[i], "@S"))
      cmd[i] = ids[0];
    else if (!strcmp(cmd[i], "@K"))
      cmd[i] = ids[1];
    else if (!strcmp(cmd[i], "@U"))
      cmd[i] = ids[2];
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    execvp(cmd[0], cmd);
    die("exec %s: %s", cmd[0], strerror(errno));
  }
  int st;
  waitpid(pid, &st, 0);
  static const int32_t rings[2] = { KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING };
  for (int i = 0; i < 2; i++) {
    long p = keyctl(KEYCTL_SEARCH, (unsigned long)(long)rings[i], (unsigned long)"user",
                    (unsigned long)"shk-planted", 0);
    if (p >= 0) {
      log_line(log, "a key was planted in the caller's %s keyring", i ? "user" : "session");
      keyctl(KEYCTL_UNLINK, (unsigned long)p, (unsigned long)(long)rings[i], 0, 0);
    }
  }
  keyctl(KEYCTL_UNLINK, (unsigned long)u, (unsigned long)(long)KEY_SPEC_USER_KEYRING, 0, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* host-fd FILE -- CMD...: runs CMD with FILE open for appending on
 * descriptor 7, inheritable, as a careless caller might. */
static int host_fd(int argc, char **argv)
{
  if (argc < 3 || strcmp(argv[1], "--"))
    die("usage: host-fd FILE -- CMD...");
  int fd = open(argv[0], O_WRONLY | O_APPEND);
  if (fd < 0 || dup2(fd, 7) < 0)
    die("cannot open %s on descriptor 7: %s", argv[0], strerror(errno));
  if (fd != 7)
    close(fd);
  execvp(argv[2], argv + 2);
  die("exec %s: %s", argv[2], strerror(errno));
}

/* host-ipc INFO LOG: a System V message queue and shared memory segment
 * under a random key, mode 0666, written to INFO; logs any message or write
 * that arrives, and removes both when it stops. */
static int host_ipc(int argc, char **argv)
{
  if (argc != 2)
    die("usage: host-ipc INFO LOG");
  key_t key;
  int q = -1, shm = -1;
  for (int tries = 0; q < 0 && tries < 50; tries++) {
    key = (key_t)(0x5a000000 | (((getpid() << 4) | tries) & 0xffffff));
    q = msgget(key, IPC_CREAT | IPC_EXCL | 0666);
  }
  if (q < 0)
    die("msgget: %s", strerror(errno));
  shm = shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0666);
  if (shm < 0) {
    msgctl(q, IPC_RMID, NULL);
    die("shmget: %s", strerror(errno));
  }
  char *p = shmat(shm, NULL, 0);
  if (p == (void *)-1)
    die("shmat: %s", strerror(errno));
  fixture_signals();
  char info[32], tmp[PATH_MAX];
  int len = snprintf(info, sizeof info, "%d\n", (int)key);
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[0]);
  write_file(tmp, info, (size_t)len);
  rename(tmp, argv[0]);
  int seen_q = 0, seen_shm = 0;
  /* One more look after SIGTERM: the queue and the segment keep what
   * arrived. */
  for (int last = 0; !last;) {
    last = stop;
    struct msqid_ds ds;
    if (!seen_q && msgctl(q, IPC_STAT, &ds) == 0 && ds.msg_qnum > 0) {
      seen_q = 1;
      log_line(argv[1], "a message arrived in the host's queue");
    }
    if (!seen_shm && p[0]) {
      seen_shm = 1;
      log_line(argv[1], "the host's shared memory was written");
    }
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    if (!last)
      nanosleep(&ts, NULL);
  }
  shmdt(p);
  shmctl(shm, IPC_RMID, NULL);
  msgctl(q, IPC_RMID, NULL);
  return 0;
}

/* ---- the host's features, for checking `shinken doctor`'s claims -------- */

/* Landlock's view of /proc as read-only: the process's own name is
 * writable under every other layer. */
static int probe_landlock_fs(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: landlock-fs");
  int fd = open("/proc/self/comm", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    note("open /proc/self/comm for writing", errno, 1);
  } else {
    note("write /proc/self/comm", write(fd, "shk-probe", 9) < 0 ? errno : 0, 1);
    close(fd);
  }
  return verdict();
}

/* Landlock's signal scoping: the sandbox's init (pid 1) is outside the
 * command's domain. Signal 0 only asks whether a signal could be sent. */
static int probe_sigscope(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: sigscope");
  note("kill(1, 0), the init outside the domain", kill(1, 0) < 0 ? errno : 0, 1);
  return verdict();
}

static int check_landlock_abi(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: landlock-abi");
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  printf("%ld\n", abi < 0 ? 0 : abi);
  return 0;
}

/* Installs an allow-everything filter in a child: 1 when the kernel takes
 * it. */
static int check_seccomp(int argc, char **argv)
{
  (void)argv;
  if (argc != 0)
    die("usage: seccomp-avail");
  pid_t pid = fork();
  if (pid < 0)
    die("fork: %s", strerror(errno));
  if (pid == 0) {
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = { .len = 1, .filter = &allow };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
      _exit(1);
    _exit(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0 ? 1 : 0);
  }
  int st;
  waitpid(pid, &st, 0);
  printf("%d\n", WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return 0;
}

/* Writes TEXT to PATH, creating it or replacing what it holds. */
static void try_put(const char *route, const char *path, const char *text)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    note(route, errno, 1);
    return;
  }
  ssize_t n = write(fd, text, strlen(text));
  note(route, n < 0 ? errno : 0, 1);
  close(fd);
}

/* In the repository at the working directory, which has a linked worktree
 * wt/ and a submodule lib/ (its gitlink file and its git directory in
 * .git/modules/lib): builds a git directory of its own, evil/, whose
 * configuration names a command (core.fsmonitor), and points each
 * repository at it through every file git follows to find its
 * configuration: commondir, a worktree's and a submodule's `.git` file,
 * the worktree's own commondir, and the submodule's config itself. The
 * judge asks the host's git what configuration each repository has. */
static int probe_git_redirect(int argc, char **argv)
{
  if (argc != 0)
    die("usage: git-redirect");
  (void)argv;
  static const char evil_config[] = "[core]\n\tfsmonitor = shk-escaped\n";
  char cwd[PATH_MAX], text[PATH_MAX + 16];
  if (!getcwd(cwd, sizeof cwd))
    die("getcwd: %s", strerror(errno));
  if ((mkdir("evil", 0755) < 0 && errno != EEXIST) ||
      (mkdir("evil/objects", 0755) < 0 && errno != EEXIST) ||
      (mkdir("evil/refs", 0755) < 0 && errno != EEXIST))
    die("cannot build evil/ in the workspace: %s", strerror(errno));
  write_file("evil/HEAD", "ref: refs/heads/main\n", 21);
  write_file("evil/config", evil_config, sizeof evil_config - 1);
  snprintf(text, sizeof text, "%s/evil\n", cwd);
  try_put("create .git/commondir naming evil/", ".git/commondir", text);
  try_put("rewrite .git/worktrees/wt/commondir", ".git/worktrees/wt/commondir", text);
  snprintf(text, sizeof text, "gitdir: %s/evil\n", cwd);
  try_put("rewrite the worktree's wt/.git", "wt/.git", text);
  try_put("rewrite the submodule's lib/.git", "lib/.git", text);
  try_put("rewrite .git/modules/lib/config", ".git/modules/lib/config", evil_config);
  /* The same, by moving the work trees away and making new ones. */
  static const char *const trees[] = { "wt", "lib" };
  for (size_t i = 0; i < 2; i++) {
    char moved[32], route[96], dotgit[32];
    snprintf(moved, sizeof moved, "%s.moved", trees[i]);
    snprintf(dotgit, sizeof dotgit, "%s/.git", trees[i]);
    snprintf(route, sizeof route, "rename %s and make a new one", trees[i]);
    if (rename(trees[i], moved) == 0) {
      note(route, 0, 1);
      if (mkdir(trees[i], 0755) == 0)
        try_put("write a new .git file in it", dotgit, text);
    } else {
      note(route, errno, 1);
    }
  }
  return verdict();
}

/* Sets the set-user-ID and set-group-ID bits on a file of the workspace,
 * and creates files and directories with them, every way the kernel
 * offers. The judge looks for such bits in the workspace. */
static int probe_setid(int argc, char **argv)
{
  if (argc != 0)
    die("usage: setid");
  (void)argv;
  write_file("plain", "#!/bin/sh\n", 10);
  note("chmod(04755)", chmod("plain", 04755) < 0 ? errno : 0, 1);
  note("chmod(02755)", chmod("plain", 02755) < 0 ? errno : 0, 1);
  note("fchmodat(06755)", fchmodat(AT_FDCWD, "plain", 06755, 0) < 0 ? errno : 0, 1);
#ifdef SYS_fchmodat2
  note("fchmodat2(04755)", syscall(SYS_fchmodat2, AT_FDCWD, "plain", 04755, 0) < 0 ? errno : 0, 1);
#else
  note("fchmodat2(04755)", syscall(452, AT_FDCWD, "plain", 04755, 0) < 0 ? errno : 0, 1);
#endif
  int fd = open("plain", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    note("fchmod(04755)", fchmod(fd, 04755) < 0 ? errno : 0, 1);
    close(fd);
  }
  /* Created with the bits (the umask never clears them). */
  umask(0);
  fd = open("created", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755);
  note("open(O_CREAT, 06755)", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close(fd);
  fd = creat("creat", 04755);
  note("creat(04755)", fd < 0 ? errno : 0, 1);
  if (fd >= 0)
    close(fd);
  note("mkdir(02755)", mkdir("setgid-dir", 02755) < 0 ? errno : 0, 1);
  note("mknod(S_IFREG | 04755)", mknod("mknod", S_IFREG | 04755, 0) < 0 ? errno : 0, 1);
  return verdict();
}

extern char **environ;

/* Writes the whole environment it was given to OUT. */
static int probe_environ(int argc, char **argv)
{
  if (argc != 1)
    die("usage: environ OUT");
  int out = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0)
    die("cannot create %s: %s", argv[0], strerror(errno));
  size_t n = 0;
  for (char **e = environ; *e; e++, n++) {
    (void)!write(out, *e, strlen(*e));
    (void)!write(out, "\n", 1);
  }
  close(out);
  note("read the environment", n ? 0 : ENODATA, 0);
  return verdict();
}

/* A unix socket bound inside, connected to from another thread than the
 * main one (threaded resolvers, Go and Java do that): the guard must
 * admit it. Exit 0 when the connection carried its message. */
struct thread_arg {
  struct sockaddr_un sun;
  int err;
};

static void *connect_thread(void *p)
{
  struct thread_arg *a = p;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&a->sun, sizeof a->sun) < 0 ||
      send(s, "hello\n", 6, MSG_NOSIGNAL) != 6)
    a->err = errno ? errno : EIO;
  if (s >= 0)
    close(s);
  return NULL;
}

static int probe_unix_thread(int argc, char **argv)
{
  if (argc != 1)
    die("usage: unix-thread PATH");
  struct thread_arg a = { .sun = { .sun_family = AF_UNIX } };
  if (strlen(argv[0]) >= sizeof a.sun.sun_path)
    die("path too long");
  strcpy(a.sun.sun_path, argv[0]);
  unlink(argv[0]);
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&a.sun, sizeof a.sun) < 0 || listen(l, 4) < 0)
    die("cannot listen on %s: %s", argv[0], strerror(errno));
  pthread_t t;
  if (pthread_create(&t, NULL, connect_thread, &a) != 0)
    die("pthread_create");
  pthread_join(t, NULL);
  if (a.err) {
    printf("connect from a thread: %s\n", strerror(a.err));
    return 1;
  }
  int c = accept(l, NULL, NULL);
  char buf[8] = { 0 };
  if (c < 0 || read(c, buf, sizeof buf - 1) != 6 || strcmp(buf, "hello\n")) {
    printf("the connection from a thread carried nothing\n");
    return 1;
  }
  printf("connected from a thread\n");
  return 0;
}

/* Writes FILE a MiB at a time, up to MAX MiB or until the file system is
 * full, removes it, and writes how many MiB it took to OUT. */
static int probe_fill(int argc, char **argv)
{
  if (argc != 3)
    die("usage: fill FILE MAX-MIB OUT");
  static char buf[1 << 20];
  memset(buf, 'x', sizeof buf);
  long max = num(argv[1]), mib = 0;
  int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    die("cannot create %s: %s", argv[0], strerror(errno));
  int err = 0;
  for (; mib < max; mib++) {
    ssize_t n = write(fd, buf, sizeof buf);
    if (n != (ssize_t)sizeof buf) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
  }
  close(fd);
  unlink(argv[0]);
  char s[32];
  int len = snprintf(s, sizeof s, "%ld\n", mib);
  write_file(argv[2], s, (size_t)len);
  note("fill the private /tmp", err, 0);
  return verdict();
}

struct entry {
  const char *name;
  int (*fn)(int, char **);
};

static const struct entry entries[] = {
  { "tcp", probe_tcp },
  { "egress", probe_egress },
  { "proxy-loopback", probe_proxy_loopback },
  { "udp", probe_udp },
  { "dns", probe_dns },
  { "packet", probe_packet },
  { "netlink", probe_netlink },
  { "vsock", probe_vsock },
  { "unix", probe_unix },
  { "unix-dgram", probe_unix_dgram },
  { "abstract", probe_abstract },
  { "iouring", probe_iouring },
  { "ptrace", probe_ptrace },
  { "vmread", probe_vmread },
  { "kill", probe_kill },
  { "tiocsti", probe_tiocsti },
  { "tty-reopen", probe_tty_reopen },
  { "egress-cross", probe_egress_cross },
  { "write", probe_write },
  { "symlink", probe_symlink },
  { "hardlink", probe_hardlink },
  { "git", probe_git },
  { "rc", probe_rc },
  { "read", probe_read },
  { "copy", probe_copy },
  { "handle", probe_handle },
  { "deny-rename", probe_deny_rename },
  { "proc", probe_proc },
  { "fds", probe_fds },
  { "kmem", probe_kmem },
  { "mknod", probe_mknod },
  { "mount", probe_mount },
  { "chroot", probe_chroot },
  { "sysctl", probe_sysctl },
  { "suid", probe_suid },
  { "suid-report", suid_report },
  { "keys", probe_keys },
  { "userns", probe_userns },
  { "bpf", probe_bpf },
  { "perf", probe_perf },
  { "userfaultfd", probe_userfaultfd },
  { "ipc", probe_ipc },
  { "hostname", probe_hostname },
  { "kernel", probe_kernel },
  { "compat", probe_compat },
  { "forkbomb", probe_forkbomb },
  { "memhog", probe_memhog },
  { "landlock-abi", check_landlock_abi },
  { "landlock-fs", probe_landlock_fs },
  { "sigscope", probe_sigscope },
  { "seccomp-avail", check_seccomp },
  { "host-listen", host_listen },
  { "host-hold", host_hold },
  { "host-pty", host_pty },
  { "host-churn", host_churn },
  { "host-keys", host_keys },
  { "host-ipc", host_ipc },
  { "host-fd", host_fd },
  { "git-redirect", probe_git_redirect },
  { "setid", probe_setid },
  { "environ", probe_environ },
  { "unix-thread", probe_unix_thread },
  { "fill", probe_fill },
};

int main(int argc, char **argv)
{
  if (argc < 2)
    die("usage: shk-probe CASE ARGS...");
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (!strcmp(argv[1], entries[i].name))
      return entries[i].fn(argc - 2, argv + 2);
  die("unknown case '%s'", argv[1]);
}

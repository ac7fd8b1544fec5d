/* SPDX-License-Identifier: Apache-2.0 */
/* `sudo` inside a sandbox: the shinken binary, bound at
 * /run/shinken/bin/sudo (first on PATH) and over /usr/bin/sudo when the
 * host has one, acts as this shim when it is called sudo. It holds no
 * authority of its own: it sends the command line to the session's manager
 * through the egress bridge (127.0.0.1:SHK_EGRESS_SUDO_PORT, which leads to
 * the session's sudo.sock outside) and prints what comes back. The manager
 * decides (install.privileged), may ask a human, and runs the command
 * outside the workload's reach; the shim's exit status is the command's.
 * Its standard input is not passed on: the command reads /dev/null. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"
#include "shinken/egress.h"

/* Moves all LEN bytes of BUF to (WRITING) or from the descriptor FD:
 * 0, or -1 when it fails or the other end is gone first. */
static int io_all(int fd, void *buf, size_t len, bool writing)
{
  char *p = buf;
  while (len) {
    ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int shk_cli_sudo(int argc, char **argv)
{
  /* sudo's own options are not taken: the command line is the command. A
   * leading "--" is allowed, as sudo allows it. */
  int first = 1;
  if (first < argc && !strcmp(argv[first], "--"))
    first++;
  if (first >= argc || argv[first][0] == '-') {
    fprintf(stderr, "sudo: usage: sudo COMMAND [ARGS...] (inside a shinken sandbox, sudo takes no options: "
                    "the session's manager decides and runs the command)\n");
    return 2;
  }
  json_t *av = json_array();
  for (int i = first; av && i < argc; i++)
    if (json_array_append_new(av, json_string(argv[i])) < 0) {
      json_decref(av);
      av = NULL;
    }
  char cwd[PATH_MAX];
  json_t *req = av ? json_pack("{s:o, s:s}", "argv", av, "cwd", getcwd(cwd, sizeof cwd) ? cwd : "/") : NULL;
  char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (!text) {
    fprintf(stderr, "sudo: the command line is not valid UTF-8 text, or out of memory\n");
    return 1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(SHK_EGRESS_SUDO_PORT),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    fprintf(stderr, "sudo: no session manager to ask: sudo works inside `shinken run --net proxy`, whose "
                    "manager decides privileged commands\n");
    free(text);
    return 1;
  }
  size_t len = strlen(text);
  text[len] = '\n';
  int w = io_all(fd, text, len + 1, true);
  free(text);
  if (w < 0) {
    fprintf(stderr, "sudo: the session's manager closed the connection\n");
    return 1;
  }
  /* The connection stays open both ways: its end is how the manager
   * learns that this shim is gone (and ends the command). */
  /* Frames: a kind byte, a 4-byte big-endian length, the payload. */
  static char buf[1 << 16];
  for (;;) {
    unsigned char hdr[5];
    if (io_all(fd, hdr, sizeof hdr, false) < 0)
      break;
    uint32_t n = (uint32_t)hdr[1] << 24 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 8 | hdr[4];
    if (n > sizeof buf - 1 || io_all(fd, buf, n, false) < 0)
      break;
    buf[n] = 0;
    switch (hdr[0]) {
    case 'o':
      if (io_all(STDOUT_FILENO, buf, n, true) < 0)
        return 1;
      break;
    case 'e':
      (void)io_all(STDERR_FILENO, buf, n, true);
      break;
    case 'r':
      fprintf(stderr, "sudo: %s\n", buf);
      return 1;
    case 'x':
      if (n == 4)
        return (int)((uint32_t)(unsigned char)buf[0] << 24 | (uint32_t)(unsigned char)buf[1] << 16 |
                     (uint32_t)(unsigned char)buf[2] << 8 | (unsigned char)buf[3]);
      break;
    default:
      break;
    }
  }
  fprintf(stderr, "sudo: the session's manager ended the request without an answer\n");
  return 1;
}

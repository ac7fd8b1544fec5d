/* SPDX-License-Identifier: Apache-2.0 */
/* Who opened a session (opener.h). The pid and uid are the kernel's
 * (SO_PEERCRED, or this process when the manager is embedded); the command
 * line and working directory are read from /proc while the opener waits for
 * the answer to its open_session, so the pid cannot have been reused by
 * then. They are labels for a person telling sessions apart, never an
 * input to a decision: a process can set its own command line. */
#include "manager/opener.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* /proc/PID/cmdline as one line: the NULs between the words become spaces,
 * control characters '?', the program shown by its last path component,
 * cut to fit. */
static void read_command(pid_t pid, char *out, size_t len)
{
  char path[64], buf[sizeof ((shk__opener *)0)->command];
  out[0] = '\0';
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return;
  buf[n] = '\0';
  while (n > 0 && buf[n - 1] == '\0')
    n--;
  /* The program's own word, up to the first NUL, by its base name. */
  const char *start = buf, *slash = NULL;
  for (const char *p = buf; p < buf + n && *p; p++)
    if (*p == '/')
      slash = p;
  if (slash)
    start = slash + 1;
  size_t j = 0;
  for (const char *p = start; p < buf + n && j + 1 < len; p++)
    out[j++] = *p == '\0' ? ' ' : ((unsigned char)*p < 0x20 || *p == 0x7f) ? '?' : *p;
  out[j] = '\0';
}

static void read_cwd(pid_t pid, char *out, size_t len)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cwd", (int)pid);
  ssize_t n = readlink(path, out, len - 1);
  out[n > 0 ? n : 0] = '\0';
}

void shk__opener_take(shk__opener *out, const shk__peer *by, int64_t now_ms)
{
  memset(out, 0, sizeof *out);
  out->pid = by->pid;
  out->uid = by->uid;
  out->started_ms = now_ms;
  struct passwd pw, *res = NULL;
  char buf[4096];
  if (getpwuid_r(by->uid, &pw, buf, sizeof buf, &res) == 0 && res)
    snprintf(out->user, sizeof out->user, "%s", res->pw_name);
  if (by->pid > 0) {
    read_command(by->pid, out->command, sizeof out->command);
    read_cwd(by->pid, out->cwd, sizeof out->cwd);
  }
}

int shk__opener_add_json(const shk__opener *o, json_t *obj)
{
  char uid[24];
  snprintf(uid, sizeof uid, "%u", (unsigned)o->uid);
  int r = json_object_set_new(obj, "command", json_string(o->command));
  r |= json_object_set_new(obj, "cwd", json_string(o->cwd));
  r |= json_object_set_new(obj, "pid", json_integer(o->pid));
  r |= json_object_set_new(obj, "uid", json_integer(o->uid));
  r |= json_object_set_new(obj, "user", json_string(o->user[0] ? o->user : uid));
  r |= json_object_set_new(obj, "started_ms", json_integer(o->started_ms));
  return r ? -1 : 0;
}

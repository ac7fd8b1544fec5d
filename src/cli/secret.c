/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken secret add|list|rm`: the secret broker's store
 * (shinken/broker.h). A value is read from the terminal without echo, or
 * from standard input when that is not a terminal; never from the command
 * line, where every process of the user (and ps) could read it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "shinken/broker.h"

static const char *store_dir(const char *opt, char *buf, size_t len)
{
  if (opt)
    return opt;
  shk_error e;
  if (shk_broker_default_dir(buf, len, &e))
    shk__die(SHK_EXIT_UNAVAILABLE, "secret: %s", e.message);
  return buf;
}

static int read_fd(int fd, char *buf, size_t cap, size_t *len)
{
  size_t n = 0;
  while (n < cap) {
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    if (r == 0)
      break;
    n += (size_t)r;
    if (buf[n - 1] == '\n' && isatty(fd))
      break;
  }
  *len = n;
  return 0;
}

/* Reads the value into BUF (locked memory of CAP bytes); returns its
 * length without the line's end. */
static size_t read_value(const char *name, char *buf, size_t cap)
{
  size_t n = 0;
  int r;
  if (isatty(STDIN_FILENO)) {
    int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (tty < 0)
      shk__die(SHK_EXIT_UNAVAILABLE, "secret add: cannot open /dev/tty: %s", strerror(errno));
    struct termios old, quiet;
    if (tcgetattr(tty, &old))
      shk__die(SHK_EXIT_UNAVAILABLE, "secret add: cannot read the terminal's settings: %s",
               strerror(errno));
    quiet = old;
    /* Why: a value typed with echo on is on the screen, in a terminal's
     * scrollback and in any recording of the session. */
    quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
    dprintf(tty, "value of secret %s (not shown): ", name);
    if (tcsetattr(tty, TCSAFLUSH, &quiet))
      shk__die(SHK_EXIT_UNAVAILABLE, "secret add: cannot turn the terminal's echo off: %s",
               strerror(errno));
    r = read_fd(tty, buf, cap, &n);
    tcsetattr(tty, TCSAFLUSH, &old);
    dprintf(tty, "\n");
    close(tty);
  } else {
    r = read_fd(STDIN_FILENO, buf, cap, &n);
  }
  if (r)
    shk__die(SHK_EXIT_BAD_INPUT, "secret add: cannot read the value: %s", strerror(-r));
  if (n == cap)
    shk__die(SHK_EXIT_BAD_INPUT, "secret add: the value is longer than %d bytes",
             SHK_BROKER_VALUE_MAX);
  if (n && buf[n - 1] == '\n')
    n--;
  if (n && buf[n - 1] == '\r')
    n--;
  if (memchr(buf, '\n', n))
    shk__die(SHK_EXIT_BAD_INPUT, "secret add: the value must be one line");
  if (n == 0)
    shk__die(SHK_EXIT_BAD_INPUT, "secret add: the value is empty (give it on standard input or at "
                                 "the prompt)");
  return n;
}

static shk_broker_store *open_store(const char *dir, bool create)
{
  shk_broker_store *st;
  shk_error e;
  int r = shk_broker_store_open(dir, create, &st, &e);
  if (r)
    shk__die(r == -ENOMEM ? SHK_EXIT_UNAVAILABLE : SHK_EXIT_BAD_INPUT, "secret: %s", e.message);
  return st;
}

static int add(int argc, char **argv, const char *dir)
{
  shk_broker_spec spec = { 0 };
  bool replace = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "--host") && has)
      spec.host = argv[++i];
    else if (!strcmp(a, "--header") && has)
      spec.header = argv[++i];
    else if (!strcmp(a, "--env") && has)
      spec.env = argv[++i];
    else if (!strcmp(a, "--allow-plain-http"))
      spec.allow_plain_http = true;
    else if (!strcmp(a, "--replace"))
      replace = true;
    else if (!strcmp(a, "--host") || !strcmp(a, "--header") || !strcmp(a, "--env"))
      shk_cli_usage_error("secret", "%s needs a value", a);
    else if (a[0] == '-')
      shk_cli_usage_error("secret", "unknown option '%s'", a);
    else if (spec.name)
      shk_cli_usage_error("secret", "secret add takes one NAME (the value is read from standard "
                                    "input or a prompt, never from the command line)");
    else
      spec.name = a;
  }
  if (!spec.name)
    shk_cli_usage_error("secret", "secret add needs a NAME");
  if (!spec.host)
    shk_cli_usage_error("secret", "secret add needs --host PATTERN");
  shk_broker_store *st = open_store(dir, true);
  size_t cap = SHK_BROKER_VALUE_MAX + 3;
  char *value = shk_broker_secure_alloc(cap);
  if (!value)
    shk__die(SHK_EXIT_UNAVAILABLE, "secret add: cannot lock memory for the value (%s)",
             strerror(errno));
  size_t n = read_value(spec.name, value, cap);
  shk_error e;
  int r = shk_broker_store_add(st, &spec, value, n, replace, &e);
  shk_broker_secure_free(value, cap);
  if (r == 0)
    r = shk_broker_store_save(st, &e);
  shk_broker_store_free(st);
  if (r)
    shk__die(r == -EINVAL || r == -EEXIST ? SHK_EXIT_BAD_INPUT : SHK_EXIT_UNAVAILABLE,
             "secret add: %s", e.message);
  printf("secret %s stored for %s\n", spec.name, spec.host);
  return SHK_EXIT_OK;
}

static int list(int argc, char **argv, const char *dir)
{
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = true;
    else
      shk_cli_usage_error("secret", "unknown argument '%s'", argv[i]);
  }
  shk_broker_store *st = open_store(dir, false);
  json_t *arr = json ? json_array() : NULL;
  /* Why no value, no length, no prefix: the listing is for knowing which
   * names exist and where they go; any part of a value narrows it. */
  for (size_t i = 0; i < shk_broker_store_count(st); i++) {
    const shk_broker_secret *s = shk_broker_store_get(st, i);
    if (arr) {
      json_array_append_new(arr, json_pack("{s:s,s:s,s:s++,s:s?,s:b}", "name", s->name, "host", s->host,
                                           "header", s->header_name, ": ", s->header_tmpl, "env", s->env,
                                           "allow_plain_http", s->allow_plain_http));
      continue;
    }
    printf("%-20s %-30s %s: %s%s%s%s\n", s->name, s->host, s->header_name, s->header_tmpl,
           s->env ? "  env " : "", s->env ? s->env : "", s->allow_plain_http ? "  plain-http" : "");
  }
  shk_broker_store_free(st);
  if (arr) {
    char *t = json_dumps(arr, JSON_COMPACT);
    puts(t ? t : "[]");
    free(t);
    json_decref(arr);
  }
  return SHK_EXIT_OK;
}

static int rm(int argc, char **argv, const char *dir)
{
  if (argc != 2 || argv[1][0] == '-')
    shk_cli_usage_error("secret", "secret rm takes one NAME");
  shk_broker_store *st = open_store(dir, false);
  shk_error e;
  int r = shk_broker_store_rm(st, argv[1], &e);
  if (r == 0)
    r = shk_broker_store_save(st, &e);
  shk_broker_store_free(st);
  if (r)
    shk__die(r == -ENOENT ? SHK_EXIT_BAD_INPUT : SHK_EXIT_UNAVAILABLE, "secret rm: %s", e.message);
  printf("secret %s removed\n", argv[1]);
  return SHK_EXIT_OK;
}

int shk_cli_secret(int argc, char **argv)
{
  const char *opt_dir = NULL;
  /* --dir DIR before the subcommand: the store's directory. */
  while (argc > 2 && !strcmp(argv[1], "--dir")) {
    opt_dir = argv[2];
    argc -= 2;
    argv += 2;
  }
  if (argc < 2)
    shk_cli_usage_error("secret", "expected add, list or rm");
  if (shk_cli_wants_help(argc, argv))
    return shk_cli_print_usage("secret");
  char buf[4096];
  const char *dir = store_dir(opt_dir, buf, sizeof buf);
  if (!strcmp(argv[1], "add"))
    return add(argc - 1, argv + 1, dir);
  if (!strcmp(argv[1], "list"))
    return list(argc - 1, argv + 1, dir);
  if (!strcmp(argv[1], "rm"))
    return rm(argc - 1, argv + 1, dir);
  shk_cli_usage_error("secret", "unknown subcommand '%s' (add, list or rm)", argv[1]);
}

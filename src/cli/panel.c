/* SPDX-License-Identifier: Apache-2.0 */
/* shinken panel: prints the Permission Panel's login URL, with the
 * one-time token the manager wrote beside its control socket, or opens it
 * with xdg-open (shinken-panel(1)). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/manager.h"

int shk_cli_panel(int argc, char **argv)
{
  static const struct option opts[] = {
    { "config", required_argument, NULL, 'c' },
    { "open", no_argument, NULL, 'o' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  const char *config = NULL;
  bool open_it = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1) {
    if (c == 'c')
      config = optarg;
    else if (c == 'o')
      open_it = true;
    else if (c == 'h')
      return shk_cli_print_usage("panel");
    else
      shk_cli_usage_error("panel", "unknown option or missing value '%s'", argv[optind - 1]);
  }
  if (optind != argc)
    shk_cli_usage_error("panel", "unexpected argument '%s'", argv[optind]);
  shk_manager_config mc;
  shk_error err;
  if (shk_manager_config_load(config, &mc, &err))
    shk__die(SHK_EXIT_BAD_INPUT, "panel: %s", err.message);
  char path[4096];
  if (shk_manager_panel_login_path(mc.socket, path, sizeof path))
    shk__die(SHK_EXIT_BAD_INPUT, "panel: %s: the control socket's path has no directory", mc.socket);
  shk_manager_config_clear(&mc);
  /* The file holds a secret: it is read only if it is this user's own
   * regular file that no one else may read or write, and never through a
   * link. */
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    shk__die(SHK_EXIT_UNAVAILABLE, "panel: no panel is served for the manager here (%s is missing): start "
                                   "`shinken daemon` with \"panel\": {\"listen\": \"127.0.0.1:0\"} in its configuration",
             path);
  if (fd < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "panel: %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != shk__self_uid() || (st.st_mode & 077))
    shk__die(SHK_EXIT_UNAVAILABLE, "panel: %s is not this user's private file (mode 0600); refusing to use it", path);
  char url[512];
  ssize_t n = read(fd, url, sizeof url - 1);
  close(fd);
  if (n <= 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "panel: %s is empty", path);
  url[n] = '\0';
  url[strcspn(url, "\n")] = '\0';
  if (strncmp(url, "http://", 7))
    shk__die(SHK_EXIT_UNAVAILABLE, "panel: %s does not hold a panel URL", path);
  if (open_it) {
    fflush(stdout);
    execlp("xdg-open", "xdg-open", url, (char *)NULL);
    shk__die(SHK_EXIT_UNAVAILABLE, "panel: xdg-open: %s; the URL is %s", strerror(errno), url);
  }
  puts(url);
  return SHK_EXIT_OK;
}

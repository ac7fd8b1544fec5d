/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the sandbox module: the option grammar, profiles, and how
 * rules resolve, nest and order into the filesystem plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/linux/plan-internal.h"
#include "sandbox/linux/sandbox-internal.h"

static int parse(shk_sandbox_opts *o, shk_error *err, ...)
{
  static char *argv[64];
  va_list ap;
  va_start(ap, err);
  int argc = 0;
  for (char *a; (a = va_arg(ap, char *));)
    argv[argc++] = a;
  va_end(ap);
  shk_sandbox_opts_init(o);
  return shk_sandbox_opts_parse(o, argc, argv, err);
}

static void test_options(void **state)
{
  (void)state;
  shk_sandbox_opts o;
  shk_error err;
  assert_int_equal(parse(&o, &err, "--write", "/a", "--write=/b", "--deny", "/c", "--net=host",
                         "--mem", "512M", "--pids", "64", "--cpu", "1.5", "--env-clean",
                         "--read-only", "--allow-degraded", "--report", "r.json", "--", "echo",
                         "--write", NULL), 0);
  assert_int_equal(o.write.n, 2);
  assert_string_equal(o.write.v[1], "/b");
  assert_int_equal(o.deny.n, 1);
  assert_int_equal(o.net, SHK_NET_HOST);
  assert_int_equal(o.mem, 512ULL << 20);
  assert_int_equal(o.pids, 64);
  assert_int_equal(o.cpu_milli, 1500);
  assert_true(o.env_clean && o.read_only && o.allow_degraded);
  assert_string_equal(o.report, "r.json");
  /* Everything after -- is the command, even what looks like an option. */
  assert_int_equal(o.ncommand, 2);
  assert_string_equal(o.command[0], "echo");
  assert_string_equal(o.command[1], "--write");
  shk_sandbox_opts_free(&o);

  /* The first non-option starts the command without --. */
  assert_int_equal(parse(&o, &err, "--net", "none", "ls", "-l", NULL), 0);
  assert_int_equal(o.ncommand, 2);
  shk_sandbox_opts_free(&o);
}

static void test_option_errors(void **state)
{
  (void)state;
  static const char *const bad[][4] = {
    { "--bogus", "--", "true", NULL },
    { "-x", "true", NULL, NULL },
    { "--net", "wifi", "true", NULL },
    { "--mem", "12Q", "true", NULL },
    { "--mem", "0", "true", NULL },
    { "--pids", "-1", "true", NULL },
    { "--pids", "0", "true", NULL },
    { "--cpu", "1.2345", "true", NULL },
    { "--cpu", "0", "true", NULL },
    { "--read-only=yes", "true", NULL, NULL },
    { "--write", NULL, NULL, NULL },
    { "--write", "/tmp", NULL, NULL },
    { "--", NULL, NULL, NULL },
    { "--profile", "/nonexistent/profile.json", "true", NULL },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *argv[4];
    int argc = 0;
    while (argc < 4 && bad[i][argc]) {
      argv[argc] = (char *)bad[i][argc];
      argc++;
    }
    shk_sandbox_opts o;
    shk_sandbox_opts_init(&o);
    shk_error err = { "", "", 0, 0 };
    int r = shk_sandbox_opts_parse(&o, argc, argv, &err);
    if (r == 0)
      fail_msg("accepted bad options #%zu (%s)", i, bad[i][0]);
    assert_int_equal(r, -EINVAL);
    assert_true(err.message[0]);
    assert_null(strchr(err.message, '\n'));
    shk_sandbox_opts_free(&o);
  }
}

static void test_sizes(void **state)
{
  (void)state;
  uint64_t v;
  uint32_t m;
  assert_int_equal(shk_sandbox_parse_size("1", &v), 0);
  assert_int_equal(v, 1);
  assert_int_equal(shk_sandbox_parse_size("2K", &v), 0);
  assert_int_equal(v, 2048);
  assert_int_equal(shk_sandbox_parse_size("3g", &v), 0);
  assert_int_equal(v, 3ULL << 30);
  assert_int_equal(shk_sandbox_parse_size("", &v), -EINVAL);
  assert_int_equal(shk_sandbox_parse_size("1KB", &v), -EINVAL);
  assert_int_equal(shk_sandbox_parse_size("99999999999999999999", &v), -EINVAL);
  assert_int_equal(shk_sandbox_parse_size("20000000T", &v), -EINVAL);
  assert_int_equal(shk_sandbox_parse_cores("2", &m), 0);
  assert_int_equal(m, 2000);
  assert_int_equal(shk_sandbox_parse_cores("0.25", &m), 0);
  assert_int_equal(m, 250);
  assert_int_equal(shk_sandbox_parse_cores(".5", &m), -EINVAL);
  assert_int_equal(shk_sandbox_parse_cores("1.", &m), -EINVAL);
  assert_int_equal(shk_sandbox_parse_cores("0.000", &m), -EINVAL);
}

static void test_profile(void **state)
{
  (void)state;
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  shk_error err;
  assert_int_equal(shk_sandbox_profile_apply(&o,
      "{\"write\": [\"/w\"], \"deny\": [\"/d\"], \"read_only\": true, \"net\": \"host\","
      " \"mem\": \"1G\", \"pids\": 10, \"cpu\": 0.5, \"env-clean\": true,"
      " \"allow-degraded\": false, \"report\": \"x.json\"}", "p", &err), 0);
  assert_int_equal(o.write.n, 1);
  assert_true(o.read_only && o.env_clean);
  assert_int_equal(o.mem, 1ULL << 30);
  assert_int_equal(o.pids, 10);
  assert_int_equal(o.cpu_milli, 500);
  assert_int_equal(o.net, SHK_NET_HOST);
  shk_sandbox_opts_free(&o);

  static const char *const bad[] = {
    "{\"wirte\": [\"/w\"]}",      /* unknown key */
    "{\"profile\": \"x\"}",       /* no nesting */
    "{\"write\": \"/w\"}",        /* not an array */
    "{\"write\": [1]}",
    "{\"read-only\": 1}",
    "{\"net\": \"all\"}",
    "{\"mem\": -1}",
    "{\"cpu\": 0.12345}",
    "{\"pids\": 1.5}",
    "[]",
    "{\"net\": \"none\", \"net\": \"host\"}", /* duplicate key */
    "{",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    shk_sandbox_opts_init(&o);
    err.message[0] = '\0';
    if (shk_sandbox_profile_apply(&o, bad[i], "p", &err) == 0)
      fail_msg("accepted bad profile %s", bad[i]);
    assert_true(err.message[0]);
    shk_sandbox_opts_free(&o);
  }
  shk_sandbox_opts_init(&o);
  assert_int_equal(shk_sandbox_profile_apply(&o, "{\"bogus\": 1}", "p.json", &err), -EINVAL);
  assert_non_null(strstr(err.message, "unknown key \"bogus\""));
  /* A JSON syntax error says where it is. */
  assert_int_equal(shk_sandbox_profile_apply(&o, "{\n  \"write\": [\"a\",]\n}", "p.json", &err),
                   -EINVAL);
  assert_string_equal(err.file, "p.json");
  assert_int_equal(err.line, 2);
  shk_sandbox_opts_free(&o);
}

/* Profiles apply where they appear: a later option overrides a scalar. */
static void test_profile_order(void **state)
{
  (void)state;
  char path[] = "/tmp/shk-test-profile-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "{\"net\": \"host\", \"write\": [\"/p\"]}";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  shk_sandbox_opts o;
  shk_error err;
  assert_int_equal(parse(&o, &err, "--write", "/a", "--profile", path, "--net", "none", "true",
                         NULL), 0);
  assert_int_equal(o.net, SHK_NET_NONE);
  assert_int_equal(o.write.n, 2);
  assert_string_equal(o.write.v[1], "/p");
  shk_sandbox_opts_free(&o);
  assert_int_equal(parse(&o, &err, "--net", "none", "--profile", path, "true", NULL), 0);
  assert_int_equal(o.net, SHK_NET_HOST);
  shk_sandbox_opts_free(&o);
  unlink(path);
}

/* A scratch tree: root/w/a/b, root/r, root/file, root/home/.ssh. */
static char root[PATH_MAX];

static void mk(const char *rel, bool dir)
{
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  if (dir)
    assert_int_equal(mkdir(p, 0755), 0);
  else
    close(open(p, O_CREAT | O_WRONLY, 0644));
}

static void put(const char *rel, const char *text)
{
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *at(const char *rel)
{
  static char bufs[8][PATH_MAX * 2];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", root, rel);
  return b;
}

static int setup_tree(void **state)
{
  (void)state;
  /* Not under /tmp (or /var/tmp, /run, /dev/shm): those are private inside
   * the sandbox, and the plan treats them so. meson runs tests in the build
   * directory; when that lies in one of them, use the suite's scratch
   * place instead. */
  char cwd[PATH_MAX], tmpl[PATH_MAX + 32];
  assert_non_null(getcwd(cwd, sizeof cwd));
  const char *base = cwd;
  static const char *const private_dirs[] = { "/tmp", "/var/tmp", "/run", "/dev/shm" };
  for (size_t i = 0; i < sizeof private_dirs / sizeof private_dirs[0]; i++) {
    size_t n = strlen(private_dirs[i]);
    if (!strncmp(cwd, private_dirs[i], n) && (cwd[n] == '/' || cwd[n] == '\0')) {
      base = "/var/lib/shinken-tests";
      (void)mkdir("/var/lib/shinken-tests", 0755);
    }
  }
  snprintf(tmpl, sizeof tmpl, "%s/shk-test-tree-XXXXXX", base);
  assert_non_null(mkdtemp(tmpl));
  assert_non_null(realpath(tmpl, root));
  mk("w", true);
  mk("w/a", true);
  mk("w/a/b", true);
  mk("w/f", false);
  mk("r", true);
  mk("home", true);
  mk("home/.ssh", true);
  mk("home/.bashrc", false);
  mk("cwd", true);
  mk("cwd/.git", true);
  mk("cwd/.git/hooks", true);
  mk("cwd/sub", true);
  mk("cwd/sub/proj", true);
  mk("cwd/sub/proj/.git", true);
  /* A repository g with a linked worktree wt, a submodule lib, a
   * repository 40 directories deep, and a configuration that names hooks,
   * an included file and a script. */
  static const char *const git_dirs[] = {
    "g", "g/.git", "g/.git/hooks", "g/.git/worktrees", "g/.git/worktrees/wt", "g/.git/modules",
    "g/.git/modules/lib", "g/.git/modules/lib/hooks", "g/wt", "g/lib", "g/tools", "g/sub", NULL,
  };
  for (const char *const *d = git_dirs; *d; d++)
    mk(*d, true);
  put("g/.git/config", "[core]\n\thooksPath = hk\n\tfsmonitor = sh tools/mon.sh\n"
                       "[include]\n\tpath = inc.cfg\n");
  put("g/.git/inc.cfg", "");
  put("g/.git/HEAD", "ref: refs/heads/main\n");
  put("g/tools/mon.sh", "#!/bin/sh\n");
  put("g/.git/worktrees/wt/commondir", "../..\n");
  put("g/.git/worktrees/wt/HEAD", "ref: refs/heads/wt\n");
  put("g/.git/modules/lib/HEAD", "ref: refs/heads/main\n");
  put("g/.git/modules/lib/config", "");
  put("g/lib/.git", "gitdir: ../.git/modules/lib\n");
  char text[PATH_MAX * 2];
  snprintf(text, sizeof text, "gitdir: %s/g/.git/worktrees/wt\n", root);
  put("g/wt/.git", text);
  char deep[PATH_MAX] = "g/deep";
  mk(deep, true);
  for (int i = 0; i < 40; i++) {
    strcat(deep, "/d");
    mk(deep, true);
  }
  strcat(deep, "/.git");
  mk(deep, true);
  strcat(deep, "/hooks");
  mk(deep, true);
  return 0;
}

static int teardown_tree(void **state)
{
  (void)state;
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static const shk_sandbox_rule *find(const shk_sandbox_plan *p, const char *path)
{
  for (size_t i = 0; i < p->n; i++)
    if (!strcmp(p->rules[i].path, path))
      return &p->rules[i];
  return NULL;
}

static size_t index_of(const shk_sandbox_plan *p, const char *path)
{
  for (size_t i = 0; i < p->n; i++)
    if (!strcmp(p->rules[i].path, path))
      return i;
  fail_msg("no rule for %s", path);
  return 0;
}

static void build(shk_sandbox_plan *p, const char *home, const char *path_var, ...)
{
  static char *argv[32];
  va_list ap;
  va_start(ap, path_var);
  int argc = 0;
  for (char *a; (a = va_arg(ap, char *));)
    argv[argc++] = a;
  va_end(ap);
  argv[argc++] = (char *)"true";
  shk_sandbox_opts o;
  shk_sandbox_opts_init(&o);
  shk_error err;
  assert_int_equal(shk_sandbox_opts_parse(&o, argc, argv, &err), 0);
  shk_sandbox_env env = { at("cwd"), { home, NULL }, path_var };
  int r = shk_sandbox_plan_build(&o, &env, p, &err);
  if (r < 0)
    fail_msg("plan: %s", err.message);
  shk_sandbox_opts_free(&o);
}

/* /w=write, /w/a=deny, /w/a/b=write: each rule comes after its ancestors,
 * whatever the order given, so the most specific wins. */
static void test_nesting(void **state)
{
  (void)state;
  shk_sandbox_plan p;
  build(&p, NULL, NULL, "--write", at("w/a/b"), "--deny", at("w/a"), "--write", at("w"), NULL);
  const shk_sandbox_rule *w = find(&p, at("w")), *a = find(&p, at("w/a")), *b = find(&p, at("w/a/b"));
  assert_non_null(w);
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(w->access, SHK_ACCESS_WRITE);
  assert_int_equal(w->kind, SHK_MOUNT_BIND_RW);
  assert_int_equal(a->access, SHK_ACCESS_DENY);
  assert_int_equal(a->kind, SHK_MOUNT_TMPFS);
  assert_int_equal(b->access, SHK_ACCESS_WRITE);
  assert_true(index_of(&p, at("w")) < index_of(&p, at("w/a")));
  assert_true(index_of(&p, at("w/a")) < index_of(&p, at("w/a/b")));
  bool vis;
  assert_int_equal(shk_sandbox_plan_access(&p, at("w/x"), &vis), SHK_ACCESS_WRITE);
  assert_int_equal(shk_sandbox_plan_access(&p, at("w/a/x"), &vis), SHK_ACCESS_DENY);
  assert_int_equal(shk_sandbox_plan_access(&p, at("w/a/b/x"), &vis), SHK_ACCESS_WRITE);
  /* A sibling with a common prefix is not beneath. */
  assert_int_equal(shk_sandbox_plan_access(&p, at("w/ab"), &vis), SHK_ACCESS_WRITE);
  assert_int_equal(shk_sandbox_plan_access(&p, "/usr", &vis), SHK_ACCESS_READ);
  assert_true(vis);
  shk_sandbox_plan_free(&p);

  /* A denied file is masked with /dev/null; the same path twice keeps the
   * most restrictive. */
  build(&p, NULL, NULL, "--write", at("w/f"), "--deny", at("w/f"), NULL);
  assert_int_equal(find(&p, at("w/f"))->kind, SHK_MOUNT_DEV_NULL);
  shk_sandbox_plan_free(&p);
}

static void test_defaults(void **state)
{
  (void)state;
  shk_sandbox_plan p;
  build(&p, at("home"), NULL, NULL);
  /* The cwd is writable; its .git/hooks read-only; a missing .git/config
   * inside a writable root is masked with /dev/null. */
  assert_int_equal(find(&p, at("cwd"))->access, SHK_ACCESS_WRITE);
  assert_int_equal(find(&p, at("cwd/.git/hooks"))->kind, SHK_MOUNT_BIND_RO);
  assert_int_equal(find(&p, at("cwd/.git/config"))->kind, SHK_MOUNT_DEV_NULL);
  /* .git is pinned (bound onto itself) so it cannot be renamed away and
   * replaced by a fresh one with new hooks. */
  assert_int_equal(find(&p, at("cwd/.git"))->kind, SHK_MOUNT_PIN);
  assert_true(index_of(&p, at("cwd/.git")) < index_of(&p, at("cwd/.git/hooks")));
  /* A repository two levels below is found, its hooks protected and every
   * directory up to the writable root pinned. */
  assert_int_equal(find(&p, at("cwd/sub/proj/.git/hooks"))->kind, SHK_MOUNT_TMPFS);
  assert_int_equal(find(&p, at("cwd/sub/proj/.git"))->kind, SHK_MOUNT_PIN);
  assert_int_equal(find(&p, at("cwd/sub/proj"))->kind, SHK_MOUNT_PIN);
  assert_int_equal(find(&p, at("cwd/sub"))->kind, SHK_MOUNT_PIN);
  /* The home is read-only here: credentials that exist are masked, missing
   * ones are left alone (nothing could be planted). */
  assert_int_equal(find(&p, at("home/.ssh"))->kind, SHK_MOUNT_TMPFS);
  assert_null(find(&p, at("home/.aws")));
  /* .bashrc is already read-only under a read-only root: no extra mount. */
  assert_null(find(&p, at("home/.bashrc")));
  shk_sandbox_plan_free(&p);

  /* --read-only still shows the cwd, read-only: a bind only where the root
   * does not show it already. */
  build(&p, NULL, NULL, "--read-only", NULL);
  assert_null(find(&p, at("cwd")));
  shk_sandbox_plan_free(&p);
  shk_sandbox_opts o;
  /* A root caller gets the host's password hashes masked. */
  struct stat st;
  if (stat("/etc/shadow", &st) == 0) {
    shk_sandbox_opts_init(&o);
    char *targv[] = { (char *)"true" };
    shk_error terr;
    assert_int_equal(shk_sandbox_opts_parse(&o, 1, targv, &terr), 0);
    shk_sandbox_env renv = { at("cwd"), { NULL, NULL }, NULL, true };
    assert_int_equal(shk_sandbox_plan_build(&o, &renv, &p, &terr), 0);
    assert_int_equal(find(&p, "/etc/shadow")->kind, SHK_MOUNT_DEV_NULL);
    shk_sandbox_plan_free(&p);
    shk_sandbox_opts_free(&o);
  }
  shk_sandbox_opts_init(&o);
  char *argv[] = { (char *)"--read-only", (char *)"true" };
  shk_error err;
  assert_int_equal(shk_sandbox_opts_parse(&o, 2, argv, &err), 0);
  shk_sandbox_env env = { "/tmp", { NULL, NULL }, NULL };
  assert_int_equal(shk_sandbox_plan_build(&o, &env, &p, &err), 0);
  assert_int_equal(find(&p, "/tmp")->kind, SHK_MOUNT_BIND_RO);
  shk_sandbox_plan_free(&p);
  shk_sandbox_opts_free(&o);

  /* With the home writable, the missing ones are masked and .bashrc kept
   * read-only. */
  build(&p, at("home"), NULL, "--write", at("home"), NULL);
  assert_int_equal(find(&p, at("home/.aws"))->kind, SHK_MOUNT_TMPFS);
  assert_true(find(&p, at("home/.aws"))->created);
  assert_int_equal(find(&p, at("home/.netrc"))->kind, SHK_MOUNT_DEV_NULL);
  /* A missing parent of a protected path is masked as a directory. */
  assert_int_equal(find(&p, at("home/.config"))->kind, SHK_MOUNT_TMPFS);
  assert_false(find(&p, at("home/.ssh"))->created);
  assert_int_equal(find(&p, at("home/.bashrc"))->kind, SHK_MOUNT_BIND_RO);
  assert_int_equal(find(&p, at("home/.ssh"))->kind, SHK_MOUNT_TMPFS);
  assert_true(index_of(&p, at("home")) < index_of(&p, at("home/.ssh")));
  shk_sandbox_plan_free(&p);

  /* An explicit option on exactly a protected path replaces the default. */
  build(&p, at("home"), NULL, "--write", at("home/.ssh"), NULL);
  assert_int_equal(find(&p, at("home/.ssh"))->access, SHK_ACCESS_WRITE);
  shk_sandbox_plan_free(&p);

  /* $PATH directories inside a writable root stay read-only. */
  char pathvar[PATH_MAX * 2];
  snprintf(pathvar, sizeof pathvar, "relative:%s:/usr/bin", at("w/a"));
  build(&p, NULL, pathvar, "--write", at("w"), NULL);
  assert_int_equal(find(&p, at("w/a"))->access, SHK_ACCESS_READ);
  assert_null(find(&p, "/usr/bin"));
  shk_sandbox_plan_free(&p);

}

static void test_symlinks(void **state)
{
  (void)state;
  char link[PATH_MAX * 2];
  snprintf(link, sizeof link, "%s/link", at("w"));
  assert_int_equal(symlink(at("w/a"), link), 0);
  /* An option path is resolved before use. */
  shk_sandbox_plan p;
  build(&p, NULL, NULL, "--deny", link, NULL);
  assert_non_null(find(&p, at("w/a")));
  assert_null(find(&p, link));
  shk_sandbox_plan_free(&p);
  unlink(link);

  /* A protected path that is a symlink inside a writable root is masked
   * where it is (the link itself), with one warning; its target is not. */
  char ssh[PATH_MAX * 2];
  snprintf(ssh, sizeof ssh, "%s/.aws", at("home"));
  assert_int_equal(symlink(at("r"), ssh), 0);
  build(&p, at("home"), NULL, "--write", at("home"), NULL);
  const shk_sandbox_rule *l = find(&p, ssh);
  assert_non_null(l);
  assert_true(l->symlink);
  assert_int_equal(l->kind, SHK_MOUNT_DEV_NULL);
  assert_null(find(&p, at("r")));
  size_t warned = 0;
  for (size_t i = 0; i < p.nwarnings; i++)
    warned += strstr(p.warnings[i], ssh) && strstr(p.warnings[i], "symlink");
  assert_int_equal(warned, 1);
  shk_sandbox_plan_free(&p);
  /* A symlink in the workspace does not turn --write into a grant on a
   * protected path; naming the path itself does (tested above). */
  char cache[PATH_MAX * 2];
  snprintf(cache, sizeof cache, "%s/cache", at("cwd"));
  assert_int_equal(symlink(at("home/.ssh"), cache), 0);
  build(&p, at("home"), NULL, "--write", cache, NULL);
  assert_int_equal(find(&p, at("home/.ssh"))->access, SHK_ACCESS_DENY);
  shk_sandbox_plan_free(&p);
  unlink(cache);
  /* Under a read-only home, its target is masked instead. */
  build(&p, at("home"), NULL, NULL);
  assert_int_equal(find(&p, at("r"))->access, SHK_ACCESS_DENY);
  shk_sandbox_plan_free(&p);
  unlink(ssh);
}

/* Every file git reads to find a repository's configuration and hooks,
 * for every repository of a writable root, is read-only; what is missing
 * is masked. */
static void test_git(void **state)
{
  (void)state;
  shk_sandbox_plan p;
  build(&p, NULL, NULL, "--write", at("g"), NULL);
  static const struct {
    const char *rel;
    shk_mount_kind kind;
    bool created;
  } cases[] = {
    { "g/.git/config", SHK_MOUNT_BIND_RO, false },
    { "g/.git/hooks", SHK_MOUNT_BIND_RO, false },
    { "g/.git/commondir", SHK_MOUNT_FILE, true },
    { "g/.git/config.worktree", SHK_MOUNT_DEV_NULL, true },
    /* What the configuration names: core.hooksPath (missing: masked as a
     * directory), the included file, the script core.fsmonitor runs. */
    { "g/hk", SHK_MOUNT_TMPFS, true },
    { "g/.git/inc.cfg", SHK_MOUNT_BIND_RO, false },
    { "g/tools/mon.sh", SHK_MOUNT_BIND_RO, false },
    /* The linked worktree: its .git file and its git directory. */
    { "g/wt/.git", SHK_MOUNT_BIND_RO, false },
    { "g/.git/worktrees/wt/commondir", SHK_MOUNT_BIND_RO, false },
    { "g/.git/worktrees/wt/config.worktree", SHK_MOUNT_DEV_NULL, true },
    /* The submodule: its gitlink and its git directory in modules/. */
    { "g/lib/.git", SHK_MOUNT_BIND_RO, false },
    { "g/.git/modules/lib/config", SHK_MOUNT_BIND_RO, false },
    { "g/.git/modules/lib/hooks", SHK_MOUNT_BIND_RO, false },
    { "g/.git/modules/lib/commondir", SHK_MOUNT_FILE, true },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const shk_sandbox_rule *r = find(&p, at(cases[i].rel));
    if (!r)
      fail_msg("no rule for %s", cases[i].rel);
    if (r->kind != cases[i].kind || r->created != cases[i].created ||
        r->access != SHK_ACCESS_READ)
      fail_msg("%s: %s%s, access %d", cases[i].rel, shk_mount_kind_name(r->kind),
               r->created ? " (created)" : "", (int)r->access);
  }
  assert_string_equal(find(&p, at("g/.git/commondir"))->text, ".\n");
  /* 40 directories deep: found all the same. */
  char deep[PATH_MAX] = "g/deep";
  for (int i = 0; i < 40; i++)
    strcat(deep, "/d");
  strcat(deep, "/.git/hooks");
  assert_non_null(find(&p, at(deep)));
  /* The directories on the way cannot be renamed. */
  assert_int_equal(find(&p, at("g/wt"))->kind, SHK_MOUNT_PIN);
  assert_int_equal(find(&p, at("g/.git"))->kind, SHK_MOUNT_PIN);
  shk_sandbox_plan_free(&p);

  /* A writable root inside a repository: the repository is found by
   * walking up, and a .git or HEAD made on the way would take its place. */
  build(&p, NULL, NULL, "--write", at("g/sub"), NULL);
  assert_int_equal(find(&p, at("g/sub/.git"))->kind, SHK_MOUNT_TMPFS);
  assert_int_equal(find(&p, at("g/sub/HEAD"))->kind, SHK_MOUNT_DEV_NULL);
  shk_sandbox_plan_free(&p);

  /* A planted symlink at a protected path of a repository is masked where
   * it is, with a warning, and its target is left alone. */
  char link[PATH_MAX * 2];
  snprintf(link, sizeof link, "%s/.git/modules/lib/hooks", at("g"));
  char moved[PATH_MAX * 2 + 8];
  snprintf(moved, sizeof moved, "%s.real", link);
  assert_int_equal(rename(link, moved), 0);
  assert_int_equal(symlink("/etc", link), 0);
  build(&p, NULL, NULL, "--write", at("g"), NULL);
  assert_true(find(&p, link)->symlink);
  assert_null(find(&p, "/etc"));
  assert_int_equal(p.nwarnings, 1);
  assert_non_null(strstr(p.warnings[0], link));
  shk_sandbox_plan_free(&p);
  unlink(link);
  assert_int_equal(rename(moved, link), 0);
}

static void test_plan_errors(void **state)
{
  (void)state;
  static const char *const opts[][3] = {
    { "--write", "/nonexistent/shk", NULL },
    { "--read", "/nonexistent/shk", NULL },
    { "--read-only", "--write", "/tmp" },
  };
  for (size_t i = 0; i < 3; i++) {
    char *argv[4];
    int argc = 0;
    for (int j = 0; j < 3 && opts[i][j]; j++)
      argv[argc++] = (char *)opts[i][j];
    argv[argc++] = (char *)"true";
    shk_sandbox_opts o;
    shk_sandbox_opts_init(&o);
    shk_error err;
    assert_int_equal(shk_sandbox_opts_parse(&o, argc, argv, &err), 0);
    shk_sandbox_env env = { at("cwd"), { NULL, NULL }, NULL };
    shk_sandbox_plan p;
    err.message[0] = '\0';
    assert_int_equal(shk_sandbox_plan_build(&o, &env, &p, &err), -EINVAL);
    assert_true(err.message[0]);
    shk_sandbox_opts_free(&o);
  }
  /* A missing --deny path is fine: masked where it could be created. */
  shk_sandbox_plan p;
  char missing[PATH_MAX * 2];
  snprintf(missing, sizeof missing, "%s/x/y", at("w"));
  build(&p, NULL, NULL, "--write", at("w"), "--deny", missing, NULL);
  assert_int_equal(find(&p, at("w/x"))->kind, SHK_MOUNT_DEV_NULL);
  shk_sandbox_plan_free(&p);
}

static void test_read_restricted(void **state)
{
  (void)state;
  shk_sandbox_plan p;
  build(&p, at("home"), "/usr/bin", "--restrict-reads", "--read", at("r"), NULL);
  assert_true(p.read_restricted);
  bool vis;
  shk_sandbox_plan_access(&p, at("r/x"), &vis);
  assert_true(vis);
  shk_sandbox_plan_access(&p, at("w"), &vis);
  assert_false(vis);
  /* Defaults never widen the view: the invisible home gets no mounts. */
  assert_null(find(&p, at("home/.ssh")));
  assert_null(find(&p, "/usr/bin"));
  shk_sandbox_plan_free(&p);
}

static void test_bwrap_argv(void **state)
{
  (void)state;
  shk_sandbox_plan p;
  /* w/a is masked with w/a/b writable inside it: bwrap makes that mask,
   * before the bind nested in it, and makes it read-only after. */
  build(&p, NULL, NULL, "--write", at("w"), "--deny", at("w/a"), "--write", at("w/a/b"), NULL);
  char *cmd[] = { (char *)"echo", (char *)"hi" };
  shk__bwrap_opts l = { .bwrap = "/usr/bin/bwrap", .exe = "/x/shinken", .chdir = at("cwd"),
                           .net = SHK_NET_NONE, .landlock = true, .seccomp = true,
                           .sync_fd = 5, .exe_fd = -1, .uid = 1000, .gid = 1001,
                           .map_uid = 1000, .map_gid = 1001,
                           .command = cmd, .ncommand = 2 };
  char **v = NULL;
  shk__stage2_args s2;
  assert_int_equal(shk__bwrap_argv(&p, &l, &v, &s2), 0);
  size_t n = 0, tmpfs = 0, remount = 0, dd = 0;
  bool unshare_net = false, cap_drop = false;
  for (; v[n]; n++) {
    if (!strcmp(v[n], "--unshare-net"))
      unshare_net = true;
    if (!strcmp(v[n], "--cap-drop") && !strcmp(v[n + 1], "ALL"))
      cap_drop = true;
    if (!strcmp(v[n], "--tmpfs") && !strcmp(v[n + 1], at("w/a")))
      tmpfs = n;
    if (!strcmp(v[n], "--remount-ro") && !strcmp(v[n + 1], at("w/a")))
      remount = n;
    if (!strcmp(v[n], "--") && !dd)
      dd = n;
  }
  assert_true(unshare_net && cap_drop);
  assert_true(tmpfs > 0 && remount > tmpfs && dd > remount);
  /* The binary is visible where it is: no extra mount. */
  assert_string_equal(v[dd + 1], "/x/shinken");
  assert_string_equal(v[n - 2], "echo");
  assert_string_equal(v[n - 1], "hi");
  /* What was written for stage 2 parses back into the same arguments. */
  shk__stage2_args back;
  const char *why;
  assert_int_equal(shk__stage2_args_parse((int)(n - dd - 2), v + dd + 2, &back, &why), 0);
  assert_int_equal(back.net, SHK_NET_NONE);
  assert_int_equal(back.sync_fd, 5);
  assert_int_equal(back.exe_fd, -1);
  /* An unprivileged caller's ids, for stage 2's own user namespace. */
  assert_int_equal(back.map_uid, 1000);
  assert_int_equal(back.map_gid, 1001);
  assert_true(back.landlock && back.seccomp && !back.guard);
  const shk__stage2_list *lists[][2] = { { &s2.ll_ro, &back.ll_ro }, { &s2.ll_rw, &back.ll_rw },
                                         { &s2.ll_dev, &back.ll_dev },
                                         { &s2.mask_files, &back.mask_files },
                                         { &s2.mask_dirs, &back.mask_dirs } };
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(lists[i][0]->n, lists[i][1]->n);
    for (size_t k = 0; k < lists[i][0]->n; k++)
      assert_string_equal(lists[i][0]->v[k], lists[i][1]->v[k]);
  }
  /* The writable roots are writable to Landlock too. */
  bool w = false;
  for (size_t k = 0; k < s2.ll_rw.n; k++)
    w |= !strcmp(s2.ll_rw.v[k], at("w"));
  assert_true(w);
  assert_int_equal(back.ncommand, 2);
  assert_string_equal(back.command[1], "hi");
  shk__stage2_args_free(&s2);
  shk__strv_free(v);
  shk_sandbox_plan_free(&p);

  /* With nothing inside it, stage 2 makes the mask itself (one mount,
   * where bwrap rereads the mount table), and keeps the capabilities for
   * it until it drops them all. */
  build(&p, NULL, NULL, "--write", at("w"), "--deny", at("w/a"), NULL);
  assert_int_equal(shk__bwrap_argv(&p, &l, &v, &s2), 0);
  bool sys_admin = false;
  for (n = 0; v[n] && strcmp(v[n], "--"); n++) {
    if (!strcmp(v[n], "--tmpfs") || !strcmp(v[n], "--remount-ro"))
      assert_string_not_equal(v[n + 1], at("w/a"));
    sys_admin |= !strcmp(v[n], "--cap-add") && !strcmp(v[n + 1], "CAP_SYS_ADMIN");
  }
  assert_true(sys_admin);
  assert_int_equal(s2.mask_dirs.n, 1);
  assert_string_equal(s2.mask_dirs.v[0], at("w/a"));
  shk__stage2_args_free(&s2);
  shk__strv_free(v);
  shk_sandbox_plan_free(&p);
}

/* The parser refuses what the launcher never writes. */
static void test_stage2_args_errors(void **state)
{
  (void)state;
  static const char *const bad[][9] = {
    { "__stage2", "--net", "none", "--", "true" },           /* no --sync-fd */
    { "__stage2", "--sync-fd", "4", "--", "true" },          /* no --net */
    { "__stage2", "--net", "wifi", "--sync-fd", "4", "--", "true" },
    { "__stage2", "--net", "none", "--sync-fd", "2", "--", "true" }, /* not above stderr */
    { "__stage2", "--net", "none", "--sync-fd", "4", "--" },         /* no command */
    { "__stage2", "--net", "none", "--sync-fd", "4", "--ll-ro", "9", "/" }, /* count too big */
    { "__stage2", "--net", "none", "--sync-fd", "4", "--bogus", "x", "--" },
    { "stage2", "--net", "none", "--sync-fd", "4", "--", "true" },
    { "__stage2", "--net", "none", "--sync-fd", "4", "--map-uid", "7", "--", "true" }, /* no gid */
    { "__stage2", "--net", "none", "--sync-fd", "4", "--map-uid", "4294967296", "--" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int argc = 0;
    while (argc < 9 && bad[i][argc])
      argc++;
    shk__stage2_args a;
    const char *why = NULL;
    if (shk__stage2_args_parse(argc, (char **)bad[i], &a, &why) == 0)
      fail_msg("stage 2 accepted bad arguments #%zu", i);
    assert_non_null(why);
  }
}

/* The store of persisted data (persist.c): an entry is locked while open
 * (a second open of it is -EBUSY, and so is its removal), a kept entry
 * survives its close and is found again, listed and shown, a session's
 * entry is removed when discarded, and names and paths that cannot be an
 * entry are refused. */
static void test_persist_store(void **state)
{
  (void)state;
  char top[] = "/tmp/shk-persist-test.XXXXXX";
  assert_non_null(mkdtemp(top));
  char store[PATH_MAX];
  snprintf(store, sizeof store, "%s/state/persist", top);
  shk_sandbox_persist *p, *q;
  shk_error err;
  assert_int_equal(shk_sandbox_persist_open(store, "img", "/home/a b", true, "s-1", &p, &err), 0);
  /* The layers are there, and a second sandbox cannot have the entry. */
  int up = shk_sandbox_persist_layer(p, "upper");
  assert_true(up >= 0);
  int f = openat(up, "file", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  assert_true(f >= 0 && write(f, "abc", 3) == 3);
  close(f);
  close(up);
  assert_int_equal(shk_sandbox_persist_open(store, "img", "/home/a b", true, "s-2", &q, &err), -EBUSY);
  assert_int_equal(shk_sandbox_persist_remove(store, "img", "/home/a b", &err), -EBUSY);
  /* Control: another path of the same image is its own entry. */
  assert_int_equal(shk_sandbox_persist_open(store, "img", "/home/c", false, "s-1", &q, &err), 0);
  shk_sandbox_persist_info *v;
  size_t n;
  assert_int_equal(shk_sandbox_persist_list(store, NULL, &v, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(v[0].path, "/home/a b");
  assert_true(v[0].survives && v[0].in_use);
  assert_int_equal(v[0].files, 1);
  assert_int_equal(v[0].bytes, 3);
  assert_false(v[1].survives);
  shk_sandbox_persist_info_free(v, n);
  /* Discarded: the session's entry is gone; kept: it stays, unlocked. */
  shk_sandbox_persist_close(q, true);
  shk_sandbox_persist_close(p, false);
  assert_int_equal(shk_sandbox_persist_list(store, "img", &v, &n, &err), 0);
  assert_int_equal(n, 1);
  assert_false(v[0].in_use);
  shk_sandbox_persist_info_free(v, n);
  shk_sandbox_persist_info info;
  assert_int_equal(shk_sandbox_persist_show(store, "img", "/home/a b", &info, &err), 0);
  assert_string_equal(info.image, "img");
  free(info.image);
  free(info.name);
  free(info.path);
  free(info.session);
  /* Kept across sessions: the next open finds the file. */
  assert_int_equal(shk_sandbox_persist_open(store, "img", "/home/a b", true, "s-3", &p, &err), 0);
  up = shk_sandbox_persist_layer(p, "upper");
  struct stat st;
  assert_int_equal(fstatat(up, "file", &st, 0), 0);
  close(up);
  shk_sandbox_persist_close(p, false);
  assert_int_equal(shk_sandbox_persist_remove(store, "img", "/home/a b", &err), 0);
  assert_int_equal(shk_sandbox_persist_show(store, "img", "/home/a b", &info, &err), -ENOENT);
  /* What cannot be an entry. */
  assert_int_equal(shk_sandbox_persist_open(store, "../x", "/home/a", true, NULL, &p, &err), -EINVAL);
  assert_int_equal(shk_sandbox_persist_open(store, ".hidden", "/home/a", true, NULL, &p, &err), -EINVAL);
  assert_int_equal(shk_sandbox_persist_open(store, "img", "rel", true, NULL, &p, &err), -EINVAL);
  /* A store directory writable by others is not this user's alone. */
  char image[PATH_MAX + 8];
  snprintf(image, sizeof image, "%s/img", store);
  assert_int_equal(chmod(image, 0777), 0);
  assert_int_equal(shk_sandbox_persist_open(store, "img", "/home/a", true, NULL, &p, &err), -EPERM);
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
  assert_int_equal(system(cmd), 0);
}

/* The path helpers the plan joins its hundreds of paths with: each case
 * names what it checks, and a path that does not fit PATH_MAX is refused,
 * never cut. */
static void test_path_helpers(void **state)
{
  (void)state;
  static const struct {
    const char *dir, *name, *want; /* want NULL: -ENAMETOOLONG */
  } joins[] = {
    { "/", "a", "/a" },
    { "/x", "a", "/x/a" },
    { "/x/y", "b.c", "/x/y/b.c" },
    { "/x", "", "/x/" },
  };
  char out[PATH_MAX];
  for (size_t i = 0; i < sizeof joins / sizeof joins[0]; i++) {
    assert_int_equal(shk__path_join(out, joins[i].dir, joins[i].name), 0);
    assert_string_equal(out, joins[i].want);
  }
  static const struct {
    const char *in, *cwd, *want;
  } norms[] = {
    { "/a/./b//c/", "/cwd", "/a/b/c" },
    { "a/../b", "/cwd", "/cwd/b" },
    { "../..", "/cwd", "/" },
    { ".", "/", "/" },
    { "/..", "/cwd", "/" },
    { "x", "/", "/x" },
  };
  for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++) {
    assert_int_equal(shk__path_normalize(norms[i].in, norms[i].cwd, out), 0);
    assert_string_equal(out, norms[i].want);
  }
  /* The longest that fits, and one byte more. */
  static char dir[PATH_MAX], name[PATH_MAX];
  memset(dir, 'd', PATH_MAX - 4);
  dir[0] = '/';
  dir[PATH_MAX - 4] = '\0';
  strcpy(name, "ab");
  assert_int_equal(shk__path_join(out, dir, name), 0);
  assert_int_equal(strlen(out), PATH_MAX - 1);
  strcpy(name, "abc");
  assert_int_equal(shk__path_join(out, dir, name), -ENAMETOOLONG);
  assert_int_equal(shk__path_normalize(name, dir, out), -ENAMETOOLONG);
  name[2] = '\0';
  assert_int_equal(shk__path_normalize(name, dir, out), 0);
  assert_int_equal(strlen(out), PATH_MAX - 1);
  memset(name, 'n', PATH_MAX - 1);
  name[0] = '/';
  name[PATH_MAX - 1] = '\0';
  assert_int_equal(shk__path_normalize(name, "/", out), 0);
  assert_int_equal(strlen(out), PATH_MAX - 1);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_options),
    cmocka_unit_test(test_option_errors),
    cmocka_unit_test(test_sizes),
    cmocka_unit_test(test_profile),
    cmocka_unit_test(test_profile_order),
    cmocka_unit_test(test_nesting),
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_symlinks),
    cmocka_unit_test(test_git),
    cmocka_unit_test(test_plan_errors),
    cmocka_unit_test(test_read_restricted),
    cmocka_unit_test(test_bwrap_argv),
    cmocka_unit_test(test_stage2_args_errors),
    cmocka_unit_test(test_persist_store),
    cmocka_unit_test(test_path_helpers),
  };
  return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}

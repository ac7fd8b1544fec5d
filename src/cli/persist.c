/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken persist list|show|rm`: what persistence grants kept, per image,
 * in the manager's state directory (the store of shk_sandbox_persist_*),
 * listed, inspected and deleted by the human it belongs to. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "shinken/manager.h"
#include "shinken/sandbox.h"

static void when(int64_t ms, char *buf, size_t len)
{
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  if (!ms || !gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
    snprintf(buf, len, "?");
}

static json_t *info_json(const shk_sandbox_persist_info *x)
{
  return json_pack("{s:s, s:s, s:s, s:b, s:b, s:s?, s:I, s:I, s:I}", "image", x->image, "path", x->path, "entry",
                   x->name, "survives_session", x->survives, "in_use", x->in_use, "session", x->session,
                   "created_ms", (json_int_t)x->created_ms, "bytes", (json_int_t)x->bytes, "files",
                   (json_int_t)x->files);
}

static const char *state_of(const shk_sandbox_persist_info *x)
{
  if (x->survives)
    return x->in_use ? "kept, mounted now" : "kept";
  return x->in_use ? "this session only, mounted now" : "this session only, left by a manager that ended (removed at the next grant)";
}

static int list(const char *root, int argc, char **argv)
{
  const char *image = NULL;
  bool json = false;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = true;
    else if (argv[i][0] == '-')
      shk_cli_usage_error("persist", "unknown option '%s'", argv[i]);
    else if (!image)
      image = argv[i];
    else
      shk_cli_usage_error("persist", "list takes at most one image");
  }
  shk_sandbox_persist_info *v;
  size_t n;
  shk_error e;
  int r = shk_sandbox_persist_list(root, image, &v, &n, &e);
  if (r < 0)
    shk__die(r == -EINVAL ? SHK_EXIT_BAD_INPUT : SHK_EXIT_UNAVAILABLE, "persist: %s", e.message);
  if (json) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
      json_array_append_new(a, info_json(&v[i]));
    json_t *o = json_pack("{s:b, s:s, s:o}", "ok", 1, "store", root, "entries", a);
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!text)
      shk__die(SHK_EXIT_UNAVAILABLE, "persist: out of memory");
    puts(text);
    free(text);
  } else if (!n) {
    printf("nothing persisted in %s\n", root);
  } else {
    for (size_t i = 0; i < n; i++) {
      char t[32];
      when(v[i].created_ms, t, sizeof t);
      printf("%s\t%s\t%llu files, %llu bytes\tsince %s\t%s\n", v[i].image, v[i].path,
             (unsigned long long)v[i].files, (unsigned long long)v[i].bytes, t, state_of(&v[i]));
    }
  }
  shk_sandbox_persist_info_free(v, n);
  return SHK_EXIT_OK;
}

static int print_file(void *data, const char *path, char kind, uint64_t size)
{
  json_t *a = data;
  if (a)
    return json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "path", path, "kind",
                                              kind == 'd' ? "directory" : kind == 'l' ? "symlink"
                                              : kind == 'x' ? "deleted" : "file", (json_int_t)size));
  if (kind == 'x')
    printf("  deleted  %s\n", path);
  else
    printf("  %-8s %s%s\n", kind == 'd' ? "dir" : kind == 'l' ? "symlink" : "file", path, kind == 'd' ? "/" : "");
  return 0;
}

static int show(const char *root, int argc, char **argv)
{
  bool json = false;
  const char *pos[2] = { 0 };
  int np = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = true;
    else if (argv[i][0] == '-' && argv[i][1])
      shk_cli_usage_error("persist", "unknown option '%s'", argv[i]);
    else if (np < 2)
      pos[np++] = argv[i];
    else
      shk_cli_usage_error("persist", "show takes an image and a path");
  }
  if (np != 2)
    shk_cli_usage_error("persist", "show takes an image and a path");
  shk_sandbox_persist_info x;
  shk_error e;
  int r = shk_sandbox_persist_show(root, pos[0], pos[1], &x, &e);
  if (r < 0)
    shk__die(r == -EINVAL || r == -ENOENT ? SHK_EXIT_BAD_INPUT : SHK_EXIT_UNAVAILABLE, "persist: %s", e.message);
  json_t *files = json ? json_array() : NULL;
  if (!json) {
    char t[32];
    when(x.created_ms, t, sizeof t);
    printf("image %s, path %s: %llu files, %llu bytes, since %s; %s\nin %s/%s/%s/upper:\n", x.image, x.path,
           (unsigned long long)x.files, (unsigned long long)x.bytes, t, state_of(&x), root, x.image, x.name);
  }
  if ((r = shk_sandbox_persist_walk(root, pos[0], pos[1], print_file, files, &e)) < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "persist: %s", e.message);
  if (json) {
    json_t *o = info_json(&x);
    json_object_set_new(o, "ok", json_true());
    json_object_set_new(o, "changes", files);
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!text)
      shk__die(SHK_EXIT_UNAVAILABLE, "persist: out of memory");
    puts(text);
    free(text);
  }
  free(x.image);
  free(x.name);
  free(x.path);
  free(x.session);
  return SHK_EXIT_OK;
}

static int rm(const char *root, int argc, char **argv)
{
  if (argc != 2 || argv[0][0] == '-' || argv[1][0] == '-')
    shk_cli_usage_error("persist", "rm takes an image and a path");
  shk_error e;
  int r = shk_sandbox_persist_remove(root, argv[0], argv[1], &e);
  if (r < 0)
    shk__die(r == -EBUSY ? SHK_EXIT_REFUSED : r == -EINVAL || r == -ENOENT ? SHK_EXIT_BAD_INPUT
                                                                            : SHK_EXIT_UNAVAILABLE,
             "persist: %s", e.message);
  printf("removed what persisted for %s in image %s\n", argv[1], argv[0]);
  return SHK_EXIT_OK;
}

int shk_cli_persist(int argc, char **argv)
{
  const char *config = NULL, *state_dir = NULL;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return shk_cli_print_usage("persist");
    if ((!strcmp(argv[i], "--config") || !strcmp(argv[i], "--state-dir")) && i + 1 < argc) {
      *(!strcmp(argv[i], "--config") ? &config : &state_dir) = argv[i + 1];
      i++;
    } else {
      shk_cli_usage_error("persist", "unknown option '%s'", argv[i]);
    }
  }
  if (i >= argc)
    shk_cli_usage_error("persist", "expected list, show or rm");
  /* The store is where the manager keeps it: the configuration's
   * state_dir, as the daemon reads it, unless named here. */
  shk_manager_config mc = { 0 };
  shk_error e;
  if (!state_dir && shk_manager_config_load(config, &mc, &e) < 0)
    shk__die(SHK_EXIT_BAD_INPUT, "persist: %s", e.message);
  char root[PATH_MAX];
  int r = shk_sandbox_persist_root(state_dir ? state_dir : mc.opts.state_dir, root, sizeof root, &e);
  if (!state_dir)
    shk_manager_config_clear(&mc);
  if (r < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "persist: %s", e.message);
  const char *sub = argv[i];
  if (!strcmp(sub, "list"))
    return list(root, argc - i - 1, argv + i + 1);
  if (!strcmp(sub, "show"))
    return show(root, argc - i - 1, argv + i + 1);
  if (!strcmp(sub, "rm"))
    return rm(root, argc - i - 1, argv + i + 1);
  shk_cli_usage_error("persist", "unknown subcommand '%s' (expected list, show or rm)", sub);
}

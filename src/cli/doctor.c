/* `shinken doctor [--json]`: what this host can enforce, per class of
 * authority, and by which mechanism. It says plainly what is missing: a
 * guarantee the host cannot keep is never implied. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/sandbox.h"

/* The first line of `bwrap --version`, without a shell. */
static char *bwrap_version(const char *bwrap)
{
  int p[2];
  if (!bwrap || pipe(p) < 0)
    return NULL;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execl(bwrap, bwrap, "--version", (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char buf[128] = "";
  ssize_t n = pid > 0 ? read(p[0], buf, sizeof buf - 1) : -1;
  close(p[0]);
  if (pid > 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  if (n <= 0)
    return NULL;
  buf[n] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  const char *v = strrchr(buf, ' ');
  return shk__xstrdup(v ? v + 1 : buf);
}

int shk_cli_doctor(int argc, char **argv)
{
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = true;
    else
      shk__die(125, "doctor: unknown option '%s' (usage: shinken doctor [--json])", argv[i]);
  }
  shk_sandbox_env env;
  shk_error e;
  if (shk_sandbox_env_from_process(&env, &e) < 0)
    shk__die(125, "doctor: %s", e.message);
  shk_sandbox_features f;
  if (shk_sandbox_features_detect(&f, &env, SHK_DETECT_CGROUP | SHK_DETECT_USERNS_TRY) < 0)
    shk__die(125, "doctor: out of memory");
  shk_autofree char *version = bwrap_version(f.bwrap);
  /* The same assessment `shinken run` makes of its defaults: it starts
   * when nothing is fatal and no layer is missing. */
  shk_sandbox_assessment a;
  shk_sandbox_assess(&f, &env, NULL, &a);
  const shk_sandbox_class *c = a.classes;
  bool can_run = !a.fatal[0] && a.ngaps == 0;

  if (json) {
    json_t *classes = json_array();
    for (int i = 0; i < SHK_SANDBOX_CLASS_N; i++)
      json_array_append_new(classes, json_pack("{s:s, s:s, s:s?, s:s?}", "class", c[i].name,
          "level", shk_sandbox_level_name(c[i].level),
          "mechanism", c[i].mechanism[0] ? c[i].mechanism : NULL,
          "missing", c[i].missing[0] ? c[i].missing : NULL));
    json_t *ctl = json_array();
    static const char *const names[] = { "memory", "pids", "cpu" };
    for (int i = 0; i < 3; i++)
      if (f.cgroup_controllers & (1u << i))
        json_array_append_new(ctl, json_string(names[i]));
    size_t ctl_n = json_array_size(ctl);
    /* With the v1 fallback: where session cgroups go in each hierarchy. */
    json_t *v1 = json_object();
    static const char *const v1_names[SHK_CG1_N] = { "memory", "pids", "cpu", "freezer" };
    for (int i = 0; i < SHK_CG1_N; i++)
      if (f.cgroup_v1_parent[i])
        json_object_set_new(v1, v1_names[i], json_string(f.cgroup_v1_parent[i]));
    /* The layers a default `shinken run` would be refused without. */
    json_t *gaps = json_array();
    for (size_t i = 0; i < a.ngaps; i++)
      json_array_append_new(gaps, json_pack("{s:s, s:b, s:s}", "layer",
          shk_sandbox_layer_name(a.gaps[i].layer), "requested", a.gaps[i].requested,
          "why", a.gaps[i].why));
    json_t *root = json_pack(
        "{s:{s:s?, s:s?, s:b}, s:{s:b, s:s?}, s:{s:i}, s:{s:b, s:b},"
        " s:{s:b, s:s?, s:s?, s:o, s:s?, s:s?, s:b, s:o}, s:o, s:o, s:b}",
        "bwrap", "path", f.bwrap, "version", version, "setuid", f.bwrap_setuid,
        "userns", "available", f.userns, "detail", f.userns_detail,
        "landlock", "abi", f.landlock_abi,
        "seccomp", "available", f.seccomp, "connect_guard", f.connect_guard,
        "cgroup", "v2", f.cgroup_v2, "mount", f.cgroup_mount, "parent", f.cgroup_parent,
        "controllers", ctl, "detail", f.cgroup_detail,
        "mechanism", !ctl_n ? NULL : f.cgroup_v1 ? "cgroup v1" : "cgroup v2",
        "delegated", ctl_n && !env.root, "v1", v1,
        "classes", classes, "gaps", gaps, "can_run", can_run);
    char *s = json_dumps(root, JSON_INDENT(2));
    puts(s);
    free(s);
    json_decref(root);
  } else {
    printf("bwrap            %s", f.bwrap ? f.bwrap : "not found");
    if (f.bwrap)
      printf(" (%s%s)", version ? version : "unknown version", f.bwrap_setuid ? ", setuid" : "");
    printf("\nuser namespaces  %s\n", f.userns_detail);
    if (f.landlock_abi)
      printf("Landlock         ABI %d\n", f.landlock_abi);
    else
      puts("Landlock         unavailable");
    printf("seccomp          %s\n", f.seccomp ? "available" : "unavailable");
    printf("cgroups          %s\n\n", f.cgroup_detail);
    printf("%-11s  %-7s  %s\n", "class", "level", "mechanism");
    for (int i = 0; i < SHK_SANDBOX_CLASS_N; i++) {
      printf("%-11s  %-7s  %s", c[i].name, shk_sandbox_level_name(c[i].level),
             c[i].mechanism[0] ? c[i].mechanism : c[i].missing[0] ? "" : "-");
      if (c[i].missing[0])
        printf("%smissing: %s", c[i].mechanism[0] ? "; " : "", c[i].missing);
      putchar('\n');
    }
    if (can_run)
      printf("\nshinken run: starts with its defaults%s\n",
             c[SHK_SANDBOX_CLASS_RESOURCES].level == SHK_SANDBOX_LEVEL_FULL ? ""
                                    : "; --mem, --pids and --cpu need --allow-degraded here");
    else
      puts("\nshinken run: needs --allow-degraded on this host (see 'missing' above)");
  }
  shk_sandbox_features_free(&f);
  shk_sandbox_env_free(&env);
  return can_run ? 0 : 1;
}

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

typedef enum level { LEVEL_NONE, LEVEL_PARTIAL, LEVEL_FULL } level;

typedef struct klass {
  const char *name;
  level lvl;
  char *mechanism;
  char *missing; /* NULL when nothing is */
} klass;

static const char *level_name(level l)
{
  switch (l) {
  case LEVEL_NONE: return "none";
  case LEVEL_PARTIAL: return "partial";
  case LEVEL_FULL: return "full";
  }
  return "?";
}

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

static void classify(const shk_sandbox_features *f, const shk_sandbox_env *env, klass c[6])
{
  bool ns = f->bwrap && f->userns;
  const char *nons = !f->bwrap ? "bwrap not found" : "user namespaces unavailable";
  int abi = f->landlock_abi;

  /* A root caller's sandbox runs as the host's root (see `shinken run`). */
  bool root = env->root;
  c[0] = (klass){ "filesystem", LEVEL_NONE, NULL, NULL };
  if (ns) {
    c[0].lvl = abi > 0 && !root ? LEVEL_FULL : LEVEL_PARTIAL;
    c[0].mechanism = abi > 0 ? shk__xasprintf("bwrap mount namespace + Landlock ABI %d", abi)
                             : shk__xstrdup("bwrap mount namespace");
    if (!abi || root)
      c[0].missing = shk__xasprintf("%s%s%s", abi ? "" : "Landlock", !abi && root ? "; " : "",
                                    root ? SHK_CLI_ROOT_CALLER_DEGRADED : "");
  } else {
    c[0].missing = shk__xstrdup(nons);
  }

  c[1] = (klass){ "network", LEVEL_NONE, NULL, NULL };
  if (ns) {
    bool tcp = abi >= 4;
    c[1].lvl = f->seccomp && tcp ? LEVEL_FULL : LEVEL_PARTIAL;
    c[1].mechanism = shk__xasprintf("network namespace (lo only)%s%s",
                                    f->seccomp ? " + seccomp socket families" : "",
                                    tcp ? " + Landlock TCP bind/connect" : "");
    if (!f->seccomp || !tcp)
      c[1].missing = shk__xasprintf("%s%s%s", f->seccomp ? "" : "seccomp",
                                    !f->seccomp && !tcp ? ", " : "",
                                    tcp ? "" : "Landlock ABI 4 (TCP rules)");
  } else {
    c[1].missing = shk__xstrdup(nons);
  }

  c[2] = (klass){ "processes", ns ? LEVEL_FULL : LEVEL_NONE, NULL, NULL };
  if (ns)
    c[2].mechanism = shk__xasprintf("pid, ipc, uts, cgroup namespaces; die-with-parent; "
                                    "new session%s",
                                    abi >= 6 ? "; Landlock signal and abstract-socket scoping"
                                             : "");
  else
    c[2].missing = shk__xstrdup(nons);

  c[3] = (klass){ "syscalls", !f->seccomp ? LEVEL_NONE : f->connect_guard ? LEVEL_FULL
                                                                         : LEVEL_PARTIAL,
                  NULL, NULL };
  if (f->seccomp)
    c[3].mechanism = shk__xstrdup(f->connect_guard
        ? "seccomp filter (libseccomp, precompiled); connect() guard (seccomp user notification)"
        : "seccomp filter (libseccomp, precompiled)");
  if (!f->seccomp)
    c[3].missing = shk__xstrdup("seccomp");
  else if (!f->connect_guard)
    c[3].missing = shk__xstrdup("connect() guard (needs Linux 5.8)");

  c[4] = (klass){ "privileges", ns ? LEVEL_FULL : LEVEL_NONE, NULL, NULL };
  if (ns)
    c[4].mechanism = shk__xstrdup("user namespace; all capabilities and the bounding set "
                                  "dropped; no-new-privs; fresh session keyring");
  else
    c[4].missing = shk__xstrdup(nons);

  unsigned all = SHK_CG_MEMORY | SHK_CG_PIDS | SHK_CG_CPU;
  unsigned have = f->cgroup_parent || f->cgroup_v1 ? f->cgroup_controllers & all : 0;
  c[5] = (klass){ "resources", have == all ? LEVEL_FULL : have ? LEVEL_PARTIAL : LEVEL_NONE,
                  NULL, NULL };
  if (have && f->cgroup_v1)
    c[5].mechanism = shk__xasprintf("cgroup v1 hierarchies%s:%s%s%s",
                                    root ? "" : " delegated to this user",
                                    have & SHK_CG_MEMORY ? " memory.limit_in_bytes" : "",
                                    have & SHK_CG_PIDS ? " pids.max" : "",
                                    have & SHK_CG_CPU ? " cpu.cfs_quota_us" : "");
  else if (have)
    c[5].mechanism = shk__xasprintf("cgroup v2 at %s:%s%s%s", f->cgroup_parent,
                                    have & SHK_CG_MEMORY ? " memory.max" : "",
                                    have & SHK_CG_PIDS ? " pids.max" : "",
                                    have & SHK_CG_CPU ? " cpu.max" : "");
  if (have != all)
    c[5].missing = shk__xstrdup(f->cgroup_detail ? f->cgroup_detail : "cgroup v2");
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
  shk_sandbox_features_detect(&f, &env, SHK_DETECT_CGROUP | SHK_DETECT_USERNS_TRY);
  shk_autofree char *version = bwrap_version(f.bwrap);
  klass c[6];
  classify(&f, &env, c);
  bool can_run = f.bwrap && f.userns && f.landlock_abi > 0 && f.seccomp && f.connect_guard &&
                 !env.root;

  if (json) {
    json_t *classes = json_array();
    for (int i = 0; i < 6; i++)
      json_array_append_new(classes, json_pack("{s:s, s:s, s:s?, s:s?}", "class", c[i].name,
          "level", level_name(c[i].lvl), "mechanism", c[i].mechanism, "missing", c[i].missing));
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
    json_t *root = json_pack(
        "{s:{s:s?, s:s?, s:b}, s:{s:b, s:s?}, s:{s:i}, s:{s:b, s:b},"
        " s:{s:b, s:s?, s:s?, s:o, s:s?, s:s?, s:b, s:o}, s:o, s:b}",
        "bwrap", "path", f.bwrap, "version", version, "setuid", f.bwrap_setuid,
        "userns", "available", f.userns, "detail", f.userns_detail,
        "landlock", "abi", f.landlock_abi,
        "seccomp", "available", f.seccomp, "connect_guard", f.connect_guard,
        "cgroup", "v2", f.cgroup_v2, "mount", f.cgroup_mount, "parent", f.cgroup_parent,
        "controllers", ctl, "detail", f.cgroup_detail,
        "mechanism", !ctl_n ? NULL : f.cgroup_v1 ? "cgroup v1" : "cgroup v2",
        "delegated", ctl_n && !env.root, "v1", v1,
        "classes", classes, "can_run", can_run);
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
    for (int i = 0; i < 6; i++) {
      printf("%-11s  %-7s  %s", c[i].name, level_name(c[i].lvl),
             c[i].mechanism ? c[i].mechanism : c[i].missing ? "" : "-");
      if (c[i].missing)
        printf("%smissing: %s", c[i].mechanism ? "; " : "", c[i].missing);
      putchar('\n');
    }
    if (can_run)
      printf("\nshinken run: starts with its defaults%s\n",
             c[5].lvl == LEVEL_FULL ? ""
                                    : "; --mem, --pids and --cpu need --allow-degraded here");
    else
      puts("\nshinken run: needs --allow-degraded on this host (see 'missing' above)");
  }
  for (int i = 0; i < 6; i++) {
    free(c[i].mechanism);
    free(c[i].missing);
  }
  shk_sandbox_features_free(&f);
  shk_sandbox_env_free(&env);
  return can_run ? 0 : 1;
}

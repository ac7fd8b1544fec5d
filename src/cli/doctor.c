/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken doctor [--json]`: what this host can enforce, per class of
 * authority, and by which mechanism; whether a capability manager answers
 * (or one can be embedded), whether an egress session opens, and the Cedar
 * analysis solver. It says plainly what is missing: a guarantee the host
 * cannot keep is never implied. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/cap.h"
#include "shinken/manager.h"
#include "shinken/sandbox.h"

/* The first line PROGRAM ARG prints on stdout, without a shell; NULL when
 * it cannot be run or prints nothing. */
static char *first_line(const char *program, const char *arg)
{
  int p[2];
  if (!program || pipe(p) < 0)
    return NULL;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    execlp(program, program, arg, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char buf[256] = "";
  ssize_t n = pid > 0 ? read(p[0], buf, sizeof buf - 1) : -1;
  close(p[0]);
  int st = 0;
  if (pid > 0)
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
  if (n <= 0)
    return NULL;
  buf[n] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  return shk__xstrdup(buf);
}

/* The last word of `bwrap --version`. */
static char *bwrap_version(const char *bwrap)
{
  char *line = first_line(bwrap, "--version");
  if (!line)
    return NULL;
  const char *v = strrchr(line, ' ');
  char *out = shk__xstrdup(v ? v + 1 : line);
  free(line);
  return out;
}

/* What `shinken run --net proxy` would find: a running manager at the
 * socket, or else one it can embed (the policy loads). And whether an
 * egress session opens there: the whole path but the sandbox. */
typedef struct manager_check {
  const char *socket;
  bool running, embeddable, egress;
  char detail[1024], egress_detail[1024];
} manager_check;

static void check_manager(manager_check *mc)
{
  mc->socket = shk_manager_socket_path();
  static const char req[] =
    "{\"op\":\"open_session\",\"name\":\"doctor\",\"egress\":true,\"allow_domains\":[]}";
  char *answer = NULL;
  shk_error err = { 0 };
  shk_manager *m = NULL;
  int fd = shk_manager_connect(mc->socket);
  if (fd >= 0) {
    mc->running = true;
    snprintf(mc->detail, sizeof mc->detail, "a manager answers at %s", mc->socket);
    if (shk_manager_rpc(fd, req, &answer, &err) < 0)
      snprintf(mc->egress_detail, sizeof mc->egress_detail, "the manager did not answer: %s",
               err.message);
  } else {
    shk_manager_config cfg;
    if (shk_manager_config_load(NULL, &cfg, &err) < 0) {
      snprintf(mc->detail, sizeof mc->detail, "none runs at %s, and none can be embedded: %s",
               mc->socket, err.message);
    } else {
      /* A check, not a session of record: no timeline. */
      cfg.opts.audit_db = NULL;
      if (shk_manager_new(&cfg.opts, &m, &err) < 0) {
        snprintf(mc->detail, sizeof mc->detail, "none runs at %s, and none can be embedded: %s",
                 mc->socket, err.message);
      } else {
        mc->embeddable = true;
        snprintf(mc->detail, sizeof mc->detail,
                 "none runs at %s; shinken run --net proxy embeds one", mc->socket);
        if (shk_manager_call(m, req, &answer) < 0)
          snprintf(mc->egress_detail, sizeof mc->egress_detail, "out of memory");
      }
      shk_manager_config_clear(&cfg);
    }
  }
  if (answer) {
    json_t *ans = json_loads(answer, 0, NULL);
    const char *dir = json_string_value(json_object_get(ans, "egress_dir"));
    const char *why = json_string_value(json_object_get(ans, "error"));
    mc->egress = json_is_true(json_object_get(ans, "ok")) && dir;
    if (mc->egress)
      snprintf(mc->egress_detail, sizeof mc->egress_detail, "an egress session opens (its proxy's "
               "sockets in %s)", dir);
    else
      snprintf(mc->egress_detail, sizeof mc->egress_detail, "no egress session: %s",
               why ? why : "the manager's answer says nothing");
    json_decref(ans);
    free(answer);
  } else if (!mc->egress_detail[0]) {
    snprintf(mc->egress_detail, sizeof mc->egress_detail, "no manager to open one");
  }
  /* Closing the connection, or the embedded manager, ends the session. */
  if (fd >= 0)
    close(fd);
  shk_manager_free(m);
}

/* The classes a grant may unlock in a running sandbox, and what the
 * manager (this process, as an embedded one would be) has for each: the
 * same answer the grant gets (shk_manager_class_mechanism). */
static const shk_cap_class live_classes[] = { SHK_CAP_FS_SCOPE, SHK_CAP_PERSISTENCE, SHK_CAP_INSTALL_PRIVILEGED,
                                              SHK_CAP_GPU, SHK_CAP_PERIPHERAL };
#define N_LIVE (sizeof live_classes / sizeof live_classes[0])

/* Whether this host has a device of the class at all (a GPU or a
 * peripheral): said beside the reason, so "nothing to grant here" is not
 * mistaken for a missing mechanism alone. */
static const char *no_device(shk_cap_class c)
{
  static const char *const gpu[] = { "/dev/nvidiactl", "/dev/nvidia0", "/dev/dri", "/dev/kfd", NULL };
  static const char *const peri[] = { "/dev/video0", "/dev/snd", "/dev/bus/usb", NULL };
  const char *const *v = c == SHK_CAP_GPU ? gpu : c == SHK_CAP_PERIPHERAL ? peri : NULL;
  if (!v)
    return NULL;
  for (; *v; v++)
    if (access(*v, F_OK) == 0)
      return NULL;
  return "no device of this class on this host";
}

int shk_cli_doctor(int argc, char **argv)
{
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json"))
      json = true;
    else
      shk_cli_usage_error("doctor", "unknown option '%s'", argv[i]);
  }
  shk_sandbox_env env;
  shk_error e;
  if (shk_sandbox_env_from_process(&env, &e) < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "doctor: %s", e.message);
  shk_sandbox_features f;
  if (shk_sandbox_features_detect(&f, &env, SHK_DETECT_CGROUP | SHK_DETECT_USERNS_TRY) < 0)
    shk__die(SHK_EXIT_UNAVAILABLE, "doctor: out of memory");
  shk_autofree char *version = bwrap_version(f.bwrap);
  /* The solver of the Cedar analysis gate (src/policy), which the manager
   * runs as a subprocess. */
  shk_autofree char *solver = first_line("cvc5", "--version");
  manager_check mc = { 0 };
  check_manager(&mc);
  /* The same assessment `shinken run` makes of its defaults: it starts
   * when nothing is fatal and no layer is missing. */
  shk_sandbox_assessment a;
  shk_sandbox_assess(&f, &env, NULL, &a);
  const shk_sandbox_class *c = a.classes;
  bool can_run = !a.fatal[0] && a.ngaps == 0;

  char live_why[N_LIVE][512];
  int live_ok[N_LIVE];
  for (size_t i = 0; i < N_LIVE; i++)
    live_ok[i] = shk_manager_class_mechanism(live_classes[i], live_why[i], sizeof live_why[i]) == 1;

  if (json) {
    json_t *live = json_array();
    for (size_t i = 0; i < N_LIVE; i++)
      json_array_append_new(live, json_pack("{s:s, s:b, s:s?, s:s?, s:s?}", "class",
          shk_cap_class_name(live_classes[i]), "available", live_ok[i],
          "mechanism", live_ok[i] ? live_why[i] : NULL, "refused", live_ok[i] ? NULL : live_why[i],
          "devices", no_device(live_classes[i])));
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
    /* With cgroup v2 in use, its parent and controllers; with the cgroup
     * v1 fallback, the hierarchies: never one's controllers under the
     * other's name. */
    json_t *v2 = json_pack("{s:b, s:s?, s:s?, s:b}", "mounted", f.cgroup_v2, "mount",
                           f.cgroup_mount, "parent", f.cgroup_parent, "used",
                           ctl_n && !f.cgroup_v1);
    json_t *root = json_pack(
        "{s:{s:s?, s:s?, s:b}, s:{s:b, s:s?}, s:{s:i}, s:{s:b, s:b},"
        " s:{s:s?, s:o, s:o, s:o, s:s?, s:b}, s:o, s:o, s:b,"
        " s:{s:s, s:b, s:b, s:s}, s:{s:b, s:s}, s:{s:s, s:b, s:s?}}",
        "bwrap", "path", f.bwrap, "version", version, "setuid", f.bwrap_setuid,
        "userns", "available", f.userns, "detail", f.userns_detail,
        "landlock", "abi", f.landlock_abi,
        "seccomp", "available", f.seccomp, "connect_guard", f.connect_guard,
        "cgroup", "mechanism", !ctl_n ? NULL : f.cgroup_v1 ? "cgroup v1" : "cgroup v2",
        "controllers", ctl, "v2", v2, "v1", v1, "detail", f.cgroup_detail,
        "delegated", ctl_n && !env.root,
        "classes", classes, "gaps", gaps, "can_run", can_run,
        "manager", "socket", mc.socket, "running", mc.running, "embeddable", mc.embeddable,
        "detail", mc.detail,
        "egress", "session", mc.egress, "detail", mc.egress_detail,
        "analysis", "solver", "cvc5", "available", solver != NULL, "version", solver);
    json_object_set_new(root, "live_unlocks", live);
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
    printf("cgroups          %s\n", f.cgroup_detail);
    printf("manager          %s\n", mc.detail);
    printf("egress           %s\n", mc.egress_detail);
    printf("analysis         %s\n\n", solver ? solver : "cvc5 not found: the Cedar analysis gate "
                                                "cannot run here");
    printf("%-11s  %-7s  %s\n", "class", "level", "mechanism");
    for (int i = 0; i < SHK_SANDBOX_CLASS_N; i++) {
      printf("%-11s  %-7s  %s", c[i].name, shk_sandbox_level_name(c[i].level),
             c[i].mechanism[0] ? c[i].mechanism : c[i].missing[0] ? "" : "-");
      if (c[i].missing[0])
        printf("%smissing: %s", c[i].mechanism[0] ? "; " : "", c[i].missing);
      putchar('\n');
    }
    printf("\n%-18s  %s\n", "live unlock", "how a grant reaches a running sandbox");
    for (size_t i = 0; i < N_LIVE; i++) {
      const char *nd = no_device(live_classes[i]);
      printf("%-18s  %s%s%s%s\n", shk_cap_class_name(live_classes[i]), live_ok[i] ? "" : "refused: ",
             live_ok[i] ? live_why[i] : live_why[i], nd ? "; " : "", nd ? nd : "");
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
  return can_run ? SHK_EXIT_OK : SHK_EXIT_CHECK;
}

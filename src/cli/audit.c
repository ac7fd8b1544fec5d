/* SPDX-License-Identifier: Apache-2.0 */
/* `shinken audit verify|prove|key|tail|show|export`: the tools of the
 * authority timeline. Each parses its arguments, calls the audit module and
 * prints. Exit status (src/cli/cli.h): 0 done (verify: verified), 3 verify
 * found the log tampered, 1 bad input or a store that cannot be read, 64 a
 * usage error. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/common.h"
#include "shinken/audit.h"

enum { EXIT_OK = SHK_EXIT_OK, EXIT_BAD = SHK_EXIT_BAD_INPUT, EXIT_TAMPERED = SHK_EXIT_CHECK };

typedef struct args {
  const char *db, *key, *key_file, *checkpoint, *session, *format, *since, *pos, *run;
  bool follow, json, system, lines_set;
  long lines;
  char dbbuf[4096], runbuf[8300], keybuf[4096];
} args;

static SHK_NORETURN void bad_usage(const char *what, const char *arg)
{
  shk_cli_usage_error("audit", "%s%s%s", what, arg ? " " : "", arg ? arg : "");
}

/* A value the command cannot use (not the shape of the command line). */
static SHK_NORETURN void bad_value(const char *what, const char *arg)
{
  shk__die(EXIT_BAD, "audit: %s %s", what, arg);
}

static void parse(int argc, char **argv, args *a)
{
  for (int i = 2; i < argc; i++) {
    const char *o = argv[i];
    const char **dst = !strcmp(o, "--db")           ? &a->db
                       : !strcmp(o, "--key")        ? &a->key
                       : !strcmp(o, "--key-file")   ? &a->key_file
                       : !strcmp(o, "--checkpoint") ? &a->checkpoint
                       : !strcmp(o, "--session")    ? &a->session
                       : !strcmp(o, "--format")     ? &a->format
                       : !strcmp(o, "--since")      ? &a->since
                       : !strcmp(o, "--run")        ? &a->run
                                                    : NULL;
    if (dst) {
      if (i + 1 >= argc)
        bad_usage("missing the value of", o);
      *dst = argv[++i];
    } else if (!strcmp(o, "-f")) {
      a->follow = true;
    } else if (!strcmp(o, "--json")) {
      a->json = true;
    } else if (!strcmp(o, "--system")) {
      a->system = true;
    } else if (!strcmp(o, "-n")) {
      char *end;
      if (i + 1 >= argc || (a->lines = strtol(argv[++i], &end, 10)) < 0 || *end)
        bad_value("-n needs a number of events, not", i < argc ? argv[i] : "nothing");
      a->lines_set = true;
    } else if (o[0] == '-' && o[1]) {
      bad_usage("unknown option", o);
    } else if (!a->pos) {
      a->pos = o;
    } else {
      bad_usage("unexpected argument", o);
    }
  }
  if (!a->db) {
    shk_error err;
    if (shk_audit_default_path(a->system, a->dbbuf, sizeof a->dbbuf, &err) < 0)
      shk__die(EXIT_BAD, "audit: %s", err.message);
    a->db = a->dbbuf;
  }
}

/* ------------------------------------------------------------------------
 * The logs of shinken run (runs/NAME.db beside the user's log, signed with
 * the user's key: src/cli/runlog.c)
 */

/* The session a run's log records (its first gen_ai.conversation.id), or
 * "" when none. */
typedef struct run_facts {
  char session[128], started[40];
  uint64_t events, refused;
} run_facts;

static int run_fact(void *data, uint64_t seq, const char *entry, size_t len, const unsigned char leaf[32])
{
  (void)leaf;
  run_facts *f = data;
  json_t *o = json_loadb(entry, len, 0, NULL);
  const char *sid = json_string_value(json_object_get(o, "gen_ai.conversation.id"));
  const char *name = json_string_value(json_object_get(o, "event.name"));
  const char *dec = json_string_value(json_object_get(o, "shinken.decision"));
  if (seq == 0)
    snprintf(f->started, sizeof f->started, "%.19sZ", json_string_value(json_object_get(o, "time")) ?: "?");
  if (sid && !f->session[0])
    snprintf(f->session, sizeof f->session, "%s", sid);
  if (name && !strcmp(name, "proxy-verdict") && dec && strcmp(dec, "allow"))
    f->refused++;
  f->events = seq + 1;
  json_decref(o);
  return 0;
}

static bool run_read(const char *path, run_facts *f)
{
  memset(f, 0, sizeof *f);
  shk_audit_reader *r;
  shk_error err;
  if (shk_audit_reader_open(path, &r, &err) < 0)
    return false;
  int rc = shk_audit_reader_scan(r, 0, run_fact, f, &err);
  shk_audit_reader_close(r);
  return rc == 0;
}

static int names_cmp(const void *x, const void *y)
{
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The runs' log names (NAME of runs/NAME.db), sorted (by start time, as
 * the names begin with it); *n of them, malloc'd. */
static char **run_names(const char *dir, size_t *n)
{
  *n = 0;
  DIR *d = opendir(dir);
  if (!d)
    return NULL;
  char **v = NULL;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len <= 3 || strcmp(de->d_name + len - 3, ".db") || de->d_name[0] == '.')
      continue;
    char **nv = realloc(v, (*n + 1) * sizeof *v);
    if (!nv)
      break;
    v = nv;
    v[(*n)++] = shk__xasprintf("%.*s", (int)(len - 3), de->d_name);
  }
  closedir(d);
  if (*n)
    qsort(v, *n, sizeof *v, names_cmp);
  return v;
}

static void free_names(char **v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

/* --run RUN: the log of one run, named by its log name or by (a unique
 * prefix of) the session it records; the key is the user's (audit.key
 * beside the user's log) unless --key or --key-file says otherwise. */
static void select_run(args *a)
{
  char dir[4096];
  shk_error err;
  if (shk_audit_runs_dir(a->db, dir, sizeof dir, &err) < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  size_t n;
  char **names = run_names(dir, &n);
  const char *hit = NULL;
  unsigned hits = 0;
  for (size_t i = 0; i < n && !hit; i++)
    if (!strcmp(names[i], a->run))
      hit = names[i], hits = 1;
  size_t plen = strlen(a->run);
  for (size_t i = 0; i < n && !hit; i++) {
    run_facts f;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.db", dir, names[i]);
    if (run_read(path, &f) && f.session[0] && !strncmp(f.session, a->run, plen) && hits++ == 0)
      hit = names[i];
    if (hits > 1)
      break;
  }
  if (hits > 1)
    shk__die(EXIT_BAD, "audit: --run %s names more than one run's log (see shinken audit runs)", a->run);
  if (!hit)
    shk__die(EXIT_BAD, "audit: --run %s: no run's log of that name or session in %s (see shinken audit "
             "runs)", a->run, dir);
  snprintf(a->runbuf, sizeof a->runbuf, "%s/%s.db", dir, hit);
  free_names(names, n);
  if (!a->key && !a->key_file) {
    const char *slash = strrchr(a->db, '/');
    snprintf(a->keybuf, sizeof a->keybuf, "%.*s/audit.key", slash ? (int)(slash - a->db) : 1,
             slash ? a->db : ".");
    a->key_file = a->keybuf;
  }
  a->db = a->runbuf;
}

static int cmd_runs(const args *a)
{
  char dir[4096];
  shk_error err;
  if (shk_audit_runs_dir(a->db, dir, sizeof dir, &err) < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  size_t n;
  char **names = run_names(dir, &n);
  if (!n) {
    printf("no run's log in %s\n", dir);
    return EXIT_OK;
  }
  printf("%-36s %-20s %-24s %8s %8s\n", "RUN", "STARTED", "SESSION", "EVENTS", "REFUSED");
  for (size_t i = 0; i < n; i++) {
    run_facts f;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.db", dir, names[i]);
    if (!run_read(path, &f)) {
      printf("%-36s (cannot be read)\n", names[i]);
      continue;
    }
    printf("%-36s %-20s %-24s %8" PRIu64 " %8" PRIu64 "\n", names[i], f.started,
           f.session[0] ? f.session : "-", f.events, f.refused);
  }
  free_names(names, n);
  return EXIT_OK;
}

static uint64_t parse_seq(const char *s)
{
  char *end;
  if (!s || !*s || *s == '-')
    bad_usage("needs a sequence number", NULL);
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || errno)
    bad_value("not a sequence number:", s);
  return v;
}

static shk_audit_reader *open_reader(const args *a)
{
  shk_audit_reader *r;
  shk_error err;
  if (shk_audit_reader_open(a->db, &r, &err) < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  return r;
}

static void hex(const unsigned char *h, char out[65])
{
  for (int i = 0; i < 32; i++)
    sprintf(out + 2 * i, "%02x", h[i]);
}

/* ------------------------------------------------------------------------
 * verify
 */
static void print_problem(void *data, uint64_t seq, const char *sentence)
{
  unsigned *shown = data;
  if ((*shown)++ < 20)
    fprintf(stderr, "shinken: audit: seq %" PRIu64 ": %s\n", seq, sentence);
}

static int cmd_verify(const args *a)
{
  char *cp = NULL;
  if (a->checkpoint) {
    int r = shk__read_file(a->checkpoint, &cp, NULL);
    if (r < 0)
      shk__die(EXIT_BAD, "audit: cannot read the checkpoint %s: %s", a->checkpoint, strerror(-r));
  }
  if (a->key && a->key_file)
    bad_usage("--key and --key-file exclude each other", NULL);
  unsigned shown = 0;
  shk_audit_verify_opts o = { .db_path = a->db, .key_path = a->key_file, .verifier_key = a->key,
                              .checkpoint = cp, .on_problem = print_problem, .data = &shown };
  shk_audit_report rep;
  shk_error err;
  int r = shk_audit_verify(&o, &rep, &err);
  free(cp);
  if (r < 0)
    shk__die(EXIT_BAD, "audit: %s%s%s", err.file[0] ? err.file : "", err.file[0] ? ": " : "",
             err.message);
  if (rep.tampered) {
    printf("tampered: first bad seq %" PRIu64 ": %s (%u problems)\n", rep.first_bad, rep.problem,
           rep.problems);
    return EXIT_TAMPERED;
  }
  printf("verified: %" PRIu64 " events, %" PRIu64 " checkpoints, the latest signed at size %" PRIu64,
         rep.events, rep.checkpoints, rep.checked_size);
  if (rep.events > rep.checked_size)
    printf(" (%" PRIu64 " later events are not signed yet)", rep.events - rep.checked_size);
  if (a->checkpoint)
    printf("; the log extends %s", a->checkpoint);
  putchar('\n');
  return EXIT_OK;
}

/* ------------------------------------------------------------------------
 * prove, key
 */
static int cmd_prove(const args *a)
{
  uint64_t seq = parse_seq(a->pos);
  shk_audit_reader *r = open_reader(a);
  shk_audit_proof p;
  shk_error err;
  if (shk_audit_prove(r, seq, &p, &err) < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  shk_audit_reader_close(r);
  json_t *path = json_array();
  char h[65];
  for (size_t i = 0; i < p.path_len; i++) {
    hex(p.path[i], h);
    json_array_append_new(path, json_string(h));
  }
  hex(p.leaf, h);
  json_t *o = json_pack("{s:I, s:I, s:s, s:s, s:o, s:s}", "seq", (json_int_t)p.seq, "tree_size",
                        (json_int_t)p.tree_size, "entry", p.entry, "leaf_hash", h, "path", path,
                        "checkpoint", p.checkpoint);
  if (!o)
    shk__die(EXIT_BAD, "audit: the entry of event %" PRIu64 " is not UTF-8", seq);
  json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  putchar('\n');
  json_decref(o);
  shk_audit_proof_clear(&p);
  return EXIT_OK;
}

static int cmd_key(const args *a)
{
  char *k;
  shk_error err;
  if (shk_audit_verifier_key(a->db, a->key_file, &k, &err) < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  puts(k);
  free(k);
  return EXIT_OK;
}

/* ------------------------------------------------------------------------
 * tail, show, export
 */
typedef struct reading {
  const args *a;
  uint64_t next, skip, matched;
  int64_t since;
  bool first;
  int (*out)(struct reading *, uint64_t, const char *, size_t, json_t *);
} reading;

static const char *short_key(const char *k)
{
  return !strncmp(k, "shinken.", 8) ? k + 8 : k;
}

static void print_value(FILE *f, json_t *v)
{
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (*s && !strpbrk(s, " \t\n\"=\\"))
      fputs(s, f);
    else
      json_dumpf(v, f, JSON_ENCODE_ANY);
  } else {
    json_dumpf(v, f, JSON_ENCODE_ANY | JSON_COMPACT);
  }
}

static int out_line(reading *rd, uint64_t seq, const char *entry, size_t len, json_t *o)
{
  if (rd->a->json) {
    fwrite(entry, 1, len, stdout);
    putchar('\n');
    return 0;
  }
  printf("%" PRIu64 " %s %s", seq, json_string_value(json_object_get(o, "time")),
         json_string_value(json_object_get(o, "event.name")));
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!strcmp(k, "seq") || !strcmp(k, "time") || !strcmp(k, "event.name") || !strcmp(k, "prev"))
      continue;
    printf(" %s=", short_key(k));
    print_value(stdout, v);
  }
  putchar('\n');
  return 0;
}

static json_t *otlp_value(json_t *v)
{
  if (json_is_string(v))
    return json_pack("{s:O}", "stringValue", v);
  if (json_is_integer(v)) {
    char n[24];
    snprintf(n, sizeof n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    return json_pack("{s:s}", "intValue", n);
  }
  if (json_is_boolean(v))
    return json_pack("{s:b}", "boolValue", json_is_true(v));
  json_t *vals = json_array();
  size_t i;
  json_t *x;
  json_array_foreach(v, i, x) json_array_append_new(vals, otlp_value(x));
  return json_pack("{s:{s:o}}", "arrayValue", "values", vals);
}

/* One OTLP/JSON LogRecord: the event's time, its name as eventName and
 * body, and every attribute under its own name (docs/audit.md). */
static int out_otlp(reading *rd, uint64_t seq, const char *entry, size_t len, json_t *o)
{
  int64_t ns = 0;
  shk_audit_parse_time(json_string_value(json_object_get(o, "time")), &ns);
  char t[24];
  snprintf(t, sizeof t, "%" PRId64, ns);
  json_t *attrs = json_array();
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!strcmp(k, "time") || !strcmp(k, "prev"))
      continue;
    json_array_append_new(attrs, json_pack("{s:s, s:o}", "key", !strcmp(k, "seq") ? "shinken.seq" : k,
                                           "value", otlp_value(v)));
  }
  const char *name = json_string_value(json_object_get(o, "event.name"));
  json_t *rec = json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}, s:o}", "timeUnixNano", t,
                          "observedTimeUnixNano", t, "severityNumber", 9, "severityText", "INFO",
                          "eventName", name, "body", "stringValue", name, "attributes", attrs);
  printf("%s", rd->first ? "" : ",\n");
  rd->first = false;
  json_dumpf(rec, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(rec);
  return 0;
}

static int out_jsonl(reading *rd, uint64_t seq, const char *entry, size_t len, json_t *o)
{
  fwrite(entry, 1, len, stdout);
  putchar('\n');
  return 0;
}

static int each(void *data, uint64_t seq, const char *entry, size_t len, const unsigned char leaf[32])
{
  reading *rd = data;
  rd->next = seq + 1;
  json_error_t je;
  json_t *o = json_loadb(entry, len, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(o) || !json_is_string(json_object_get(o, "time")) ||
      !json_is_string(json_object_get(o, "event.name"))) {
    json_decref(o);
    fprintf(stderr, "shinken: audit: event %" PRIu64 " is not a valid entry (run shinken audit "
                    "verify)\n", seq);
    return EXIT_BAD;
  }
  int r = 0;
  const char *sess = json_string_value(json_object_get(o, "gen_ai.conversation.id"));
  int64_t t = 0;
  shk_audit_parse_time(json_string_value(json_object_get(o, "time")), &t);
  bool match = (!rd->a->session || (sess && !strcmp(sess, rd->a->session))) &&
               (!rd->a->since || t >= rd->since);
  if (match && rd->skip)
    rd->skip--;
  else if (match)
    r = rd->out(rd, seq, entry, len, o);
  json_decref(o);
  return r;
}

static int scan(shk_audit_reader *r, reading *rd)
{
  shk_error err;
  int ret = shk_audit_reader_scan(r, rd->next, each, rd, &err);
  if (ret < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  fflush(stdout);
  return ret;
}

static int out_count(reading *rd, uint64_t seq, const char *entry, size_t len, json_t *o)
{
  rd->matched++;
  return 0;
}

static int cmd_tail(const args *a)
{
  shk_audit_reader *r = open_reader(a);
  reading rd = { .a = a, .out = out_line };
  if (a->pos)
    bad_usage("unexpected argument", a->pos);
  uint64_t want = a->lines_set ? (uint64_t)a->lines : 10;
  /* The last N events, or the last N of one session (counted first). */
  if (want && a->session) {
    reading cnt = { .a = a, .out = out_count };
    scan(r, &cnt);
    rd.skip = cnt.matched > want ? cnt.matched - want : 0;
  } else if (want) {
    uint64_t n = 0;
    shk_error err;
    if (shk_audit_reader_count(r, &n, &err) < 0)
      shk__die(EXIT_BAD, "audit: %s", err.message);
    rd.next = n > want ? n - want : 0;
  }
  int ret = scan(r, &rd);
  while (a->follow && ret == 0) {
    usleep(200 * 1000);
    ret = scan(r, &rd);
  }
  shk_audit_reader_close(r);
  return ret;
}

typedef struct found {
  uint64_t seq;
  char *entry;
  unsigned char leaf[32];
} found;

/* The first event scanned is the one show asked for, if it is there. */
static int found_one(void *data, uint64_t s, const char *e, size_t len, const unsigned char leaf[32])
{
  found *f = data;
  if (s == f->seq) {
    if (!(f->entry = strndup(e, len)))
      shk__die(EXIT_BAD, "out of memory");
    memcpy(f->leaf, leaf, 32);
  }
  return 1;
}

static int cmd_show(const args *a)
{
  uint64_t seq = parse_seq(a->pos);
  shk_audit_reader *r = open_reader(a);
  shk_error err;
  char *note = NULL;
  uint64_t covered = 0;
  if (shk_audit_reader_checkpoint(r, &note, &err) == 0) {
    const char *nl = strchr(note, '\n');
    covered = nl ? strtoull(nl + 1, NULL, 10) : 0;
  }
  free(note);
  found f = { .seq = seq };
  if (shk_audit_reader_scan(r, seq, found_one, &f, &err) < 0)
    shk__die(EXIT_BAD, "audit: %s", err.message);
  shk_audit_reader_close(r);
  if (!f.entry)
    shk__die(EXIT_BAD, "audit: no event %" PRIu64 " in %s", seq, a->db);
  json_error_t je;
  json_t *o = json_loads(f.entry, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(o))
    shk__die(EXIT_BAD, "audit: event %" PRIu64 " is not a valid entry (run shinken audit verify)",
             seq);
  if (a->json) {
    puts(f.entry);
  } else {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
      printf("%-28s ", k);
      print_value(stdout, v);
      putchar('\n');
    }
    char h[65];
    hex(f.leaf, h);
    printf("%-28s %s\n", "leaf hash", h);
    if (seq < covered)
      printf("%-28s the latest checkpoint (size %" PRIu64 ")\n", "signed by", covered);
    else
      printf("%-28s no checkpoint yet\n", "signed by");
  }
  json_decref(o);
  free(f.entry);
  return EXIT_OK;
}

static int cmd_export(const args *a)
{
  if (!a->format)
    bad_usage("export needs --format otlp-json or jsonl", NULL);
  bool otlp = !strcmp(a->format, "otlp-json");
  if (!otlp && strcmp(a->format, "jsonl"))
    bad_value("--format is otlp-json or jsonl, not", a->format);
  reading rd = { .a = a, .first = true, .out = otlp ? out_otlp : out_jsonl };
  if (a->since && shk_audit_parse_time(a->since, &rd.since) < 0)
    bad_value("--since needs an RFC 3339 time (2025-01-02T03:04:05Z), not", a->since);
  shk_audit_reader *r = open_reader(a);
  if (otlp)
    printf("{\"resourceLogs\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
           "\"value\":{\"stringValue\":\"shinken\"}}]},\"scopeLogs\":[{\"scope\":{\"name\":"
           "\"shinken.audit\",\"version\":\"%s\"},\"logRecords\":[\n", SHK_VERSION);
  int ret = scan(r, &rd);
  if (otlp)
    printf("\n]}]}]}\n");
  shk_audit_reader_close(r);
  return ret;
}

int shk_cli_audit(int argc, char **argv)
{
  if (argc < 2)
    bad_usage("which command? (verify, prove, key, tail, show, export, runs)", NULL);
  if (shk_cli_wants_help(argc, argv))
    return shk_cli_print_usage("audit");
  args a = { 0 };
  parse(argc, argv, &a);
  const char *c = argv[1];
  if (!strcmp(c, "runs"))
    return cmd_runs(&a);
  if (a.run)
    select_run(&a);
  if (!strcmp(c, "verify"))
    return cmd_verify(&a);
  if (!strcmp(c, "prove"))
    return cmd_prove(&a);
  if (!strcmp(c, "key"))
    return cmd_key(&a);
  if (!strcmp(c, "tail"))
    return cmd_tail(&a);
  if (!strcmp(c, "show"))
    return cmd_show(&a);
  if (!strcmp(c, "export"))
    return cmd_export(&a);
  bad_usage("unknown subcommand", c);
}

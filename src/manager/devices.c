/* SPDX-License-Identifier: Apache-2.0 */
/* Which device nodes a gpu or peripheral grant names: the one place that
 * maps a scope to nodes beneath the device root (shk_manager_opts.
 * device_root, normally /dev). Only nodes that exist are named, and a
 * grant that would name none is refused with what was looked for, so a
 * grant never answers "granted" for a device this host does not have.
 * The mounts themselves are unlock.c's. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/common.h"
#include "manager/manager-internal.h"
#include "shinken/cap.h"

typedef struct found {
  char **v;
  size_t n;
} found;

/* Adds REL when ROOT/REL is a character device (or, with DIR, a
 * directory); true when it was added. */
static bool add(found *f, const char *root, const char *rel, bool dir)
{
  char p[4096];
  struct stat st;
  if (snprintf(p, sizeof p, "%s/%s", root, rel) >= (int)sizeof p || lstat(p, &st) < 0 ||
      !(dir ? S_ISDIR(st.st_mode) : S_ISCHR(st.st_mode)))
    return false;
  for (size_t i = 0; i < f->n; i++)
    if (!strcmp(f->v[i], rel))
      return true;
  char **nv = realloc(f->v, (f->n + 2) * sizeof *nv);
  if (!nv)
    return false;
  f->v = nv;
  if (!(nv[f->n] = strdup(rel)))
    return false;
  nv[++f->n] = NULL;
  return true;
}

/* Adds each character device directly in ROOT whose name is PREFIX and
 * digits (video0, media1); how many. */
static size_t add_numbered(found *f, const char *root, const char *prefix)
{
  DIR *d = opendir(root);
  size_t n = 0, len = strlen(prefix);
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, prefix, len) && e->d_name[len] &&
        strspn(e->d_name + len, "0123456789") == strlen(e->d_name + len))
      n += add(f, root, e->d_name, false);
  if (d)
    closedir(d);
  return n;
}

static const char *gpu_nodes(found *f, const char *root, const shk_cap_scope *s, char *buf, size_t len)
{
  if (s->gpu_exclusive)
    return "mode \"exclusive\" is not given by this version (a device node mounted into one sandbox can be "
           "mounted into another): grant the gpu in mode \"shared\"";
  if (!s->device_ids.n)
    return "the grant names no gpu device id";
  for (size_t i = 0; i < s->device_ids.n; i++) {
    const char *id = s->device_ids.v[i];
    char *end;
    long n = strtol(id, &end, 10);
    if (!*id || *end || n < 0 || n > 63) {
      snprintf(buf, len, "gpu device id '%s' is not a number from 0 to 63", id);
      return buf;
    }
    char a[32], b[32], c[32];
    snprintf(a, sizeof a, "nvidia%ld", n);
    snprintf(b, sizeof b, "dri/card%ld", n);
    snprintf(c, sizeof c, "dri/renderD%ld", 128 + n);
    bool any = add(f, root, a, false);
    any |= add(f, root, b, false);
    any |= add(f, root, c, false);
    if (!any) {
      snprintf(buf, len, "no gpu with device id %ld on this host (no %s/%s, %s/%s or %s/%s)", n, root, a, root, b,
               root, c);
      return buf;
    }
  }
  /* The nodes every GPU of a vendor shares, where they exist. */
  static const char *const shared[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "kfd" };
  for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
    add(f, root, shared[i], false);
  return NULL;
}

static const char *peripheral_nodes(found *f, const char *root, const shk_cap_scope *s, char *buf, size_t len)
{
  /* Safe to refuse here as well as in the admin tier: a process that can
   * write to uinput types into the human's own session. */
  if (s->input_inject)
    return "input_inject is never granted (/dev/uinput would let the workload type into the human's session)";
  if (!s->camera && !s->mic && !s->usb)
    return "the grant names no peripheral (camera, mic or usb)";
  size_t cams = s->camera ? add_numbered(f, root, "video") : 0;
  cams += s->camera ? add_numbered(f, root, "media") : 0;
  if (s->camera && !cams) {
    snprintf(buf, len, "no camera on this host (no %s/video* or %s/media*)", root, root);
    return buf;
  }
  if (s->mic && !add(f, root, "snd", true)) {
    snprintf(buf, len, "no sound device on this host (no %s/snd)", root);
    return buf;
  }
  if (s->usb && !add(f, root, "bus/usb", true)) {
    snprintf(buf, len, "no usb bus on this host (no %s/bus/usb)", root);
    return buf;
  }
  return NULL;
}

const char *shk__devices_of(const char *root, const shk_cap_scope *scope, char ***out, size_t *n, char *buf,
                            size_t len)
{
  found f = { 0 };
  const char *why = scope->cls == SHK_CAP_GPU        ? gpu_nodes(&f, root, scope, buf, len)
                  : scope->cls == SHK_CAP_PERIPHERAL ? peripheral_nodes(&f, root, scope, buf, len)
                                                     : "not a device class";
  if (!why && !f.n)
    why = "no device node of the grant on this host";
  if (why) {
    shk__devices_free(f.v, f.n);
    *out = NULL;
    *n = 0;
    return why;
  }
  *out = f.v;
  *n = f.n;
  return NULL;
}

void shk__devices_free(char **v, size_t n)
{
  for (size_t i = 0; v && i < n; i++)
    free(v[i]);
  free(v);
}

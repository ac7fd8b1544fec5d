/* SPDX-License-Identifier: Apache-2.0 */
/* Paths: the canonical form of an absolute path, and the prefix test on
 * component boundaries that grants, the filesystem plan and the policy
 * rest on. Bytewise and case-sensitive, as the kernel compares names. */
#include "shinken/match.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

int shk_path_check(const char *path, shk_error *err)
{
  if (path[0] != '/')
    return shk__error_set(err, -EINVAL, "the path is not absolute");
  if (!strcmp(path, "/"))
    return 0;
  for (const char *p = path; *p;) {
    const char *name = p + 1;
    size_t n = strcspn(name, "/");
    if (n == 0)
      return shk__error_set(err, -EINVAL, name[0] ? "the path has an empty component ('//')"
                                                   : "the path ends in '/'");
    if ((n == 1 && name[0] == '.') || (n == 2 && name[0] == '.' && name[1] == '.'))
      return shk__error_set(err, -EINVAL, "the path has a '.' or '..' component");
    p = name + n;
  }
  return 0;
}

int shk_path_normalize(const char *path, const char *cwd, char **out, shk_error *err)
{
  *out = NULL;
  if (!path[0])
    return shk__error_set(err, -EINVAL, "the path is empty");
  bool relative = path[0] != '/';
  if (relative && (!cwd || cwd[0] != '/'))
    return shk__error_set(err, -EINVAL,
                          "the path is relative and there is no absolute directory to resolve "
                          "it against");
  size_t cl = relative ? strlen(cwd) : 0, pl = strlen(path);
  /* The result is never longer than cwd, '/', path and the NUL. */
  char *buf = malloc(cl + pl + 2);
  if (!buf)
    return -ENOMEM;
  size_t n = 0;
  for (int part = relative ? 0 : 1; part < 2; part++) {
    const char *s = part ? path : cwd;
    while (*s) {
      while (*s == '/')
        s++;
      size_t len = strcspn(s, "/");
      if (len == 0 || (len == 1 && s[0] == '.')) {
        /* nothing, or ".": no component */
      } else if (len == 2 && s[0] == '.' && s[1] == '.') {
        while (n > 0 && buf[n - 1] != '/')
          n--;
        if (n > 0)
          n--; /* the '/' before the dropped component */
      } else {
        buf[n++] = '/';
        memcpy(buf + n, s, len);
        n += len;
      }
      s += len;
    }
  }
  if (n == 0)
    buf[n++] = '/';
  buf[n] = '\0';
  *out = buf;
  return 0;
}

bool shk_path_within(const char *path, const char *prefix)
{
  size_t n = strlen(prefix);
  if (n == 1 && prefix[0] == '/')
    return path[0] == '/';
  return !strncmp(path, prefix, n) && (path[n] == '\0' || path[n] == '/');
}

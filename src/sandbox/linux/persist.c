/* SPDX-License-Identifier: Apache-2.0 */
/* The store of persistence grants: what a sandbox writes beneath a path it
 * was granted persistence of is kept, per image, in the state directory,
 * as the upper layer of an overlay whose lower layer is the host's path
 * (unlock.c mounts it). The host's path itself never changes.
 *
 *   STATE/persist/IMAGE/NAME/meta.json  what it is: image, path, whether it
 *                                       survives the session, since when
 *                                       /upper/           the sandbox's changes
 *                                       /work/            the overlay's scratch
 *                                       /lock             flock'd while mounted
 *
 * NAME is the path with every byte but [A-Za-z0-9._-] written %XX, so one
 * path has one entry per image and the name says which path it is; an
 * entry that lives for one session only (survives_session false) adds
 * "@" and 64 random bits, and is removed when its grant ends. An entry
 * whose lock nobody holds and whose name has an "@" was left by a manager
 * that ended without removing it: the next open in that image removes it.
 *
 * Who may touch it: everything is made 0700 by the user the manager acts
 * for, and a directory of the store owned by anyone else is refused (a
 * planted directory must not become where a sandbox's writes go). */
#include "sandbox-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "shinken/sandbox.h"

struct shk_sandbox_persist {
  int image;  /* the image's directory */
  int dir;    /* the entry's directory */
  int lock;   /* its lock file, held (LOCK_EX) while this handle lives */
  char *name; /* the entry's name in the image's directory */
  char *path; /* the granted path */
  char *where; /* the entry's directory, absolute */
  bool survives;
};

int shk_sandbox_persist_root(const char *state_dir, char *buf, size_t len, shk_error *err)
{
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  int n;
  if (state_dir && state_dir[0] == '/')
    n = snprintf(buf, len, "%s/persist", state_dir);
  else if (state && state[0] == '/')
    n = snprintf(buf, len, "%s/shinken/persist", state);
  else if (home && home[0] == '/')
    n = snprintf(buf, len, "%s/.local/state/shinken/persist", home);
  else
    return shk__error_set(err, -ENOENT, "neither XDG_STATE_HOME nor HOME is set: there is no state directory "
                          "to keep persisted data in");
  if (n < 0 || (size_t)n >= len)
    return shk__error_set(err, -ENAMETOOLONG, "the state directory's path is too long");
  return 0;
}

/* An image name is one directory name: letters, digits, '.', '_', '-',
 * not starting with '.'. */
static bool image_ok(const char *image)
{
  size_t n = image ? strlen(image) : 0;
  if (n == 0 || n > 128 || image[0] == '.')
    return false;
  for (size_t i = 0; i < n; i++)
    if (!(image[i] >= 'a' && image[i] <= 'z') && !(image[i] >= 'A' && image[i] <= 'Z') &&
        !(image[i] >= '0' && image[i] <= '9') && !strchr("._-", image[i]))
      return false;
  return true;
}

/* The entry name of PATH (malloc'd), or NULL when out of memory. */
static char *encode(const char *path)
{
  size_t n = strlen(path);
  char *out = malloc(n * 3 + 1), *o = out;
  if (!out)
    return NULL;
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-", *p))
      *o++ = (char)*p;
    else
      o += sprintf(o, "%%%02X", *p);
  }
  *o = 0;
  return out;
}

/* Opens (making it when missing, mode 0700) the directory NAME beneath
 * DIRFD, through no symlink, and only when the user this process acts for
 * owns it and nobody else may write it: -EPERM otherwise. */
static int own_dir(int at, const char *name, bool create)
{
  if (create && mkdirat(at, name, 0700) < 0 && errno != EEXIST)
    return -errno;
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  if (fstat(fd, &st) < 0 || st.st_uid != shk__self_uid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    close(fd);
    return -EPERM;
  }
  return fd;
}

/* Opens ROOT (the store: made when missing, as every directory above it
 * that is missing, 0700). The last component must be this user's alone;
 * the ones above are walked as the path names them. -ENOENT (no err)
 * when it is missing and CREATE is false. */
static int open_root(const char *root, bool create, shk_error *err)
{
  if (root[0] != '/')
    return shk__error_set(err, -EINVAL, "%s: the store's path must be absolute", root);
  int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return shk__error_set(err, -errno, "/: %s", strerror(errno));
  shk_autofree char *copy = strdup(root);
  if (!copy) {
    close(fd);
    return shk__error_set(err, -ENOMEM, "out of memory");
  }
  char *p = copy;
  while (*p) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    char *end = strchr(p, '/');
    if (end)
      *end = 0;
    bool last = !end || !end[1 + strspn(end + 1, "/")];
    int sub;
    if (last) {
      sub = own_dir(fd, p, create);
    } else {
      sub = create && mkdirat(fd, p, 0700) < 0 && errno != EEXIST ? -errno : 0;
      if (sub == 0 && (sub = openat(fd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        sub = -errno;
    }
    close(fd);
    if (sub < 0) {
      if (sub == -ENOENT && !create)
        return -ENOENT;
      return shk__error_set(err, sub, "%s: %s", root,
                            sub == -EPERM ? "the store of persisted data is not this user's alone"
                                          : strerror(-sub));
    }
    fd = sub;
    if (!end)
      break;
    p = end + 1;
  }
  return fd;
}

/* A directory stream over a copy of FD, so that closing the stream leaves
 * FD open; NULL with errno set. */
static DIR *dir_of(int fd)
{
  int d = dup(fd);
  if (d < 0)
    return NULL;
  DIR *dir = fdopendir(d);
  if (!dir) {
    int e = errno;
    close(d);
    errno = e;
  }
  return dir;
}

/* Removes NAME beneath DIRFD and everything in it, through no symlink (a
 * link is removed, never followed). The overlay leaves directories of mode
 * 0 in its work directory: those are made this user's to enter first. */
static int rm_tree(int at, const char *name)
{
  struct stat st;
  if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : -errno;
  if (!S_ISDIR(st.st_mode))
    return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == EACCES && fchmodat(at, name, 0700, 0) == 0)
    fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  DIR *d = fdopendir(fd);
  if (!d) {
    int e = -errno;
    close(fd);
    return e;
  }
  int r = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int x = rm_tree(dirfd(d), e->d_name);
    if (x < 0 && !r)
      r = x;
  }
  closedir(d);
  if (unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !r)
    r = -errno;
  return r;
}

/* True when somebody holds the lock of the entry NAME (a manager that has
 * it mounted). */
static bool in_use(int image, const char *name)
{
  int dir = openat(image, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return false;
  int lock = openat(dir, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  close(dir);
  if (lock < 0)
    return false;
  bool busy = flock(lock, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
  close(lock);
  return busy;
}

/* Removes the session-only entries of IMAGE nobody holds: their manager
 * ended without removing them, and their session is over. */
static void sweep(int image)
{
  DIR *d = dir_of(image);
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));)
    if (strchr(e->d_name, '@') && e->d_name[0] != '.' && !in_use(image, e->d_name))
      rm_tree(image, e->d_name);
  closedir(d);
}

static int write_meta(int dir, const char *image, const char *path, bool survives, const char *session)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  json_t *j = json_pack("{s:s, s:s, s:b, s:s?, s:I}", "image", image, "path", path, "survives_session",
                        survives, "session", session, "created_ms",
                        (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
  char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!text)
    return -ENOMEM;
  int r = 0;
  int fd = openat(dir, "meta.json", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  size_t n = strlen(text);
  if (fd < 0 || write(fd, text, n) != (ssize_t)n)
    r = fd < 0 ? -errno : -EIO;
  if (fd >= 0)
    close(fd);
  free(text);
  return r;
}

int shk_sandbox_persist_open(const char *root, const char *image, const char *path, bool survives,
                             const char *session, shk_sandbox_persist **out, shk_error *err)
{
  *out = NULL;
  if (!image_ok(image))
    return shk__error_set(err, -EINVAL, "the image name '%s' cannot name a directory of the store (letters, "
                          "digits, '.', '_' and '-' only, not starting with '.')", image ? image : "");
  if (!path || path[0] != '/')
    return shk__error_set(err, -EINVAL, "'%s' is not an absolute path", path ? path : "");
  shk_sandbox_persist *p = calloc(1, sizeof *p);
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory");
  p->image = p->dir = p->lock = -1;
  p->survives = survives;
  int r = 0, top = open_root(root, true, err);
  if (top < 0) {
    free(p);
    return top;
  }
  p->image = own_dir(top, image, true);
  close(top);
  if (p->image < 0) {
    r = shk__error_set(err, p->image, "%s/%s: %s", root, image,
                       p->image == -EPERM ? "not this user's alone" : strerror(-p->image));
    goto fail;
  }
  sweep(p->image);
  char *enc = encode(path);
  uint64_t rnd = 0;
  if (enc && !survives && getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
    free(enc);
    r = shk__error_set(err, -EIO, "no randomness for the name of a session's store");
    goto fail;
  }
  if (!enc || (!survives ? asprintf(&p->name, "%s@%016llx", enc, (unsigned long long)rnd) < 0
                         : !(p->name = strdup(enc)))) {
    free(enc);
    p->name = NULL;
    r = shk__error_nomem(err);
    goto fail;
  }
  free(enc);
  if (!(p->path = strdup(path))) {
    r = shk__error_nomem(err);
    goto fail;
  }
  if (asprintf(&p->where, "%s/%s/%s", root, image, p->name) < 0) {
    p->where = NULL;
    r = shk__error_nomem(err);
    goto fail;
  }
  if ((p->dir = own_dir(p->image, p->name, true)) < 0) {
    r = shk__error_set(err, p->dir, "%s/%s/%s: %s", root, image, p->name,
                       p->dir == -EPERM ? "not this user's alone" : strerror(-p->dir));
    goto fail;
  }
  /* One overlay per upper layer: a second sandbox mounting the same one
   * at once would corrupt it, so the second is refused. */
  p->lock = openat(p->dir, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (p->lock < 0 || flock(p->lock, LOCK_EX | LOCK_NB) < 0) {
    r = errno == EWOULDBLOCK ? shk__error_set(err, -EBUSY, "the persisted data of %s for image %s is mounted in "
                                              "another sandbox: one sandbox at a time may have it", path, image)
                             : shk__error_set(err, -errno, "the lock of %s/%s/%s: %s", root, image, p->name,
                                              strerror(errno));
    goto fail;
  }
  for (const char *sub = "upper"; sub; sub = strcmp(sub, "upper") ? NULL : "work") {
    int fd = own_dir(p->dir, sub, true);
    if (fd < 0 && fd != -EPERM) {
      r = shk__error_set(err, fd, "%s/%s/%s/%s: %s", root, image, p->name, sub, strerror(-fd));
      goto fail;
    }
    /* The upper layer's root takes the owner of the files the sandbox
     * made there; only the store's own directories must be this user's. */
    if (fd >= 0)
      close(fd);
  }
  /* A kept entry says since when it exists: its record is written once. */
  struct stat mst;
  bool recorded = survives && fstatat(p->dir, "meta.json", &mst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(mst.st_mode);
  if (!recorded && (r = write_meta(p->dir, image, path, survives, session)) < 0) {
    shk__error_set(err, r, "%s/%s/%s/meta.json: %s", root, image, p->name, strerror(-r));
    goto fail;
  }
  *out = p;
  return 0;
fail:
  shk_sandbox_persist_close(p, !survives && p->dir >= 0);
  return r;
}

int shk_sandbox_persist_layer(const shk_sandbox_persist *p, const char *which)
{
  int fd = openat(p->dir, which, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

const char *shk_sandbox_persist_where(const shk_sandbox_persist *p)
{
  return p->where;
}

bool shk_sandbox_persist_survives(const shk_sandbox_persist *p)
{
  return p && p->survives;
}

void shk_sandbox_persist_close(shk_sandbox_persist *p, bool discard)
{
  if (!p)
    return;
  /* Removed while still locked, so no other manager takes it meanwhile. */
  if (discard && p->image >= 0 && p->name)
    rm_tree(p->image, p->name);
  if (p->lock >= 0)
    close(p->lock);
  if (p->dir >= 0)
    close(p->dir);
  if (p->image >= 0)
    close(p->image);
  free(p->name);
  free(p->path);
  free(p->where);
  free(p);
}

/* Adds up the files of the upper layer beneath DIRFD. */
static void tally(int at, uint64_t *bytes, uint64_t *files, int depth)
{
  DIR *d = dir_of(at);
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));) {
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    (*files)++;
    *bytes += (uint64_t)st.st_size;
    int sub;
    if (S_ISDIR(st.st_mode) && depth < 64 &&
        (sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
      tally(sub, bytes, files, depth + 1);
      close(sub);
    }
  }
  closedir(d);
}

/* Reads the entry NAME of the image directory IMAGE into *info; -ENOENT
 * when it has no readable meta.json (not an entry). */
static int read_entry(int image, const char *iname, const char *name, shk_sandbox_persist_info *info)
{
  memset(info, 0, sizeof *info);
  int dir = openat(image, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0)
    return -ENOENT;
  int mfd = openat(dir, "meta.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  json_t *j = mfd < 0 ? NULL : json_loadfd(mfd, 0, NULL);
  if (mfd >= 0)
    close(mfd);
  const char *path = json_string_value(json_object_get(j, "path"));
  const char *session = json_string_value(json_object_get(j, "session"));
  int r = 0;
  if (!path) {
    r = -ENOENT;
  } else if (!(info->image = strdup(iname)) || !(info->name = strdup(name)) || !(info->path = strdup(path)) ||
             (session && !(info->session = strdup(session)))) {
    r = -ENOMEM;
  } else {
    info->survives = json_is_true(json_object_get(j, "survives_session"));
    info->created_ms = json_integer_value(json_object_get(j, "created_ms"));
    info->in_use = in_use(image, name);
    int up = openat(dir, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (up >= 0) {
      tally(up, &info->bytes, &info->files, 0);
      close(up);
    }
  }
  json_decref(j);
  close(dir);
  if (r < 0) {
    free(info->image);
    free(info->name);
    free(info->path);
    free(info->session);
    memset(info, 0, sizeof *info);
  }
  return r;
}

static int by_image_path(const void *a, const void *b)
{
  const shk_sandbox_persist_info *x = a, *y = b;
  int c = strcmp(x->image, y->image);
  return c ? c : strcmp(x->path, y->path) ? strcmp(x->path, y->path) : strcmp(x->name, y->name);
}

int shk_sandbox_persist_list(const char *root, const char *image, shk_sandbox_persist_info **out, size_t *n,
                             shk_error *err)
{
  *out = NULL;
  *n = 0;
  if (image && !image_ok(image))
    return shk__error_set(err, -EINVAL, "'%s' is not an image name", image);
  int top = open_root(root, false, err);
  if (top == -ENOENT)
    return 0; /* nothing was ever persisted */
  if (top < 0)
    return top;
  DIR *d = dir_of(top);
  if (!d) {
    close(top);
    return shk__error_set(err, -errno, "%s: %s", root, strerror(errno));
  }
  int r = 0;
  size_t cap = 0;
  for (struct dirent *e; !r && (e = readdir(d));) {
    if (!image_ok(e->d_name) || (image && strcmp(e->d_name, image)))
      continue;
    int im = own_dir(top, e->d_name, false);
    DIR *di = im < 0 ? NULL : dir_of(im);
    for (struct dirent *x; !r && di && (x = readdir(di));) {
      if (x->d_name[0] == '.')
        continue;
      if (*n == cap) {
        size_t nc = cap ? cap * 2 : 8;
        shk_sandbox_persist_info *nv = realloc(*out, nc * sizeof *nv);
        if (!nv) {
          r = shk__error_nomem(err);
          break;
        }
        *out = nv;
        cap = nc;
      }
      int x2 = read_entry(im, e->d_name, x->d_name, &(*out)[*n]);
      if (x2 == -ENOMEM)
        r = shk__error_nomem(err);
      else if (x2 == 0)
        (*n)++;
    }
    if (di)
      closedir(di);
    if (im >= 0)
      close(im);
  }
  closedir(d);
  close(top);
  if (r < 0) {
    shk_sandbox_persist_info_free(*out, *n);
    *out = NULL;
    *n = 0;
    return r;
  }
  if (*n)
    qsort(*out, *n, sizeof **out, by_image_path);
  return 0;
}

void shk_sandbox_persist_info_free(shk_sandbox_persist_info *v, size_t n)
{
  for (size_t i = 0; v && i < n; i++) {
    free(v[i].image);
    free(v[i].name);
    free(v[i].path);
    free(v[i].session);
  }
  free(v);
}

/* The image directory and the name of the surviving entry of PATH. */
static int find_entry(const char *root, const char *image, const char *path, int *im, char **name,
                      shk_error *err)
{
  *im = -1;
  *name = NULL;
  if (!image_ok(image))
    return shk__error_set(err, -EINVAL, "'%s' is not an image name", image);
  if (!path || path[0] != '/')
    return shk__error_set(err, -EINVAL, "'%s' is not an absolute path", path ? path : "");
  int top = open_root(root, false, err);
  if (top == -ENOENT)
    return shk__error_set(err, -ENOENT, "nothing persisted for %s in image %s", path, image);
  if (top < 0)
    return top;
  *im = own_dir(top, image, false);
  close(top);
  if (*im < 0) {
    int r = *im;
    *im = -1;
    return r == -ENOENT ? shk__error_set(err, r, "nothing persisted for %s in image %s", path, image)
                        : shk__error_set(err, r, "%s/%s: %s", root, image,
                                         r == -EPERM ? "not this user's alone" : strerror(-r));
  }
  if (!(*name = encode(path))) {
    close(*im);
    *im = -1;
    return shk__error_nomem(err);
  }
  struct stat st;
  if (fstatat(*im, *name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
    close(*im);
    *im = -1;
    free(*name);
    *name = NULL;
    return shk__error_set(err, -ENOENT, "nothing persisted for %s in image %s", path, image);
  }
  return 0;
}

int shk_sandbox_persist_show(const char *root, const char *image, const char *path,
                             shk_sandbox_persist_info *info, shk_error *err)
{
  int im;
  char *name;
  int r = find_entry(root, image, path, &im, &name, err);
  if (r < 0)
    return r;
  r = read_entry(im, image, name, info);
  if (r == -ENOENT)
    shk__error_set(err, r, "the store's entry for %s in image %s has no readable meta.json", path, image);
  else if (r < 0)
    shk__error_nomem(err);
  close(im);
  free(name);
  return r;
}

/* Lists what the upper layer beneath DIRFD holds, REL its path. */
static int walk(int at, const char *rel, shk_sandbox_persist_walk_fn fn, void *data, int depth)
{
  DIR *d = dir_of(at);
  if (!d)
    return -errno;
  int r = 0;
  for (struct dirent *e; !r && (e = readdir(d));) {
    struct stat st;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    char sub[4096];
    if (snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name) >= (int)sizeof sub)
      continue;
    /* A character device 0:0 is the overlay's mark of a deleted file. */
    char kind = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l'
              : S_ISCHR(st.st_mode) && st.st_rdev == 0 ? 'x' : 'f';
    r = fn(data, sub, kind, (uint64_t)st.st_size);
    int sfd;
    if (!r && kind == 'd' && depth < 64 &&
        (sfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
      r = walk(sfd, sub, fn, data, depth + 1);
      close(sfd);
    }
  }
  closedir(d);
  return r;
}

int shk_sandbox_persist_walk(const char *root, const char *image, const char *path,
                             shk_sandbox_persist_walk_fn fn, void *data, shk_error *err)
{
  int im;
  char *name;
  int r = find_entry(root, image, path, &im, &name, err);
  if (r < 0)
    return r;
  int dir = openat(im, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int up = dir < 0 ? -1 : openat(dir, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (up >= 0) {
    r = walk(up, strcmp(path, "/") ? path : "", fn, data, 0);
    if (r < 0 && r != -ECANCELED)
      shk__error_set(err, r, "reading what persisted for %s: %s", path, strerror(-r));
    close(up);
  }
  if (dir >= 0)
    close(dir);
  close(im);
  free(name);
  return r;
}

int shk_sandbox_persist_remove(const char *root, const char *image, const char *path, shk_error *err)
{
  int im;
  char *name;
  int r = find_entry(root, image, path, &im, &name, err);
  if (r < 0)
    return r;
  int dir = openat(im, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int lock = dir < 0 ? -1 : openat(dir, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (dir >= 0)
    close(dir);
  /* Held across the removal: no sandbox mounts it meanwhile. */
  if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
    r = lock >= 0 && errno == EWOULDBLOCK
      ? shk__error_set(err, -EBUSY, "what persisted for %s in image %s is mounted in a running sandbox: revoke "
                       "its persistence grant (or end the session) first", path, image)
      : shk__error_set(err, -errno, "the lock of what persisted for %s: %s", path, strerror(errno));
  if (!r && (r = rm_tree(im, name)) < 0)
    shk__error_set(err, r, "removing what persisted for %s in image %s: %s", path, image, strerror(-r));
  if (lock >= 0)
    close(lock);
  close(im);
  free(name);
  return r;
}

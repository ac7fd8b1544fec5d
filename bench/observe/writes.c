/* SPDX-License-Identifier: Apache-2.0 */
/* The write observer benchmark's workload: creates N small files in a
 * fresh directory of the working directory (open with O_CREAT, a write, a
 * close), then removes them and the directory: 2N + 2 observed calls, and
 * nothing else that is, so the time it takes is what each observed call
 * costs. usage: writes N DIR */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  if (argc != 3)
    return 2;
  long n = strtol(argv[1], NULL, 10);
  if (mkdir(argv[2], 0755) < 0) {
    perror(argv[2]);
    return 1;
  }
  int dir = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return 1;
  char name[32];
  for (long i = 0; i < n; i++) {
    snprintf(name, sizeof name, "f%ld", i);
    int fd = openat(dir, name, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "sixteen bytes.\n", 15) != 15 || close(fd) < 0) {
      perror(name);
      return 1;
    }
  }
  for (long i = 0; i < n; i++) {
    snprintf(name, sizeof name, "f%ld", i);
    if (unlinkat(dir, name, 0) < 0) {
      perror(name);
      return 1;
    }
  }
  close(dir);
  return rmdir(argv[2]) < 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* vfork-park: a parent that waits, in the kernel, for a vfork(2) child that
 * is stopped before it could exec, which is where a shell such as dash
 * (it starts every command with vfork) stands when a freeze stops the
 * child first. The child stops itself at once; the parent then sleeps in
 * uninterruptible state until someone continues the child, which then
 * runs /bin/true. Exits with the child's status. */
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
  pid_t child = vfork();
  if (child < 0)
    return 126;
  if (child == 0) {
    /* Only system calls here: the child shares the parent's memory. */
    kill(getpid(), SIGSTOP);
    execl("/bin/true", "true", (char *)NULL);
    _exit(127);
  }
  int status;
  while (waitpid(child, &status, 0) < 0) {
  }
  /* _exit: a sanitizer build's leak check at exit cannot run inside the
   * sandbox (it needs ptrace), and there is nothing to flush. */
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

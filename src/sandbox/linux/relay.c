/* SPDX-License-Identifier: Apache-2.0 */
/* The workload's stdin, stdout and stderr. The sandbox never gets the
 * caller's own descriptors: through /proc/self/fd a descriptor can be
 * reopened, so a caller's output file would be readable from its start,
 * the pipe a shell loop reads from writable, and the caller's terminal
 * open to TIOCSTI and to settings that outlive the run. Instead:
 *
 * - When stdin and stdout are terminals, the workload gets a pseudo-
 *   terminal of its own (stage 2 makes it the controlling terminal of the
 *   workload's session), and the launcher relays between it and the
 *   caller's terminal, which it puts in raw mode for the run and restores
 *   on the way out. Job control, Ctrl-C, Ctrl-Z and resizes then happen
 *   inside; nothing the workload sets reaches the caller's terminal.
 * - Otherwise each of the three is a pipe, relayed with splice(2).
 *
 * The relay owns the caller's terminal, so it is also where a prompt for a
 * human is drawn (shk_sandbox_prompt_ask): the workload's output is held
 * back while the prompt shows, and the key that answers it is read from the
 * caller's terminal and never given to the workload.
 *
 * The relay runs in the launcher's supervising loop (launch.c), beside the
 * connect() guard: it never blocks on the workload, and a stalled reader of
 * the caller's output holds back only that output. */
#include "sandbox-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

/* The caller's terminal in the background is looked at again this often:
 * reading it from there would stop the launcher (SIGTTIN). */
#define BACKGROUND_RECHECK_MS 200
/* A key pressed sooner than this after a prompt appears is not taken for
 * its answer: it was typed for the workload before the prompt was seen. */
#define PROMPT_ARM_MS 400
#define COPY_BUF 65536
/* One splice moves at most this much. */
#define SPLICE_MAX (1 << 20)

/* ---- prompts ---- */

typedef enum prompt_state {
  PROMPT_IDLE,     /* nothing asked */
  PROMPT_PENDING,  /* asked, not drawn yet */
  PROMPT_SHOWN,    /* drawn: the next key in `keys` answers it */
  PROMPT_WITHDRAW, /* timed out or cancelled: to be erased */
} prompt_state;

struct shk_sandbox_prompt {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int wake[2];       /* ask and cancel wake the relay; nonblocking */
  bool active;       /* a relay owns a terminal and can draw */
  prompt_state state;
  char *text, *keys;
  int withdraw;      /* -ETIMEDOUT or -ECANCELED, for PROMPT_WITHDRAW */
  int result;        /* the answer of the ask that ended last */
  unsigned long asked, answered; /* asks started, and ended */
};

int shk_sandbox_prompt_new(shk_sandbox_prompt **out, shk_error *err)
{
  shk_sandbox_prompt *p = shk__calloc(1, sizeof *p);
  if (!p)
    return shk__error_set(err, -ENOMEM, "out of memory");
  if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    int e = errno;
    free(p);
    return shk__error_set(err, -e, "a pipe for the prompt: %s", strerror(e));
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = p;
  return 0;
}

void shk_sandbox_prompt_free(shk_sandbox_prompt *p)
{
  if (!p)
    return;
  close(p->wake[0]);
  close(p->wake[1]);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->text);
  free(p->keys);
  free(p);
}

static void prompt_wake(shk_sandbox_prompt *p)
{
  char c = 1;
  (void)!write(p->wake[1], &c, 1);
}

static void deadline_after(struct timespec *ts, int ms)
{
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

int shk_sandbox_prompt_ask(shk_sandbox_prompt *p, const char *text, const char *keys,
                           int timeout_ms)
{
  if (!text || !keys || !*keys)
    return -EINVAL;
  char *t = shk__strdup(text), *k = shk__strdup(keys);
  if (!t || !k) {
    free(t);
    free(k);
    return -ENOMEM;
  }
  struct timespec deadline;
  deadline_after(&deadline, timeout_ms > 0 ? timeout_ms : 0);
  pthread_mutex_lock(&p->mu);
  /* One prompt at a time: a second one waits for the first. */
  int r = 0;
  while (p->active && p->state != PROMPT_IDLE && r != ETIMEDOUT)
    r = timeout_ms > 0 ? pthread_cond_timedwait(&p->cv, &p->mu, &deadline)
                       : pthread_cond_wait(&p->cv, &p->mu);
  if (!p->active || p->state != PROMPT_IDLE) {
    pthread_mutex_unlock(&p->mu);
    free(t);
    free(k);
    return p->active ? -ETIMEDOUT : -ENOTTY;
  }
  free(p->text);
  free(p->keys);
  p->text = t;
  p->keys = k;
  p->state = PROMPT_PENDING;
  unsigned long mine = ++p->asked;
  prompt_wake(p);
  r = 0;
  while (p->answered < mine) {
    r = timeout_ms > 0 ? pthread_cond_timedwait(&p->cv, &p->mu, &deadline)
                       : pthread_cond_wait(&p->cv, &p->mu);
    if (r == ETIMEDOUT) {
      /* The relay erases it and ends this ask. */
      if (p->state == PROMPT_PENDING || p->state == PROMPT_SHOWN) {
        p->state = PROMPT_WITHDRAW;
        p->withdraw = -ETIMEDOUT;
        prompt_wake(p);
      }
      timeout_ms = 0;
    }
  }
  int result = p->result;
  pthread_mutex_unlock(&p->mu);
  return result;
}

void shk_sandbox_prompt_cancel(shk_sandbox_prompt *p)
{
  pthread_mutex_lock(&p->mu);
  if (p->state == PROMPT_PENDING || p->state == PROMPT_SHOWN) {
    p->state = PROMPT_WITHDRAW;
    p->withdraw = -ECANCELED;
    prompt_wake(p);
  }
  pthread_mutex_unlock(&p->mu);
}

/* The relay's side, with p->mu held: the ask in progress ends with RESULT. */
static void prompt_end(shk_sandbox_prompt *p, int result)
{
  p->state = PROMPT_IDLE;
  p->result = result;
  p->answered = p->asked;
  pthread_cond_broadcast(&p->cv);
}

/* ---- streams ---- */

enum { MOVE_SPLICE, MOVE_COPY, MOVE_SEND };
enum { S_IN, S_OUT, S_ERR, S_N };

typedef struct stream {
  int src, dst;
  bool close_src, close_dst; /* the relay's own ends, closed when the stream ends */
  int how;
  bool want_out;  /* waiting for dst to take more */
  bool done;
  bool terminal;  /* src is the caller's terminal in cooked mode: read in the foreground only */
  bool src_nb;    /* reading src never waits: it is read until it is empty, otherwise
                   * once for each time poll finds it readable */
  char *buf;      /* MOVE_COPY and MOVE_SEND: bytes read, not yet written */
  size_t off, len;
} stream;

struct shk__relay {
  stream s[S_N];
  bool pty;
  int master;             /* pty mode: the pseudo-terminal's master, nonblocking */
  int tty;                /* pty mode: the caller's terminal (its stdin) */
  struct termios saved;   /* its settings before the run */
  bool raw;               /* they were changed */
  int child[S_N];         /* what the sandbox gets as 0, 1 and 2 */
  shk_sandbox_prompt *prompt;
  int sig[2];             /* SIGWINCH and SIGCONT wake the loop */
  bool handlers;
  struct sigaction old_winch, old_cont;
  int map[S_N + 2];       /* which stream each polled descriptor is; -1 the signals, -2 the prompt */
  bool shown;             /* a prompt is on the screen */
  unsigned shown_rows;    /* how many rows it takes, at the bottom */
  struct timespec shown_at;
};

static int relay_sig_fd = -1;

static void on_signal(int sig)
{
  int e = errno;
  char c = sig == SIGCONT ? 'c' : 'w';
  if (relay_sig_fd >= 0)
    (void)!write(relay_sig_fd, &c, 1);
  errno = e;
}

/* FD moved above stderr (so that the child's dup2 onto 0, 1 and 2 cannot
 * overwrite one of them), close-on-exec. */
static int high_fd(int fd)
{
  if (fd < 0 || fd > 2)
    return fd;
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int e = errno;
  close(fd);
  errno = e;
  return h;
}

static int set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* A pipe: the sandbox's end blocking (as a program's stdio is), the
 * relay's nonblocking. FOR_READ: the sandbox reads (its stdin). */
static int make_pipe(bool for_read, int *child, int *ours)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return -errno;
  if ((p[0] = high_fd(p[0])) < 0 || (p[1] = high_fd(p[1])) < 0) {
    int e = errno;
    if (p[0] >= 0)
      close(p[0]);
    if (p[1] >= 0)
      close(p[1]);
    return -e;
  }
  *child = for_read ? p[0] : p[1];
  *ours = for_read ? p[1] : p[0];
  int r = set_nonblock(*ours);
  if (r < 0) {
    close(p[0]);
    close(p[1]);
  }
  return r;
}

static bool fd_open(int fd)
{
  return fcntl(fd, F_GETFD) >= 0;
}

/* How bytes reach DST, from a pipe: splice where it cannot block the loop
 * (another pipe, with SPLICE_F_NONBLOCK; a regular file), send() without
 * waiting to a socket (splice would wait on a blocking socket), and
 * read/write otherwise. */
static int how_to(int dst)
{
  struct stat st;
  if (fstat(dst, &st) < 0)
    return MOVE_COPY;
  if (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
    return MOVE_SPLICE;
  if (S_ISSOCK(st.st_mode))
    return MOVE_SEND;
  return MOVE_COPY;
}

/* Whether the caller's stdin can be read until empty without waiting: a
 * regular file always can; a pipe or a socket can with splice's
 * SPLICE_F_NONBLOCK (pipes) or its own nonblocking receive (sockets); a
 * terminal or another device cannot. A relay that falls back to read(2)
 * on a pipe reads it once per poll, which is the same. */
static bool reads_without_waiting(int fd)
{
  struct stat st;
  return fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

static void stream_end(stream *s)
{
  if (s->close_src && s->src >= 0)
    close(s->src);
  if (s->close_dst && s->dst >= 0)
    close(s->dst);
  s->src = s->dst = -1;
  s->close_src = s->close_dst = false;
  s->done = true;
  s->len = s->off = 0;
}

/* Moves what is there from S->src to S->dst without waiting for either. A
 * source at its end ends the stream (for stdin: the sandbox then reads its
 * end); a destination that refuses more ends it too (for stdout: the
 * workload's next write gets EPIPE, as it would writing to the caller's
 * closed pipe itself). */
static void stream_move(stream *s)
{
  for (int rounds = 0; rounds < 16 && !s->done; rounds++) {
    if (s->how == MOVE_SPLICE) {
      ssize_t n = splice(s->src, NULL, s->dst, NULL, SPLICE_MAX, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
      if (n > 0) {
        s->want_out = false;
        if (!s->src_nb)
          return;
        continue;
      }
      if (n == 0) {
        stream_end(s);
        return;
      }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN) {
        /* The source was readable (this runs on POLLIN), so the
         * destination is full; when it was writable, the source is empty. */
        s->want_out = !s->want_out;
        return;
      }
      if (errno == EINVAL || errno == ENOSYS) {
        /* A file in append mode, or a descriptor splice does not serve. */
        s->how = MOVE_COPY;
        continue;
      }
      stream_end(s);
      return;
    }
    if (!s->buf && !(s->buf = malloc(COPY_BUF))) {
      stream_end(s);
      return;
    }
    if (s->len == 0) {
      ssize_t n = read(s->src, s->buf, COPY_BUF);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN) {
        s->want_out = false;
        return;
      }
      if (n <= 0) { /* the end, or EIO: a pseudo-terminal's last slave closed */
        stream_end(s);
        return;
      }
      s->off = 0;
      s->len = (size_t)n;
    }
    ssize_t w = s->how == MOVE_SEND
                    ? send(s->dst, s->buf + s->off, s->len - s->off, MSG_DONTWAIT | MSG_NOSIGNAL)
                    : write(s->dst, s->buf + s->off, s->len - s->off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN) {
      s->want_out = true;
      return;
    }
    if (w < 0 && s->how == MOVE_SEND && errno == ENOTSOCK) {
      s->how = MOVE_COPY;
      continue;
    }
    if (w <= 0) {
      stream_end(s);
      return;
    }
    s->off += (size_t)w;
    if (s->off == s->len)
      s->off = s->len = 0;
    s->want_out = s->len > 0;
    if (!s->want_out && !s->src_nb)
      return;
  }
}

/* ---- the pseudo-terminal ---- */

/* Safe because the master never enters the sandbox: it is opened here, on
 * the host's /dev/ptmx, and only the slave is given to bwrap as the
 * workload's stdin and stdout. The alternative, stage 2 opening the
 * sandbox's own /dev/ptmx and passing the master out, would have the
 * launcher use (ioctl, read, write) a descriptor the sandbox chose, and the
 * master would exist, if briefly, in a process of the sandbox. The slave
 * inside is the workload's own terminal: what it sets there (echo off, raw
 * mode, TIOCSTI, which seccomp refuses anyway) concerns only itself. */
static int open_pty(shk__relay *r, const struct termios *tio, const struct winsize *ws)
{
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0)
    return -errno;
  if ((m = high_fd(m)) < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
    int e = errno;
    if (m >= 0)
      close(m);
    return -e;
  }
  int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0) {
    char name[64];
    if (ptsname_r(m, name, sizeof name) == 0)
      s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  }
  if (s < 0 || (s = high_fd(s)) < 0) {
    int e = errno;
    close(m);
    return -e;
  }
  /* The workload's terminal starts as the caller's was: the same erase and
   * interrupt keys, the same size. */
  (void)tcsetattr(s, TCSANOW, tio);
  (void)ioctl(s, TIOCSWINSZ, ws);
  if (set_nonblock(m) < 0) {
    int e = errno;
    close(m);
    close(s);
    return -e;
  }
  r->master = m;
  r->child[S_IN] = r->child[S_OUT] = s;
  return 0;
}

static void write_all(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
      struct pollfd pf = { fd, POLLOUT, 0 };
      (void)poll(&pf, 1, 100);
      continue;
    }
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

/* The caller's terminal in raw mode: every key goes to the pseudo-
 * terminal, whose own line discipline then makes Ctrl-C a SIGINT, Ctrl-Z
 * a SIGTSTP for the workload's foreground job, and so on. */
static void enter_raw(shk__relay *r)
{
  struct termios raw = r->saved;
  cfmakeraw(&raw);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(r->tty, TCSADRAIN, &raw) == 0)
    r->raw = true;
}

/* Restores the caller's terminal, from the foreground or the background:
 * SIGTTOU would otherwise stop the launcher that is trying to put things
 * back. */
static void leave_raw(shk__relay *r)
{
  if (!r->raw)
    return;
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &old);
  (void)tcsetattr(r->tty, TCSADRAIN, &r->saved);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  r->raw = false;
}

static void sync_size(shk__relay *r)
{
  struct winsize ws;
  if (ioctl(r->tty, TIOCGWINSZ, &ws) == 0)
    (void)ioctl(r->master, TIOCSWINSZ, &ws);
}

/* ---- drawing a prompt ---- */

/* Appends TEXT's line L (0-based) to B, control characters replaced, at
 * most COLS columns (a UTF-8 continuation byte takes none). Returns false
 * when TEXT has no such line. */
static bool card_line(shk__buf *b, const char *text, unsigned l, unsigned cols)
{
  const char *p = text;
  for (unsigned i = 0; i < l; i++) {
    p = strchr(p, '\n');
    if (!p)
      return false;
    p++;
  }
  unsigned col = 0;
  for (; *p && *p != '\n'; p++) {
    unsigned char c = (unsigned char)*p;
    bool cont = (c & 0xc0) == 0x80;
    if (!cont && col >= cols)
      break;
    char out = c < 0x20 || c == 0x7f ? '?' : (char)c;
    shk__buf_put(b, &out, 1);
    col += !cont;
  }
  for (; col < cols; col++)
    shk__buf_put(b, " ", 1);
  return true;
}

static unsigned card_lines(const char *text)
{
  unsigned n = 1;
  for (const char *p = text; *p; p++)
    n += *p == '\n';
  return n;
}

/* Draws the prompt over the bottom rows of the caller's terminal. First
 * it cancels whatever escape sequence the workload's output may have left
 * open (CAN, then ST), then saves the cursor with its attributes and
 * character set (DECSC), leaves origin mode so that the rows are the
 * screen's, and writes each line in reverse video. */
static void card_draw(shk__relay *r, const char *text)
{
  struct winsize ws = { 24, 80, 0, 0 };
  (void)ioctl(r->tty, TIOCGWINSZ, &ws);
  unsigned rows = ws.ws_row ? ws.ws_row : 24, cols = ws.ws_col ? ws.ws_col : 80;
  unsigned n = card_lines(text);
  if (n > rows)
    n = rows;
  shk__buf b = { 0 };
  shk__buf_puts(&b, "\030\033\\\0337\033[?6l\033(B\017");
  for (unsigned i = 0; i < n; i++) {
    shk__buf_printf(&b, "\033[%u;1H\033[0;7m", rows - n + 1 + i);
    card_line(&b, text, i, cols);
  }
  shk__buf_puts(&b, "\033[0m");
  char *s = shk__buf_take(&b);
  if (s) {
    write_all(STDOUT_FILENO, s, strlen(s));
    free(s);
  }
  r->shown_rows = n;
}

/* Erases the prompt's rows, puts the cursor and attributes back (DECRC),
 * and lets the workload redraw what was under it: a change of the
 * pseudo-terminal's size and back makes a full-screen program or a shell's
 * line editor repaint. */
static void card_erase(shk__relay *r)
{
  struct winsize ws = { 24, 80, 0, 0 };
  (void)ioctl(r->tty, TIOCGWINSZ, &ws);
  unsigned rows = ws.ws_row ? ws.ws_row : 24;
  shk__buf b = { 0 };
  for (unsigned i = 0; i < r->shown_rows && i < rows; i++)
    shk__buf_printf(&b, "\033[%u;1H\033[0m\033[2K", rows - i);
  shk__buf_puts(&b, "\0338");
  char *s = shk__buf_take(&b);
  if (s) {
    write_all(STDOUT_FILENO, s, strlen(s));
    free(s);
  }
  r->shown = false;
  struct winsize nudge = ws;
  nudge.ws_row = ws.ws_row > 1 ? ws.ws_row - 1 : ws.ws_row + 1;
  (void)ioctl(r->master, TIOCSWINSZ, &nudge);
  sync_size(r);
}

static long ms_since(const struct timespec *t)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* The prompt's state changed, or the screen did: draw, redraw or erase. */
static void prompt_update(shk__relay *r, bool resized)
{
  shk_sandbox_prompt *p = r->prompt;
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  if (p->state == PROMPT_PENDING && r->s[S_OUT].len == 0) {
    card_draw(r, p->text);
    r->shown = true;
    clock_gettime(CLOCK_MONOTONIC, &r->shown_at);
    p->state = PROMPT_SHOWN;
  } else if (p->state == PROMPT_SHOWN && resized) {
    card_draw(r, p->text);
  } else if (p->state == PROMPT_WITHDRAW) {
    if (r->shown)
      card_erase(r);
    prompt_end(p, p->withdraw);
  }
  pthread_mutex_unlock(&p->mu);
}

/* Keys while a prompt shows: one key alone in a read answers it when it is
 * one of the prompt's, once the prompt has been on the screen long enough
 * to be seen. Nothing of it reaches the workload: a paste, a mouse report
 * or an escape sequence arrives as several bytes at once and is dropped. */
static void prompt_key(shk__relay *r)
{
  char buf[256];
  ssize_t n = read(r->tty, buf, sizeof buf);
  if (n <= 0)
    return;
  shk_sandbox_prompt *p = r->prompt;
  pthread_mutex_lock(&p->mu);
  if (p->state == PROMPT_SHOWN && n == 1 && buf[0] && strchr(p->keys, buf[0]) &&
      ms_since(&r->shown_at) >= PROMPT_ARM_MS) {
    card_erase(r);
    prompt_end(p, (unsigned char)buf[0]);
  }
  pthread_mutex_unlock(&p->mu);
}

static bool prompt_showing(shk__relay *r)
{
  if (!r->prompt)
    return false;
  pthread_mutex_lock(&r->prompt->mu);
  bool on = r->prompt->state == PROMPT_SHOWN;
  pthread_mutex_unlock(&r->prompt->mu);
  return on;
}

/* ---- the relay ---- */

int shk__relay_open(shk__relay **out, const shk_sandbox_io *io, shk_error *err)
{
  *out = NULL;
  shk__relay *r = shk__calloc(1, sizeof *r);
  if (!r)
    return shk__error_set(err, -ENOMEM, "out of memory");
  r->master = r->tty = -1;
  r->sig[0] = r->sig[1] = -1;
  for (int i = 0; i < S_N; i++) {
    r->s[i] = (stream){ .src = -1, .dst = -1 };
    r->child[i] = -1;
  }
  r->prompt = io ? io->prompt : NULL;
  struct termios tio;
  struct winsize ws;
  bool want_pty = (!io || io->stdio == SHK_SANDBOX_STDIO_AUTO) && isatty(STDIN_FILENO) &&
                  isatty(STDOUT_FILENO) && tcgetattr(STDIN_FILENO, &tio) == 0 &&
                  ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0;
  int e = 0;
  if (want_pty && (e = open_pty(r, &tio, &ws)) == 0) {
    r->pty = true;
    r->tty = STDIN_FILENO;
    r->saved = tio;
    r->s[S_IN] = (stream){ .src = STDIN_FILENO, .dst = r->master, .how = MOVE_COPY };
    r->s[S_OUT] = (stream){ .src = r->master, .dst = STDOUT_FILENO, .how = MOVE_COPY,
                            .src_nb = true };
    if (pipe2(r->sig, O_CLOEXEC | O_NONBLOCK) < 0) {
      e = -errno;
      goto fail;
    }
  } else if (want_pty) {
    goto fail;
  } else {
    /* stdin: the caller's, relayed into a pipe the sandbox reads. */
    int ours;
    if ((e = make_pipe(true, &r->child[S_IN], &ours)) < 0)
      goto fail;
    r->s[S_IN] = (stream){ .src = fd_open(STDIN_FILENO) ? STDIN_FILENO : -1, .dst = ours,
                           .close_dst = true, .how = MOVE_SPLICE,
                           .terminal = isatty(STDIN_FILENO),
                           .src_nb = reads_without_waiting(STDIN_FILENO) };
    if ((e = make_pipe(false, &r->child[S_OUT], &ours)) < 0)
      goto fail;
    r->s[S_OUT] = (stream){ .src = ours, .dst = fd_open(STDOUT_FILENO) ? STDOUT_FILENO : -1,
                            .close_src = true, .how = how_to(STDOUT_FILENO), .src_nb = true };
  }
  /* stderr: the pseudo-terminal too when it is the caller's terminal, a
   * pipe otherwise. */
  if (r->pty && isatty(STDERR_FILENO)) {
    r->child[S_ERR] = r->child[S_OUT];
    r->s[S_ERR].done = true;
  } else {
    int ours;
    if ((e = make_pipe(false, &r->child[S_ERR], &ours)) < 0)
      goto fail;
    r->s[S_ERR] = (stream){ .src = ours, .dst = fd_open(STDERR_FILENO) ? STDERR_FILENO : -1,
                            .close_src = true, .how = how_to(STDERR_FILENO), .src_nb = true };
  }
  /* A caller without stdin gives the sandbox an empty one; without stdout
   * or stderr, a pipe nobody reads (writes fail with EPIPE). */
  for (int i = 0; i < S_N; i++)
    if (!r->s[i].done && (r->s[i].src < 0 || r->s[i].dst < 0))
      stream_end(&r->s[i]);
  *out = r;
  return 0;
fail:
  shk__relay_close(r);
  return shk__error_set(err, e ? e : -EIO, "the workload's %s: %s",
                        want_pty ? "pseudo-terminal" : "stdio pipes", strerror(e ? -e : EIO));
}

const int *shk__relay_child_fds(const shk__relay *r)
{
  return r->child;
}

bool shk__relay_is_pty(const shk__relay *r)
{
  return r && r->pty;
}

void shk__relay_started(shk__relay *r)
{
  /* The sandbox has its ends; the launcher keeps none, so that the
   * workload's exit is the end of each stream. */
  int closed = -1;
  for (int i = 0; i < S_N; i++) {
    if (r->child[i] >= 0 && r->child[i] != closed)
      close(r->child[i]);
    closed = r->child[i];
    r->child[i] = -1;
  }
  if (!r->pty)
    return;
  relay_sig_fd = r->sig[1];
  struct sigaction sa = { .sa_handler = on_signal };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &sa, &r->old_winch);
  sigaction(SIGCONT, &sa, &r->old_cont);
  r->handlers = true;
  enter_raw(r);
  if (r->prompt) {
    pthread_mutex_lock(&r->prompt->mu);
    r->prompt->active = true;
    pthread_mutex_unlock(&r->prompt->mu);
  }
}

size_t shk__relay_fds(shk__relay *r, struct pollfd *fds, bool gone, int *timeout)
{
  size_t n = 0;
  *timeout = -1;
  if (!r)
    return 0;
  bool held = r->pty && prompt_showing(r);
  for (int i = 0; i < S_N; i++) {
    stream *s = &r->s[i];
    if (s->done || (i == S_IN && gone))
      continue;
    /* While a prompt shows, the workload's output waits in its terminal
     * (and then the workload waits on its writes): nothing it draws can
     * cover the prompt. */
    if (i == S_OUT && held)
      continue;
    /* And the caller's keys go to the prompt. */
    if (i == S_IN && held) {
      fds[n] = (struct pollfd){ r->tty, POLLIN, 0 };
    } else if (s->want_out || s->len > 0) {
      fds[n] = (struct pollfd){ s->dst, POLLOUT, 0 };
    } else {
      if (s->terminal && tcgetpgrp(s->src) != getpgrp()) {
        *timeout = BACKGROUND_RECHECK_MS;
        continue;
      }
      fds[n] = (struct pollfd){ s->src, POLLIN, 0 };
    }
    r->map[n++] = i;
  }
  if (r->pty) {
    fds[n] = (struct pollfd){ r->sig[0], POLLIN, 0 };
    r->map[n++] = -1;
    if (r->prompt) {
      fds[n] = (struct pollfd){ r->prompt->wake[0], POLLIN, 0 };
      r->map[n++] = -2;
    }
  }
  return n;
}

void shk__relay_handle(shk__relay *r, const struct pollfd *fds, size_t n)
{
  if (!r)
    return;
  bool resized = false;
  bool held = r->pty && prompt_showing(r);
  for (size_t k = 0; k < n; k++) {
    if (!fds[k].revents)
      continue;
    char drain[64];
    if (r->map[k] == -1) {
      ssize_t got;
      bool cont = false;
      while ((got = read(r->sig[0], drain, sizeof drain)) > 0)
        cont |= memchr(drain, 'c', (size_t)got) != NULL;
      /* After something stopped the launcher, a shell may have reset the
       * terminal meanwhile. */
      if (cont)
        enter_raw(r);
      sync_size(r);
      resized = true;
      continue;
    }
    if (r->map[k] == -2) {
      while (read(r->prompt->wake[0], drain, sizeof drain) > 0) {
      }
      continue;
    }
    stream *s = &r->s[r->map[k]];
    if (r->map[k] == S_IN && held) {
      prompt_key(r);
      continue;
    }
    stream_move(s);
  }
  if (r->pty && r->prompt)
    prompt_update(r, resized);
}

bool shk__relay_drained(const shk__relay *r)
{
  return !r || (r->s[S_OUT].done && r->s[S_ERR].done);
}

void shk__relay_close(shk__relay *r)
{
  if (!r)
    return;
  if (r->prompt) {
    pthread_mutex_lock(&r->prompt->mu);
    if (r->shown)
      card_erase(r);
    r->prompt->active = false;
    if (r->prompt->state != PROMPT_IDLE)
      prompt_end(r->prompt, -ENOTTY);
    pthread_cond_broadcast(&r->prompt->cv);
    pthread_mutex_unlock(&r->prompt->mu);
  }
  leave_raw(r);
  if (r->handlers) {
    sigaction(SIGWINCH, &r->old_winch, NULL);
    sigaction(SIGCONT, &r->old_cont, NULL);
    relay_sig_fd = -1;
  }
  for (int i = 0; i < S_N; i++) {
    stream_end(&r->s[i]);
    free(r->s[i].buf);
  }
  int closed = -1;
  for (int i = 0; i < S_N; i++) {
    if (r->child[i] >= 0 && r->child[i] != closed)
      close(r->child[i]);
    closed = r->child[i];
  }
  if (r->master >= 0)
    close(r->master);
  for (int i = 0; i < 2; i++)
    if (r->sig[i] >= 0)
      close(r->sig[i]);
  free(r);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/common. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

static void read_file_reads_everything(void **state)
{
  (void)state;
  char path[] = "/tmp/shk-test-common-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  char big[10000];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (char)('a' + i % 26);
  assert_int_equal(write(fd, big, sizeof big), (ssize_t)sizeof big);
  close(fd);
  char *buf = NULL;
  size_t len = 0;
  assert_int_equal(shk__read_file(path, &buf, &len), 0);
  assert_int_equal(len, sizeof big);
  assert_memory_equal(buf, big, sizeof big);
  assert_int_equal(buf[len], '\0');
  free(buf);
  unlink(path);
}

static void read_file_reports_errors(void **state)
{
  (void)state;
  char *buf = NULL;
  assert_int_equal(shk__read_file("/nonexistent/shinken", &buf, NULL), -ENOENT);
  assert_int_equal(shk__read_file("/", &buf, NULL), -EISDIR);
  assert_null(buf);
}

static void asprintf_formats(void **state)
{
  (void)state;
  char *s = shk__asprintf("%s-%d", "a", 42);
  assert_string_equal(s, "a-42");
  free(s);
  /* Longer than any fixed buffer inside. */
  char big[1000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  s = shk__asprintf("<%s>", big);
  assert_int_equal(strlen(s), sizeof big + 1);
  free(s);
}

static void allocators_refuse_overflow(void **state)
{
  (void)state;
  assert_null(shk__calloc(SIZE_MAX / 2, 4));
  void *p = shk__malloc(8);
  assert_non_null(p);
  assert_null(shk__reallocarray(p, SIZE_MAX / 2, 4));
  /* A failed reallocarray leaves p alone. */
  p = shk__reallocarray(p, 16, 4);
  assert_non_null(p);
  free(p);
  /* A size of zero is one byte, never NULL. */
  p = shk__malloc(0);
  assert_non_null(p);
  free(p);
  char *s = shk__strndup("abcdef", 3);
  assert_string_equal(s, "abc");
  free(s);
}

static void buf_appends(void **state)
{
  (void)state;
  shk__buf b = { 0 };
  char *s = shk__buf_take(&b);
  assert_string_equal(s, ""); /* nothing appended is still a text */
  free(s);
  assert_int_equal(shk__buf_puts(&b, "a"), 0);
  assert_int_equal(shk__buf_put(&b, "bcd", 2), 0);
  char big[600];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(shk__buf_printf(&b, "-%d-%s", 7, big), 0);
  s = shk__buf_take(&b);
  assert_int_equal(strlen(s), 3 + 3 + sizeof big - 1);
  assert_memory_equal(s, "abc-7-zz", 8);
  free(s);
  assert_null(b.p);
}

/* With fault injection built in, a failed append marks the buffer, later
 * appends do nothing, and take gives NULL; without it, the case skips. */
static void buf_remembers_failure(void **state)
{
  (void)state;
  if (!shk__fault_enabled())
    skip();
  shk__buf b = { 0 };
  assert_int_equal(shk__buf_puts(&b, "kept"), 0);
  shk__fault_arm(1, false);
  assert_int_equal(shk__buf_printf(&b, "%0300d", 1), -ENOMEM);
  assert_true(shk__fault_hit());
  shk__fault_arm(0, false);
  assert_true(b.failed);
  assert_string_equal(b.p, "kept"); /* the text is as it was */
  assert_int_equal(shk__buf_puts(&b, "more"), -ENOMEM);
  assert_null(shk__buf_take(&b));
  assert_null(b.p);
}

static void fault_counts_and_fails(void **state)
{
  (void)state;
  if (!shk__fault_enabled())
    skip();
  shk__fault_arm(3, false);
  void *a = shk__malloc(1), *b = shk__strdup("x"), *c = shk__malloc(1), *d = shk__malloc(1);
  assert_non_null(a);
  assert_non_null(b);
  assert_null(c); /* only the third */
  assert_non_null(d);
  assert_int_equal(shk__fault_allocs(), 4);
  free(a);
  free(b);
  free(d);
  shk__fault_arm(2, true);
  a = shk__malloc(1);
  assert_non_null(a);
  assert_null(shk__malloc(1)); /* the second, and every one after */
  assert_null(shk__calloc(1, 1));
  assert_null(shk__asprintf("%d", 1));
  shk__fault_arm(0, false);
  assert_false(shk__fault_hit());
  b = shk__malloc(1);
  assert_non_null(b);
  free(a);
  free(b);
}

static void errors_fill_the_detail(void **state)
{
  (void)state;
  shk_error e;
  memset(&e, 'x', sizeof e);
  assert_int_equal(shk__error_set(&e, -EINVAL, "bad %s", "thing"), -EINVAL);
  assert_string_equal(e.message, "bad thing");
  assert_string_equal(e.file, "");
  assert_int_equal(e.line, 0);
  assert_int_equal(shk__error_at(&e, -EINVAL, "f.cedar", 3, 4, "here"), -EINVAL);
  assert_string_equal(e.file, "f.cedar");
  assert_int_equal(e.line, 3);
  assert_int_equal(e.column, 4);
  assert_int_equal(shk__error_nomem(&e), -ENOMEM);
  assert_string_equal(e.message, "out of memory");
  assert_int_equal(shk__error_set(NULL, -ENOENT, "ignored"), -ENOENT);
  assert_string_equal(shk_strerror(-ENOMEM), "out of memory");
  assert_string_equal(shk_strerror(EACCES), "refused");
  assert_string_equal(shk_version(), SHK_VERSION);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(read_file_reads_everything),
    cmocka_unit_test(read_file_reports_errors),
    cmocka_unit_test(asprintf_formats),
    cmocka_unit_test(allocators_refuse_overflow),
    cmocka_unit_test(buf_appends),
    cmocka_unit_test(buf_remembers_failure),
    cmocka_unit_test(fault_counts_and_fails),
    cmocka_unit_test(errors_fill_the_detail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

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

static void xasprintf_formats(void **state)
{
  (void)state;
  char *s = shk__xasprintf("%s-%d", "a", 42);
  assert_string_equal(s, "a-42");
  free(s);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(read_file_reads_everything),
    cmocka_unit_test(read_file_reports_errors),
    cmocka_unit_test(xasprintf_formats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

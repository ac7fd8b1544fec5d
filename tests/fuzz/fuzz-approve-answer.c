/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the reviewer's answer, the one text from outside that
 * the Ask loop parses, and the cleaner every reason goes through. Besides
 * not crashing: a refused answer is always "escalate" with no reason (it
 * can never approve), an accepted one is one of the three decisions, and a
 * cleaned text is valid UTF-8 with no control character, no bidirectional
 * override, and cleaning it again changes nothing. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "approve/approve-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_clean(const char *s)
{
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; p[i];) {
    unsigned c = p[i];
    if (c < 0x20 || c == 0x7f || c == 0xc0 || c == 0xc1 || c > 0xf4)
      abort();
    size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (c >= 0x80 && c < 0xc0)
      abort();
    unsigned v = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; k++) {
      if ((p[i + k] & 0xc0) != 0x80)
        abort();
      v = (v << 6) | (p[i + k] & 0x3f);
    }
    if ((v >= 0x80 && v < 0xa0) || (v >= 0x202a && v <= 0x202e) || (v >= 0x2066 && v <= 0x2069) ||
        v == 0x2028 || v == 0x2029 || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
      abort();
    i += len;
  }
  char again[512];
  shk__approve_clean_text(s, again, sizeof again);
  if (strcmp(again, s))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  shk__review_answer a;
  shk_error err;
  int r = shk__approve_parse_answer((const char *)data, size, &a, &err);
  if (r) {
    if (r != -EINVAL || a.decision != SHK__REVIEW_ESCALATE || a.reason[0] || !err.message[0])
      abort();
  } else if (a.decision != SHK__REVIEW_APPROVE && a.decision != SHK__REVIEW_DENY &&
             a.decision != SHK__REVIEW_ESCALATE) {
    abort();
  }
  if (memchr(a.reason, '\0', sizeof a.reason) == NULL)
    abort();
  check_clean(a.reason);

  char *text = malloc(size + 1), out[512];
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  shk__approve_clean_text(text, out, sizeof out);
  check_clean(out);
  free(text);
  return 0;
}

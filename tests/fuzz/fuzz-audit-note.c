/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the signed-note and checkpoint parser and the key
 * parser, which read what `shinken audit verify --checkpoint` and `--key`
 * are given. Besides not crashing: a note that parses as a checkpoint
 * formats back to exactly its signed text, and a key that parses formats
 * back to a key that parses to the same key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *s = (const char *)data;
  shk__checkpoint cp;
  shk_error err;
  if (shk__checkpoint_open(s, size, NULL, &cp, &err) == 0) {
    /* Without extension lines the text is exactly origin, size, root. */
    shk__abuf text = { 0 };
    if (shk__checkpoint_text(cp.origin, cp.size, cp.root, &text) < 0)
      abort();
    if (text.len < cp.text_len ? memcmp(text.p, s, text.len) != 0
                               : text.len != cp.text_len || memcmp(text.p, s, text.len) != 0)
      abort();
    shk__abuf_free(&text);
  }
  shk__note_key k, k2;
  if (shk__note_key_parse(s, size, &k, &err) == 0) {
    char *v = NULL;
    if (shk__note_key_verifier(&k, &v) < 0)
      abort();
    if (shk__note_key_parse(v, strlen(v), &k2, &err) != 0 || k2.id != k.id ||
        memcmp(k2.pub, k.pub, 32) || strcmp(k2.name, k.name))
      abort();
    free(v);
    /* A note signed by this key (when it is a signing key) opens with it. */
    if (k.has_seed && size < 200) {
      shk__abuf note = { 0 };
      static const char text[] = "o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
      if (shk__note_sign(&k, text, sizeof text - 1, &note, &err) == 0 &&
          shk__checkpoint_open(note.p, note.len, &k, &cp, &err) != 0)
        abort();
      shk__abuf_free(&note);
    }
  }
  return 0;
}

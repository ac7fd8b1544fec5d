/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of the formatter (format.c) and the policy JSON
 * writer and reader (est.c). Text goes to a shk__buf (src/common/common.h),
 * which records running out of memory for the caller to check once. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "cedar/cedar-internal.h"
#include "common/common.h"

/* A Cedar string literal; in a pattern a literal '*' is written \*. */
void shk__buf_quote(shk__buf *b, const char *s, size_t n, bool pattern);
void shk__buf_uid(shk__buf *b, shk__uid u);

/* Builders of jansson trees that pass running out of memory up: each
 * returns its container, or frees the container and V and returns NULL
 * (also when the container or V is NULL already). Push appends V to the
 * array A; put sets key K (N bytes, not checked) of the object O to V. */
struct json_t;
struct json_t *shk__json_push(struct json_t *a, struct json_t *v);
struct json_t *shk__json_put(struct json_t *o, const char *k, size_t n, struct json_t *v);

/* The tree as indented JSON text in its own order (malloc'd), or NULL when
 * ROOT is NULL or out of memory. */
char *shk__json_dumps(const struct json_t *root);

/* One policy as Cedar text, ending with ";\n". */
void shk__format_policy(shk__buf *b, const shk__policy *p);

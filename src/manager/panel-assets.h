/* SPDX-License-Identifier: Apache-2.0 */
/* The Permission Panel's page (src/panel/), embedded at build time. */
#pragma once

#include <stddef.h>

typedef struct shk__panel_asset {
  const char *path;          /* the URL path it is served at */
  const char *type;          /* its Content-Type */
  const unsigned char *data;
  const size_t *size;
} shk__panel_asset;

/* The asset served at `path`, or NULL. */
const shk__panel_asset *shk__panel_asset_find(const char *path);

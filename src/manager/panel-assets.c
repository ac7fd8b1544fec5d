/* SPDX-License-Identifier: Apache-2.0 */
/* The table of the panel's embedded files: every one is named here and
 * built from src/panel/ (src/manager/meson.build), so a missing file fails
 * the build. Nothing is read from disk at run time. */
#include <string.h>

#include "manager/panel-assets.h"

extern const unsigned char shk__panel_html[], shk__panel_js[], shk__panel_css[];
extern const size_t shk__panel_html_size, shk__panel_js_size, shk__panel_css_size;

#define HTML "text/html; charset=utf-8"
static const shk__panel_asset assets[] = {
  { "/", HTML, shk__panel_html, &shk__panel_html_size },
  { "/login", HTML, shk__panel_html, &shk__panel_html_size },
  { "/panel.js", "text/javascript; charset=utf-8", shk__panel_js, &shk__panel_js_size },
  { "/panel.css", "text/css; charset=utf-8", shk__panel_css, &shk__panel_css_size },
};

const shk__panel_asset *shk__panel_asset_find(const char *path)
{
  for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++)
    if (!strcmp(assets[i].path, path))
      return &assets[i];
  return NULL;
}

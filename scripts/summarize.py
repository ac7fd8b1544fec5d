#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Reads meson's testlog.json files and prints the closing line of the
test command: 'N passed, N failed' (and the skips, if any, named above it)."""
import json
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        print(f"summarize: cannot read {path}: {e}", file=sys.stderr)
        failed += 1
        continue
    for line in lines:
        t = json.loads(line)
        r = t.get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
            print(f"skipped: {t['name']}")
        else:
            failed += 1
            print(f"failed: {t['name']} ({r})")
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)

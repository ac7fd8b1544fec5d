# SPDX-License-Identifier: Apache-2.0
"""What every Python test shares with tests/lib.sh: how it skips and fails.

A test imports it with its own directory's parent on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from lib import fail, skip
"""

import os
import sys


def skip(why):
    """A missing kernel feature or tool: exit 77, which meson counts as a
    skip, except under SHINKEN_MUST_WORK=1 (CI), where it is a failure."""
    if os.environ.get("SHINKEN_MUST_WORK") == "1":
        print("FAIL (SHINKEN_MUST_WORK=1, would skip): " + why, file=sys.stderr)
        sys.exit(1)
    print("SKIP: " + why, file=sys.stderr)
    sys.exit(77)


def fail(why):
    print("FAIL: " + why, file=sys.stderr)
    sys.exit(1)


def scratch(prefix):
    """A new directory for one test, outside /tmp and /var/tmp, which the
    sandbox replaces with its own: under /var/lib/shinken-tests when it can
    be made there, else /var/tmp."""
    import tempfile
    base = "/var/lib/shinken-tests"
    try:
        os.makedirs(base, exist_ok=True)
        os.chmod(base, 0o755)
    except OSError:
        base = "/var/tmp"
    return tempfile.mkdtemp(prefix=prefix, dir=base)

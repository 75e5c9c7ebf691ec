"""Playwright's sync API for the benchmarks that drive Chromium (bench/pages.py, bench/screenshots.py),
imported where they need it: the console's install (README) leaves Playwright out, as only these
two and the browser tests use it (the ``bench`` extra brings it), so where it is missing the
benchmark stops with the command that installs it instead of a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sys.exit(
        f"bench/{Path(sys.argv[0]).name} drives /usr/bin/chromium with Playwright, which the console's install "
        "leaves out: .venv/bin/pip install -e '.[bench]' (no browser download: it uses Debian's)"
    )

__all__ = ["sync_playwright"]

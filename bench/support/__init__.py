"""What the benchmarks and the test suite both use, from the console's own install (no pytest, no
Playwright at import): bench scripts run from ``pip install -e .`` as the README sets it up, and
the tests import these same modules rather than keep copies.

- ``packages``: Real trainer packages (sdists and wheels) built on the fly.
- ``waiting``: Waiting on a condition with a timeout, never sleeping and hoping.
- ``images``: Container images made on the spot from Debian's busybox-static.
- ``saved_models``: The script that saves the model files the prediction tests and benchmarks serve.
- ``harness``: A real ``aiconsole up`` and Debian's Chromium.
- ``trainers``: Trainer packages the browser tests and the screenshots run, and their first jobs.
- ``cluster``: A scaled-mode installation (web and workers on PostgreSQL and Redis) on this host.
- ``needs_playwright``: Playwright's sync API, or an exit naming its install command where it is missing.
"""

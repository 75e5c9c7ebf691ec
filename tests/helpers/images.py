"""The container engine the container tests need: a test without one fails in CI and skips
elsewhere. The images themselves are made by bench/support/images.py, which the benchmarks share."""

from __future__ import annotations

import os

import pytest

from bench.support.images import busybox


def require_engine():
    """The engine the console found; a test without one fails in CI and skips elsewhere."""
    from jobs.containers import engine as engines

    engine = engines.current()
    # Found once per test worker, as once per console process: finding it runs podman version and
    # podman info (a quarter of a second of CPU, podman's package queries included). Looked for
    # again only where it was missing or its containers.conf has gone with another test's data dir.
    if not isinstance(engine, engines.Engine) or (engine.conf is not None and not engine.conf.is_file()):
        engines.current.cache_clear()
        engine = engines.current()
    missing = None
    if not isinstance(engine, engines.Engine):
        missing = engine.reason
    elif busybox() is None:
        missing = "busybox-static is not installed (apt install busybox-static)"
    if missing:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI runs the container tests: {missing}")
        pytest.skip(missing)
    return engine

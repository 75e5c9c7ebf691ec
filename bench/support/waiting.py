"""Waiting on a condition with a timeout, never sleeping and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    predicate: Callable[[], object], timeout: float = 60.0, interval: float = 0.05, message: str = "condition"
) -> object:
    """Poll until the predicate returns something truthy; fail with a message on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {message}")
        time.sleep(interval)

"""What only the tests add to bench/support/cluster.py: a scratch PostgreSQL database and Redis
database per test module, skipped where the services are missing (failed in CI)."""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager

import pytest
import redis

from bench.support.cluster import drop_database, scratch_database, service_up


@contextmanager
def scratch_services():
    """A new PostgreSQL database and a flushed Redis database for one test module: (their URLs).
    Without PostgreSQL or Redis the module skips, except in CI (``CI=true``), where it fails."""
    for name, port in (("PostgreSQL", 5432), ("Redis", 6379)):
        problem = service_up("127.0.0.1", port)
        if problem:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{name} must be running at 127.0.0.1:{port} in CI: {problem}")
            pytest.skip(f"no {name} at 127.0.0.1:{port}: {problem}")
    database_url, admin = scratch_database()
    redis_url = f"redis://127.0.0.1:6379/{10 + uuid.uuid4().int % 6}"
    redis.Redis.from_url(redis_url).flushdb()
    try:
        yield database_url, redis_url
    finally:
        redis.Redis.from_url(redis_url).flushdb()
        drop_database(database_url, admin)

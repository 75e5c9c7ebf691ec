"""Helpers for the core's tests: bearer headers, a job owned by the admin, audit look-ups."""

from __future__ import annotations

import pytest

from tests.helpers.jobs import submit


@pytest.fixture
def job(project, admin):
    return submit(project, "shared_job", admin)

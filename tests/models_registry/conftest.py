"""The registry's tests: model serving fixtures come from tests/fixtures/serving.py."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_prewarming(settings):
    """Tests start serving environments when they deploy, never behind a test's back."""
    settings.MODEL_PREWARM = False

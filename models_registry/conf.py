"""The model registry's settings, by meaning: every value is read once, in ``console.settings``
(``AICONSOLE_MODEL_*``, ``AICONSOLE_BATCH_MAX_WORKERS``), like every other setting; these
functions only name them, and tests override them there (``settings.MODEL_IDLE_SECONDS = 1``).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings


def idle_seconds() -> float:
    """How long a version with autoScaling.minNodes 0 keeps its serving processes after the last
    request."""
    return float(settings.MODEL_IDLE_SECONDS)


def max_nodes() -> int:
    """Serving processes one version may run on this machine."""
    return int(settings.MODEL_MAX_NODES)


def max_request_bytes() -> int:
    return int(settings.MODEL_MAX_REQUEST_BYTES)


def predict_timeout() -> float:
    """Longest a serving process may take to answer one request before it is stopped."""
    return float(settings.MODEL_PREDICT_TIMEOUT)


def load_timeout() -> float:
    """Longest a new serving process may take to load its model."""
    return float(settings.MODEL_LOAD_TIMEOUT)


def max_files() -> int:
    """Files a deploymentUri may hold (the original's limit)."""
    return int(settings.MODEL_MAX_FILES)


def max_model_bytes() -> int:
    return int(settings.MODEL_MAX_BYTES)


def batch_max_workers() -> int:
    """Serving processes one batch prediction job may run here, whatever maxWorkerCount says."""
    return int(settings.BATCH_MAX_WORKERS)


def models_dir() -> Path:
    """Where deployed versions' files are kept."""
    return Path(settings.MODELS_DIR)


def prewarm() -> bool:
    """Start a runtime's serving environment ahead of need (a model created, the console started)."""
    return bool(settings.MODEL_PREWARM)

"""The model registry's settings, read when used so tests can override them.

Each comes from ``django.conf.settings`` when set there (``settings.MODEL_IDLE_SECONDS = 1`` in a
test), else from its environment variable, else the embedded default. Malformed values fail
loudly through the same typed readers as ``aiconsole.settings``.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from aiconsole.settings import env_bool, env_float, env_int

# 1.5 MB, the original's online prediction request limit.
DEFAULT_MAX_REQUEST_BYTES = 1_572_864


def _setting(name: str, reader, env_name: str, default, **kwargs):
    value = getattr(settings, name, None)
    if value is not None:
        return value
    return reader(env_name, default, **kwargs)


def idle_seconds() -> float:
    """How long a version with autoScaling.minNodes 0 keeps its serving processes after the last
    request."""
    return float(_setting("MODEL_IDLE_SECONDS", env_float, "AICONSOLE_MODEL_IDLE_SECONDS", 180.0))


def max_nodes() -> int:
    """Serving processes one version may run on this machine."""
    return int(_setting("MODEL_MAX_NODES", env_int, "AICONSOLE_MODEL_MAX_NODES", 4, minimum=1))


def max_request_bytes() -> int:
    return int(_setting("MODEL_MAX_REQUEST_BYTES", env_int, "AICONSOLE_MODEL_MAX_REQUEST_BYTES",
                        DEFAULT_MAX_REQUEST_BYTES, minimum=1024))


def predict_timeout() -> float:
    """Longest a serving process may take to answer one request before it is stopped."""
    return float(_setting("MODEL_PREDICT_TIMEOUT", env_float, "AICONSOLE_MODEL_PREDICT_TIMEOUT", 60.0))


def load_timeout() -> float:
    """Longest a new serving process may take to load its model."""
    return float(_setting("MODEL_LOAD_TIMEOUT", env_float, "AICONSOLE_MODEL_LOAD_TIMEOUT", 300.0))


def max_files() -> int:
    """Files a deploymentUri may hold (the original's limit)."""
    return int(_setting("MODEL_MAX_FILES", env_int, "AICONSOLE_MODEL_MAX_FILES", 1000, minimum=1))


def max_model_bytes() -> int:
    return int(_setting("MODEL_MAX_BYTES", env_int, "AICONSOLE_MODEL_MAX_BYTES", 2 * 1024**3, minimum=1024))


def batch_max_workers() -> int:
    """Serving processes one batch prediction job may run here, whatever maxWorkerCount says."""
    return int(_setting("BATCH_MAX_WORKERS", env_int, "AICONSOLE_BATCH_MAX_WORKERS", 2, minimum=1))


def models_dir() -> Path:
    """Where deployed versions' files are kept."""
    configured = getattr(settings, "MODELS_DIR", None)
    return Path(configured) if configured else settings.DATA_DIR / "models"


def prewarm() -> bool:
    """Start a runtime's serving environment ahead of need (a model created, the console started)."""
    return bool(_setting("MODEL_PREWARM", env_bool, "AICONSOLE_MODEL_PREWARM", True))

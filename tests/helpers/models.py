"""Deployed versions for the prediction tests (the saved model files: bench/support/saved_models.py)."""

from __future__ import annotations

from bench.support.waiting import wait_for


def wait_version(version, states=("READY", "FAILED"), timeout: float = 120):
    from models_registry.models import Version

    wait_for(
        lambda: Version.objects.get(pk=version.pk).state in states,
        timeout,
        message=f"version {version.name} to reach {states}",
    )
    version.refresh_from_db()
    return version


def deploy(model, name: str, uri: str, actor, **fields):
    """Create a version and wait for its operation to finish; returns (version, operation)."""
    from models_registry import services
    from models_registry.models import Operation, Version

    operation = services.create_version(model, {"name": name, "deploymentUri": uri, **fields}, actor=actor)
    wait_for(lambda: Operation.objects.get(pk=operation.pk).done, 120, message=f"the operation creating {name}")
    operation.refresh_from_db()
    version = Version.objects.get(model=model, name=name)
    return version, operation

"""The kinds of job, registered by the apps that run them (``AppConfig.ready``).

A job is training (plain, tuned, or a built-in algorithm) or batch prediction. ``jobs`` runs the
training kinds; ``models_registry`` registers batch prediction and the model-serving work the
executor's process hosts. So ``jobs`` never imports the apps built on it: the executor, the
submit service and the scaled-mode coordinator ask this registry what a job needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobKind:
    name: str  # "batch prediction", as the console says it
    # Whether a job body's inputs (``trainingInput``, ``predictionInput``) are this kind's.
    matches: Callable[[dict | None, dict | None], bool]
    # What submitting checks beyond the v1 schema: ``check(input, project=, actor=)``, raising a ServiceError.
    check: Callable[..., None]
    # Replicas the job holds at once, whole on one host (a tuning job: a set per parallel trial).
    replicas: Callable[[object], int]
    # The runner class the executor runs the job with; imported the first time it is needed.
    runner: Callable[[], type]
    # The input the kind reads: "trainingInput" or "predictionInput".
    input_field: str = "trainingInput"


@dataclass
class BackgroundService:
    """Work the executor's process hosts beside the jobs (model serving): started with it, stopped with it."""

    name: str
    start: Callable[[], None]
    stop: Callable[[], None]


@dataclass
class _Registry:
    kinds: list[JobKind] = field(default_factory=list)
    services: list[BackgroundService] = field(default_factory=list)
    # Why a SUCCEEDED training job offers no "Deploy as model version" (None: it does); set by models_registry.
    deploy_problem: Callable[[object], str | None] | None = None


_registry = _Registry()


def register(kind: JobKind) -> None:
    """Add a kind; earlier registrations are asked first, so the narrowest kinds register first."""
    if any(existing.name == kind.name for existing in _registry.kinds):
        return  # AppConfig.ready can run twice in one process (tests)
    _registry.kinds.append(kind)


def register_service(service: BackgroundService) -> None:
    if all(existing.name != service.name for existing in _registry.services):
        _registry.services.append(service)


def register_deploy_problem(check: Callable[[object], str | None]) -> None:
    _registry.deploy_problem = check


def of(training_input: dict | None, prediction_input: dict | None) -> JobKind:
    for kind in _registry.kinds:
        if kind.matches(training_input, prediction_input):
            return kind
    raise LookupError("No job kind takes this job: is the app that runs it in INSTALLED_APPS?")


def of_job(job) -> JobKind:
    return of(job.training_input, job.prediction_input)


def services() -> list[BackgroundService]:
    return list(_registry.services)


def deploy_problem(job) -> str | None:
    """Why this job has nothing to deploy as a model version; a reason too when no app deploys models."""
    if _registry.deploy_problem is None:
        return "Model deployment is not installed in this console."
    return _registry.deploy_problem(job)

"""The kinds of job, registered by the apps that run them (``AppConfig.ready``).

A job is training (plain, tuned, or a built-in algorithm) or batch prediction. ``jobs`` runs the
training kinds; ``models_registry`` registers batch prediction and the model-serving work the
executor's process hosts. So ``jobs`` never imports the apps built on it: the executor, the
submit service and the scaled-mode coordinator ask this registry what a job needs, and the job
page asks it for the kind's own sections (``JobPage``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("aiconsole.jobs")


@dataclass(frozen=True)
class PageSection:
    """One tab of a job's page, drawn by the feature that knows it (the trial table by tuning, the
    prediction input by batch prediction): ``template`` is included in the page with the page's
    context plus ``context``; its panel carries ``data-tab="<key>"`` and the id ``anchor``."""

    key: str  # "trials": the tab and its panel
    title: str  # "Trials", the tab's label
    template: str
    anchor: str  # the id of the panel's element, what "#trials" in a link opens
    context: dict = field(default_factory=dict)


@dataclass(frozen=True)
class JobPage:
    """What a kind of job shows on the job page besides what every job shows (state, logs,
    replicas, outputs): ``sections(request, job)`` gives its sections in tab order, the last being
    its input (shown after every job's own) unless ``input_last`` is False (a batch prediction's one
    section is its input and its results: first); ``fragment(request, job, part)`` answers the
    refreshes those sections make, one URL each (``fragments/<part>/``; None: not one of this kind's parts)."""

    sections: Callable[..., list[PageSection]]
    # The section a job that ended opens on, ``finished_opens_on(job)`` (a study's trials, a training
    # job's metrics when it reported any); None: its log, as a job that runs opens on.
    finished_opens_on: Callable[[object], str | None] = lambda job: None
    # The section a RUNNING job opens on (a study's trials); None: its log.
    running_opens_on: Callable[[object], str | None] = lambda job: None
    fragment: Callable[..., object] = lambda request, job, part: None
    # The log's replica choices this kind's jobs can have beyond their replicas' rows (the
    # planned ones, before they start): ``log_tasks(job)``.
    log_tasks: Callable[[object], list[str]] = lambda job: []
    input_last: bool = True
    # What colours the lines of its metric charts (``jobs.metrics.curves.Study``: a study's trials
    # by their objective), ``curve_study(job)``; None: plain colours.
    curve_study: Callable[[object], Any] = lambda job: None


@dataclass(frozen=True)
class JobKind:
    name: str  # "batch prediction", as the console says it
    # Whether a job body's inputs (``trainingInput``, ``predictionInput``) are this kind's.
    matches: Callable[[dict | None, dict | None], bool]
    # What submitting checks beyond the v1 schema: ``check(input, project=, actor=)``, raising a ServiceError.
    check: Callable[..., None]
    # The replicas the job holds at once (``catalogue.ReplicaPlan``s; a tuning job: a set per
    # parallel trial, batch prediction: its serving processes), what admission counts.
    plans: Callable[[object], list]
    # The runner class the executor runs the job with; imported the first time it is needed.
    runner: Callable[[], type]
    # The input the kind reads: "trainingInput" or "predictionInput".
    input_field: str = "trainingInput"
    # The folder its outputs are under (``outputs(job)``: a training job's jobDir), for the console's
    # outputs browser; None when it has none.
    outputs: Callable[[Any], str | None] = lambda job: (job.training_input or {}).get("jobDir")
    # Its own sections of the job page; imported the first time a page is drawn (the pages' code
    # is not wanted in the processes that only run jobs).
    page: Callable[[], JobPage] | None = None
    # Its ``trainingOutput`` as the v1 API shows it (a built-in algorithm's adds its own fields).
    training_output: Callable[[Any], dict] = lambda job: dict(job.training_output or {})


@dataclass
class BackgroundService:
    """Long-running work an app adds to a console process (model serving, in the process that
    answers predictions): started and stopped with it by ``start_services``/``stop_services``."""

    name: str
    start: Callable[[], None]
    stop: Callable[[], None]


@dataclass
class _Registry:
    kinds: list[JobKind] = field(default_factory=list)
    services: list[BackgroundService] = field(default_factory=list)
    # The submission rules each feature adds to the one validator (jobs.validation) and to the one submit
    # check (jobs.services): ``rule(training_input, path) -> violations``, pure, with the v1 schema;
    # ``check(training_input, project=) -> violations``, what needs the project (its storage, images).
    training_rules: list[Callable[[dict, str], list]] = field(default_factory=list)
    submission_checks: list[Callable[..., list]] = field(default_factory=list)
    # Why a SUCCEEDED training job offers no "Deploy as model version" (None: it does); set by models_registry.
    deploy_problem: Callable[[object], str | None] | None = None
    # What an upper app does once a job has SUCCEEDED (models_registry uploads a Vertex training
    # pipeline's model): ``hook(job)``, run by the job's runner after the state is written.
    success_hooks: list[Callable[[object], None]] = field(default_factory=list)
    # What an upper app adds to a job's ``trainingOutput`` as the API shows it (web access adds the
    # shells' ``webAccessUris`` while they are open): ``add(job, output)`` changes ``output`` in place.
    output_additions: list[Callable[[Any, dict], None]] = field(default_factory=list)


_registry = _Registry()


def register(kind: JobKind) -> None:
    """Add a kind; earlier registrations are asked first, so the narrowest kinds register first."""
    if any(existing.name == kind.name for existing in _registry.kinds):
        return  # AppConfig.ready can run twice in one process (tests)
    _registry.kinds.append(kind)


def register_training_rule(rule: Callable[[dict, str], list]) -> None:
    """A feature's own rules for a TrainingInput (a built-in algorithm's image, args, machines)."""
    if rule not in _registry.training_rules:
        _registry.training_rules.append(rule)


def training_rules() -> list[Callable[[dict, str], list]]:
    return list(_registry.training_rules)


def register_submission_check(check: Callable[..., list]) -> None:
    """A feature's own checks at submit, with the project (a container's images, a built-in
    algorithm's data files)."""
    if check not in _registry.submission_checks:
        _registry.submission_checks.append(check)


def submission_checks() -> list[Callable[..., list]]:
    return list(_registry.submission_checks)


def register_service(service: BackgroundService) -> None:
    if all(existing.name != service.name for existing in _registry.services):
        _registry.services.append(service)


def register_deploy_problem(check: Callable[[object], str | None]) -> None:
    _registry.deploy_problem = check


def register_output_addition(add: Callable[[Any, dict], None]) -> None:
    if add not in _registry.output_additions:
        _registry.output_additions.append(add)


def output_additions() -> list[Callable[[Any, dict], None]]:
    return list(_registry.output_additions)


def register_success_hook(hook: Callable[[object], None]) -> None:
    if hook not in _registry.success_hooks:
        _registry.success_hooks.append(hook)


def job_succeeded(job) -> None:
    """Run what the apps do after a job succeeded; one that fails is logged, the rest still run."""
    for hook in _registry.success_hooks:
        try:
            hook(job)
        except Exception:
            logger.exception("After %s succeeded, %s failed", job, getattr(hook, "__name__", hook))


def of(training_input: dict | None, prediction_input: dict | None) -> JobKind:
    for kind in _registry.kinds:
        if kind.matches(training_input, prediction_input):
            return kind
    raise LookupError("No job kind takes this job: is the app that runs it in INSTALLED_APPS?")


def of_job(job) -> JobKind:
    return of(job.training_input, job.prediction_input)


def start_services() -> None:
    """Start every registered background service; one that fails is logged, the rest still start."""
    for service in _registry.services:
        try:
            service.start()
        except Exception:
            logger.exception("%s did not start", service.name.capitalize())


def stop_services() -> None:
    for service in reversed(_registry.services):
        try:
            service.stop()
        except Exception:
            logger.exception("%s did not stop cleanly", service.name.capitalize())


def deploy_problem(job) -> str | None:
    """Why this job has nothing to deploy as a model version; a reason too when no app deploys models."""
    if _registry.deploy_problem is None:
        return "Model deployment is not installed in this console."
    return _registry.deploy_problem(job)

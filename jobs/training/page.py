"""The job page's sections of a training job (``jobs.kinds.JobPage``): Metrics and Training input.

The facts a user reads about how the job ran are stated here once, in one way: the scale tier
(``BASIC`` when the job names none, as the v1 default), the runtime and the Python it ran on (from
the job's log once its environment is ready, else what it will run), and, for a job that asks for
GPUs, whether this host gave it any.
"""

from __future__ import annotations

import json
import shlex

from algorithms import definitions as algos
from jobs import catalogue, kinds, runtimes, services
from jobs.logs import stream as logstream
from jobs.models import MetricSource
from jobs.templatetags import job_format
from jobs.training import equivalent
from jobs.validation import roles
from jobs.vertex import equivalent as vertex_equivalent


def plans(job) -> list:
    """The replicas the job's input describes (none for an input an older release stored that no
    longer reads as one)."""
    try:
        return catalogue.replica_plan(job.training_input or {})
    except Exception:  # a job stored by an older release must still render
        return []


def log_tasks(job) -> list[str]:
    """The replicas the job has, before they start: the log's replica filter offers them."""
    return [catalogue.replica_label(plan.task_type, plan.index) for plan in plans(job)]


def ran_on(job) -> dict:
    """Which runtime, Python and build the job ran on, once its environment was ready (its log's
    build line), and what it asked for: ``{"python": "3.11.7", "variant": "cpu", "gpus": "1 ×
    NVIDIA_TESLA_T4 per replica", "gpu_missing": True}``. A container job names its own images."""
    training_input = job.training_input or {}
    asked = [plan for plan in plans(job) if plan.accelerator_count and "TPU" not in (plan.accelerator_type or "")]
    gpus = ", ".join(sorted({f"{p.accelerator_count} × {p.accelerator_type}" for p in asked}))
    built = runtimes.parse_build(logstream.build_line(job.pk) or "") if job.state != "QUEUED" else None
    return {
        **(built or {}),
        "gpus": gpus,
        "gpu_missing": bool(asked and built and built["variant"] == "cpu"),
        "container": bool((training_input.get("masterConfig") or {}).get("imageUri")),
    }


def training_summary(job) -> dict:
    training_input = job.training_input or {}
    job_plans = plans(job)
    # An uploaded package shows as the file the user gave, never as its path on this server.
    packages = [(services.uploaded_name(uri, job.project), uri) for uri in training_input.get("packageUris") or []]
    shown = {**training_input, "packageUris": [f"{name} (uploaded)" if name else uri for name, uri in packages]}
    try:
        runtime, _ = runtimes.resolve_pair(training_input.get("runtimeVersion"), training_input.get("pythonVersion"))
        python, python_note, _ = runtimes.python_choice(
            training_input.get("runtimeVersion"), training_input.get("pythonVersion")
        )
    except KeyError:  # a runtime this console no longer has: show what was asked
        runtime, python, python_note = None, training_input.get("pythonVersion") or "", ""
    return {
        "input": training_input,
        "scale_tier": job_format.scale_tier(training_input),
        # A built-in algorithm's image is the console's own: its page shows the algorithm instead.
        "container": None if algos.for_training_input(training_input) else container_summary(training_input, job_plans),
        "runtime": runtime.name if runtime else training_input.get("runtimeVersion") or "",
        "python": python,
        "python_note": python_note,
        "ran_on": ran_on(job),
        "packages": packages,
        "input_json": json.dumps(shown if packages else training_input, indent=2, sort_keys=True),
        "plans": [(catalogue.replica_label(p.task_type, p.index), p) for p in job_plans],
    }


def container_summary(training_input: dict, job_plans) -> dict | None:
    """A custom container job's images, commands and args per role (None for a package job): each
    role that runs, or names an image, with the master's image where it names none."""
    master = training_input.get("masterConfig") or {}
    if not master.get("imageUri"):
        return None
    tasks = {plan.task_type for plan in job_plans} | {"master"}
    shown = []
    for task, _type_key, _count_key, config_key, words in roles.ROLES:
        config = training_input.get(config_key) or {}
        if task in tasks or config.get("imageUri"):
            shown.append((words, config))
    return {
        "images": [
            (words, config.get("imageUri") or master["imageUri"], not config.get("imageUri")) for words, config in shown
        ],
        "commands": [(words, shlex.join(c["containerCommand"])) for words, c in shown if c.get("containerCommand")],
        "args": [(words, shlex.join(c["containerArgs"])) for words, c in shown if c.get("containerArgs")],
        "chief": bool(training_input.get("useChiefInTfConfig")),
    }


def input_section(job) -> kinds.PageSection:
    summary = training_summary(job)
    uploads = {uri: name for name, uri in summary["packages"] if name}
    preview = equivalent.build(job.project.project_id, job.job_id, job.training_input, job.labels, uploads)
    vertex = vertex_equivalent.for_job(job, uploads)  # a job created through the Vertex AI API
    return kinds.PageSection(
        "input",
        "Training input",
        "jobs/_training_input.html",
        "training-input",
        {"summary": summary, "preview": preview, "vertex": vertex},
    )


def metrics_section(tab: str = "metrics") -> kinds.PageSection:
    """The metric curves, loaded after the page (jobs.metrics.views); a study shows them under Charts."""
    return kinds.PageSection(tab, "Metrics", "jobs/_metrics_panel.html", "metrics-panel")


def sections(request, job) -> list[kinds.PageSection]:
    return [metrics_section(), input_section(job)]


def opens_on(job) -> str | None:
    """A finished job that reported metrics opens on them; one that reported none, on its log."""
    return "metrics" if job.metric_points.exclude(source=MetricSource.SYSTEM).exists() else None


def page() -> kinds.JobPage:
    return kinds.JobPage(sections=sections, log_tasks=log_tasks, finished_opens_on=opens_on)

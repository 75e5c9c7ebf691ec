"""The job page's sections of a built-in algorithm job (``jobs.kinds.JobPage``): its results (the
algorithm, the evaluation on each split, the data summary, Deploy), then a tuning job's sections
when it tunes, then a training job's; and the refresh of its results (``fragments/builtin/``)."""

from __future__ import annotations

from django.shortcuts import render

from aiconsole import iam
from jobs import kinds
from jobs.builtin import algorithm as builtin
from jobs.training import page as training
from jobs.tuning import page as tuning


def results_context(request, job) -> dict:
    """A built-in job's results: of the trial asked for, else of the best one so far."""
    trial = request.GET.get("trial") or (builtin.best_trial(job) if job.is_hyperparameter_job else "")
    return {
        "builtin": builtin.results(job, trial),
        "builtin_trial_asked": request.GET.get("trial", ""),
        "can_deploy": iam.can(request.user, "ml.models.create", job.project),
    }


def sections(request, job) -> list[kinds.PageSection]:
    results = kinds.PageSection(
        "results", "Results", "jobs/_builtin_results.html", "builtin-results", results_context(request, job)
    )
    if job.is_hyperparameter_job:
        return [results, *tuning.sections(request, job)]
    return [results, *training.sections(request, job)]


def fragment(request, job, part: str):
    if part == "builtin":
        context = {"project": job.project, "job": job, **results_context(request, job)}
        return render(request, "jobs/_builtin_results.html#builtin-results", context)
    return tuning.fragment(request, job, part) if job.is_hyperparameter_job else None


def page() -> kinds.JobPage:
    return kinds.JobPage(
        finished_opens_on=lambda job: "results", sections=sections, fragment=fragment, log_tasks=training.log_tasks
    )

"""The job page's sections of a tuning job (``jobs.kinds.JobPage``): the trial table and the study's
charts, then a training job's own (the metric curves under Charts), and the fragments they refresh
themselves with (``fragments/trials/``, ``fragments/charts/``, and ``fragments/chart-data/``: one
chart's data table, fetched when its Data is opened)."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from aiconsole import iam
from jobs import kinds
from jobs.metrics import curves
from jobs.training import page as training
from jobs.tuning import charts, kept, study
from jobs.tuning import table as trial_table


def trials_context(request, job) -> dict:
    """The study's trial table as the query string asks, its rows already drawn."""
    table = study.trial_table(job, request.GET)
    table["trial_files"] = bool(kinds.of_job(job).outputs(job))  # a job dir, the trials' folders under it
    table["trial_body"] = trial_table.body(
        table["trial_rows"],
        table["trial_shown"],
        job_id=job.job_id,
        best=table["best_trial_id"],
        goal=table["trial_goal"],
        failures=table["trial_failures"],
        files=table["trial_files"],
        within=table["within_noise"],
    )
    table["can_resume"] = job.is_terminal and iam.can(request.user, "ml.jobs.create", job.project)
    return table


def contour_choice(params) -> dict:
    """What the user picked for the charts: the pair of parameters of the contour plot, if any, and
    every trial's line in the parallel coordinates (``parallel=all``; a large study's are sampled)."""
    pair = (params.get("contour_x", ""), params.get("contour_y", ""))
    return {
        "contour_x": pair[0] if all(pair) else "",
        "contour_y": pair[1] if all(pair) else "",
        "parallel": "all" if params.get("parallel") == "all" else "",
    }


def study_charts(job, params) -> dict:
    """The study's charts (the contour for the chosen pair of parameters, if any), drawn; a finished
    study's kept once built (``kept``)."""
    spec = (job.training_input or {}).get("hyperparameters", {})
    choice = contour_choice(params)
    pair = (choice["contour_x"], choice["contour_y"])

    def build() -> list:
        return charts.tuning_charts(
            job.training_output,
            spec.get("goal"),
            spec,
            contour=pair if all(pair) else None,
            costs=study.trial_costs(job),
            times=study.report_times(job),
            every_line=bool(choice["parallel"]),
        )

    view = (choice["contour_x"], choice["contour_y"], choice["parallel"])
    return {"tuning_charts": kept.study_charts(job, view, build), **choice}


def chart_anchor(index: int, chart) -> str:
    """A chart's id on the page after ``chart-``: its key, else its place (the slices have none)."""
    return chart.key or str(index + 1)


def sections(request, job) -> list[kinds.PageSection]:
    # The charts follow the page (``fragments/charts/``): built while the browser shows the rest.
    # ``?charts=inline`` puts them in the page, for a browser without JavaScript.
    inline = request.GET.get("charts") == "inline"
    chart_context = study_charts(job, request.GET) if inline else contour_choice(request.GET)
    return [
        kinds.PageSection("trials", "Trials", "jobs/_trials.html", "trials", trials_context(request, job)),
        kinds.PageSection(
            "charts",
            "Charts",
            "jobs/_study_charts.html",
            "study-charts-section",
            {**chart_context, "charts_inline": inline},
        ),
        training.metrics_section("charts"),
        training.input_section(job),
    ]


def fragment(request, job, part: str):
    if part == "trials":
        context = {"project": job.project, "job": job, **trials_context(request, job)}
        # The address bar follows the table (sort, filters, columns), so a copied link shows it:
        # static/trials.js puts this address there (htmx's own HX-Replace-Url first snapshots the
        # whole page for its history cache, which cost a large study's re-sort half a second).
        page_path = reverse("jobs:detail", args=[job.project.project_id, job.job_id])
        context["trial_page_url"] = trial_table.page_url(page_path, request.GET, context["trial_query"])
        return render(request, "jobs/_trials.html#trial-table", context)
    if part == "charts":
        context = {"project": job.project, "job": job, **study_charts(job, request.GET)}
        return render(request, "jobs/_study_charts.html#study-charts", context)
    if part == "chart-data":  # one chart's data table, fetched when its Data is opened
        drawn = study_charts(job, request.GET)["tuning_charts"]
        wanted = request.GET.get("chart", "")
        table = next((c.table_html for i, c in enumerate(drawn) if chart_anchor(i, c) == wanted and c.rows), None)
        if table is None:
            raise Http404(f"{job.job_id} has no chart {wanted!r}.")
        return HttpResponse(table)
    return None


def curve_study(job) -> curves.Study | None:
    """A tuning job's trials' objectives, which colour their lines on the metric charts."""
    objectives = {
        t.trial_id: float(t.objective_value)
        for t in job.trials.only("trial_id", "final_metric")
        if t.objective_value is not None
    }
    maximize = study.goal(job) != "MINIMIZE"
    return curves.Study(objectives, maximize=maximize, metric=study.metric_tag(job))


def page() -> kinds.JobPage:
    return kinds.JobPage(
        finished_opens_on=lambda job: "trials",
        running_opens_on=lambda job: "trials",
        sections=sections,
        fragment=fragment,
        log_tasks=training.log_tasks,
        curve_study=curve_study,
    )

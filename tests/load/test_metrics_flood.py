"""A trainer that reports millions of metric points, in a hypertune file of hundreds of MB or in
event files: the console reads them in bounded steps, stores at most AICONSOLE_METRIC_POINTS_MAX
per job and says so in the job's log."""

from __future__ import annotations

import json
import textwrap

import hypertune
import pytest
from django.conf import settings

from jobs.metrics import points as metrics
from jobs.models import LogLine, MetricPoint
from tests.helpers.inputs import input_folder
from tests.helpers.jobs import submit
from tests.helpers.memory import PeakRss
from tests.helpers.metrics import write_event_file

# The console's whole-file reads took a 200 MB metric file to more than 1 GB.
BOUNDED_MB = 150


def append_reports(path, count: int, *, tag: str = "loss") -> None:
    """``count`` hypertune reports appended to one file, as a trainer may write them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        for start in range(0, count, 50_000):
            handle.write(
                "".join(
                    f'{{"timestamp": {1_700_000_000 + step / 1000}, "trial": "0", "global_step": "{step}", '
                    f'"{tag}": "{1 / (step + 1)}", "checkpoint_path": ""}}\n'
                    for step in range(start, min(count, start + 50_000))
                )
            )


def hypertune_file(folder, count: int) -> None:
    append_reports(folder / "output.metrics", count)


def events_job_dir(folder, count: int) -> None:
    write_event_file(folder / "train" / "events.out.tfevents.1700000000.host", count)


def stored(job, source: str) -> int:
    return MetricPoint.objects.filter(job=job, source=source).count()


@pytest.mark.slow
@pytest.mark.django_db
def test_a_hypertune_file_of_200_mb_costs_little_memory_and_the_points_past_the_limit_are_said(
    project, admin, settings
):
    settings.METRIC_POINTS_MAX = 100_000
    job = submit(project, "huge_hypertune", admin)
    work_dir = input_folder(settings.WORK_DIR / "project-a" / "huge_hypertune", hypertune_file, 1_500_000)
    metric_file = work_dir / "output.metrics"
    said = []

    with PeakRss() as peak:
        collector = metrics.Collector(job.pk, metric_file=metric_file, say=said.append)
        collector.poll()
        collector.poll(final=True)

    assert stored(job, "hypertune") == 100_000
    assert len(said) == 1 and "100,000 metric points" in said[0] and "AICONSOLE_METRIC_POINTS_MAX" in said[0]
    assert peak.growth_mb < BOUNDED_MB, f"{peak.growth_mb:.0f} MB more while reading a {1_500_000:,}-report file"
    first = MetricPoint.objects.filter(job=job).order_by("pk").values_list("step", flat=True)[:3]
    assert list(first) == [0, 1, 2]  # the first reports, in order: what is cut is the end


@pytest.mark.slow
@pytest.mark.django_db
def test_a_million_summary_scalars_cost_little_memory_and_the_points_past_the_limit_are_said(project, admin, settings):
    settings.METRIC_POINTS_MAX = 200_000
    job = submit(project, "huge_events", admin)
    job_dir = input_folder(settings.STORAGE_DIR / "job-dirs" / "project-a" / "huge_events", events_job_dir, 1_000_000)
    said = []

    with PeakRss() as peak:
        collector = metrics.Collector(job.pk, job_dir=str(job_dir), say=said.append)
        collector.poll(final=True)

    assert stored(job, "tfevents") == 200_000
    assert len(said) == 1 and "AICONSOLE_METRIC_POINTS_MAX" in said[0]
    assert peak.growth_mb < BOUNDED_MB, f"{peak.growth_mb:.0f} MB more while reading a million scalars"


@pytest.mark.django_db
def test_every_report_the_hypertune_library_writes_is_stored_once_however_often_it_rewrites_its_file(
    project, admin, tmp_path, monkeypatch
):
    """The library rewrites its whole file on each report, keeping the last 100: read on from
    where the last read stopped, each report is still stored exactly once."""
    job = submit(project, "library_reports", admin)
    metric_file = settings.WORK_DIR / "project-a" / "library_reports" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metric_file))
    reporter = hypertune.HyperTune()
    collector = metrics.Collector(job.pk, metric_file=metric_file)

    for step in range(1, 251):
        reporter.report_hyperparameter_tuning_metric("accuracy", step / 1000, global_step=step)
        if step % 7 == 0:
            collector.poll(final=True)
    collector.poll(final=True)

    steps = list(MetricPoint.objects.filter(job=job).order_by("pk").values_list("step", flat=True))
    assert steps == list(range(1, 251))


@pytest.mark.django_db
def test_a_line_too_long_to_be_a_report_is_skipped_and_the_reports_after_it_are_read(project, admin):
    job = submit(project, "long_report_line", admin)
    metric_file = settings.WORK_DIR / "project-a" / "long_report_line" / "output.metrics"
    append_reports(metric_file, 3)
    with metric_file.open("a") as handle:
        handle.write(json.dumps({"global_step": "99", "loss": "1.0", "pad": "x" * 10_000_000}) + "\n")
    append_reports(metric_file, 3, tag="accuracy")

    metrics.Collector(job.pk, metric_file=metric_file).poll(final=True)

    assert sorted(MetricPoint.objects.filter(job=job).values_list("tag", "step")) == [
        ("accuracy", 0),
        ("accuracy", 1),
        ("accuracy", 2),
        ("loss", 0),
        ("loss", 1),
        ("loss", 2),
    ]


# Appends reports flat out to the file cloudml-hypertune would write, then ends.
FLOODING_TRAINER = """
    path = os.environ["CLOUD_ML_HP_METRIC_FILE"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as handle:
        for step in range(150_000):
            point = {"timestamp": time.time(), "global_step": str(step), "loss": str(1 / (step + 1))}
            handle.write(json.dumps(point) + "\\n")
    print("reported", flush=True)
"""


@pytest.mark.executor
def test_a_job_reporting_past_the_limit_succeeds_with_the_limit_said_in_its_log(run_job, package_factory, settings):
    settings.METRIC_POINTS_MAX = 50_000
    job = run_job("metric_flood", package_factory(textwrap.dedent(FLOODING_TRAINER)))

    assert job.state == "SUCCEEDED", job.error_message
    # The trainer's own points: what the console sampled of its replica has a bound of its own.
    assert MetricPoint.objects.filter(job=job).exclude(source="system").count() == 50_000
    said = LogLine.objects.filter(job=job, task_name="service", message__contains="AICONSOLE_METRIC_POINTS_MAX")
    assert said.count() == 1 and "50,000 metric points" in said.get().message

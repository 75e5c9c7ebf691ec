"""The job page's Resources tab (jobs.metrics.views.job_resources): what the console sampled of
each replica, one chart per resource and one line per replica; the Metrics tab and its CSV keep
the job's own points."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.metrics import system
from jobs.models import MetricPoint
from tests.helpers.jobs import body


@pytest.fixture
def sampled_job(project, admin):
    job = services.submit_job(project, body("sampled"), actor=admin)
    for run in ("master-replica-0", "worker-replica-0"):
        for step in range(3):
            MetricPoint.objects.create(
                job=job, source="system", run=run, tag=system.MEMORY_USED, step=step, value=1e6 * step, wall_time=step
            )
    MetricPoint.objects.create(job=job, source="hypertune", tag="loss", step=1, value=0.5, wall_time=1)
    return job


def test_resources_panel_draws_one_line_per_replica_and_metrics_keeps_the_jobs_own(client, admin, sampled_job):
    client.force_login(admin)
    resources = client.get("/projects/project-a/jobs/sampled/resources/").content.decode()
    assert resources.count('data-tag="system/memory_bytes_used"') == 1 and "loss" not in resources
    assert "master-replica-0" in resources and "worker-replica-0" in resources
    metrics_panel = client.get("/projects/project-a/jobs/sampled/metrics/").content.decode()
    assert 'data-tag="loss"' in metrics_panel and "system/" not in metrics_panel


def test_metrics_csv_holds_the_jobs_own_points_and_the_resources_csv_the_sampled(client, admin, sampled_job):
    client.force_login(admin)

    def rows(query: str) -> list[str]:
        answer = client.get(f"/projects/project-a/jobs/sampled/metrics/download/{query}")
        return b"".join(answer.streaming_content).decode().splitlines()[1:]

    assert [row.split(",")[0] for row in rows("")] == ["loss"]
    assert {row.split(",")[-1] for row in rows("?source=system")} == {"master-replica-0", "worker-replica-0"}
    assert len(rows(f"?tag={system.MEMORY_USED}")) == 6


def test_outsider_gets_404_for_resources_and_viewer_reads_them(client, sampled_job, viewer, outsider):
    client.force_login(outsider)
    assert client.get("/projects/project-a/jobs/sampled/resources/").status_code == 404
    client.force_login(viewer)
    assert client.get("/projects/project-a/jobs/sampled/resources/").status_code == 200


def test_a_studys_resources_draw_its_running_trials_then_those_that_ended_last(client, project, admin):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.metrics.system import DRAWN_TRIALS as RESOURCE_TRIALS
    from jobs.models import JobState, Trial

    spec = {
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "score",
        "maxTrials": 20,
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
    }
    job = services.submit_job(project, body("sampled_study", hyperparameters=spec), actor=admin)
    start = timezone.now() - timedelta(hours=1)
    for number in range(1, 13):
        running = number in (3, 11)
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            state=JobState.RUNNING if running else JobState.SUCCEEDED,
            start_time=start,
            end_time=None if running else start + timedelta(minutes=number),
        )
        MetricPoint.objects.create(
            job=job, trial_id=str(number), source="system", run="master-replica-0", tag=system.MEMORY_USED,
            step=0, value=1e6, wall_time=number,
        )  # fmt: skip
    client.force_login(admin)
    resources = client.get("/projects/project-a/jobs/sampled_study/resources/").content.decode()
    drawn = {n for n in range(1, 13) if f"trial {n} · master-replica-0" in resources}
    # The two running, then the six that ended last (12, 10, 9, 8, 7, 6): eight lines, not twelve.
    assert RESOURCE_TRIALS == 8 and drawn == {3, 11, 12, 10, 9, 8, 7, 6}
    assert "trials 3, 11, 12, 10, 9, 8, 7, 6" in resources and "the CSV has every trial" in resources
    answer = client.get("/projects/project-a/jobs/sampled_study/metrics/download/?source=system")
    assert len(b"".join(answer.streaming_content).decode().splitlines()) == 1 + 12

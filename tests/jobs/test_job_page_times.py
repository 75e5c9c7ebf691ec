"""The job pages' numbers and times: significant digits with the
exact value on hover, the best trial marked, replicas by trial, durations, time zones, log dates
once per day, ML units that do not round to 0.0, and study panels that end in the fresh-load state."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs import runtimes, services
from jobs.models import Job, JobState, LogLine, MetricPoint, Replica, Trial
from jobs.templatetags.job_format import duration, ml_units, significant
from tests.helpers.jobs import body

SPEC = {
    "goal": "MINIMIZE",
    "maxTrials": 3,
    "hyperparameterMetricTag": "loss",
    "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1}],
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.00990744869641468, "0.009907"),
        (0.875, "0.875"),
        (3, "3"),
        ("7", "7"),
        (123456.789, "123457"),
        (1.23456789e-7, "1.235e-07"),
        ("relu", "relu"),
        (None, None),
        (-2.5, "-2.5"),
    ],
)
def test_significant_keeps_four_digits_and_leaves_categories_alone(value, expected):
    assert significant(value) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (None, "—"),
        (0.42, "0.4 s"),
        (42, "42 s"),
        (185, "3 min 05 s"),
        (3720, "1 h 02 min"),
        (2 * 86400 + 3 * 3600, "2 d 03 h"),
    ],
)
def test_duration_reads_as_a_person_would_say_it(seconds, expected):
    assert duration(seconds) == expected


@pytest.mark.parametrize(
    ("units", "expected"),
    [
        (0.0042, "0.0042"),
        (0.00011, "0.00011"),
        (4.6e-05, "0.000046"),
        (0.065, "0.065"),
        (0.0, "0.00"),
        (2.345, "2.35"),
        (None, "—"),
        (0.3878, "0.39"),
    ],
)
def test_small_ml_units_are_not_shown_as_zero(units, expected):
    assert ml_units(units) == expected


def test_job_durations_split_queued_running_and_total(project, admin):
    job = services.submit_job(project, body("timed"), actor=admin)
    created = timezone.now() - timedelta(seconds=100)
    Job.objects.filter(pk=job.pk).update(
        create_time=created,
        start_time=created + timedelta(seconds=30),
        end_time=created + timedelta(seconds=90),
        state=JobState.SUCCEEDED,
    )
    job.refresh_from_db()
    assert (job.queued_seconds, job.running_seconds, job.total_seconds) == (30.0, 60.0, 90.0)


def test_a_queued_jobs_durations_run_to_now_and_it_has_no_running_time(project, admin):
    job = services.submit_job(project, body("waiting"), actor=admin)
    assert job.running_seconds is None and job.queued_seconds >= 0 and job.total_seconds >= 0


@pytest.fixture
def study(project, admin):
    job = services.submit_job(project, body("study", hyperparameters=SPEC), actor=admin)
    now = timezone.now()
    for number, loss in [(1, 0.00990744869641468), (2, 0.5), (3, 0.0021)]:
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters={"lr": str(loss / 3)},
            state=JobState.SUCCEEDED,
            start_time=now,
            end_time=now,
            final_metric={"trainingStep": "5", "objectiveValue": loss},
        )
        Replica.objects.create(
            job=job,
            trial_id=str(number),
            task_type="master",
            task_index=0,
            label="master-replica-0",
            machine_type="n1-standard-4",
        )
    return job


def test_trial_values_are_rounded_with_the_exact_value_on_hover_and_the_best_is_marked(client, admin, study):
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/study/?trial_sort=number").content.decode()
    assert '<td class="number" title="0.00990744869641468">0.009907</td>' in html
    assert '<td class="number" title="0.0033024828988048936">0.003302</td>' in html  # the lr column
    best = re.search(r'<tr data-trial="(\d+)" id="trial-\d+" class="best-trial" aria-current="true">', html)
    assert best and best.group(1) == "3"  # MINIMIZE: the lowest loss
    assert html.count("★ Best") == 1 and 'Best: <a href="#trial-3">trial 3</a>.' in html


def test_the_replicas_table_says_which_trial_each_replica_ran(client, admin, study):
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/study/").content.decode()
    assert '<th scope="col">Trial</th><th scope="col">Replica</th>' in html
    assert re.findall(r'<tr data-replica-trial="(\d+)"><td>(\d+)</td><td>master-replica-0</td>', html) == [
        ("1", "1"),
        ("2", "2"),
        ("3", "3"),
    ]


def test_a_study_page_has_tabs_for_trials_charts_logs_and_input(client, admin, study):
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/study/").content.decode()
    tabs = [
        ("trials", "trials"),
        ("charts", "study-charts-section"),
        ("logs", "logs"),
        ("replicas", "replicas"),
        ("resources", "resources-panel"),  # its trials' use of the machine
        ("outputs", "outputs"),
        ("input", "training-input"),
    ]
    assert re.findall(r'<a href="#([\w-]+)" data-tab-for="(\w+)">', html) == [(t, n) for n, t in tabs]
    for name, target in tabs:
        assert f'id="{target}" data-tab="{name}"' in html
    assert 'data-tabs data-open="logs"' in html  # still QUEUED: it opens on its log


def test_a_finished_study_opens_on_its_trials_and_a_plain_job_on_its_metrics_or_log(client, project, admin, study):
    Job.objects.filter(pk=study.pk).update(state=JobState.SUCCEEDED)
    services.submit_job(project, body("plain"), actor=admin)
    Job.objects.filter(job_id="plain").update(state=JobState.SUCCEEDED)
    client.force_login(admin)
    assert 'data-open="trials"' in client.get("/projects/project-a/jobs/study/").content.decode()
    html = client.get("/projects/project-a/jobs/plain/").content.decode()
    assert 'data-open="logs"' in html
    assert re.findall(r'data-tab-for="(\w+)"', html) == ["metrics", "logs", "replicas", "resources", "outputs", "input"]
    plain = Job.objects.get(job_id="plain")
    MetricPoint.objects.create(
        job=plain, source="system", run="master-replica-0", tag="system/memory_bytes_used", step=0, value=1, wall_time=0
    )
    assert 'data-open="logs"' in client.get("/projects/project-a/jobs/plain/").content.decode()  # no result of its own
    MetricPoint.objects.create(job=plain, source="hypertune", tag="loss", step=1, value=0.5, wall_time=0)
    assert 'data-open="metrics"' in client.get("/projects/project-a/jobs/plain/").content.decode()
    Job.objects.filter(job_id="plain").update(state=JobState.RUNNING)
    assert 'data-open="logs"' in client.get("/projects/project-a/jobs/plain/").content.decode()


def test_a_study_opened_before_its_first_trial_ends_in_the_fresh_load_state(client, project, admin):
    """The trial summary lives in the polled fragment: the last poll, after the study ended,
    shows what a fresh load shows (never "No trials have started yet")."""
    job = services.submit_job(project, body("later", hyperparameters=SPEC), actor=admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/later/").content.decode()
    assert "No trials have started yet." in page and re.search(r'id="trial-table"[^>]*hx-get=', page)
    for number in (1, 2, 3):
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters={"lr": "0.01"},
            state=JobState.SUCCEEDED,
            final_metric={"trainingStep": "1", "objectiveValue": number},
        )
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, end_time=timezone.now(), start_time=timezone.now())
    fragment = client.get(
        "/projects/project-a/jobs/later/fragments/trials/?trial_sort=&trial_state=", HTTP_HX_REQUEST="true"
    ).content.decode()
    fresh = client.get("/projects/project-a/jobs/later/").content.decode()
    assert "hx-get" not in fragment.split(">", 1)[0]  # the last refresh: polling stops
    for html in (fragment, fresh):
        assert "No trials have started yet" not in html
        assert '<span data-count="completed">3</span> of 3 trials completed' in html
        assert 'data-trials="3" data-completed="3" data-best="1"' in html
    assert "Resume as new job" in fragment and "Resume as new job" in fresh


def test_the_job_page_shows_durations_the_time_zone_and_small_ml_units(client, project, admin):
    job = services.submit_job(project, body("short"), actor=admin)
    start = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
    Job.objects.filter(pk=job.pk).update(
        create_time=start,
        start_time=start + timedelta(seconds=5),
        end_time=start + timedelta(seconds=47),
        state=JobState.SUCCEEDED,
        training_output={"consumedMLUnits": 0.0042},
    )
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/short/").content.decode()
    assert "2024-03-01 12:00:00 UTC" in html
    assert "queued 5.0 s</span> · <span>running 42 s</span> · <span>total 47 s</span>" in html
    assert '<dd title="0.0042">0.0042</dd>' in html
    listing = client.get("/projects/project-a/jobs/").content.decode()
    assert re.search(r'<th scope="col"[^>]*>Queued<', listing)
    assert re.search(r'<th scope="col"[^>]*>(<a [^>]*>)?Running<', listing)
    assert "<td data-queued>5.0 s</td>" in listing and "<td data-duration>42 s</td>" in listing


def test_log_rows_show_the_date_once_per_day(client, project, admin):
    job = services.submit_job(project, body("overnight"), actor=admin)
    start = datetime(2024, 3, 1, 23, 59, 58, tzinfo=UTC)
    for n in range(4):
        LogLine.objects.create(
            job=job,
            task_name="master-replica-0",
            seq=n + 1,
            stream="stdout",
            severity="INFO",
            message=f"line {n}",
            time=start + timedelta(seconds=n),
        )
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/overnight/").content.decode()
    times = re.findall(r'<time datetime="2024-03-0[12]T[^"]+">([^<]+)</time>', html)
    assert times == ["2024-03-01 23:59:58", "23:59:59", "2024-03-02 00:00:00", "00:00:01"]
    assert "Time (UTC)" in html


def test_the_page_says_which_python_ran_and_that_the_gpus_asked_for_were_not_there(client, project, admin):
    gpu = {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-8",
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
    }
    job = services.submit_job(project, body("gpu_less", **gpu), actor=admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    Replica.objects.create(
        job=job, task_type="master", task_index=0, label="master-replica-0", machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1, host="127.0.0.1",
    )  # fmt: skip
    client.force_login(admin)
    before = client.get("/projects/project-a/jobs/gpu_less/").content.decode()
    assert "data-gpu-missing" not in before and "Python 3.7 <small>(the exact version" in before
    line = runtimes.describe_build("2.11", "3.7.16", "cpu", ["TensorFlow 2.11.0"])
    assert runtimes.parse_build(line) == {"runtime": "2.11", "python": "3.7.16", "variant": "cpu"}
    LogLine.objects.create(
        job=job, task_name="service", seq=1, stream="service", severity="INFO", message=line, time=timezone.now()
    )
    html = client.get("/projects/project-a/jobs/gpu_less/").content.decode()
    assert "<dd data-python>Ran on Python 3.7.16 (CPU build)" in html
    status = html[html.index('id="job-status"') : html.index("</section>", html.index('id="job-status"'))]
    assert "Asked for 1 × NVIDIA_TESLA_T4, but ran without a GPU" in status
    assert "(asked; none on this host)" in html  # the replica's machine says so too

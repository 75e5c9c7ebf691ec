"""A project's usage by day and user: the figures from jobs with known times and machines, the REST
and CSV shapes, who may read them, and their audit."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest

from aiconsole.models import AuditEntry
from jobs import catalogue
from jobs.models import Job, JobState, Replica
from jobs.usage import reckoning, services
from tests.helpers.identity import bearer, make_user

UTC = dt.UTC


def at(day: int, hour: float) -> dt.datetime:
    return dt.datetime(2026, 11, day, tzinfo=UTC) + dt.timedelta(hours=hour)


def finished(project, job_id, user, start, end, training_input, ml_units=None) -> Job:
    return Job.objects.create(
        project=project,
        job_id=job_id,
        training_input=training_input,
        state=JobState.SUCCEEDED,
        create_time=start,
        start_time=start,
        end_time=end,
        created_by=user,
        training_output={"consumedMLUnits": ml_units} if ml_units is not None else {},
    )


BASIC = {"scaleTier": "BASIC", "region": "us-central1"}  # one `standard` master: 4 vCPUs
T4_PAIR = {
    "scaleTier": "CUSTOM",
    "region": "us-central1",
    "masterType": "n1-standard-8",
    "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "2"}},
}


@pytest.fixture
def two_jobs(project, admin, developer):
    # 4 h across midnight: 2 h on each day, 4 vCPUs, 2.0 ML units recorded
    finished(project, "overnight", admin, at(1, 22), at(2, 2), BASIC, ml_units=2.0)
    # 1.5 h of an 8-vCPU machine with two T4s
    finished(project, "gpu_run", developer, at(2, 10), at(2, 11.5), T4_PAIR)


def test_a_span_is_split_at_utc_midnight():
    assert list(reckoning.days_of(at(1, 22), at(2, 2))) == [(dt.date(2026, 11, 1), 2.0), (dt.date(2026, 11, 2), 2.0)]


def test_usage_per_day_and_user_from_jobs_with_known_times_and_machines(two_jobs, project, admin):
    usage = services.project_usage(project, dt.date(2026, 11, 1), dt.date(2026, 11, 2), actor=admin)
    rows = {(row["date"], row["user"]): row for row in usage["rows"]}
    assert set(rows) == {("2026-11-01", "alice_admin"), ("2026-11-02", "alice_admin"), ("2026-11-02", "dave_dev")}
    assert rows["2026-11-01", "alice_admin"]["cpuHours"] == 8.0
    assert rows["2026-11-01", "alice_admin"]["mlUnits"] == 1.0  # half the recorded 2.0
    assert rows["2026-11-02", "alice_admin"]["cpuHours"] == 8.0
    gpu = rows["2026-11-02", "dave_dev"]
    assert gpu["cpuHours"] == 12.0
    assert gpu["acceleratorHours"] == 3.0
    assert gpu["acceleratorHoursByType"] == {"NVIDIA_TESLA_T4": 3.0}
    # no consumedMLUnits recorded: the catalogue's rates, n1-standard-8 plus two T4s for 1.5 h
    plan = catalogue.ReplicaPlan("master", 0, "n1-standard-8", "NVIDIA_TESLA_T4", 2)
    assert gpu["mlUnits"] == catalogue.consumed_ml_units([(plan, 1.5 * 3600)])
    assert usage["totals"]["cpuHours"] == 28.0
    assert usage["totals"]["acceleratorHours"] == 3.0


def test_the_window_keeps_only_its_days(two_jobs, project, admin):
    usage = services.project_usage(project, dt.date(2026, 11, 2), dt.date(2026, 11, 2), actor=admin)
    assert [(row["date"], row["user"], row["cpuHours"]) for row in usage["rows"]] == [
        ("2026-11-02", "alice_admin", 8.0),
        ("2026-11-02", "dave_dev", 12.0),
    ]


def test_replicas_as_they_ran_count_over_the_plan(project, admin):
    job = finished(project, "study", admin, at(3, 0), at(3, 5), BASIC)
    for index, (start, end) in enumerate([(1, 2), (1, 4)]):  # two trials' masters: 1 h and 3 h
        Replica.objects.create(
            job=job,
            trial_id=str(index + 1),
            task_type="master",
            task_index=0,
            label="master-replica-0",
            machine_type="standard",
            start_time=at(3, start),
            end_time=at(3, end),
        )
    usage = services.project_usage(project, dt.date(2026, 11, 3), dt.date(2026, 11, 3), actor=admin)
    assert usage["totals"]["cpuHours"] == 16.0  # (1 + 3) h × 4 vCPUs, not the job's 5 h


def test_rest_answers_json_and_csv(client, two_jobs, viewer):
    url = "/v1/projects/project-a/usage?from=2026-11-01&to=2026-11-02"
    body = client.get(url, **bearer(viewer)).json()
    assert {"project", "from", "to", "rows", "totals", "disk"} <= set(body)
    assert body["from"] == "2026-11-01" and body["to"] == "2026-11-02"
    assert set(body["rows"][0]) == {
        "date",
        "project",
        "user",
        "mlUnits",
        "cpuHours",
        "acceleratorHours",
        "acceleratorHoursByType",
        "jobs",
    }
    assert set(body["disk"]) == {"storageBytes", "jobDirBytes", "complete", "logLines", "metricPoints"}
    answer = client.get(url + "&alt=csv", **bearer(viewer))
    assert answer["Content-Type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(answer.content.decode())))
    assert lines[0] == ["date", "project", "user", "ml_units", "cpu_hours", "accelerator_hours", "jobs"]
    assert lines[1] == ["2026-11-01", "project-a", "alice_admin", "1.0", "8.0", "0", "1"]
    assert len(lines) == 4


def test_a_bad_date_is_refused_with_its_field(client, project, viewer):
    answer = client.get("/v1/projects/project-a/usage?from=yesterday", **bearer(viewer))
    assert answer.status_code == 400
    assert "from" in answer.content.decode()


def test_outsider_gets_404_for_usage(client, two_jobs, outsider):
    assert client.get("/v1/projects/project-a/usage", **bearer(outsider)).status_code == 404
    client.force_login(outsider)
    assert client.get("/projects/project-a/usage/").status_code == 404
    assert client.get("/projects/project-a/usage/?format=csv").status_code == 404


def test_every_projects_usage_is_for_platform_admins_only(client, two_jobs, admin, outsider):
    assert client.get("/v1/projects/-/usage?from=2026-11-01&to=2026-11-02", **bearer(admin)).status_code == 404
    root = make_user("root_admin", is_superuser=True)
    body = client.get("/v1/projects/-/usage?from=2026-11-01&to=2026-11-02", **bearer(root)).json()
    assert {row["project"] for row in body["rows"]} == {"project-a"}
    client.force_login(root)
    page = client.get("/usage/?from=2026-11-01&to=2026-11-02")
    assert page.status_code == 200 and b"dave_dev" in page.content


def test_the_page_shows_the_days_and_the_disk(client, two_jobs, viewer):
    client.force_login(viewer)
    page = client.get("/projects/project-a/usage/?from=2026-11-01&to=2026-11-02").content.decode()
    assert "dave_dev" in page and "Disk space" in page and "Log lines" in page
    download = client.get("/projects/project-a/usage/?from=2026-11-01&to=2026-11-02&format=csv")
    assert download.content.decode().count("\n") == 4


def test_a_read_of_usage_is_a_data_access_entry(client, two_jobs, project, viewer):
    project.data_access_logs = True
    project.save(update_fields=["data_access_logs"])
    client.get("/v1/projects/project-a/usage", **bearer(viewer))
    entry = AuditEntry.objects.get(method_name=services.USAGE_METHOD)
    assert entry.principal == "vera_viewer@example.com" and entry.log_type == "data_access"
    assert entry.resource_name == "projects/project-a/usage"


@pytest.mark.parametrize(
    "role, status",
    [
        ("roles/ml.admin", 200),
        ("roles/ml.developer", 200),
        ("roles/ml.viewer", 200),
        ("roles/ml.modelUser", 403),  # sees the project, may not list its jobs
        (None, 404),
    ],
)
@pytest.mark.parametrize("entry_point", ["html", "rest"])
def test_who_may_read_a_projects_usage(client, project, role, status, entry_point):
    user = make_user("someone", role, project if role else None)
    if entry_point == "rest":
        assert client.get("/v1/projects/project-a/usage", **bearer(user)).status_code == status
    else:
        client.force_login(user)
        assert client.get("/projects/project-a/usage/").status_code == status


def test_a_window_longer_than_a_year_is_refused(client, project, viewer):
    answer = client.get("/v1/projects/project-a/usage?from=1970-01-01&to=2026-11-01", **bearer(viewer))
    assert answer.status_code == 400
    assert "366" in answer.content.decode()


def test_disk_space_counts_the_storage_area_job_dirs_and_rows_never_through_a_link(
    settings, tmp_path, project, other_project, admin
):
    from jobs.models import LogLine

    settings.STORAGE_DIR = tmp_path / "storage"
    settings.WORK_DIR = tmp_path / "work"
    area = settings.STORAGE_DIR / "bucket" / "project-a"
    area.mkdir(parents=True)
    (area / "data.csv").write_bytes(b"d" * 300)
    (settings.STORAGE_DIR / "bucket" / "project-b").mkdir()
    (settings.STORAGE_DIR / "bucket" / "project-b" / "theirs").write_bytes(b"t" * 5000)
    (area / "elsewhere").symlink_to(settings.STORAGE_DIR / "bucket" / "project-b")
    job_dir = settings.WORK_DIR / "project-a" / "overnight"
    job_dir.mkdir(parents=True)
    (job_dir / "model.bin").write_bytes(b"m" * 700)
    job = finished(project, "overnight", admin, at(1, 22), at(2, 2), BASIC)
    LogLine.objects.create(
        job=job, task_name="service", seq=0, stream="service", severity="INFO", message="hi", time=at(1, 22)
    )
    disk = services.project_usage(project, dt.date(2026, 11, 1), dt.date(2026, 11, 2), actor=admin)["disk"]
    assert disk == {"storageBytes": 300, "jobDirBytes": 700, "complete": True, "logLines": 1, "metricPoints": 0}

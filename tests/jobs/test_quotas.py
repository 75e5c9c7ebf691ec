"""Quotas per project and the fair queue: set by platform admins over REST, refusing at submit what
could never fit, holding back what fits later (saying which quota), and giving the next slot to the
project owed the most, with a real executor and real trainers."""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from aiconsole.models import AuditEntry
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from jobs import services
from jobs.executor import queue
from jobs.models import Job, JobState, ProjectQuota
from jobs.quotas import admission as quotas
from tests.helpers.jobs import body

# Says it started, then holds its replica slot until the test lets it go.
HOLD = """
import os, sys, time
release, job = sys.argv[1], os.environ["CLOUD_ML_JOB_ID"]
open(os.path.join(release, "started-" + job), "w").close()
while not os.path.exists(os.path.join(release, "go-" + job)):
    time.sleep(0.05)
"""


@pytest.fixture
def superuser(db):
    return get_user_model().objects.create_superuser("root_admin", "root@example.com", "pw-root-admin")


@pytest.fixture
def api(api_as):
    return api_as


def _package(project_id: str, name: str):
    folder = settings.STORAGE_DIR / "test-packages" / project_id / name
    return build_package(folder, {"trainer/task.py": HOLD})


def _body(job_id: str, package, release, **training_input) -> dict:
    return body(job_id, packageUris=[str(package)], args=[str(release)], **training_input)


@pytest.fixture
def release(tmp_path):
    folder = tmp_path / "release"
    folder.mkdir()
    os.chmod(folder, 0o777)  # the trainers' accounts write their marks here
    return folder


def _started(release) -> list[str]:
    marks = sorted(release.glob("started-*"), key=lambda p: p.stat().st_mtime_ns)
    return [p.name.removeprefix("started-") for p in marks]


def _states() -> str:
    from jobs.models import LogLine

    return "\n".join(
        f"{job.job_id} {job.state}: " + " | ".join(LogLine.objects.filter(job=job).values_list("message", flat=True))
        for job in Job.objects.order_by("pk")
        if job.state not in (JobState.QUEUED, JobState.RUNNING)
    )


def _wait_started(release, count: int, timeout: float, what: str) -> None:
    """Until ``count`` trainers said they started; on a timeout, what each job's log says."""
    from jobs.models import LogLine

    try:
        wait_for(lambda: len(_started(release)) >= count, timeout, message=what)
    except AssertionError:
        states = [
            f"{job.job_id} {job.state}: "
            + " | ".join(LogLine.objects.filter(job=job).values_list("message", flat=True))
            for job in Job.objects.order_by("pk")
        ]
        raise AssertionError(f"{what}: started {_started(release)}; " + "\n".join(states)) from None


def test_platform_admins_set_quotas_everyone_in_the_project_reads_them(api, project, admin, viewer, superuser):
    path = "/v1/projects/project-a/quotas"
    body = {"limits": [{"metric": "CPUS", "region": "us-central1", "limit": 8}, {"metric": "REPLICAS", "limit": 2}]}
    assert api(admin, "PATCH", path, body)[0] == 403  # a project admin does not raise its own quota
    status, answer = api(superuser, "PATCH", path, {**body, "weight": 2})
    assert status == 200, answer
    assert {(q["metric"], q["region"], q["limit"]) for q in answer["limits"]} == {
        ("CPUS", "us-central1", 8),
        ("REPLICAS", "", 2),
    }
    assert answer["weight"] == 2.0
    status, read = api(viewer, "GET", path)
    assert status == 200 and len(read["limits"]) == 2
    status, error = api(superuser, "PATCH", path, {"limits": [{"metric": "GPUS", "limit": -1}], "extra": 1})
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert status == 400 and fields == {"limits[0].metric", "limits[0].limit", "extra"}
    api(superuser, "PATCH", path, {"limits": [{"metric": "CPUS", "region": "us-central1", "limit": None}]})
    assert list(ProjectQuota.objects.values_list("metric", flat=True)) == ["REPLICAS"]
    assert AuditEntry.objects.filter(method_name__endswith="UpdateConsumerQuotaLimit", granted=False).count() == 1


def test_a_job_larger_than_its_quota_is_refused_at_submit(api, project, admin, superuser, release):
    ProjectQuota.objects.create(project=project, metric="CPUS", region="us-central1", limit=2)
    package = _package("project-a", "too-big")
    status, error = api(admin, "POST", "/v1/projects/project-a/jobs", _body("too_big", package, release))
    assert status == 429 and error["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "more than the project's quota of 2 (CPUS, us-central1)" in error["error"]["message"]
    assert not Job.objects.exists()


@pytest.mark.executor
def test_a_quota_of_one_replica_keeps_the_second_job_waiting_while_slots_are_free(
    executor, project, admin, release, settings
):
    settings.MAX_REPLICAS = 4
    ProjectQuota.objects.create(project=project, metric="REPLICAS", limit=1)
    package = _package("project-a", "quota-one")
    first = services.submit_job(project, _body("first", package, release), actor=admin)
    second = services.submit_job(project, _body("second", package, release), actor=admin)
    wait_for(lambda: "first" in _started(release), 180, message="the first job to start")
    assert Job.objects.get(pk=second.pk).state == JobState.QUEUED  # three slots free, yet it waits
    reason = queue.explain(Job.objects.get(pk=second.pk), actor=admin)
    assert "Waiting for its project's quota REPLICAS: it needs 1, its limit is 1" in reason.summary
    assert "first" in reason.summary
    (release / "go-first").touch()
    wait_for(lambda: "second" in _started(release), 180, message="the second job once the first ended")
    (release / "go-second").touch()
    wait_for(lambda: Job.objects.get(pk=second.pk).state == JobState.SUCCEEDED, 60, message="the second job")
    assert Job.objects.get(pk=first.pk).state == JobState.SUCCEEDED


@pytest.mark.executor
def test_the_next_slot_goes_to_the_project_owed_the_most(
    executor, project, other_project, admin, outsider, release, settings
):
    """Project A fills the 4 slots and queues 4 more; then B queues 2. When A's first job ends, B's
    first starts before A's fifth (A holds 3 slots, B none), though A's came first."""
    settings.MAX_REPLICAS = 4
    mine, theirs = _package("project-a", "fair-a"), _package("project-b", "fair-b")
    for index in range(8):
        services.submit_job(project, _body(f"a_{index}", mine, release), actor=admin)
    _wait_started(release, 4, 180, "project A's first four jobs")
    for index in range(2):
        services.submit_job(other_project, _body(f"b_{index}", theirs, release), actor=outsider)
    queued = list(Job.objects.queued_in_order())
    line = [job.job_id for job in quotas.projected_order(queued, quotas.running_usage(), quotas.console_capacity())]
    assert line[:2] == ["b_0", "b_1"]  # B holds nothing: its jobs are owed first
    from jobs.wire import job_resource

    positions = {job.job_id: job_resource(job)["jobPosition"] for job in queued}
    assert (positions["b_0"], positions["b_1"], positions["a_4"]) == ("1", "2", "3")  # jobPosition says so too
    (release / "go-a_0").touch()
    _wait_started(release, 5, 120, "the next job to take the freed slot")
    assert _started(release)[4] == "b_0", _states()
    for name in ["a_1", "a_2", "a_3", "b_0", "a_4", "a_5", "a_6", "a_7", "b_1"]:
        (release / f"go-{name}").touch()
    wait_for(lambda: not Job.objects.exclude(state=JobState.SUCCEEDED).exists(), 240, message="every job to end")


def test_the_fair_order_weighs_shares_and_lets_pass_what_can_never_run(project, other_project):
    """A with 2 replicas running and weight 2 is owed as much as B with 1: the earlier comes first;
    a job that WAITS holds its project's line, one that is PASSED does not."""
    from jobs.models import ProjectShare

    def job(project_, job_id, state=JobState.QUEUED):
        return Job.objects.create(
            project=project_, job_id=job_id, state=state, training_input={"scaleTier": "BASIC", "region": "us-central1"}
        )

    for index in range(2):
        job(project, f"a_run_{index}", JobState.RUNNING)
    job(other_project, "b_run", JobState.RUNNING)
    ProjectShare.objects.create(project=project, weight=2)
    a_0, b_0, _, b_1 = job(project, "a_0"), job(other_project, "b_0"), job(project, "a_1"), job(other_project, "b_1")
    queued = list(Job.objects.queued_in_order())
    capacity = {quotas.REPLICAS: 4}
    line = [j.job_id for j in quotas.projected_order(queued, quotas.running_usage(), capacity)]
    # Shares 2/4 ÷ 2 and 1/4 tie: first come. Then A (3/4 ÷ 2) is still owed more than B (2/4).
    assert line == ["a_0", "b_0", "a_1", "b_1"]
    ProjectShare.objects.filter(project=project).update(weight=1)  # without the weight, B is owed first
    line = [j.job_id for j in quotas.projected_order(queued, quotas.running_usage(), capacity)]
    assert line == ["b_0", "a_0", "b_1", "a_1"]  # then even (2/4 each): first come

    ProjectShare.objects.filter(project=project).update(weight=2)
    order = quotas.fair_order(queued, quotas.running_usage(), capacity)
    assert next(order) == a_0
    assert order.send(quotas.WAITS) == b_0  # A's line waits behind a_0
    assert order.send(quotas.PASSED) == b_1  # b_0 holds up nobody, not even B's next
    assert list(_drain(order, quotas.ADMITTED)) == []  # a_1 never comes: a_0 waits


def _drain(order, outcome):
    try:
        while True:
            yield order.send(outcome)
    except StopIteration:
        return


def test_the_quotas_page_shows_limits_and_lets_platform_admins_set_them(client, project, admin, superuser):
    ProjectQuota.objects.create(project=project, metric="REPLICAS", limit=3)
    client.force_login(admin)
    page = client.get("/projects/project-a/quotas/").content.decode()
    assert 'data-quota="REPLICAS"' in page and "Platform admins set quotas." in page
    assert 'href="/projects/project-a/quotas/"' in client.get("/projects/project-a/usage/").content.decode()
    refused = client.post("/projects/project-a/quotas/", {"metric": "CPUS", "region": "", "limit": 8})
    assert refused.status_code == 403 and not ProjectQuota.objects.filter(metric="CPUS").exists()
    client.force_login(superuser)
    client.post("/projects/project-a/quotas/", {"metric": "CPUS", "region": "us-central1", "limit": 8, "weight": 2})
    assert ProjectQuota.objects.filter(metric="CPUS", region="us-central1", limit=8).exists()
    client.post("/projects/project-a/quotas/", {"metric": "REPLICAS", "region": "", "limit": ""})
    assert not ProjectQuota.objects.filter(metric="REPLICAS").exists()  # an empty limit lifts it

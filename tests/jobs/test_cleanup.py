"""Cleaning up after jobs: a project's retention removes exactly what the dry run lists, keeps
labelled and unfinished jobs, never follows a link out of a job dir, and audits every removal;
unused environment layers go after their own retention; the worker runs it once a day."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time

import pytest
from django.test import Client
from django.utils import timezone

from aiconsole import iam
from aiconsole.models import AuditEntry, ProjectRetention
from jobs.executor import cleanup, environments, housekeeping
from jobs.models import Job, JobState, LogLine, MetricPoint
from jobs.usage import services
from tests.helpers.identity import make_user


@pytest.fixture
def work(settings, tmp_path):
    settings.WORK_DIR = tmp_path / "work"
    settings.ENV_DIR = tmp_path / "envs"
    settings.ENV_DIR.mkdir()
    return settings.WORK_DIR


def make_job(project, job_id, *, ended_days_ago=None, state=JobState.SUCCEEDED, labels=None, work=None):
    now = timezone.now()
    ended = now - dt.timedelta(days=ended_days_ago) if ended_days_ago is not None else None
    job = Job.objects.create(
        project=project,
        job_id=job_id,
        training_input={"scaleTier": "BASIC"},
        state=state,
        create_time=now - dt.timedelta(days=30),
        start_time=now - dt.timedelta(days=30),
        end_time=ended,
        labels=labels or {},
    )
    for seq in range(3):
        LogLine.objects.create(
            job=job, task_name="master-replica-0", seq=seq, stream="stdout", severity="INFO", message="x" * 10, time=now
        )
    MetricPoint.objects.create(job=job, source="hypertune", tag="loss", step=1, value=0.5, wall_time=0)
    if work is not None:
        folder = work / project.project_id / job_id
        folder.mkdir(parents=True)
        (folder / "model.bin").write_bytes(b"m" * 1000)
    return job


@pytest.fixture
def jobs(project, work, tmp_path):
    ProjectRetention.objects.create(project=project, days=7, protect_label="paper")
    made = {
        "old": make_job(project, "old", ended_days_ago=10, work=work),
        "kept": make_job(project, "kept", ended_days_ago=10, labels={"keep": "true"}, work=work),
        "paper": make_job(project, "paper", ended_days_ago=10, labels={"paper": "icml"}, work=work),
        # running again, with an end time left from before: its state decides, not its times
        "running": make_job(project, "running", state=JobState.RUNNING, ended_days_ago=10, work=work),
        "recent": make_job(project, "recent", ended_days_ago=1, work=work),
    }
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("not the job's")
    (work / project.project_id / "old" / "escape").symlink_to(outside)
    return made


def test_retention_removes_exactly_what_the_dry_run_listed(jobs, project, work, tmp_path):
    listed = cleanup.plan()
    assert {(item.kind, item.target) for item in listed} == {
        (cleanup.LOGS, "projects/project-a/jobs/old"),
        (cleanup.METRICS, "projects/project-a/jobs/old"),
        (cleanup.JOB_DIR, str(work / "project-a" / "old")),
    }
    assert next(i for i in listed if i.kind == cleanup.JOB_DIR).bytes == 1000
    assert next(i for i in listed if i.kind == cleanup.LOGS).count == 3
    removed = cleanup.run()
    assert [item.as_dict() for item in removed] == [item.as_dict() for item in listed]
    assert not LogLine.objects.filter(job=jobs["old"]).exists()
    assert not MetricPoint.objects.filter(job=jobs["old"]).exists()
    assert not (work / "project-a" / "old").exists()
    assert cleanup.plan() == []


def test_labelled_running_and_recent_jobs_keep_everything(jobs, work, tmp_path):
    cleanup.run()
    for name in ("kept", "paper", "running", "recent"):
        assert LogLine.objects.filter(job=jobs[name]).count() == 3, name
        assert MetricPoint.objects.filter(job=jobs[name]).exists(), name
        assert (work / "project-a" / name / "model.bin").exists(), name
    assert Job.objects.filter(job_id="old").exists()  # the job itself stays, only its records go


def test_a_link_in_a_job_dir_is_removed_never_followed(jobs, tmp_path):
    cleanup.run()
    assert (tmp_path / "outside" / "precious").read_text() == "not the job's"


def test_a_job_labelled_after_the_dry_run_is_kept(jobs, work):
    listed = cleanup.plan()
    assert listed
    Job.objects.filter(job_id="old").update(labels={"keep": "true"})
    items = cleanup.run()
    assert items == []
    assert LogLine.objects.filter(job=jobs["old"]).count() == 3
    assert (work / "project-a" / "old").exists()


def test_every_removal_is_audited(jobs):
    removed = cleanup.run()
    entries = AuditEntry.objects.filter(method_name=cleanup.METHOD).order_by("seq")
    assert [(e.resource_name, e.request["kind"], e.principal) for e in entries] == [
        (item.target, item.kind, "system") for item in removed
    ]
    assert all(entry.project_id == "project-a" for entry in entries)


def test_no_retention_keeps_everything(project, work):
    make_job(project, "old", ended_days_ago=400, work=work)
    assert cleanup.plan() == []


def layer(env_dir, name, days_ago):
    folder = env_dir / name
    folder.mkdir()
    marker = folder / environments.COMPLETE_MARKER
    marker.write_text(json.dumps({"kind": "job"}))
    (folder / "lib.py").write_bytes(b"x" * 500)
    stamp = time.time() - days_ago * 86400
    os.utime(marker, (stamp, stamp))
    return folder


def test_environments_unused_past_their_retention_go(settings, work, db):
    settings.ENVIRONMENT_RETENTION_DAYS = 5
    old = layer(settings.ENV_DIR, "job-old", 9)
    fresh = layer(settings.ENV_DIR, "job-fresh", 1)
    listed = cleanup.plan()
    assert [(item.kind, item.target) for item in listed] == [(cleanup.ENVIRONMENT, str(old))]
    assert listed[0].bytes > 500
    assert cleanup.run() == listed
    assert not old.exists() and fresh.exists()


def test_no_environment_goes_while_an_older_job_still_runs(settings, work, project):
    settings.ENVIRONMENT_RETENTION_DAYS = 5
    old = layer(settings.ENV_DIR, "job-old", 9)
    make_job(project, "running", state=JobState.RUNNING)  # made 30 days ago: it may use the layer
    assert cleanup.plan() == []
    cleanup.run()
    assert old.exists()


@pytest.mark.django_db(transaction=True)
def test_the_daily_housekeeping_cleans_up_beside_the_tick_that_started_it(jobs, monkeypatch):
    """The scheduler's tick (admissions, cancels) does not wait for a long clean-up."""
    going, release, finished = threading.Event(), threading.Event(), threading.Event()
    real_run = cleanup.run

    def long_run(**options):
        going.set()
        release.wait(30)
        try:
            return real_run(**options)
        finally:
            finished.set()

    monkeypatch.setattr(cleanup, "run", long_run)
    retention = housekeeping.AuditRetention()
    retention.run_if_due()
    assert not finished.is_set()  # the tick is back while the clean-up is under way
    assert going.wait(10)
    retention.run_if_due()  # a second tick starts no second clean-up
    release.set()
    assert retention.wait(30)
    assert not LogLine.objects.filter(job=jobs["old"]).exists()
    assert LogLine.objects.filter(job=jobs["recent"]).exists()


def test_a_stopped_clean_up_removes_nothing_more(jobs):
    stopping = threading.Event()
    stopping.set()
    assert cleanup.run(stopping=stopping) == []
    assert LogLine.objects.filter(job=jobs["old"]).exists()


def test_only_a_platform_admin_sets_retention(project, admin, outsider):
    with pytest.raises(iam.PermissionDenied):
        services.set_retention(project, 3, actor=admin)
    with pytest.raises(iam.NotFound):
        services.set_retention(project, 3, actor=outsider)
    root = make_user("root_admin", is_superuser=True)
    services.set_retention(project, 3, "paper", actor=root)
    retention = ProjectRetention.objects.get(project=project)
    assert (retention.days, retention.protect_label) == (3, "paper")
    entry = AuditEntry.objects.get(method_name=services.RETENTION_METHOD, granted=True)
    assert entry.request == {"days": 3, "protectLabel": "paper"}


def test_the_page_form_sets_retention_for_a_platform_admin(client, project):
    root = make_user("root_admin", is_superuser=True)
    client.force_login(root)
    client.post("/projects/project-a/usage/retention/", {"days": "14", "protect_label": ""})
    assert ProjectRetention.objects.get(project=project).days == 14
    assert "deleted 14 days after it ends" in client.get("/projects/project-a/usage/").content.decode()


def test_gc_dry_run_lists_and_removes_nothing_then_gc_removes_it(jobs, capsys):
    from console.cli import main

    assert main(["gc", "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert "project-a\tlogLines\tprojects/project-a/jobs/old (3 rows)" in listed
    assert "Would free" in listed and "in 3 items." in listed
    assert LogLine.objects.filter(job=jobs["old"]).count() == 3
    assert main(["gc"]) == 0
    assert "Freed" in capsys.readouterr().out
    assert not LogLine.objects.filter(job=jobs["old"]).exists()
    assert AuditEntry.objects.filter(method_name=cleanup.METHOD, user_agent="aiconsole-cli").count() == 3


def test_gc_sets_a_projects_retention(project, capsys):
    from console.cli import main

    assert main(["gc", "--project", "project-a", "--set-retention", "21", "--protect-label", "paper"]) == 0
    assert ProjectRetention.objects.get(project=project).days == 21


def test_a_job_dir_swapped_for_a_link_after_the_dry_run_is_not_followed(jobs, work, tmp_path):
    import shutil

    listed = cleanup.plan()
    folder = work / "project-a" / "old"
    shutil.rmtree(folder)
    folder.symlink_to(tmp_path / "outside")
    removed = cleanup.run()
    assert (tmp_path / "outside" / "precious").read_text() == "not the job's"
    assert [item.kind for item in removed] == [cleanup.LOGS, cleanup.METRICS]
    assert len(listed) == 3


def test_shell_recordings_go_with_the_jobs_records_and_with_a_deleted_job(
    jobs, settings, tmp_path, admin, django_capture_on_commit_callbacks
):
    from jobs.models import WebAccessSession
    from jobs.webaccess import sessions

    settings.DATA_DIR = tmp_path / "data"
    made = {}
    for name in ("old", "recent"):
        session = WebAccessSession.objects.create(
            job=jobs[name], replica_label="master-replica-0", principal="a@example.com", recording="x"
        )
        session.recording = f"{jobs[name].pk}/{session.pk}.cast"
        session.save()
        path = sessions.recording_path(session)
        path.parent.mkdir(parents=True)
        path.write_text('{"version": 2}\n')
        made[name] = (session, path)

    listed = [item for item in cleanup.plan() if item.kind == cleanup.SHELL_RECORDINGS]
    assert [(item.target, item.count) for item in listed] == [(str(made["old"][1].parent), 1)]
    cleanup.run()
    assert not made["old"][1].exists() and made["recent"][1].exists()
    assert WebAccessSession.objects.get(pk=made["old"][0].pk).recording == ""  # listed, without its recording
    client = Client()
    client.force_login(admin)
    gone = client.get(f"/projects/project-a/jobs/old/shell-sessions/{made['old'][0].pk}/recording/")
    assert gone.status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        jobs["recent"].delete()
    assert not made["recent"][1].parent.exists()

"""A queued job's environment is built while it waits, so a job that cannot install fails at once,
not when its turn comes; and which Python a job runs on, and why, is said on its page and in its log."""

from __future__ import annotations

import pytest
from django.urls import reverse

from bench.support.waiting import wait_for
from jobs import runtimes, services
from jobs.models import TERMINAL_STATES, Job, JobState
from tests.helpers.jobs import log_text

BLOCKER = """
    print("HOLDING", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def one_slot(settings):
    settings.MAX_REPLICAS = 1


@pytest.mark.executor
@pytest.mark.parametrize("problem", ["missing_module", "impossible_pin"])
def test_a_job_that_cannot_be_prepared_fails_while_others_hold_every_slot(
    problem, one_slot, executor, job_body, package_factory, project, admin, monkeypatch
):
    blocker = services.submit_job(project, job_body("blocker", package_factory(BLOCKER)), actor=admin)
    try:
        wait_for(lambda: "HOLDING" in log_text(blocker), 120, message="the first job to hold the only slot")
        if problem == "missing_module":
            body = job_body("doomed", package_factory('print("never runs")'), pythonModule="trainer.absent")
        else:
            monkeypatch.setenv("UV_OFFLINE", "1")  # the index is not asked: the pin cannot be had
            body = job_body(
                "doomed", package_factory('print("never runs")', requires=["aiconsole-no-such-package-anywhere==9.9.9"])
            )
        doomed = services.submit_job(project, body, actor=admin)
        ended = wait_for(
            lambda: Job.objects.get(pk=doomed.pk).state in TERMINAL_STATES,
            60,
            message="the unpreparable job to fail while it waits",
        )
        doomed.refresh_from_db()
        blocker.refresh_from_db()
    finally:
        services.cancel_job(Job.objects.get(pk=blocker.pk), actor=admin)

    assert ended and doomed.state == JobState.FAILED
    assert blocker.state == JobState.RUNNING  # it failed while the only slot was still taken
    assert doomed.start_time is None and not doomed.replicas.exists()
    if problem == "missing_module":
        assert "trainer.absent" in doomed.error_message
    else:
        assert doomed.error_message.startswith("Failed to install the trainer packages.")
        assert "aiconsole-no-such-package-anywhere" in doomed.error_message
    text = log_text(doomed)
    assert "Preparing the job's environment while it waits in the queue." in text
    assert doomed.error_message.splitlines()[0] in text


@pytest.mark.executor
def test_a_queued_job_whose_environment_is_ready_starts_on_it_when_a_slot_frees(
    one_slot, executor, job_body, package_factory, project, admin
):
    blocker = services.submit_job(project, job_body("blocker", package_factory(BLOCKER)), actor=admin)
    wait_for(lambda: "HOLDING" in log_text(blocker), 120, message="the first job to hold the only slot")
    waiting = services.submit_job(project, job_body("waiting", package_factory('print("ran after")')), actor=admin)
    wait_for(
        lambda: "it starts when its replicas fit" in log_text(waiting),
        120,
        message="the waiting job's environment to be ready",
    )
    assert Job.objects.get(pk=waiting.pk).state == JobState.QUEUED
    services.cancel_job(Job.objects.get(pk=blocker.pk), actor=admin)

    wait_for(lambda: Job.objects.get(pk=waiting.pk).state in TERMINAL_STATES, 120, message="the waiting job to run")
    waiting.refresh_from_db()
    assert waiting.state == JobState.SUCCEEDED, waiting.error_message
    assert "Reusing the cached environment for these trainer packages." in log_text(waiting)
    assert "ran after" in log_text(waiting)


def test_runtime_1_15_without_a_python_version_says_which_python_runs_and_why():
    python, why, differs = runtimes.python_choice("1.15", None)
    assert (python, differs) == ("3.7", True)
    assert "on AI Platform runtime version 1.15 then ran Python 2.7, which this console cannot provide" in why
    assert runtimes.python_choice("1.15", "3.7") == ("3.7", "Python 3.7, as the job asks (pythonVersion).", False)
    python, why, differs = runtimes.python_choice("2.11", None)
    assert (python, differs) == ("3.7", False) and "runtime version 2.11's default" in why


def test_the_job_page_shows_the_python_a_job_runs_on_and_why(client, project, admin, job_body):
    body = job_body("old_runtime", "gs://bucket/trainer-0.1.tar.gz", runtimeVersion="1.15")
    del body["trainingInput"]["pythonVersion"]
    job = services.submit_job(project, body, actor=admin)
    client.force_login(admin)

    page = client.get(reverse("jobs:detail", args=[project.project_id, job.job_id])).content.decode()

    assert "<dd data-runtime>1.15</dd>" in page and "<dd data-python>Python 3.7 <small>" in page
    assert "runtime version 1.15 then ran Python 2.7, which this console cannot provide" in page

"""Why a queued job waits: the admission rule in words (pure), and read from the database for its
page: what it needs, what is free and who holds the rest, which jobs are ahead."""

from __future__ import annotations

from django.test import Client

from jobs import services
from jobs.executor.queue import Holder, explain, reason
from jobs.models import Job, JobState
from tests.helpers.jobs import body

SPEC = {
    "goal": "MAXIMIZE",
    "maxTrials": 6,
    "maxParallelTrials": 3,
    "params": [{"parameterName": "x", "type": "INTEGER", "minValue": 1, "maxValue": 9}],
}


def test_a_job_that_fits_behind_nobody_is_about_to_start():
    why = reason(1, 4, [Holder("study", 2)], [])
    assert why.summary.startswith("Nothing holds it back")
    assert why.needs == "It needs 1 replica slot (one per replica)."
    assert why.free == "2 of 4 replica slots are free; 2 in use by study (2)."


def test_a_job_waits_for_slots_a_study_holds():
    why = reason(2, 4, [Holder("study", 3)], [])
    assert why.summary == "Waiting for 1 replica slot more to free up: 1 replica slot free, it needs 2."
    assert why.free == "1 of 4 replica slots are free; 3 in use by study (3)."


def test_the_jobs_ahead_come_first_even_when_it_would_fit():
    why = reason(1, 4, [], [Holder("first", 1), Holder("", 2)], ahead_count=7)
    assert why.summary.startswith("Waiting for the 7 jobs ahead of it in the queue to start")
    assert why.summary.endswith("first is next.")
    assert [h.name for h in why.ahead] == ["first", "a job you cannot see"]
    assert why.ahead_count == 7


def test_a_job_larger_than_the_machine_waits_to_run_alone():
    why = reason(6, 4, [Holder("small", 1)], [])
    assert why.summary.startswith("Waiting for the running jobs to end: it needs 6 replica slots, more than")
    assert "more than the 4 this console runs at once" in why.needs
    assert reason(6, 4, [], []).summary.startswith("Nothing holds it back")  # alone, it starts


def test_explain_reads_the_study_holding_slots_and_the_queue_ahead(project, other_project, admin, outsider, settings):
    settings.MAX_REPLICAS = 4
    study = services.submit_job(project, body("study", hyperparameters=SPEC), actor=admin)
    Job.objects.filter(pk=study.pk).update(state=JobState.RUNNING)
    services.submit_job(other_project, body("theirs"), actor=outsider)  # queued first, another project
    quick = services.submit_job(project, body("quick"), actor=admin)
    why = explain(quick, actor=admin)
    assert why.needs == "It needs 1 replica slot (one per replica)."
    assert why.free == "1 of 4 replica slots are free; 3 in use by study (3)."
    assert why.ahead == [Holder("", 1, foreign=True)] and why.ahead_count == 1  # counted, never named
    assert why.ahead[0].name == "a job of another project"
    assert "theirs" not in why.summary and why.summary.startswith("Waiting for the 1 job ahead")
    study.refresh_from_db()
    assert explain(study, actor=admin) is None  # it does not wait


def test_the_queued_job_page_says_what_it_waits_for(project, admin, settings):
    settings.MAX_REPLICAS = 4
    study = services.submit_job(project, body("study", hyperparameters=SPEC), actor=admin)
    Job.objects.filter(pk=study.pk).update(state=JobState.RUNNING)
    services.submit_job(project, body("heavy", scaleTier="STANDARD_1"), actor=admin)
    services.submit_job(project, body("quick"), actor=admin)
    client = Client()
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/quick/").content.decode()
    assert "data-queue-reason" in html
    # The job holding the slots is a link to its page, as the jobs ahead are.
    assert '1 of 4 replica slots are free; 3 in use by <a href="/projects/project-a/jobs/study/">study</a> (3).' in html
    assert 'Ahead of it: <a href="/projects/project-a/jobs/heavy/">heavy</a>' in html


def test_a_job_holding_the_slots_that_the_viewer_may_not_see_is_named_without_a_link(
    project, other_project, admin, outsider, settings
):
    settings.MAX_REPLICAS = 4
    study = services.submit_job(project, body("study", hyperparameters=SPEC), actor=admin)
    Job.objects.filter(pk=study.pk).update(state=JobState.RUNNING)
    services.submit_job(other_project, body("heavy", scaleTier="STANDARD_1"), actor=outsider)
    client = Client()
    client.force_login(outsider)
    html = client.get("/projects/project-b/jobs/heavy/").content.decode()
    assert "1 of 4 replica slots are free; 3 in use by a job of another project (3)." in html
    assert "study" not in html and "/projects/project-a/" not in html


def test_a_job_of_the_same_project_the_viewer_may_not_see_is_not_named(project, admin, settings):
    """A user bound to one job only (its owner) sees that job's page, not the project's other jobs."""
    from django.contrib.auth import get_user_model

    from aiconsole import iam

    settings.MAX_REPLICAS = 4
    study = services.submit_job(project, body("study", hyperparameters=SPEC), actor=admin)
    Job.objects.filter(pk=study.pk).update(state=JobState.RUNNING)
    quick = services.submit_job(project, body("quick", scaleTier="STANDARD_1"), actor=admin)
    owner = get_user_model().objects.create_user(username="oscar_owner", password="pw-oscar_owner")
    iam.grant(owner, "roles/ml.jobOwner", quick)
    why = explain(quick, actor=owner)
    assert why.running == [Holder("", 3)] and why.running[0].name == "a job you cannot see"
    assert why.free == "1 of 4 replica slots are free; 3 in use by a job you cannot see (3)."

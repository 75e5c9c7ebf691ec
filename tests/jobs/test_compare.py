"""Jobs compared side by side: ``/projects/P/compare/?jobs=a,b/3`` and the pure pieces behind it."""

from __future__ import annotations

import re

import pytest

from aiconsole import iam
from jobs import services
from jobs.metrics import compare
from jobs.models import Job, JobState, MetricPoint, Trial
from tests.helpers.jobs import body, log_text
from tests.helpers.metrics import HYPERTUNE_TASK, job_dir_for, store_points

# --- pure pieces -------------------------------------------------------------------------------------


def test_args_are_read_as_flags_in_both_forms():
    assert compare.parse_args(["--lr", "0.1", "--epochs=5", "--verbose", "--shift", "-3", "data.csv"]) == {
        "--lr": "0.1",
        "--epochs": "5",
        "--verbose": "true",
        "--shift": "-3",
        "arg 1": "data.csv",
    }


def test_entries_are_jobs_or_trials_each_once_and_bad_ones_are_named():
    entries, malformed = compare.parse_entries(["a, b/3,a", "c/x,9lives"])
    assert [e.label for e in entries] == ["a", "b/3"]
    assert malformed == ["c/x", "9lives"]


def test_inputs_side_by_side_mark_the_rows_that_differ():
    first = compare.inputs({"scaleTier": "BASIC", "runtimeVersion": "2.11", "args": ["--lr", "0.1"]}, {"team": "a"})
    second = compare.inputs(
        {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-8",
            "runtimeVersion": "2.11",
            "workerType": "n1-standard-4",
            "workerCount": "2",
            "args": ["--lr=0.2", "--deep"],
        },
        {"team": "a"},
        hyperparameters={"units": "64"},
    )
    rows = {row.name: row for row in compare.input_rows([first, second])}
    assert rows["Scale tier"].values == ["BASIC", "CUSTOM"] and rows["Scale tier"].differs
    assert rows["Master"].values == ["standard × 1", "n1-standard-8 × 1"]
    assert rows["Workers"].values == [compare.MISSING, "n1-standard-4 × 2"]
    assert not rows["Runtime version"].differs and not rows["label team"].differs
    assert rows["--lr"].values == ["0.1", "0.2"] and rows["--deep"].values == [compare.MISSING, "true"]
    assert rows["--units"].values == [compare.MISSING, "64"]  # a trial's hyperparameter is a flag it ran with
    assert rows["Tuned hyperparameters"].values == [compare.MISSING, "units"]


def test_final_value_is_the_last_by_step_and_the_best_follows_the_documented_rule():
    finals = [
        compare.final_values([("loss", "train", 1, 0.9), ("loss", "train", 2, 0.5), ("accuracy", "", 2, 0.7)]),
        compare.final_values([("loss", "train", 2, 0.4), ("loss", "train", 1, 0.1), ("accuracy", "", 1, 0.8)]),
    ]
    assert finals[1]["loss (train)"] == (2, 0.4)
    tags = {"loss (train)": "loss", "accuracy": "accuracy"}
    rows = {row.name: row for row in compare.metric_rows(finals, tags, goals={})}
    assert rows["loss (train)"].lower_is_better and rows["loss (train)"].best == {1}
    assert not rows["accuracy"].lower_is_better and rows["accuracy"].best == {1}
    flipped = {row.name: row for row in compare.metric_rows(finals, tags, goals={}, lower=["accuracy"])}
    assert flipped["accuracy"].best == {0} and flipped["accuracy"].reason == "your choice"
    by_goal = {row.name: row for row in compare.metric_rows(finals, tags, goals={"accuracy": "MINIMIZE"})}
    assert by_goal["accuracy"].best == {0} and "goal" in by_goal["accuracy"].reason


# --- the page ------------------------------------------------------------------------------------------


def make_job(project, actor, job_id: str, args: list[str], labels: dict | None = None, *, loss: float = 1.0):
    job = services.submit_job(project, {**body(job_id, args=args), "labels": labels or {}}, actor=actor)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    store_points(job, 5, tag="loss", run="train")
    store_points(job, 5, tag="loss", run="validation")
    MetricPoint.objects.create(
        job=job, source="hypertune", run="", tag="accuracy", step=5, value=1 - loss / 10, wall_time=1.0
    )
    return job


@pytest.fixture
def two_jobs(project, admin):
    return (
        make_job(project, admin, "small", ["--lr", "0.1", "--epochs", "5"], {"team": "vision"}, loss=3.0),
        make_job(project, admin, "large", ["--lr=0.01", "--epochs", "5"], {"team": "vision"}, loss=1.0),
    )


def test_compare_page_shows_both_jobs_their_differences_best_values_and_charts(client, viewer, two_jobs):
    client.force_login(viewer)
    answer = client.get("/projects/project-a/compare/", {"jobs": "small,large"})
    assert answer.status_code == 200
    page = answer.content.decode()
    assert ">small</a>" in page and ">large</a>" in page
    differing = re.findall(
        r'<tr class="differs" data-kind="(\w+)">\s*<th scope="row"><span[^>]*>≠</span> '
        r"<code>([^<]+)</code>",
        page,
    )
    assert differing == [("flag", "--lr")]  # epochs, labels, tier and runtime are the same
    accuracy = re.search(r'<tr data-metric="accuracy">(.*?)</tr>', page, re.S).group(1)
    assert accuracy.count("★ best") == 1 and re.search(r'<td class="best">0\.9 .*★ best', accuracy)
    assert page.count('class="chart metric-chart"') == 2  # accuracy and loss, one line per job and run
    assert "large · validation" in page and "small · train" in page
    assert page.count('class="chart parallel-chart"') == 1 and '<th scope="col">--lr</th>' in page
    assert "vendor/plotly.min.js" in page


def test_the_list_page_ticks_become_one_shareable_link(client, admin, two_jobs):
    client.force_login(admin)
    listing = client.get("/projects/project-a/jobs/").content.decode()
    assert 'id="compare-form"' in listing and listing.count('form="compare-form"') == 2
    answer = client.get("/projects/project-a/compare/", {"jobs": ["small", "large"], "metric": "accuracy"})
    assert answer.status_code == 302
    assert answer["Location"] == "/projects/project-a/compare/?jobs=small,large&metric=accuracy"


def test_flipping_a_metric_changes_its_best_and_keeps_the_link(client, admin, two_jobs):
    client.force_login(admin)
    page = client.get("/projects/project-a/compare/", {"jobs": "small,large", "lower": "accuracy"}).content.decode()
    accuracy = re.search(r'<tr data-metric="accuracy">(.*?)</tr>', page, re.S).group(1)
    assert re.search(r'<td class="best">0\.7 .*★ best', accuracy) and "your choice" in accuracy
    assert 'href="?jobs=small,large&amp;higher=accuracy"' in accuracy


def test_too_many_or_unknown_or_malformed_ids_are_named(client, admin, project, two_jobs):
    client.force_login(admin)
    many = ",".join(["small"] + [f"job_{n}" for n in range(21)])
    answer = client.get("/projects/project-a/compare/", {"jobs": many})
    assert answer.status_code == 400 and "At most 20 jobs" in answer.content.decode()
    assert "job_19, job_20" in answer.content.decode()
    answer = client.get("/projects/project-a/compare/", {"jobs": "small,nope,large/4"})
    assert answer.status_code == 404 and "Not found in project project-a: nope, large/4." in answer.content.decode()
    answer = client.get("/projects/project-a/compare/", {"jobs": "small,bad-id"})
    assert answer.status_code == 400 and "Not a job ID or jobId/trialId: bad-id." in answer.content.decode()
    empty = client.get("/projects/project-a/compare/")
    assert empty.status_code == 200 and "Pick jobs to compare" in empty.content.decode()


def test_outsider_gets_404_and_a_job_owner_cannot_see_the_other_job(client, outsider, two_jobs, django_user_model):
    client.force_login(outsider)
    assert client.get("/projects/project-a/compare/", {"jobs": "small,large"}).status_code == 404
    owner = django_user_model.objects.create_user("otto_owner", password="pw-otto")
    iam.grant(owner, "roles/ml.jobOwner", two_jobs[0])
    client.force_login(owner)
    assert client.get("/projects/project-a/compare/", {"jobs": "small"}).status_code == 200
    answer = client.get("/projects/project-a/compare/", {"jobs": "small,large"})
    assert answer.status_code == 404 and "large" in answer.content.decode()


def test_a_trial_is_compared_with_a_plain_job_under_its_study_goal(client, admin, project, two_jobs):
    tuned = services.submit_job(
        project,
        body(
            "tuned",
            args=["--epochs", "5"],
            hyperparameters={
                "goal": "MINIMIZE",
                "hyperparameterMetricTag": "accuracy",
                "maxTrials": 2,
                "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}],
            },
        ),
        actor=admin,
    )
    for number, lr, value in ((1, "0.05", 0.5), (2, "0.002", 0.6)):
        Trial.objects.create(
            job=tuned,
            trial_id=str(number),
            number=number,
            hyperparameters={"lr": lr},
            state=JobState.SUCCEEDED,
            final_metric={"trainingStep": "3", "objectiveValue": value},
        )
        store_points(tuned, 3, tag="accuracy", run="", trial_id=str(number))
    client.force_login(admin)
    page = client.get("/projects/project-a/compare/", {"jobs": "small,tuned/2"}).content.decode()
    assert ">tuned/2</a>" in page and "(trial 2)" in page
    assert re.search(r"<code>--lr</code></th>\s*<td>0\.1</td><td>0\.002</td>", page)
    accuracy = re.search(r'<tr data-metric="accuracy">(.*?)</tr>', page, re.S).group(1)
    assert "the study&#x27;s goal (MINIMIZE)" in accuracy  # the study's goal for its metric tag
    assert re.search(r'<td class="best">0\.333333 .*★ best', accuracy)  # tuned/2's last point: 1/3
    # A tuning job named alone stands for its best trial (MINIMIZE: trial 1).
    page = client.get("/projects/project-a/compare/", {"jobs": "tuned,small"}).content.decode()
    assert ">tuned/1</a>" in page


# --- real trainers -----------------------------------------------------------------------------------------


@pytest.mark.executor
def test_two_real_hypertune_jobs_compare_with_their_charts(run_job, package_factory, client, admin):
    package = package_factory(HYPERTUNE_TASK.replace("deadline = time.time() + 60", "deadline = time.time()"))
    for job_id in ("run_a", "run_b"):
        job = run_job(job_id, package, jobDir=job_dir_for(job_id), args=["--run", job_id])
        assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]
    client.force_login(admin)
    page = client.get("/projects/project-a/compare/", {"jobs": "run_a,run_b"}).content.decode()
    assert ">run_a</a>" in page and ">run_b</a>" in page
    assert re.search(r"<code>--run</code></th>\s*<td>run_a</td><td>run_b</td>", page)
    assert page.count('class="chart metric-chart"') == 2  # accuracy and loss
    assert "run_a · hypertune" in page and "run_b · hypertune" in page
    accuracy = re.search(r'<tr data-metric="accuracy">(.*?)</tr>', page, re.S).group(1)
    assert accuracy.count("0.8 <small") == 2 and accuracy.count("★ best") == 2  # a tie: both marked

"""The jobs list as a runs table: chosen columns of final metrics and trainer args (sorted and filtered,
kept in the URL), the job type, labels that filter the list, and the job page's labels and note."""

from __future__ import annotations

import html
import importlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps

from aiconsole.models import AuditEntry
from jobs.metrics import points
from jobs.models import Job, JobMetric, JobState
from jobs.web.listing import JobListQuery

LIST = "/projects/project-a/jobs/"
T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def make_job(project, job_id, *, args=(), minutes=0, **fields):
    training_input = fields.pop("training_input", {"scaleTier": "BASIC", "args": list(args)})
    return Job.objects.create(
        project=project,
        job_id=job_id,
        state=fields.pop("state", JobState.SUCCEEDED),
        training_input=training_input,
        create_time=T0 + timedelta(minutes=minutes),
        **fields,
    )


def report(job, tag, *pairs, run="", trial_id=""):
    """Metric points as the executor stores them: (step, value) pairs in recorded order."""
    points.insert([(job.pk, trial_id, "hypertune", run, tag, step, value, 0.0) for step, value in pairs])


def listed(client, params) -> list[str]:
    page = client.get(LIST, params).content.decode()
    return re.findall(r'name="jobs" value="([^"]+)"', page)


def cells(client, params, column: int) -> list[str]:
    """The text of one chosen column (0 = the first chosen), row by row."""
    page = client.get(LIST, params).content.decode()
    rows = re.findall(r"<tr data-job=.*?</tr>", page, re.S)
    return [html.unescape(re.findall(r'<td class="chosen-col[^"]*"[^>]*>(.*?)</td>', row)[column]) for row in rows]


@pytest.fixture
def runs(project):
    """Four runs of one trainer with different learning rates; their accuracy and loss."""
    a = make_job(project, "run_a", args=["--lr", "0.1", "--optimizer=adam"], minutes=1)
    b = make_job(project, "run_b", args=["--lr=0.01", "--optimizer", "sgd"], minutes=2)
    c = make_job(project, "run_c", args=["--lr", "0.3"], minutes=3)
    d = make_job(project, "run_d", args=["--epochs", "3"], minutes=4)  # reported nothing
    report(a, "accuracy", (1, 0.5), (10, 0.91), (5, 0.99))  # last by step: 0.91
    report(b, "accuracy", (10, 0.7), (10, 0.95))  # the later report at the same step wins
    report(c, "accuracy", (3, 0.80))
    report(a, "loss", (10, 0.2))
    report(b, "loss", (10, 0.1))
    report(c, "loss", (3, 0.4), run="validation")
    return a, b, c, d


def test_final_metric_is_the_last_point_by_step_and_trials_stay_out(project, runs):
    a, b, c, _ = runs
    tuning = make_job(project, "study", training_input={"hyperparameters": {"goal": "MAXIMIZE"}})
    report(tuning, "accuracy", (1, 0.99), trial_id="1")

    finals = {(m.job.job_id, m.name): (m.step, m.value) for m in JobMetric.objects.select_related("job")}

    assert finals == {
        ("run_a", "accuracy"): (10, 0.91),
        ("run_b", "accuracy"): (10, 0.95),
        ("run_c", "accuracy"): (3, 0.80),
        ("run_a", "loss"): (10, 0.2),
        ("run_b", "loss"): (10, 0.1),
        ("run_c", "loss (validation)"): (3, 0.4),
    }
    report(a, "accuracy", (4, 0.1))  # an earlier step arriving late changes nothing
    report(a, "accuracy", (11, 0.93))
    assert JobMetric.objects.get(job=a, name="accuracy").value == 0.93


def test_backfill_builds_the_final_metrics_of_points_stored_before(project, runs):
    JobMetric.objects.all().delete()

    importlib.import_module("jobs.migrations.0010_backfill_final_metrics").backfill(apps, None)

    assert JobMetric.objects.get(job=runs[0], name="accuracy").value == 0.91
    assert JobMetric.objects.get(job=runs[1], name="accuracy").value == 0.95
    assert JobMetric.objects.count() == 6


def test_chooser_offers_the_projects_metrics_and_flags(client, admin, runs):
    client.force_login(admin)
    page = client.get(LIST).content.decode()

    for value in ("metric:accuracy", "metric:loss", "metric:loss (validation)", "arg:--lr", "arg:--optimizer"):
        assert f'name="col" value="{html.escape(value)}"' in page
    assert "arg:--epochs" in page


def test_metric_column_sorts_either_way_with_jobs_without_it_last(client, admin, runs):
    client.force_login(admin)
    params = {"col": ["metric:accuracy", "metric:loss"], "sort": "-metric:accuracy"}

    assert listed(client, params) == ["run_b", "run_a", "run_c", "run_d"]
    assert cells(client, params, 0) == ["0.95", "0.91", "0.8", "—"]
    assert cells(client, params, 1) == ["0.1", "0.2", "—", "—"]
    assert listed(client, params | {"sort": "metric:accuracy"}) == ["run_c", "run_a", "run_b", "run_d"]
    page = client.get(LIST, params).content.decode()
    assert re.search(r'<th scope="col" class="chosen-col num" aria-sort="descending"><a [^>]*>accuracy</a>', page)


def test_metric_column_filters_by_bounds_kept_in_the_url(client, admin, runs):
    client.force_login(admin)
    params = {"col": "metric:accuracy", "min.metric:accuracy": "0.85"}

    assert sorted(listed(client, params)) == ["run_a", "run_b"]
    assert listed(client, params | {"max.metric:accuracy": "0.92"}) == ["run_a"]
    page = client.get(LIST, params).content.decode()
    assert 'name="min.metric:accuracy" value="0.85"' in page
    assert "Clear filters" in page


def test_a_bound_on_a_column_not_chosen_and_malformed_values_are_ignored(client, admin, runs):
    client.force_login(admin)

    everyone = ["run_d", "run_c", "run_b", "run_a"]
    assert listed(client, {"min.metric:accuracy": "0.9"}) == everyone
    assert listed(client, {"col": ["metric:accuracy", "nonsense", "metric:"], "min.metric:accuracy": "abc"}) == everyone
    assert listed(client, {"sort": "-metric:accuracy"}) == everyone  # not a chosen column
    assert listed(client, {"type": "spaceship"}) == everyone
    query = JobListQuery.from_params({"col": "metric:accuracy", "min.metric:accuracy": "nan", "sort": "arg:--lr"})
    assert query.columns == ("metric:accuracy",) and query.minimum == () and query.sort == "-created"


def test_arg_column_shows_sorts_and_filters_flags_in_either_form(client, admin, runs):
    client.force_login(admin)
    params = {"col": ["arg:--lr", "arg:--optimizer"], "sort": "arg:--lr"}

    assert listed(client, params) == ["run_b", "run_a", "run_c", "run_d"]  # 0.01, 0.1, 0.3, none
    assert cells(client, params, 0) == ["0.01", "0.1", "0.3", "—"]
    assert cells(client, params, 1) == ["sgd", "adam", "—", "—"]
    assert listed(client, params | {"sort": "-arg:--lr"}) == ["run_c", "run_a", "run_b", "run_d"]
    assert listed(client, params | {"eq.arg:--optimizer": "adam"}) == ["run_a"]
    assert listed(client, params | {"min.arg:--lr": "0.05"}) == ["run_a", "run_c"]


def test_job_type_is_shown_and_filters_the_list(client, admin, project):
    client.force_login(admin)
    make_job(project, "plain", minutes=1)
    make_job(project, "study", minutes=2, training_input={"hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 2}})
    make_job(
        project,
        "boosted",
        minutes=3,
        training_input={"masterConfig": {"imageUri": "gcr.io/cloud-ml-algos/boosted_trees:latest"}},
    )
    make_job(project, "batch", minutes=4, training_input=None, prediction_input={"dataFormat": "JSON"})

    page = client.get(LIST).content.decode()
    shown = dict(re.findall(r'<tr data-job="(\w+)">.*?<td data-type="\w+">([^<]+)</td>', page, re.S))
    assert shown == {
        "plain": "Training",
        "study": "Hyperparameter tuning",
        "boosted": "Built-in algorithm",
        "batch": "Batch prediction",
    }
    assert listed(client, {"type": "training"}) == ["plain"]
    assert listed(client, {"type": "tuning"}) == ["study"]
    assert listed(client, {"type": "builtin"}) == ["boosted"]
    assert listed(client, {"type": "prediction"}) == ["batch"]


def test_a_label_in_the_list_links_to_the_list_filtered_by_it(client, admin, project):
    client.force_login(admin)
    make_job(project, "first", labels={"team": "ml"}, minutes=1)
    make_job(project, "second", labels={"team": "research"}, minutes=2)
    params = {"col": "metric:accuracy", "sort": "-created"}

    page = client.get(LIST, params).content.decode()
    link = html.unescape(re.search(r'<a class="label" href="([^"]+)"[^>]*>team=ml</a>', page)[1])

    assert "label=team%3Dml" in link and "col=metric%3Aaccuracy" in link  # keeps the chosen columns
    assert re.findall(r'name="jobs" value="([^"]+)"', client.get(LIST + link).content.decode()) == ["first"]


def test_the_list_shows_a_long_note_shortened_with_the_whole_of_it_a_click_away(client, admin, project):
    client.force_login(admin)
    make_job(project, "short", note="lr too high", minutes=1)
    make_job(project, "long", note="x" * 100 + " the end", minutes=2)

    page = client.get(LIST).content.decode()

    assert "<span data-note>lr too high</span>" in page
    assert re.search(r"<details data-note><summary title=\"x{100} the end\">x{60}…</summary>", page)


# --- the job page: labels and note ---------------------------------------------------------------


def labels_url(job_id="run_a"):
    return f"/projects/project-a/jobs/{job_id}/labels/"


def note_url(job_id="run_a"):
    return f"/projects/project-a/jobs/{job_id}/note/"


def test_admin_saves_labels_through_the_audited_patch(client, admin, runs):
    client.force_login(admin)

    response = client.post(labels_url(), {"labels": "team=ml\n\nenv = prod\n"}, headers={"HX-Request": "true"})

    assert response.status_code == 200 and "Labels saved." in response.content.decode()
    assert Job.objects.get(job_id="run_a").labels == {"team": "ml", "env": "prod"}
    entry = AuditEntry.objects.filter(method_name="google.cloud.ml.v1.JobService.UpdateJob").get()
    assert entry.principal.startswith("alice_admin") and entry.request["updateMask"] == "labels"
    assert entry.resource_name == "projects/project-a/jobs/run_a"


def test_invalid_labels_name_the_field_and_rule_and_keep_what_was_typed(client, admin, runs):
    client.force_login(admin)
    typed = "Team=ml\nnot a pair"

    page = client.post(labels_url(), {"labels": typed}, headers={"HX-Request": "true"})
    assert 'role="alert"' in page.content.decode()
    assert "Labels, line 2: “not a pair” is not key=value." in html.unescape(page.content.decode())
    page = client.post(labels_url(), {"labels": "Team=ml"})  # without JavaScript: its own page
    text = html.unescape(page.content.decode())
    assert page.status_code == 400
    assert "Labels: Label key 'Team' is invalid" in text or 'Labels: Label key "Team" is invalid' in text
    assert ">Team=ml</textarea>" in text
    assert Job.objects.get(job_id="run_a").labels == {}


def test_admin_saves_a_note_audited_and_shown_on_the_job_page(client, admin, runs):
    client.force_login(admin)

    response = client.post(note_url(), {"note": "  lr 0.1 overfits after epoch 3\r\nnext: dropout  "})

    assert response.status_code == 302
    assert Job.objects.get(job_id="run_a").note == "lr 0.1 overfits after epoch 3\nnext: dropout"
    entry = AuditEntry.objects.filter(method_name="google.cloud.ml.v1.JobService.UpdateJob").get()
    assert entry.request == {
        "name": "projects/project-a/jobs/run_a",
        "updateMask": "note",
        "job": {"note": "lr 0.1 overfits after epoch 3\nnext: dropout"},
    }
    page = client.get("/projects/project-a/jobs/run_a/").content.decode()
    assert "lr 0.1 overfits after epoch 3" in page and 'id="job-note"' in page


def test_a_note_over_500_characters_is_refused_keeping_the_text(client, admin, runs):
    client.force_login(admin)
    typed = "y" * 501

    page = client.post(note_url(), {"note": typed}, headers={"HX-Request": "true"})

    text = page.content.decode()
    assert "Note: A note is at most 500 characters; this one has 501." in text
    assert f">{typed}</textarea>" in text and 'aria-invalid="true"' in text
    assert Job.objects.get(job_id="run_a").note == ""


def test_one_save_keeps_a_typed_note_when_the_labels_are_refused_then_saves_both(client, admin, runs):
    """The panel is one form: a note typed beside a bad label is neither lost nor half-saved."""
    client.force_login(admin)
    typed = {"labels": "Team=ml", "note": "lr 0.1 overfits"}

    page = client.post(labels_url(), typed, headers={"HX-Request": "true"})
    text = html.unescape(page.content.decode())
    assert 'role="alert"' in text and ">Team=ml</textarea>" in text and ">lr 0.1 overfits</textarea>" in text
    job = Job.objects.get(job_id="run_a")
    assert job.labels == {} and job.note == ""  # neither saved

    page = client.post(labels_url(), {**typed, "labels": "team=ml"}, headers={"HX-Request": "true"})
    assert "Labels and note saved." in page.content.decode()
    job = Job.objects.get(job_id="run_a")
    assert job.labels == {"team": "ml"} and job.note == "lr 0.1 overfits"

    again = client.post(labels_url(), {**typed, "labels": "team=ml"}, headers={"HX-Request": "true"})
    assert "Nothing changed" in again.content.decode()
    assert AuditEntry.objects.filter(method_name="google.cloud.ml.v1.JobService.UpdateJob").count() == 2


def test_a_refused_note_saves_no_label_either(client, admin, runs):
    client.force_login(admin)
    page = client.post(labels_url(), {"labels": "team=ml", "note": "y" * 501}, headers={"HX-Request": "true"})
    assert "Note: A note is at most 500 characters" in page.content.decode()
    assert Job.objects.get(job_id="run_a").labels == {}


@pytest.mark.parametrize("persona", ["viewer", "developer"])  # neither holds ml.jobs.update
def test_viewer_cannot_edit_labels_or_note(client, persona, request, runs):
    client.force_login(request.getfixturevalue(persona))

    assert client.post(labels_url(), {"labels": "team=ml"}).status_code == 403
    assert client.post(labels_url(), {"labels": "", "note": ""}).status_code == 403  # even changing nothing
    assert client.post(note_url(), {"note": "mine"}).status_code == 403
    job = Job.objects.get(job_id="run_a")
    assert job.labels == {} and job.note == ""
    page = client.get("/projects/project-a/jobs/run_a/").content.decode()
    assert 'id="job-annotations"' in page and 'id="job-labels"' not in page  # shown, not editable


def test_outsider_gets_404_for_editing_a_note(client, outsider, runs):
    client.force_login(outsider)

    assert client.post(note_url(), {"note": "mine"}).status_code == 404


# --- at scale -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ten_thousand_jobs_sorted_by_a_final_metric_show_the_right_first_page(client, admin, project):
    client.force_login(admin)
    count = 10_000
    Job.objects.bulk_create(
        Job(
            project=project,
            job_id=f"job_{i:05d}",
            state=JobState.SUCCEEDED,
            training_input={"scaleTier": "BASIC", "args": [f"--seed={i}"]},
            create_time=T0 + timedelta(seconds=i),
        )
        for i in range(count)
    )
    ids = dict(Job.objects.values_list("job_id", "pk"))
    # accuracy: a permutation of 0..count-1 / count (so no ties); every third job has no loss.
    accuracy = {i: ((i * 7919) % count) / count for i in range(count)}
    JobMetric.objects.bulk_create(
        [JobMetric(job_id=ids[f"job_{i:05d}"], name="accuracy", step=100, value=accuracy[i]) for i in range(count)]
        + [
            JobMetric(job_id=ids[f"job_{i:05d}"], name="loss", step=100, value=1 - accuracy[i])
            for i in range(count)
            if i % 3
        ],
        batch_size=2000,
    )
    params = {"col": ["metric:accuracy", "metric:loss"], "sort": "-metric:accuracy"}

    best = sorted(range(count), key=lambda i: -accuracy[i])
    assert listed(client, params) == [f"job_{i:05d}" for i in best[:100]]
    assert listed(client, params | {"page": "2"}) == [f"job_{i:05d}" for i in best[100:200]]
    assert cells(client, params, 0)[0] == "0.9999"
    filtered = params | {"min.metric:loss": "0.5", "sort": "metric:loss"}
    by_loss = sorted((i for i in range(count) if i % 3 and 1 - accuracy[i] >= 0.5), key=lambda i: 1 - accuracy[i])
    assert listed(client, filtered) == [f"job_{i:05d}" for i in by_loss[:100]]

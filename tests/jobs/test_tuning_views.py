"""The job page's trials table."""

from __future__ import annotations

import json
import re

from django.utils import timezone

from jobs.metrics import charts
from jobs.models import JobState, Trial
from tests.helpers.jobs import body


def test_job_page_lists_trials_with_their_outcome(client, project, admin):
    from jobs import services

    spec = {
        "maxTrials": 3,
        "hyperparameterMetricTag": "Taxi Model Accuracy",
        "params": [{"parameterName": "max-depth", "type": "INTEGER", "minValue": 1, "maxValue": 9}],
    }
    job = services.submit_job(project, body("tuned", hyperparameters=spec), actor=admin)
    now = timezone.now()
    Trial.objects.create(
        job=job,
        trial_id="1",
        number=1,
        hyperparameters={"max-depth": "3"},
        start_time=now,
        end_time=now,
        state=JobState.SUCCEEDED,
        is_stopped_early=True,
        final_metric={"trainingStep": "40", "objectiveValue": 0.875},
    )
    Trial.objects.create(job=job, trial_id="2", number=2, hyperparameters={"max-depth": "7"}, state=JobState.SUCCEEDED)
    Trial.objects.create(
        job=job,
        trial_id="3",
        number=3,
        hyperparameters={"max-depth": "8"},
        state=JobState.FAILED,
        error_message="ValueError: bad depth",
    )
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/tuned/").content.decode()

    assert 'id="trials"' in html
    assert re.search(r'data-sort-key="p.max-depth"[^>]*>max-depth</a>', html)  # a column per parameter
    row = re.search(r'<tr data-trial="1".*?</tr>', html).group(0)
    assert '<td class="number">3</td>' in row and "0.875" in row and '<td class="number">40</td>' in row
    assert "Stopped early" in row
    assert "no metric reported" in html
    assert "ValueError: bad depth" in html


def test_plain_job_page_has_no_trials_section(client, project, admin):
    from jobs import services

    services.submit_job(project, body("plain"), actor=admin)
    client.force_login(admin)
    assert 'id="trials"' not in client.get("/projects/project-a/jobs/plain/").content.decode()


def test_trial_table_refreshes_itself_while_the_study_runs(client, project, admin):
    from aiconsole.models import AuditEntry
    from jobs import services

    spec = {"maxTrials": 3, "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}
    job = services.submit_job(project, body("live", hyperparameters=spec), actor=admin)
    Trial.objects.create(
        job=job, trial_id="1", number=1, hyperparameters={"x": "0.5"}, state=JobState.RUNNING, start_time=timezone.now()
    )
    project.data_access_logs = True
    project.save()
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/live/").content.decode()
    assert re.search(r'id="trial-table"[^>]*hx-get="/projects/project-a/jobs/live/fragments/trials/', html)
    assert 'hx-trigger="every 3s"' in html

    Trial.objects.create(
        job=job,
        trial_id="2",
        number=2,
        hyperparameters={"x": "0.9"},
        state=JobState.SUCCEEDED,
        final_metric={"trainingStep": "1", "objectiveValue": 0.42},
    )
    audited = AuditEntry.objects.count()
    fragment = client.get(
        "/projects/project-a/jobs/live/fragments/trials/?trial_sort=&trial_state=", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert fragment.lstrip().startswith('<div class="table-scroll trial-scroll" id="trial-table"')
    assert '<td class="number">0.9</td>' in fragment and "0.42" in fragment
    assert AuditEntry.objects.count() == audited  # the page's own refresh is not a new Data Access read

    job.state = JobState.SUCCEEDED
    job.save()
    assert 'hx-trigger="every 3s"' not in client.get("/projects/project-a/jobs/live/").content.decode()


def test_study_charts_refresh_themselves_while_the_study_runs(client, project, admin):
    from jobs import services
    from jobs.executor.trials import training_output
    from jobs.models import Job

    spec = {
        "maxTrials": 4,
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "score",
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
    }
    job = services.submit_job(project, body("charts", hyperparameters=spec), actor=admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/charts/").content.decode()
    assert 'id="study-charts" hx-get="/projects/project-a/jobs/charts/fragments/charts/' in page
    assert "Optimization history" not in page  # no trial yet: nothing to draw

    for number, (x, score) in enumerate([("0.2", 0.4), ("0.7", 0.9)], start=1):
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters={"x": x},
            state=JobState.SUCCEEDED,
            final_metric={"trainingStep": "1", "objectiveValue": score},
        )
    Job.objects.filter(pk=job.pk).update(training_output=training_output(job, spec))
    fragment = client.get("/projects/project-a/jobs/charts/fragments/charts/", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="study-charts"')
    assert "Optimization history" in fragment and '<script type="application/json" class="chart-figure">' in fragment

    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    assert 'hx-trigger="every 10s"' not in client.get("/projects/project-a/jobs/charts/").content.decode()


def finished_study(project, admin, trials: int = 12):
    """A finished study of ``trials`` trials over three parameters, one of them categorical."""
    from jobs import services
    from jobs.executor.trials import training_output
    from jobs.models import Job

    spec = {
        "maxTrials": trials,
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "score",
        "params": [
            {"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1},
            {"parameterName": "y", "type": "DOUBLE", "minValue": 0, "maxValue": 1},
            {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["plain", "a</script><b>"]},
        ],
    }
    job = services.submit_job(project, body("done", hyperparameters=spec), actor=admin)
    for n in range(1, trials + 1):
        x, y = (n * 0.37) % 1, (n * 0.61) % 1
        Trial.objects.create(
            job=job,
            trial_id=str(n),
            number=n,
            state=JobState.SUCCEEDED,
            hyperparameters={"x": repr(x), "y": repr(y), "kind": ["plain", "a</script><b>"][n % 2]},
            final_metric={"trainingStep": "2", "objectiveValue": x - y},
            all_metrics=[
                {"trainingStep": "1", "objectiveValue": x - y - 0.1},
                {"trainingStep": "2", "objectiveValue": x - y},
            ],
        )
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, training_output=training_output(job, spec))
    return job


def test_study_page_shows_at_once_and_fetches_its_charts_when_their_tab_is_shown(client, project, admin):
    finished_study(project, admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/done/?contour_x=y&contour_y=x").content.decode()
    assert 'data-trial="12"' in page  # the trial table is in the page
    assert "Optimization history" not in page and "Loading the charts" in page
    assert (
        'id="study-charts" hx-get="/projects/project-a/jobs/done/fragments/charts/'
        '?contour_x=y&amp;contour_y=x&amp;parallel=" '
        'hx-trigger="tab:shown once from:closest [data-tab]"'
    ) in page
    # A link to a chart opens the Charts tab before its charts are in the page (static/console.js).
    assert 'id="study-charts-section" data-tab="charts" data-holds="chart-"' in page
    assert 'href="?charts=inline&amp;contour_x=y&amp;contour_y=x#study-charts"' in page  # without JavaScript

    fragment = client.get(
        "/projects/project-a/jobs/done/fragments/charts/?contour_x=y&contour_y=x", HTTP_HX_REQUEST="true"
    ).content.decode()
    titles = re.findall(r"<figcaption>(.*?)</figcaption>", fragment)
    assert titles == [
        "Optimization history",
        "Parallel coordinates",
        "Slice: x",
        "Slice: y",
        "Slice: kind",
        "Contour: y × x",
        "Intermediate values",
        "Parameter importance",
    ]
    # Each chart's data as a table, fetched when its Data is opened (not sent with every chart).
    assert "<table>" not in fragment
    lazy = '<details class="chart-data" hx-get="/projects/project-a/jobs/done/fragments/chart-data/'
    assert fragment.count(lazy) == 8
    assert 'fragments/chart-data/?chart=3&amp;contour_x=y&amp;contour_y=x&amp;parallel="' in fragment  # Slice: x
    table = client.get(
        "/projects/project-a/jobs/done/fragments/chart-data/?chart=3&contour_x=y&contour_y=x", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert table.startswith('<table><thead><tr><th scope="col">Trial</th><th scope="col">x</th>')
    assert table.count("<tr>") == 13  # the heading and the 12 trials
    assert 'hx-trigger="every 10s"' not in fragment  # finished: nothing more to fetch
    assert '<select id="contour-x" name="contour_x">' in fragment


def test_study_chart_figures_are_json_that_no_value_can_break_out_of(client, project, admin):
    finished_study(project, admin)
    client.force_login(admin)
    fragment = client.get("/projects/project-a/jobs/done/fragments/charts/", HTTP_HX_REQUEST="true").content.decode()
    assert "a</script>" not in fragment
    figures = [
        json.loads(text)
        for text in re.findall(r'<script type="application/json" class="chart-figure">(.*?)</script>', fragment)
    ]
    assert len(figures) == 7
    assert all(f["config"] == charts.CONFIG for f in figures)  # the offline toolbar
    assert all(f["layout"]["template"]["layout"]["paper_bgcolor"] == "white" for f in figures)  # plotly_white
    kinds = figures[3]["data"][0]["x"]
    assert "a</script><b>" in kinds and "plain" in kinds
    # The parallel coordinates' data (drawn as SVG by static/parallel.js, not by Plotly) too.
    parallel = re.findall(
        r'<script type="application/json" class="chart-figure" data-chart="parallel">(.*?)</script>', fragment
    )
    axes = json.loads(parallel[0])["axes"]
    assert len(parallel) == 1 and any("a</script><b>" in axis.get("categories", []) for axis in axes)
    table = client.get("/projects/project-a/jobs/done/fragments/chart-data/?chart=5", HTTP_HX_REQUEST="true")
    assert "a&lt;/script&gt;&lt;b&gt;" in table.content.decode()  # and the data table shows it as text


def test_study_charts_render_in_the_page_for_a_browser_without_javascript(client, project, admin):
    finished_study(project, admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/done/?charts=inline").content.decode()
    assert "Loading the charts" not in page and "Optimization history" in page
    assert page.count("<details><summary>Data</summary><table>") == 8
    assert '<input type="hidden" name="charts" value="inline">' in page  # the contour form keeps it so


def test_a_finished_studys_charts_are_built_once_per_view_and_kept(client, project, admin):
    from jobs.tuning import kept

    kept.reset()
    finished_study(project, admin)
    client.force_login(admin)
    url = "/projects/project-a/jobs/done/fragments/charts/"
    first = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    again = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert again == first and (kept.stats.misses, kept.stats.hits) == (1, 1)
    # Opening a chart's Data reads the kept charts too; another contour pair is another view.
    assert client.get(url.replace("charts", "chart-data") + "?chart=1").status_code == 200
    assert kept.stats.hits == 2
    other = client.get(url + "?contour_x=y&contour_y=kind", HTTP_HX_REQUEST="true").content.decode()
    assert "Contour: y × kind" in other and kept.stats.misses == 2
    kept.reset()


def test_a_running_studys_charts_are_built_each_time(client, project, admin):
    from jobs.models import Job
    from jobs.tuning import kept

    kept.reset()
    job = finished_study(project, admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    client.force_login(admin)
    for _ in range(2):
        assert client.get("/projects/project-a/jobs/done/fragments/charts/").status_code == 200
    assert (kept.stats.misses, kept.stats.hits, kept.held()) == (0, 0, 0)


def test_kept_charts_stay_within_their_memory_bound(client, project, admin, settings):
    from jobs.tuning import kept

    kept.reset()
    finished_study(project, admin)
    client.force_login(admin)
    url = "/projects/project-a/jobs/done/fragments/charts/"
    settings.STUDY_CHARTS_CACHE_MB = 0  # none kept: every view built again
    client.get(url)
    client.get(url)
    assert kept.stats.hits == 0 and kept.held() == 0
    settings.STUDY_CHARTS_CACHE_MB = 1
    for pair in ("x&contour_y=y", "y&contour_y=x", "kind&contour_y=x", "x&contour_y=kind"):
        client.get(f"{url}?contour_x={pair}")
        assert 0 < kept.held() <= 1024 * 1024
    kept.reset()


def test_a_charts_data_table_is_only_for_who_may_see_the_study(client, project, admin, viewer, outsider):
    finished_study(project, admin)
    url = "/projects/project-a/jobs/done/fragments/chart-data/?chart=parallel"
    client.force_login(viewer)
    assert client.get(url).status_code == 200
    assert client.get(url.replace("parallel", "nothing")).status_code == 404
    client.force_login(outsider)
    assert client.get(url).status_code == 404


def test_learning_curves_of_a_large_study_are_lines_without_markers():
    from jobs.tuning import charts

    def trials(count):
        return [
            {
                "trialId": str(n),
                "state": "SUCCEEDED",
                "allMetrics": [{"trainingStep": str(s), "objectiveValue": 0.1 * s} for s in range(1, 11)],
            }
            for n in range(1, count + 1)
        ]

    assert charts.intermediate_values(trials(100)).figure.data[0].mode == "lines+markers"
    big = charts.intermediate_values(trials(2000))
    assert big.figure.data[0].mode == "lines" and len(big.rows) == 2000  # every report still in the table


def test_a_trial_links_to_its_files_only_where_the_study_has_a_job_dir(client, project, admin, settings):
    from jobs import services

    spec = {"maxTrials": 1, "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}
    folder = settings.STORAGE_DIR / "job-dirs" / project.project_id / "kept"
    for job_id, extra in (("nodir", {}), ("kept", {"jobDir": str(folder)})):
        job = services.submit_job(project, body(job_id, hyperparameters=spec, **extra), actor=admin)
        Trial.objects.create(job=job, trial_id="1", number=1, hyperparameters={"x": "0.5"}, state=JobState.SUCCEEDED)
    client.force_login(admin)

    bare = client.get("/projects/project-a/jobs/nodir/").content.decode()
    row = re.search(r'<tr data-trial="1".*?</tr>', bare, re.S).group(0)
    assert 'aria-label="Logs of trial 1"' in row and "outputs/?trial=" not in row  # no folder to browse
    assert '<th scope="col">Logs</th>' in bare
    kept = client.get("/projects/project-a/jobs/kept/").content.decode()
    row = re.search(r'<tr data-trial="1".*?</tr>', kept, re.S).group(0)
    assert '<a href="outputs/?trial=1" aria-label="Files of trial 1">Files</a>' in row
    assert '<th scope="col">Logs and files</th>' in kept
    # The table's refresh says the same as the page.
    fragment = client.get("/projects/project-a/jobs/nodir/fragments/trials/", HTTP_HX_REQUEST="true").content.decode()
    assert "Logs of trial 1" in fragment and "Files of trial" not in fragment

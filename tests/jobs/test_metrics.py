"""Every job's metrics: read from hypertune reports and TF summaries while it runs, kept after it
ends, listed by GET /v1/projects/{p}/jobs/{j}/metrics and charted on the job page."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from aiconsole import iam
from aiconsole.tokens import create_token
from bench.support.waiting import wait_for
from jobs import services
from jobs.metrics import curves
from jobs.metrics import points as metrics
from jobs.models import Job, JobState
from tests.helpers.jobs import log_text, submit
from tests.helpers.metrics import HYPERTUNE_TASK, job_dir_for, store_points

RFC3339 = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"


@pytest.fixture
def get_metrics(client):
    tokens: dict = {}

    def get(job, user, **params):
        if user.pk not in tokens:
            tokens[user.pk] = create_token(user)[1]
        return client.get(
            f"/v1/projects/{job.project.project_id}/jobs/{job.job_id}/metrics",
            params,
            HTTP_AUTHORIZATION=f"Bearer {tokens[user.pk]}",
        )

    return get


def every_point(get, job, user, **params) -> list[dict]:
    points, token = [], ""
    while True:
        answer = get(job, user, **params, **({"pageToken": token} if token else {}))
        assert answer.status_code == 200, answer.content
        points += answer.json()["metrics"]
        token = answer.json().get("nextPageToken")
        if not token:
            return points


# --- pure pieces -------------------------------------------------------------------------------------


def test_every_tag_of_a_hypertune_file_is_read_and_torn_lines_are_skipped():
    text = "\n".join(
        [
            json.dumps({"timestamp": 1.5, "trial": "0", "accuracy": "0.5", "global_step": "1", "checkpoint_path": ""}),
            json.dumps({"timestamp": 2.5, "trial": "0", "loss": "0.25", "global_step": "2", "checkpoint_path": ""}),
            json.dumps({"timestamp": 3.5, "trial": "0", "loss": "nan", "global_step": "3"}),
            '{"timestamp": 4.5, "trial": "0", "los',  # being rewritten by the library
        ]
    )
    assert metrics.parse_hypertune(text) == [
        metrics.Report("accuracy", 1, 0.5, 1.5),
        metrics.Report("loss", 2, 0.25, 2.5),
    ]


def test_metric_charts_overlay_runs_per_tag_and_thin_long_lines():
    rows = [("loss", "", "train", "tfevents", step, 1.0, 1e9 + step) for step in range(5000)]
    rows += [("loss", "", "validation", "tfevents", step, 2.0, 1e9 + step) for step in range(0, 5000, 1000)]
    rows += [("accuracy", "", "", "hypertune", 1, 0.9, 1e9)]
    accuracy, loss = curves.metric_charts(rows)
    assert (accuracy.title, loss.title) == ("accuracy", "loss")
    assert [trace.name for trace in loss.figure.data] == ["train", "validation"]
    assert [trace.name for trace in accuracy.figure.data] == ["hypertune"]
    train = loss.figure.data[0]
    assert len(train.x) <= curves.METRIC_POINTS_PER_SERIES + 1 and train.x[-1] == 4999
    assert "thinned" in loss.note and loss.columns == ["Run", "Step", "Value"]


def test_the_consoles_memory_and_network_samples_are_drawn_in_bytes_with_si_prefixes():
    limit = 16_106_127_360  # 15 GiB, once shown as 16.106127361B ("B" for billions)
    rows = [
        ("system/memory_bytes_used", "", "master-replica-0", "system", step, 2.5e8, 1e9 + step) for step in range(3)
    ]
    rows += [
        ("system/memory_bytes_limit", "", "master-replica-0", "system", step, limit, 1e9 + step) for step in range(3)
    ]
    rows += [("system/cpu_utilization", "", "master-replica-0", "system", step, 0.5, 1e9 + step) for step in range(3)]
    rows += [("bytes_seen", "", "", "hypertune", 1, 3.0, 1e9)]  # a trainer's own metric keeps plain numbers
    charts = {chart.title: chart for chart in curves.metric_charts(rows)}
    memory = charts["system/memory_bytes_used"].figure.layout.yaxis
    assert (memory.tickformat, memory.ticksuffix) == (".3~s", "B")  # 16.1GB, 250MB
    limit_axis = charts["system/memory_bytes_limit"].figure.layout.yaxis
    assert (limit_axis.ticksuffix, limit_axis.rangemode) == ("B", "tozero")  # a constant line still gets ticks apart
    assert charts["system/cpu_utilization"].figure.layout.yaxis.ticksuffix is None
    assert charts["bytes_seen"].figure.layout.yaxis.ticksuffix is None


# --- the REST endpoint ---------------------------------------------------------------------------------


def test_points_come_in_the_contract_form_and_filter_by_tag_and_trial(get_metrics, project, admin):
    job = submit(project, "stored", admin)
    store_points(job, 3)
    store_points(job, 2, tag="accuracy", run="validation", trial_id="2")

    answer = get_metrics(job, admin)
    assert answer.status_code == 200, answer.content
    first = answer.json()["metrics"][0]
    assert set(first) == {"tag", "step", "value", "time", "trialId", "source", "run"}
    assert (first["tag"], first["step"], first["value"], first["trialId"], first["source"], first["run"]) == (
        "loss",
        "0",
        1.0,
        "",
        "tfevents",
        "train",
    )
    assert re.match(RFC3339, first["time"]), first["time"]
    assert "nextPageToken" not in answer.json()
    assert [p["tag"] for p in get_metrics(job, admin, tag="accuracy").json()["metrics"]] == ["accuracy"] * 2
    assert [p["trialId"] for p in get_metrics(job, admin, trialId="2").json()["metrics"]] == ["2", "2"]
    assert get_metrics(job, admin, tag="nothing").json() == {"metrics": []}


def test_paging_returns_every_point_once_in_recorded_order(get_metrics, project, admin):
    job = submit(project, "paged", admin)
    store_points(job, 25)

    first = get_metrics(job, admin, pageSize=10).json()
    assert len(first["metrics"]) == 10 and first["nextPageToken"]
    points = every_point(get_metrics, job, admin, pageSize=10)
    assert [p["step"] for p in points] == [str(n) for n in range(25)]
    assert len(get_metrics(job, admin).json()["metrics"]) == 25  # default page size 1,000


def test_a_bad_page_token_or_size_is_invalid_argument(get_metrics, project, admin):
    job = submit(project, "bad_page", admin)
    for params in ({"pageToken": "forged"}, {"pageSize": "-3"}, {"pageSize": "many"}):
        answer = get_metrics(job, admin, **params)
        assert answer.status_code == 400, params
        assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_outsider_gets_404_and_viewer_reads_metrics(get_metrics, project, admin, viewer, outsider):
    job = submit(project, "private", admin)
    store_points(job, 2)
    answer = get_metrics(job, outsider)
    assert answer.status_code == 404 and answer.json()["error"]["status"] == "NOT_FOUND"
    assert len(get_metrics(job, viewer).json()["metrics"]) == 2


def test_member_without_jobs_get_gets_403(get_metrics, project, admin, django_user_model):
    job = submit(project, "guarded", admin)
    user = django_user_model.objects.create_user("mona_model_user", password="pw-mona")
    iam.grant(user, "roles/ml.modelUser", project)
    answer = get_metrics(job, user)
    assert answer.status_code == 403 and "ml.jobs.get" in answer.json()["error"]["message"]


def test_a_missing_job_is_404_in_the_envelope(get_metrics, project, admin):
    job = submit(project, "exists", admin)
    job.job_id = "missing"
    assert get_metrics(job, admin).json()["error"]["status"] == "NOT_FOUND"


# --- the job page ----------------------------------------------------------------------------------------


def test_job_page_loads_the_metrics_panel_with_a_chart_per_tag_and_csv(client, project, admin, viewer, outsider):
    job = submit(project, "charted", admin)
    store_points(job, 3, run="train")
    store_points(job, 3, run="validation")
    store_points(job, 2, tag="accuracy", run="validation")
    client.force_login(viewer)

    page = client.get("/projects/project-a/jobs/charted/").content.decode()
    assert 'hx-get="/projects/project-a/jobs/charted/metrics/"' in page
    panel = client.get("/projects/project-a/jobs/charted/metrics/").content.decode()
    assert panel.count('class="chart metric-chart"') == 2
    assert panel.count('script type="application/json" class="chart-figure"') == 2
    assert "every 5s" in panel  # QUEUED: it refreshes itself
    assert "Data table: loss" in panel and "<td>validation</td>" in panel

    download = client.get("/projects/project-a/jobs/charted/metrics/download/", {"tag": "loss"})
    assert download["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert len(rows) == 6 and rows[0]["run"] == "train" and rows[3]["run"] == "validation"
    assert list(rows[0]) == metrics.CSV_COLUMNS

    client.force_login(outsider)
    assert client.get("/projects/project-a/jobs/charted/metrics/").status_code == 404
    assert client.get("/projects/project-a/jobs/charted/metrics/download/").status_code == 404


def test_loss_and_val_loss_share_a_chart_whose_csv_has_both(client, project, admin):
    job = submit(project, "twins", admin)
    store_points(job, 3, tag="loss")
    store_points(job, 2, tag="val_loss")
    store_points(job, 2, tag="accuracy")
    client.force_login(admin)
    panel = client.get("/projects/project-a/jobs/twins/metrics/").content.decode()
    assert panel.count('class="chart metric-chart"') == 2 and 'id="chart-metric-loss"' in panel
    assert "/metrics/download/?tag=loss&amp;tag=val_loss" in panel

    download = client.get("/projects/project-a/jobs/twins/metrics/download/?tag=loss&tag=val_loss")
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert sorted({r["tag"] for r in rows}) == ["loss", "val_loss"] and len(rows) == 5
    assert download["Content-Disposition"] == 'attachment; filename="twins-metrics-loss_val_loss.csv"'


def test_finished_job_panel_stops_refreshing(client, project, admin):
    job = submit(project, "quiet", admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    client.force_login(admin)
    panel = client.get("/projects/project-a/jobs/quiet/metrics/").content.decode()
    assert "hx-trigger" not in panel and "No metrics were reported" in panel


# --- real trainers -----------------------------------------------------------------------------------------


@pytest.mark.executor
def test_plain_hypertune_job_lists_its_metrics_live_and_after_its_job_dir_is_gone(
    executor, job_body, admin, project, package_factory, get_metrics
):
    job_dir = job_dir_for("hypertuned")
    job = services.submit_job(
        project, job_body("hypertuned", package_factory(HYPERTUNE_TASK), jobDir=job_dir), actor=admin
    )

    def live_points():
        points = get_metrics(job, admin).json()["metrics"]
        return points if len(points) == 2 else None

    live = wait_for(live_points, 120, interval=0.2, message="the first reports while the job runs")
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert {(p["tag"], p["step"], p["value"], p["source"], p["run"], p["trialId"]) for p in live} == {
        ("accuracy", "1", 0.5, "hypertune", "", ""),
        ("loss", "1", 2.0, "hypertune", "", ""),
    }
    Path(job_dir, "go").touch()
    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 60, message="the job to end")
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]

    shutil.rmtree(job_dir)
    accuracy = every_point(get_metrics, job, admin, tag="accuracy")
    assert [(p["step"], p["value"]) for p in accuracy] == [("1", 0.5), ("2", 0.7), ("3", 0.8)]
    assert {p["source"] for p in accuracy} == {"hypertune"}


SUMMARY_TASK = """
    import struct
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def keras_scalar(tag, value):  # as tf.summary.scalar (Keras' TensorBoard callback) writes it
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                        tensor_content=struct.pack("<f", value))
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
        return summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor)

    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    writers = {run: EventFileWriter(os.path.join(job_dir, run)) for run in ("train", "validation")}
    for epoch in range(3):
        for run, writer in writers.items():
            loss = 1.0 / (epoch + 1) + (0.5 if run == "validation" else 0.0)
            writer.add_event(event_pb2.Event(step=epoch, wall_time=time.time(),
                                             summary=summary_pb2.Summary(value=[keras_scalar("epoch_loss", loss)])))
            writer.flush()
    for writer in writers.values():
        writer.close()
"""


@pytest.mark.executor
def test_job_writing_tf_summaries_lists_them_per_run(run_job, package_factory, get_metrics, admin):
    job = run_job("summarized", package_factory(SUMMARY_TASK), jobDir=job_dir_for("summarized"))
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]

    points = every_point(get_metrics, job, admin, pageSize=2)
    assert {p["source"] for p in points} == {"tfevents"}
    by_run = {
        run: [(p["step"], round(p["value"], 3)) for p in points if p["run"] == run] for run in ("train", "validation")
    }
    assert by_run == {
        "train": [("0", 1.0), ("1", 0.5), ("2", 0.333)],
        "validation": [("0", 1.5), ("1", 1.0), ("2", 0.833)],
    }
    assert {p["tag"] for p in points} == {"epoch_loss"}


TRIAL_TASK = """
    import hypertune

    x = float(next(a for a in sys.argv if a.startswith("--x=")).split("=", 1)[1])
    reporter = hypertune.HyperTune()
    for step in (1, 2):
        reporter.report_hyperparameter_tuning_metric("score", x * step, global_step=step)
        reporter.report_hyperparameter_tuning_metric("other", -x, global_step=step)
"""


@pytest.mark.executor
def test_tuning_trials_metrics_carry_their_trial_id_and_every_tag(run_job, package_factory, get_metrics, admin):
    job = run_job(
        "tuned_metrics",
        package_factory(TRIAL_TASK),
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "score",
            "algorithm": "GRID_SEARCH",
            "maxTrials": 2,
            "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [1, 2]}],
        },
    )
    assert job.state == JobState.SUCCEEDED, job.error_message

    points = [p for p in every_point(get_metrics, job, admin) if p["source"] != "system"]  # the trials' own
    assert {(p["trialId"], p["tag"]) for p in points} == {
        ("1", "score"),
        ("1", "other"),
        ("2", "score"),
        ("2", "other"),
    }
    second = every_point(get_metrics, job, admin, trialId="2", tag="score")
    x = float(job.trials.get(trial_id="2").hyperparameters["x"])
    assert [(p["step"], p["value"]) for p in second] == [("1", x), ("2", 2 * x)]


KERAS_TASK = """
    import numpy as np
    import tensorflow as tf

    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    features = np.random.RandomState(0).rand(64, 4).astype("float32")
    labels = (features.sum(axis=1) > 2).astype("float32")
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu", input_shape=(4,)),
                                 tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(features, labels, epochs=3, validation_split=0.25, verbose=0,
              callbacks=[tf.keras.callbacks.TensorBoard(log_dir=os.path.join(job_dir, "logs"))])
"""


@pytest.mark.executor
def test_a_keras_job_with_a_tensorboard_callback_lists_its_curves_per_run(run_job, package_factory, get_metrics, admin):
    job = run_job(
        "keras_curves",
        package_factory(KERAS_TASK),
        jobDir=job_dir_for("keras_curves"),
        runtimeVersion="2.11",
        pythonVersion="3.7",
    )
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]

    points = every_point(get_metrics, job, admin)
    assert {p["source"] for p in points} == {"tfevents"}
    steps: dict[tuple[str, str], list[int]] = {}
    for point in points:
        steps.setdefault((point["run"], point["tag"]), []).append(int(point["step"]))
    curves = [(run, tag) for run in ("logs/train", "logs/validation") for tag in ("epoch_loss", "epoch_accuracy")]
    # Keras' own per-epoch curves; TF 2.11 also writes evaluation_*_vs_iterations under validation.
    assert {key: sorted(steps.get(key, [])) for key in curves} == {key: [0, 1, 2] for key in curves}
    assert all(0.0 <= p["value"] <= 1.0 for p in points if p["tag"] == "epoch_accuracy")


@pytest.mark.executor
def test_a_job_reusing_anothers_job_dir_draws_only_its_own_curves(run_job, package_factory, get_metrics, admin):
    """A clone run in its original's job dir: the original's event files are there; the clone's
    metrics are what the clone wrote, and its log says the folder was used before."""
    shared = job_dir_for("first_run")
    first = run_job("first_run", package_factory(SUMMARY_TASK), jobDir=shared)
    assert first.state == JobState.SUCCEEDED, log_text(first)[-2000:]
    second = run_job("second_run", package_factory("print('no summaries this time')"), jobDir=shared)
    assert second.state == JobState.SUCCEEDED, log_text(second)[-2000:]
    assert every_point(get_metrics, second, admin) == []  # none of first_run's curves
    assert f"The job dir {shared} was used before by first_run" in log_text(second)
    assert len(every_point(get_metrics, first, admin)) == 6  # the original keeps its own

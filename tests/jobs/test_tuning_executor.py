"""Hyperparameter tuning jobs for real: trainers built here report through cloudml-hypertune."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.conf import settings

from bench.support.waiting import wait_for
from jobs import services
from jobs.models import Job, JobState, ReplicaState
from jobs.wire import job_resource

pytestmark = pytest.mark.executor


def job_dir_for(name: str) -> str:
    return str(settings.STORAGE_DIR / "job-dirs" / "project-a" / name)


QUADRATIC_TASK = """
    import argparse
    import hypertune

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--x", type=float)
    parser.add_argument("--job-dir")
    args = parser.parse_args()
    trial = json.loads(os.environ["TF_CONFIG"])["task"]["trial"]
    seen = {"trial": trial, "env_trial": os.environ["CLOUD_ML_TRIAL_ID"], "argv": sys.argv[1:],
            "metric_file": os.environ["CLOUD_ML_HP_METRIC_FILE"], "tag": os.environ["CLOUD_ML_HP_METRIC_TAG"],
            "cwd": os.getcwd(), "tmpdir": os.environ["TMPDIR"], "start": time.time()}
    # Nobody else may have written into this trial's metric file or working directory.
    assert not os.path.exists(seen["metric_file"]), "metric file shared"
    assert os.listdir(os.getcwd()) == ["tmp"], os.listdir(os.getcwd())
    open("scratch.txt", "w").write(trial)
    reporter = hypertune.HyperTune()
    for step in (1, 2):
        reporter.report_hyperparameter_tuning_metric("score", -(args.x - 2.0) ** 2 + step - 2, global_step=step)
        time.sleep(0.2)
    assert open("scratch.txt").read() == trial
    seen["end"] = time.time()
    with open(os.path.join(args.job_dir, f"trial-{trial}.json"), "w") as handle:
        json.dump(seen, handle)
"""


def test_tuning_job_finds_the_optimum_region_with_isolated_parallel_trials(run_job, package_factory):
    package = package_factory(QUADRATIC_TASK)
    job_dir = job_dir_for("quadratic")
    job = run_job(
        "quadratic",
        package,
        jobDir=job_dir,
        args=["--epochs=1"],
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "score",
            "maxTrials": 12,
            "maxParallelTrials": 3,
            "params": [
                {
                    "parameterName": "x",
                    "type": "DOUBLE",
                    "minValue": -5,
                    "maxValue": 5,
                    "scaleType": "UNIT_LINEAR_SCALE",
                }
            ],
        },
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    # Each trial ran with --job-dir <jobDir>/<trialId>, as the original: one output folder per trial.
    seen = [json.loads(Path(job_dir, str(n), f"trial-{n}.json").read_text()) for n in range(1, 13)]
    assert [s["trial"] for s in seen] == [s["env_trial"] for s in seen] == [str(n) for n in range(1, 13)]
    assert len({s["metric_file"] for s in seen}) == len({s["cwd"] for s in seen}) == 12
    assert len({s["tmpdir"] for s in seen}) == 12
    assert all(s["tag"] == "score" for s in seen)
    # Hyperparameters come after the user's args; --job-dir stays last.
    assert seen[0]["argv"][0] == "--epochs=1" and seen[0]["argv"][1].startswith("--x=")
    assert seen[0]["argv"][-2:] == ["--job-dir", f"{job_dir}/1"]
    assert job.training_input["jobDir"] == job_dir
    overlap = max(sum(1 for o in seen if o["start"] <= s["start"] < o["end"]) for s in seen)
    assert 1 < overlap <= 3

    output = job_resource(job)["trainingOutput"]
    assert output["isHyperparameterTuningJob"] is True
    assert output["completedTrialCount"] == "12"
    assert output["hyperparameterMetricTag"] == "score"
    assert isinstance(output["consumedMLUnits"], float)
    trials = output["trials"]
    assert [t["trialId"] for t in trials] == [str(n) for n in range(1, 13)]
    first = trials[0]
    assert set(first) >= {"trialId", "hyperparameters", "finalMetric", "allMetrics", "state", "startTime", "endTime"}
    assert first["state"] == "SUCCEEDED"
    assert first["finalMetric"]["trainingStep"] == "2"
    assert [m["trainingStep"] for m in first["allMetrics"]] == ["1", "2"]
    x = float(first["hyperparameters"]["x"])
    assert first["finalMetric"]["objectiveValue"] == pytest.approx(-((x - 2.0) ** 2))
    best = max(trials, key=lambda t: t["finalMetric"]["objectiveValue"])
    assert abs(float(best["hyperparameters"]["x"]) - 2.0) < 1.25
    replicas = job.replicas.all()
    assert sorted({r.trial_id for r in replicas}, key=int) == [str(n) for n in range(1, 13)]
    assert job.log_lines.filter(trial_id="5").exists()


MODES_TASK = """
    import hypertune

    mode = next(a for a in sys.argv if a.startswith("--mode=")).split("=", 1)[1]
    if mode == "fail":
        raise SystemExit("this trial fails on purpose")
    if mode == "report":
        hypertune.HyperTune().report_hyperparameter_tuning_metric("training/hptuning/metric", 0.5, 7)
"""


def test_grid_stops_when_exhausted_marks_silent_trials_and_tolerates_failures(run_job, package_factory):
    package = package_factory(MODES_TASK)
    job = run_job(
        "modes",
        package,
        hyperparameters={
            "goal": "MINIMIZE",
            "algorithm": "GRID_SEARCH",
            "maxTrials": 10,
            "maxParallelTrials": 3,
            "maxFailedTrials": 2,
            "params": [
                {"parameterName": "mode", "type": "CATEGORICAL", "categoricalValues": ["report", "silent", "fail"]}
            ],
        },
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    trials = {t.hyperparameters["mode"]: t for t in job.trials.all()}
    assert set(trials) == {"report", "silent", "fail"}
    assert trials["report"].final_metric == {"trainingStep": "7", "objectiveValue": 0.5}
    assert trials["silent"].state == JobState.SUCCEEDED and trials["silent"].reported_no_metric
    assert trials["fail"].state == JobState.FAILED and "fails on purpose" in trials["fail"].error_message
    assert job.training_output["completedTrialCount"] == "3"
    assert "finalMetric" not in next(
        t for t in job.training_output["trials"] if t["hyperparameters"]["mode"] == "silent"
    )


def test_job_fails_when_its_first_trials_all_fail(run_job, package_factory):
    package = package_factory("raise SystemExit('broken trainer')\n")
    job = run_job(
        "all_fail",
        package,
        hyperparameters={
            "maxTrials": 6,
            "maxParallelTrials": 1,
            "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 9}],
        },
    )

    assert job.state == JobState.FAILED
    assert "Too many trials failed" in job.error_message and "broken trainer" in job.error_message
    assert job.trials.count() == 3


STAIRS_TASK = """
    import hypertune

    x = float(next(a for a in sys.argv if a.startswith("--x=")).split("=", 1)[1])
    reporter = hypertune.HyperTune()
    for step in range(1, 400 if x == 4 else 4):
        reporter.report_hyperparameter_tuning_metric("", 10 - x, global_step=step)
        time.sleep(0.05)
"""


def test_early_stopping_stops_a_trial_that_falls_behind(run_job, package_factory):
    package = package_factory(STAIRS_TASK)
    job = run_job(
        "stairs",
        package,
        hyperparameters={
            "goal": "MAXIMIZE",
            "algorithm": "GRID_SEARCH",
            "maxTrials": 4,
            "enableTrialEarlyStopping": True,
            "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [1, 2, 3, 4]}],
        },
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    last = job.trials.get(trial_id="4")
    assert last.hyperparameters == {"x": "4"}
    assert last.is_stopped_early and last.state == JobState.SUCCEEDED
    assert (last.end_time - last.start_time).total_seconds() < 10
    assert job.replicas.get(trial_id="4").state == ReplicaState.STOPPED
    assert not any(t.is_stopped_early for t in job.trials.exclude(trial_id="4"))
    assert job.training_output["trials"][3]["isTrialStoppedEarly"] is True


def test_resumed_job_reuses_the_earlier_trials(run_job, package_factory):
    package = package_factory(MODES_TASK.replace("--mode=", "--n=").replace('mode == "report"', "True"))
    grid = {
        "algorithm": "GRID_SEARCH",
        "maxTrials": 10,
        "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 2}],
    }
    first = run_job("first", package, hyperparameters=grid)
    assert first.state == JobState.SUCCEEDED, first.error_message

    wider = {
        **grid,
        "resumePreviousJobId": "first",
        "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 3}],
    }
    second = run_job("second", package, hyperparameters=wider)
    assert second.state == JobState.SUCCEEDED, second.error_message
    assert [(t.trial_id, t.hyperparameters) for t in second.trials.all()] == [("1", {"n": "3"})]

    not_tuning = run_job("plain", package, args=["--n=1"])
    orphan = run_job("orphan", package, hyperparameters={**grid, "resumePreviousJobId": not_tuning.job_id})
    assert orphan.state == JobState.FAILED and "not a hyperparameter tuning job" in orphan.error_message


def test_cancel_stops_every_running_trial(executor, job_body, admin, project, package_factory):
    package = package_factory("print('trial up', flush=True)\ntime.sleep(120)\n")
    body = job_body(
        "cancel_me",
        package,
        hyperparameters={
            "maxTrials": 4,
            "maxParallelTrials": 2,
            "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
        },
    )
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: job.replicas.filter(state=ReplicaState.RUNNING).count() == 2, 120, message="two trials")
    services.cancel_job(job, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED, 60, message="the cancel")

    job.refresh_from_db()
    assert {t.state for t in job.trials.all()} == {JobState.CANCELLED}
    assert job.trials.count() == 2
    for replica in job.replicas.all():
        assert replica.state == ReplicaState.STOPPED
        assert not Path(f"/proc/{replica.pid}").exists() or _zombie(replica.pid)
    assert job.training_output["isHyperparameterTuningJob"] is True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_tuning_job_counts_replicas_per_parallel_trial(db, project):
    from jobs import kinds

    job = Job(
        project=project,
        job_id="capacity",
        training_input={
            "scaleTier": "CUSTOM",
            "masterType": "n1-highcpu-16",
            "workerType": "n1-highcpu-16",
            "workerCount": "1",
            "hyperparameters": {"maxTrials": 9, "maxParallelTrials": 2, "params": []},
        },
    )
    held = len(kinds.of_job(job).plans(job))
    assert kinds.of_job(job).name == "tuning" and held == 4
    assert os.environ.get("AICONSOLE_MAX_REPLICAS") is None or held <= settings.MAX_REPLICAS

"""Trainers written for the original's runtimes, run for real on those runtimes' stacks (Python 3.7)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings

from jobs.models import JobState, ReplicaState
from tests.helpers.jobs import log_text

pytestmark = pytest.mark.executor


def job_dir_for(name: str) -> str:
    return str(settings.STORAGE_DIR / "job-dirs" / "project-a" / name)


def test_a_trainer_written_for_runtime_2_1_runs_unchanged_and_its_log_names_the_versions(run_job, package_factory):
    package = package_factory("""
        import pandas, sklearn, tensorflow
        from sklearn.externals import joblib  # gone from scikit-learn 0.23 on
        with open("data.txt", "w") as handle:
            handle.write("1 2\\n3 4\\n")
        frame = pandas.read_csv("data.txt", delim_whitespace=True, header=None)  # gone from pandas 3
        joblib.dump(frame.values.sum(), os.path.join(sys.argv[-1], "total.joblib"))
        print("python", sys.version_info[:2], "tf", tensorflow.__version__, "sklearn", sklearn.__version__)
    """)
    job_dir = job_dir_for("era_trainer")
    job = run_job("era_trainer", package, runtimeVersion="2.1", jobDir=job_dir, timeout=600)

    assert job.state == JobState.SUCCEEDED, job.error_message
    text = log_text(job)
    assert "python (3, 7) tf 2.1.0 sklearn 0.22.1" in text
    assert "Runtime version 2.1, Python 3.7." in text and "TensorFlow 2.1.0, scikit-learn 0.22.1" in text
    assert Path(job_dir, "total.joblib").exists()


def test_a_trainers_pins_replace_the_runtimes_versions_and_the_log_lists_them(run_job, package_factory):
    package = package_factory(
        """
        import sklearn, pandas, numpy
        print("versions", sklearn.__version__, pandas.__version__, numpy.__version__)
    """,
        requires=["scikit-learn==0.24.2", "pandas==1.1.5"],
    )
    job = run_job("older_pins", package)

    assert job.state == JobState.SUCCEEDED, job.error_message
    text = log_text(job)
    assert "versions 0.24.2 1.1.5 1.21.6" in text
    assert "scikit-learn 1.0.2 → 0.24.2" in text and "pandas 1.3.5 → 1.1.5" in text


def test_requirements_that_cannot_be_installed_fail_preparing_naming_every_one(run_job, package_factory):
    package = package_factory(
        "print('never runs')", requires=["numpy==99.0", "aiconsole-no-such-package-anywhere==1.0", "six"]
    )
    job = run_job("unsatisfiable", package)

    assert job.state == JobState.FAILED
    message = job.error_message
    assert message.startswith(
        "Failed to install the trainer packages. 2 requirements of the trainer packages "
        "cannot be installed on runtime version 2.11 (Python 3.7."
    ), message
    assert "- numpy==99.0:" in message and "- aiconsole-no-such-package-anywhere==1.0:" in message
    assert "- six" not in message
    assert not job.replicas.exists()
    assert "numpy==99.0" in log_text(job)


def test_a_framework_the_runtime_lacks_is_named_with_the_runtime(run_job, package_factory):
    job = run_job("needs_torch", package_factory("import torch"))

    assert job.state == JobState.FAILED
    assert "No module named 'torch'" in job.error_message
    assert "The trainer imports torch, which runtime version 2.11 (Python 3.7) does not provide" in job.error_message


ESTIMATOR = """
    import numpy as np
    import tensorflow as tf

    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print("TensorFlow", tf.__version__, "task", task["type"], task["index"], flush=True)

    def input_fn():
        x = np.random.RandomState(0).rand(200, 2).astype(np.float32)
        y = (x.sum(axis=1) > 1).astype(np.int32)
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(20)

    estimator = tf.estimator.LinearClassifier(
        feature_columns=[tf.feature_column.numeric_column("x", shape=(2,))],
        model_dir=os.path.join(job_dir, "model"),
        config=tf.estimator.RunConfig(save_checkpoints_steps=20))
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn, max_steps=60),
        tf.estimator.EvalSpec(input_fn, steps=3, start_delay_secs=0, throttle_secs=0))
    open(os.path.join(job_dir, task["type"] + "-finished"), "w").close()
"""


CHECKPOINT = re.compile(r"model\.ckpt-(\d+)\.index$")


def test_a_tf_1_15_estimator_trains_across_master_worker_and_parameter_server(run_job, package_factory):
    job_dir = job_dir_for("estimator_115")
    job = run_job(
        "estimator_115",
        package_factory(ESTIMATOR),
        timeout=600,
        runtimeVersion="1.15",
        jobDir=job_dir,
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="1",
        parameterServerType="n1-standard-4",
        parameterServerCount="1",
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    text = log_text(job)
    assert "TensorFlow 1.15.0 task master 0" in text and "TensorFlow 1.15.0 task ps 0" in text
    assert Path(job_dir, "master-finished").exists()
    # Master and worker step one global step asynchronously: the master stops at the first step it
    # sees at or past max_steps, which the worker may already have pushed past 60.
    steps = [int(m[1]) for m in map(CHECKPOINT.match, os.listdir(Path(job_dir, "model"))) if m]
    assert steps and max(steps) >= 60, sorted(steps)
    states = dict(job.replicas.values_list("label", "state"))
    assert states["master-replica-0"] == ReplicaState.SUCCEEDED
    assert states["ps-replica-0"] == ReplicaState.STOPPED  # it never exits by itself: stopped with the job

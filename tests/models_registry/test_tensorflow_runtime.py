"""A TF 2.x Keras trainer on runtime 2.11 / Python 3.7: tuned on a TensorBoard summary tag, each
trial in its own ``<jobDir>/<trialId>``, and its SavedModel deployed as a TENSORFLOW version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from jobs.models import JobState
from models_registry import services
from models_registry.models import VersionState
from tests.helpers.jobs import log_text
from tests.helpers.models import deploy

pytestmark = pytest.mark.executor

KERAS = """
    import argparse
    import numpy as np
    import tensorflow as tf

    parser = argparse.ArgumentParser()
    parser.add_argument("--learning-rate", type=float, required=True)
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    x = np.random.RandomState(0).rand(256, 4).astype("float32")
    y = (x.sum(axis=1) > 2).astype("float32")
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)),
                                 tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer=tf.keras.optimizers.Adam(args.learning_rate), loss="binary_crossentropy",
                  metrics=["accuracy"])
    board = tf.keras.callbacks.TensorBoard(log_dir=os.path.join(args.job_dir, "logs"))
    model.fit(x, y, epochs=3, validation_split=0.25, verbose=2, callbacks=[board])
    model.save(os.path.join(args.job_dir, "model"))
"""


def test_a_keras_trainer_tunes_on_its_summary_tag_and_its_saved_model_serves(
    run_job, package_factory, serving, project, admin
):
    job_dir = str(settings.STORAGE_DIR / "job-dirs" / "project-a" / "keras_tuned")
    hyperparameters = {
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "epoch_accuracy",
        "maxTrials": 2,
        "maxParallelTrials": 2,
        "params": [
            {
                "parameterName": "learning-rate",
                "type": "DOUBLE",
                "minValue": 0.001,
                "maxValue": 0.1,
                "scaleType": "UNIT_LOG_SCALE",
            }
        ],
    }
    job = run_job("keras_tuned", package_factory(KERAS), timeout=600, jobDir=job_dir, hyperparameters=hyperparameters)

    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-3000:]
    trials = job.training_output["trials"]
    assert len(trials) == 2
    for trial in trials:
        assert trial["state"] == "SUCCEEDED"
        assert trial["finalMetric"]["trainingStep"] == "2"  # Keras' last epoch, from the validation run
        assert 0 <= trial["finalMetric"]["objectiveValue"] <= 1
        assert Path(job_dir, trial["trialId"], "model", "saved_model.pb").is_file()
        assert list(Path(job_dir, trial["trialId"], "logs", "validation").glob("events.out.tfevents.*"))
    assert not Path(job_dir, "model").exists()
    assert job.training_input["jobDir"] == job_dir

    model = services.create_model(project, {"name": "keras"}, actor=admin)
    version, operation = deploy(
        model,
        "v1",
        str(Path(job_dir, "1", "model")),
        admin,
        framework="TENSORFLOW",
        runtimeVersion="2.11",
        pythonVersion="3.7",
    )
    assert version.state == VersionState.READY, version.error_message
    answer = services.predict(
        model, None, json.dumps({"instances": [[0.9, 0.9, 0.9, 0.9], [0, 0, 0, 0.1]]}).encode(), actor=admin
    )
    assert answer.status == 200, answer.body
    predictions = json.loads(answer.body)["predictions"]
    assert len(predictions) == 2 and all(0 <= p[0] <= 1 for p in predictions)

"""Trainer packages the browser tests and bench/screenshots.py run for real, and the jobs a console
starts with (a tuning study, a model to deploy)."""

from __future__ import annotations

from pathlib import Path

from bench.support.packages import TASK_HEADER, build_package

# Prints a line every 0.1 s for ~6 s on every replica, then the master succeeds.
STREAMING_TASK = (
    TASK_HEADER
    + """\
role = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("type", "master")
steps = int(os.environ.get("STEPS", "60"))
for step in range(1, steps + 1):
    print(f"{role} step {step} loss={1 / step:.4f}", flush=True)
    time.sleep(0.1)
print("training done", flush=True)
"""
)

# Runs until cancelled.
FOREVER_TASK = (
    TASK_HEADER
    + """\
step = 0
while True:
    step += 1
    print(f"still training, step {step}", flush=True)
    time.sleep(0.2)
"""
)

# A tuning trial: reports a metric through cloudml-hypertune, unchanged.
TUNING_TASK = (
    TASK_HEADER
    + """\
import argparse
import hypertune

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", type=float)
parser.add_argument("--layers", type=int)
parser.add_argument("--job-dir")
args = parser.parse_args()
reporter = hypertune.HyperTune()
score = 0.9 - (args.learning_rate - 0.05) ** 2 * 40 + args.layers * 0.01
for step in (1, 2):
    reporter.report_hyperparameter_tuning_metric("accuracy", score - 0.05 * (2 - step), global_step=step)
print(f"trial done: accuracy={score:.4f}", flush=True)
"""
)

# Trains a scikit-learn classifier and saves it where "Deploy as model version" finds it.
MODEL_TASK = (
    TASK_HEADER
    + """\
import joblib
import numpy as np
from sklearn.linear_model import LogisticRegression

rng = np.random.default_rng(7)
X = rng.random((200, 4))
y = (X[:, 0] + X[:, 1] > 1.0).astype(int)
model = LogisticRegression().fit(X, y)
out = os.path.join(sys.argv[-1], "model")
os.makedirs(out, exist_ok=True)
joblib.dump(model, os.path.join(out, "model.joblib"))
print("saved", out, flush=True)
"""
)

TUNING = {
    "goal": "MAXIMIZE",
    "hyperparameterMetricTag": "accuracy",
    "maxTrials": 4,
    "maxParallelTrials": 2,
    "params": [
        {
            "parameterName": "learning_rate",
            "type": "DOUBLE",
            "minValue": 0.001,
            "maxValue": 0.1,
            "scaleType": "UNIT_LOG_SCALE",
        },
        {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 4, "scaleType": "UNIT_LINEAR_SCALE"},
    ],
}


def package(folder: Path, task: str, name: str = "trainer") -> Path:
    return build_package(folder, {"trainer/task.py": task}, name=name)


def start_background_jobs(console) -> dict:
    """Submit the tuning study and the model-training job; tests wait for them when they need them."""
    packages = console.storage / "browser-packages" / "default-project"
    tuning = package(packages / "tuning", TUNING_TASK)
    model = package(packages / "model", MODEL_TASK)
    console.submit(
        "study_1", tuning, hyperparameters=TUNING, jobDir=str(console.storage / "out" / "default-project" / "study_1")
    )
    console.submit("train_model", model, jobDir=str(console.storage / "out" / "default-project" / "train_model"))
    return {"tuning": "study_1", "model": "train_model"}

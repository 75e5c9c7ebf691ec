"""``aiconsole jobs compare A B …``: the differing inputs and the final metrics, from a real console."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers.cli import write_trainer
from tests.helpers.console import AICONSOLE

pytestmark = pytest.mark.executor

LR_TRAINER = """\
import sys
import hypertune
lr = float(sys.argv[sys.argv.index("--lr") + 1])
reporter = hypertune.HyperTune()
for step in (1, 2):
    reporter.report_hyperparameter_tuning_metric("accuracy", lr * step, global_step=step)
    reporter.report_hyperparameter_tuning_metric("loss", 1 - lr * step, global_step=step)
"""


@pytest.fixture(scope="module")
def compared(console, tmp_path_factory):
    """Two jobs of the same trainer with another --lr and label, run to the end."""
    folder = write_trainer(tmp_path_factory.mktemp("compare-src"), LR_TRAINER)
    env = {
        **os.environ,
        "AICONSOLE_URL": console.url,
        "AICONSOLE_TOKEN": console.token,
        "AICONSOLE_CONFIG": str(folder.parent / "none.json"),
    }
    for job_id, lr in (("cmp_slow", "0.1"), ("cmp_fast", "0.3")):
        subprocess.run(
            [
                AICONSOLE,
                "jobs",
                "submit",
                "training",
                job_id,
                "--package-path",
                str(folder),
                "--module-name",
                "trainer.task",
                "--region",
                "us-central1",
                "--labels",
                f"speed={job_id[4:]}",
                "--",
                "--lr",
                lr,
                "--epochs",
                "2",
            ],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return [console.wait(job_id) for job_id in ("cmp_slow", "cmp_fast")]


def test_compare_prints_the_differing_inputs_and_the_final_metrics(cli, compared):
    assert [job["state"] for job in compared] == ["SUCCEEDED", "SUCCEEDED"], [j.get("errorMessage") for j in compared]
    result = cli("jobs", "compare", "cmp_slow", "cmp_fast")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["INPUT", "cmp_slow", "cmp_fast"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:] if line.strip()}
    assert rows["--lr"] == ["0.1", "0.3"]
    assert "--epochs" not in rows and "Region" not in rows  # the same for both: not printed
    assert rows["label"] == ["speed", "slow", "fast"]
    assert rows["METRIC"] == ["cmp_slow", "cmp_fast", "BEST"]
    assert rows["accuracy"] == ["0.2", "0.6", "*", "higher"]
    assert rows["loss"] == ["0.8", "0.4", "*", "lower"]
    assert "* marks the best" in result.err


def test_compare_with_lower_flips_the_best_and_all_inputs_prints_every_row(cli, compared):
    result = cli("jobs", "compare", "cmp_slow", "cmp_fast", "--lower", "accuracy", "--all-inputs")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line.split()[1:] for line in result.out.splitlines() if line.strip()}
    assert rows["accuracy"] == ["0.2", "*", "0.6", "lower"]
    assert rows["--epochs"] == ["2", "2"] and rows["Region"] == ["us-central1", "us-central1"]


def test_compare_names_a_missing_job_or_trial(cli, compared):
    result = cli("jobs", "compare", "cmp_slow", "no_such_job")
    assert result.code == 1 and "NOT_FOUND" in result.err
    result = cli("jobs", "compare", "cmp_slow", "cmp_fast/3")
    assert result.code == 1 and "has no trial 3" in result.err

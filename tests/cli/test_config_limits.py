"""A ``--config`` YAML bomb, deep nesting or an oversized file is refused by the
CLI with a message naming the file, within a memory bound (no console needed: the file is read
before anything is sent)."""

from __future__ import annotations

import os
import resource
import subprocess

import pytest

from console.cli import training
from tests.helpers.console import AICONSOLE
from tests.helpers.yaml_bombs import ANCHORED_HPTUNING, BILLION_LAUGHS, DEEP_FLOW, OVERSIZED

MEMORY_BOUND = 1024**3  # address space: the interpreter and the CLI fit; expanding the bomb does not


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND, MEMORY_BOUND))


def aiconsole(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    # Nothing listens on the discard port: a command that got as far as the network would say so.
    env.update(
        {
            "AICONSOLE_URL": "http://127.0.0.1:9",
            "AICONSOLE_TOKEN": "unused",
            "AICONSOLE_CONFIG": str(tmp_path / "cli-config.json"),
        }
    )
    return subprocess.run([AICONSOLE, *argv], capture_output=True, text=True, env=env, timeout=120, preexec_fn=_bounded)


def _nested(text: str, key: str) -> str:
    return f"{key}:\n" + "".join(f"  {line}\n" for line in text.splitlines())


CONFIGS = {
    "billion laughs": (
        _nested(_nested(BILLION_LAUGHS, "hyperparameters"), "trainingInput"),
        "the YAML expands to more than 20,000 values",
    ),
    "deep lists": (_nested(DEEP_FLOW, "labels"), "the YAML nests more than 100 levels deep"),
    "oversized": (OVERSIZED, "the YAML is longer than 131,072 bytes"),
}


@pytest.mark.parametrize(("text", "rule"), CONFIGS.values(), ids=CONFIGS.keys())
def test_jobs_submit_training_refuses_the_config_naming_the_file_and_the_rule(tmp_path, text, rule):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = aiconsole(
        tmp_path,
        "jobs",
        "submit",
        "training",
        "bombed",
        "--config",
        str(config),
        "--region",
        "us-central1",
        "--module-name",
        "trainer.task",
        "--packages",
        "gs://b/t.tar.gz",
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"--config {config} is refused: {rule}" in result.stderr


def test_versions_create_refuses_a_bomb_in_its_config(tmp_path):
    config = tmp_path / "version.yaml"
    config.write_text(_nested(BILLION_LAUGHS, "labels"))
    result = aiconsole(
        tmp_path, "versions", "create", "v1", "--model", "census", "--origin", "gs://b/model", "--config", str(config)
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"--config {config} is refused: the YAML expands to more than 20,000 values" in result.stderr


def test_a_config_with_modest_anchors_still_loads(tmp_path):
    config = tmp_path / "hptuning_config.yaml"
    config.write_text(ANCHORED_HPTUNING)
    params = training.load_config(str(config))["trainingInput"]["hyperparameters"]["params"]
    assert [p["parameterName"] for p in params] == ["learning_rate", "decay", "layers", "units"]
    assert params[1]["maxValue"] == 0.1 and params[3]["discreteValues"] == [1, 2, 4, 8]


@pytest.mark.parametrize(
    "argv",
    [
        ("versions", "update", "v1", "--model", "census", "--config"),
        ("models", "set-iam-policy", "census"),
    ],
    ids=["versions update --config", "models set-iam-policy POLICY_FILE"],
)
def test_every_yaml_the_cli_reads_refuses_a_bomb_naming_the_file(tmp_path, argv):
    config = tmp_path / "bomb.yaml"
    config.write_text(_nested(BILLION_LAUGHS, "labels"))
    result = aiconsole(tmp_path, *argv, str(config))
    assert result.returncode == 2, result.stderr[-2000:]
    assert f" {config} is refused: the YAML expands to more than 20,000 values" in result.stderr

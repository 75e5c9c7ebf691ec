"""The CLI's pure pieces: packaging, flag parsing, output formats, log lines (no console)."""

from __future__ import annotations

import argparse
import tarfile
import textwrap
from datetime import UTC, datetime

import pytest

from aiconsole.cli import logs, output, packaging, training
from aiconsole.cli.client import ApiError, Violation
from aiconsole.cli.jobs import summary


def _trainer(root, name="trainer"):
    folder = root / name
    (folder / "sub").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "task.py").write_text("print('x')\n")
    (folder / "sub" / "__init__.py").write_text("")
    (folder / "sub" / "vocab.txt").write_text("a\nb\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"\0")
    (folder / ".hidden").write_text("secret")
    return folder


def test_generated_sdist_holds_the_package_and_a_setup_py_and_is_reproducible(tmp_path):
    folder = _trainer(tmp_path / "src")
    first = packaging.build_sdist(folder, tmp_path / "a")
    second = packaging.build_sdist(folder, tmp_path / "b")
    assert first.sha256 == second.sha256 and first.size == second.size
    with tarfile.open(first.path) as archive:
        names = archive.getnames()
        setup_py = archive.extractfile("trainer-0.0.0/setup.py").read().decode()
    assert names == ["trainer-0.0.0/PKG-INFO", "trainer-0.0.0/setup.py", "trainer-0.0.0/MANIFEST.in",
                     "trainer-0.0.0/trainer/__init__.py", "trainer-0.0.0/trainer/sub/__init__.py",
                     "trainer-0.0.0/trainer/sub/vocab.txt", "trainer-0.0.0/trainer/task.py"]
    assert "find_packages(include=['trainer', 'trainer.*'])" in setup_py


def test_a_folder_that_is_not_a_package_is_refused(tmp_path):
    (tmp_path / "code").mkdir()
    with pytest.raises(packaging.PackagingError, match="has no __init__.py"):
        packaging.build_sdist(tmp_path / "code", tmp_path / "out")
    (tmp_path / "my-code").mkdir()
    with pytest.raises(packaging.PackagingError, match="not a valid Python package name"):
        packaging.build_sdist(tmp_path / "my-code", tmp_path / "out")
    with pytest.raises(packaging.PackagingError, match="no such directory"):
        packaging.build_sdist(tmp_path / "missing", tmp_path / "out")


def test_a_broken_setup_py_reports_its_error(tmp_path):
    folder = _trainer(tmp_path / "project")
    (folder.parent / "setup.py").write_text("raise RuntimeError('setup is broken')\n")
    with pytest.raises(packaging.PackagingError, match="setup is broken"):
        packaging.build_sdist(folder, tmp_path / "out")


def test_pyproject_only_for_tools_does_not_make_a_project(tmp_path):
    folder = _trainer(tmp_path / "src")
    (folder / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    assert packaging.build_sdist(folder, tmp_path / "out").how.startswith("generated setup.py")


@pytest.mark.parametrize(("text", "expected"), [
    ("count=1,type=nvidia-tesla-t4", {"count": "1", "type": "NVIDIA_TESLA_T4"}),
    ("type=tpu-v3,count=8", {"count": "8", "type": "TPU_V3"}),
    ("type=nvidia-tesla-a100", {"count": "1", "type": "NVIDIA_TESLA_A100"}),
])
def test_accelerator_flag_values(text, expected):
    assert training.accelerator(text) == expected


def test_scale_tiers_labels_and_booleans():
    assert training.scale_tier("standard-1") == "STANDARD_1"
    assert training.scale_tier("BASIC_GPU") == "BASIC_GPU"
    assert training.labels("a=1, b=two") == {"a": "1", "b": "two"}
    assert training.boolean("True") is True and training.boolean("no") is False
    with pytest.raises(argparse.ArgumentTypeError):
        training.labels("novalue")


def test_yaml_dates_and_json_configs_load(tmp_path):
    as_json = tmp_path / "config.json"
    as_json.write_text('{"trainingInput": {"scaleTier": "BASIC", "region": "us-central1"}}')
    assert training.load_config(str(as_json))["trainingInput"]["scaleTier"] == "BASIC"
    dated = tmp_path / "dated.yaml"
    dated.write_text("labels: {day: 2024-01-02}\n")
    assert training.load_config(str(dated)) == {"labels": {"day": "2024-01-02"}}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert training.load_config(str(empty)) == {}


def test_api_errors_render_each_field_violation():
    error = ApiError(400, "INVALID_ARGUMENT", "Field: a Error: b", [Violation("job.a", "b is wrong."),
                                                                   Violation("job.c", "d is missing.")])
    assert error.message == ("INVALID_ARGUMENT: the request has 2 invalid fields:\n"
                             "  - job.a: b is wrong.\n  - job.c: d is missing.")
    assert ApiError(404, "NOT_FOUND", "Job x not found.").message == "NOT_FOUND: Job x not found."


def test_log_entries_print_in_gclouds_stream_logs_format():
    entry = {"severity": "ERROR", "timestamp": "2024-03-05T10:11:12.345Z", "taskName": "worker-replica-1",
             "trialId": "2", "message": "line one\nline two"}
    local = datetime(2024, 3, 5, 10, 11, 12, 345000, tzinfo=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")
    assert logs.format_entry(entry) == [f"ERROR\t{local}\tworker-replica-1\t2\tline one",
                                        f"ERROR\t{local}\tworker-replica-1\t2\tline two"]
    assert logs.format_entry(entry, multiline=True)[0].endswith("\tline one\nline two")
    assert logs.format_entry({"message": "m"})[0].split("\t")[2] == "unknown_task"


def test_summary_tables_for_a_tuning_job():
    job = {"jobId": "hp", "state": "SUCCEEDED", "createTime": "2024-01-01T00:00:00Z",
           "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task", "hyperparameters": {"goal": "MAXIMIZE"}},
           "trainingOutput": {"completedTrialCount": "2", "consumedMLUnits": 0.07, "isHyperparameterTuningJob": True,
                              "trials": [{"trialId": "10", "hyperparameters": {"lr": "0.1"}},
                                         {"trialId": "2", "finalMetric": {"objectiveValue": 0.9, "trainingStep": "5"},
                                          "hyperparameters": {"lr": "0.01", "depth": "3"}}]}}
    text = summary(job)
    assert "Training Output Trials" in text and "ML_UNITS" in text and "TRIALS" in text
    trials = text.split("Training Output Trials")[1]
    trial_rows = [line for line in trials.splitlines() if line.startswith(("│ 2 ", "│ 10 "))]
    assert [row.split()[1] for row in trial_rows] == ["2", "10"]  # sorted by trial number
    assert "depth=3" in text and "lr=0.01" in text


def test_box_table_shape():
    text = output.box("Title", ["A", "BB"], [["x", "yy\nzz"]])
    assert text == textwrap.dedent("""\
        ┌────────┐
        │ Title  │
        ├───┬────┤
        │ A │ BB │
        ├───┼────┤
        │ x │ yy │
        │   │ zz │
        └───┴────┘
        """)


def test_a_pyproject_project_is_built_with_its_own_backend_and_left_clean(tmp_path):
    project = tmp_path / "project"
    _trainer(project)
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "pp_trainer"
        version = "0.3"

        [tool.setuptools.packages.find]
        include = ["trainer*"]
        """))
    built = packaging.build_sdist(project, tmp_path / "out")
    assert built.path.name == "pp_trainer-0.3.tar.gz"
    with tarfile.open(built.path) as archive:
        assert "pp_trainer-0.3/trainer/task.py" in archive.getnames()
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml", "trainer"]

"""Runtime versions: their lock files, interpreters, submit-time refusals, the CLI and the page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aiconsole import archives
from aiconsole.errors import InvalidArgument
from bench.support.packages import build_package
from console.cli import gcloud
from jobs import catalogue, runtimes, services
from jobs.runtimes import pythons
from jobs.tuning import search as tuning
from tests.helpers.jobs import body

ORIGINAL = [name for name in runtimes.RUNTIMES if name != runtimes.CURRENT]


def test_every_original_runtime_version_is_offered_on_python_3_7_with_tensorflow():
    assert ORIGINAL == ["1.15", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11"]
    for name in ORIGINAL:
        runtime = runtimes.RUNTIMES[name]
        assert runtime.pythons[0] == "3.7", name
        assert runtime.tensorflow.startswith(name + "."), name
        assert runtime.pinned("cloudml-hypertune"), name
        assert catalogue.RUNTIME_VERSIONS[name].python_versions == runtime.accepted_pythons
    assert catalogue.RUNTIME_VERSIONS["1.15"].python_versions == ("2.7", "3.7")
    assert not catalogue.uses_chief("1.15") and catalogue.uses_chief("2.11") and catalogue.uses_chief("current")


@pytest.mark.parametrize("name", list(runtimes.RUNTIMES))
def test_each_runtime_has_hash_locked_cpu_and_gpu_resolutions(name):
    runtime = runtimes.RUNTIMES[name]
    for python in runtime.pythons:
        for variant in runtimes.VARIANTS:
            text = runtime.lock_path(python, variant).read_text()
            pins = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", text, re.MULTILINE))
            assert pins and all("--hash=sha256:" in block for block in text.split("==")[1:]), (name, variant)
            framework = (
                "tensorflow-gpu"
                if name == "1.15" and variant == "gpu"
                else ("tensorflow" if variant == "gpu" else "tensorflow-cpu")
            )
            if name == runtimes.CURRENT and variant == "gpu":
                framework = "tensorflow"
            assert pins.get(framework) == runtime.tensorflow, (name, variant, framework)
            for requirement in runtime.packages:
                package, version = requirement.split("==")
                assert pins.get(runtimes.canonical_name(package)) == version, (name, requirement)


def test_python_2_7_is_refused_with_the_reason_and_the_python_to_use():
    reason = runtimes.unavailable_reason("1.15", "2.7")
    assert "Python 2.7" in reason and "uv" in reason and "set pythonVersion to 3.7" in reason
    assert runtimes.unavailable_reason("2.11", "3.7") is None


def test_an_interpreter_mapping_to_a_wrong_python_is_refused(settings):
    settings.PYTHONS = f"3.7={sys.executable}"  # the console's 3.11, not a 3.7
    pythons._found.clear()
    reason = runtimes.unavailable_reason("2.11", "3.7")
    assert f"AICONSOLE_PYTHONS maps Python 3.7 to {sys.executable}, which is not a working Python 3.7" in reason


@pytest.fixture
def no_interpreters(settings, tmp_path, monkeypatch):
    """A machine with nothing but the console's Python: no pyenv, nothing on PATH, no downloads."""
    pythons._found.clear()
    pythons.interpreter_version.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    settings.PYTHON_DOWNLOADS = "never"
    yield
    pythons._found.clear()


def test_a_missing_interpreter_is_refused_at_submit_with_how_to_provide_it(no_interpreters, project, admin):
    with pytest.raises(InvalidArgument) as refused:
        services.submit_job(project, body("needs_37"), actor=admin)
    message = str(refused.value)
    assert "job.training_input.python_version" in message
    assert "Runtime version 2.11 needs Python 3.7" in message and "AICONSOLE_PYTHONS=3.7=" in message
    assert "AICONSOLE_PYTHON_DOWNLOADS=never" in message
    assert not project.jobs.exists()


def test_the_console_python_runs_the_current_runtime_without_anything_else(no_interpreters, project, admin):
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert runtimes.unavailable_reason("current", None) is None
    assert pythons.find_python(own) == sys.executable
    job = services.submit_job(project, body("on_current", runtimeVersion="current", pythonVersion=own), actor=admin)
    assert job.training_input["runtimeVersion"] == "current"


def test_python_3_7_is_found_through_pyenv_and_every_source_is_checked(settings):
    pythons._found.clear()
    found = pythons.find_python("3.7")
    assert found and pythons.interpreter_version(found).startswith("3.7.")
    sources = dict(pythons.where_to_look("3.7"))
    assert sources["the console's interpreter"] is None  # 3.11: never taken for a 3.7
    assert sources["pyenv"] and pythons.interpreter_version(sources["pyenv"]).startswith("3.7.")


def test_declared_requirements_are_read_from_wheels_and_sdists(tmp_path):
    wheel = build_package(tmp_path / "w", {"trainer/task.py": ""}, requires=["pandas==1.1.5", "six"], kind="wheel")
    sdist = build_package(tmp_path / "s", {"trainer/task.py": ""}, requires=["scikit-learn<1"])
    assert archives.inspect_package(wheel).requires == ("pandas==1.1.5", "six")
    assert archives.inspect_package(sdist).requires == ("scikit-learn<1",)


def test_early_stopping_never_stops_a_trial_at_the_step_finished_trials_ended():
    spec = {
        "goal": "MAXIMIZE",
        "maxTrials": 10,
        "enableTrialEarlyStopping": True,
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
    }
    finished = [tuning.TrialRecord({"x": 0.1 * i}, "SUCCEEDED", 0.9, {100: 0.9}) for i in range(1, 5)]
    reporting_once_at_the_end = tuning.TrialRecord({"x": 0.05}, "RUNNING", None, {100: 0.1})
    assert not tuning.should_stop_early(spec, finished, reporting_once_at_the_end)
    behind_midway = tuning.TrialRecord({"x": 0.05}, "RUNNING", None, {50: 0.1})
    finished = [tuning.TrialRecord({"x": 0.1 * i}, "SUCCEEDED", 0.9, {50: 0.9, 100: 0.9}) for i in range(1, 5)]
    assert tuning.should_stop_early(spec, finished, behind_midway)


# --- the gcloud wrapper ----------------------------------------------------------------------------


def test_gcloud_commands_translate_to_aiconsole_and_others_are_left_alone():
    assert gcloud.translate(
        ["ai-platform", "jobs", "submit", "training", "j1", "--region", "us-central1", "--quiet", "--", "--epochs", "5"]
    ) == ["jobs", "submit", "training", "j1", "--region", "us-central1", "--", "--epochs", "5"]
    assert gcloud.translate(["--project", "p", "--verbosity=debug", "ml-engine", "jobs", "describe", "j1"]) == [
        "jobs",
        "describe",
        "j1",
        "--project",
        "p",
    ]
    assert gcloud.translate(["config", "list"]) is None
    assert gcloud.translate(["compute", "instances", "list", "--project", "p"]) is None


def test_the_gcloud_wrapper_reaches_aiconsole_and_passes_other_commands_to_the_real_gcloud(tmp_path):
    wrapper = gcloud.write_wrapper(tmp_path / "wrapper")
    real_dir = tmp_path / "sdk"
    real_dir.mkdir()
    (real_dir / "gcloud").write_text('#!/bin/sh\necho "real gcloud: $*"\n')
    (real_dir / "gcloud").chmod(0o755)
    env = {**os.environ, "PATH": f"{wrapper.parent}:{real_dir}"}  # not /usr/bin: this machine may have gcloud
    ours = subprocess.run(
        ["gcloud", "ml-engine", "local", "train", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert ours.returncode == 0 and "--module-name" in ours.stdout
    theirs = subprocess.run(["gcloud", "auth", "list"], capture_output=True, text=True, env=env, timeout=60)
    assert theirs.stdout.strip() == "real gcloud: auth list"
    alone = subprocess.run(
        ["gcloud", "auth", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PATH": str(wrapper.parent)},
    )
    assert alone.returncode == 127 and "no other gcloud" in alone.stderr


# --- the CLI and the page ------------------------------------------------------------------------------


def aiconsole(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).with_name("aiconsole")), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ.copy(),
    )


@pytest.mark.executor
def test_runtimes_build_then_list_shows_it_built(tmp_path):
    built = aiconsole("runtimes", "build", "2.11")
    assert built.returncode == 0, built.stderr
    assert "Runtime version 2.11, Python 3.7." in built.stdout and "TensorFlow 2.11" in built.stdout
    listing = aiconsole("runtimes", "list")
    assert listing.returncode == 0, listing.stderr
    row = next(line for line in listing.stdout.splitlines() if line.startswith("2.11 "))
    assert re.search(r"2\.11\s+3\.7\s+cpu\s+2\.11\.\d+\s+1\.0\.2", row) and " yes " in row
    refused = aiconsole("runtimes", "build", "1.15", "--python", "2.7")
    assert refused.returncode == 2 and "Python 2.7" in refused.stderr


@pytest.mark.slow
def test_the_runtimes_page_lists_versions_for_members(client, viewer):
    client.force_login(viewer)
    page = client.get("/runtimes/")
    assert page.status_code == 200
    text = page.content.decode()
    for name in ORIGINAL:
        assert f">{name}" in text
    assert "2.11.0" in text and "(extension)" in text


def test_the_runtimes_page_needs_a_sign_in(client):
    assert client.get("/runtimes/").status_code == 302

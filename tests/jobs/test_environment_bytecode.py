"""An environment built before installs compiled its modules is compiled once, in place, and opened
to the trainers' accounts again (jobs.executor.environments.compile_bytecode)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from aiconsole import trainer_user
from jobs.executor import environments
from jobs.executor.environments import COMPLETE_MARKER, Environment


def old_environment(folder) -> Environment:
    """A virtual environment as a console built it before: a module without bytecode, marked
    complete and shared, with no word of bytecode in its marker."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    environment = Environment(path=folder, key="old")
    (environment.site_packages() / "census_features.py").write_text("SCALE = 2\n")
    (folder / COMPLETE_MARKER).write_text(json.dumps({"kind": "runtime", "packages": {}}))
    (folder / trainer_user.SHARED_MARKER).write_text("all\n")
    return environment


def test_an_environment_built_without_bytecode_is_compiled_once_and_shared_again(tmp_path):
    environment = old_environment(tmp_path / "runtime")
    module = environment.site_packages() / "census_features.py"
    compiled = importlib.util.cache_from_source(str(module))

    environments.compile_bytecode(environment)

    assert Path(compiled).is_file()  # the venv runs this interpreter: the same cache tag
    assert environment.info()[environments.BYTECODE] is True
    assert environment.info()["kind"] == "runtime"  # the rest of what it recorded is kept
    assert not (tmp_path / "runtime" / trainer_user.SHARED_MARKER).exists()  # walked again for the accounts


def test_an_environment_built_with_bytecode_is_left_alone(tmp_path):
    environment = old_environment(tmp_path / "runtime")
    info = {**environment.info(), environments.BYTECODE: True}
    (tmp_path / "runtime" / COMPLETE_MARKER).write_text(json.dumps(info))

    environments.compile_bytecode(environment)

    module = environment.site_packages() / "census_features.py"
    assert not (module.parent / "__pycache__").exists()
    assert (tmp_path / "runtime" / trainer_user.SHARED_MARKER).is_file()

"""How the CLI packages a trainer folder: a reproducible sdist, its own build backend, clear refusals (no console)."""

from __future__ import annotations

import tarfile
import textwrap

import pytest

from console.cli import packaging


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
    assert names == [
        "trainer-0.0.0/PKG-INFO",
        "trainer-0.0.0/setup.py",
        "trainer-0.0.0/MANIFEST.in",
        "trainer-0.0.0/trainer/__init__.py",
        "trainer-0.0.0/trainer/sub/__init__.py",
        "trainer-0.0.0/trainer/sub/vocab.txt",
        "trainer-0.0.0/trainer/task.py",
    ]
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


def test_a_pyproject_project_is_built_with_its_own_backend_and_left_clean(tmp_path):
    project = tmp_path / "project"
    _trainer(project)
    (project / "pyproject.toml").write_text(
        textwrap.dedent("""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "pp_trainer"
        version = "0.3"

        [tool.setuptools.packages.find]
        include = ["trainer*"]
        """)
    )
    built = packaging.build_sdist(project, tmp_path / "out")
    assert built.path.name == "pp_trainer-0.3.tar.gz"
    with tarfile.open(built.path) as archive:
        assert "pp_trainer-0.3/trainer/task.py" in archive.getnames()
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml", "trainer"]

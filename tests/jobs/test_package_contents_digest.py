"""A package's environment is found by what the package holds, not by its archive's bytes: the
same sources packaged again (the Vertex SDK's local script, ``--package-path``) reuse it."""

from __future__ import annotations

import io
import tarfile
import time
import zipfile

from jobs.executor.environments import contents_digest


def _sdist(path, files: dict[str, bytes], *, mtime: float, executable: set[str] = frozenset()):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            info.mode = 0o755 if name in executable else 0o644
            archive.addfile(info, io.BytesIO(data))
    return path


FILES = {"trainer-0.1/PKG-INFO": b"Name: trainer\n", "trainer-0.1/trainer/task.py": b"print('hi')\n"}


def test_the_same_sources_packaged_at_another_time_have_one_digest(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _sdist(tmp_path / "a" / "trainer-0.1.tar.gz", FILES, mtime=time.time() - 3600)
    second = _sdist(tmp_path / "b" / "trainer-0.1.tar.gz", FILES, mtime=time.time())
    assert first.read_bytes() != second.read_bytes()
    assert contents_digest(first) == contents_digest(second)


def test_a_changed_file_or_executable_bit_is_another_digest(tmp_path):
    base = _sdist(tmp_path / "base.tar.gz", FILES, mtime=0)
    changed = _sdist(tmp_path / "changed.tar.gz", {**FILES, "trainer-0.1/trainer/task.py": b"print('bye')\n"}, mtime=0)
    executable = _sdist(tmp_path / "exec.tar.gz", FILES, mtime=0, executable={"trainer-0.1/trainer/task.py"})
    assert len({contents_digest(base), contents_digest(changed), contents_digest(executable)}) == 3


def test_wheels_are_read_by_contents_and_anything_else_by_its_bytes(tmp_path):
    digests = []
    for index, stamp in enumerate(((2020, 1, 1, 0, 0, 0), (2024, 6, 1, 12, 0, 0))):
        path = tmp_path / f"w{index}" / "trainer-0.1-py3-none-any.whl"
        path.parent.mkdir()
        with zipfile.ZipFile(path, "w") as wheel:
            for name, data in FILES.items():
                wheel.writestr(zipfile.ZipInfo(name, stamp), data)
        digests.append(contents_digest(path))
    assert digests[0] == digests[1] and digests[0].startswith("contents:")
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not an archive")
    assert not contents_digest(broken).startswith("contents:")


def test_a_layer_is_found_again_for_the_same_sources_under_another_name(tmp_path):
    from jobs.executor.environments import _layer_key

    # The Vertex SDK stages its script's package as gs://…/aiplatform-<time>-aiplatform_custom_trainer_script-0.1.tar.gz
    early = _sdist(tmp_path / "aiplatform-2026-11-29-06:56:01-script-0.1.tar.gz", FILES, mtime=1)
    later = _sdist(tmp_path / "aiplatform-2026-11-29-06:57:44-script-0.1.tar.gz", FILES, mtime=2)
    assert _layer_key(["runtime"], [early], None) == _layer_key(["runtime"], [later], None)
    other = _sdist(tmp_path / "other.tar.gz", {**FILES, "trainer-0.1/extra.py": b""}, mtime=1)
    assert _layer_key(["runtime"], [early], None) != _layer_key(["runtime"], [other], None)

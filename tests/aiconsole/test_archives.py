"""Tests for aiconsole.archives: every archive is built on the fly in tmp_path."""

import gzip
import io
import os
import stat
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

from aiconsole import archives
from aiconsole.archives import (
    ArchiveError,
    PackageInfo,
    inspect_package,
    require_module,
    safe_extract,
)

PKG_INFO = b"Metadata-Version: 2.1\nName: trainer\nVersion: 0.1\n\nA trainer.\n"
METADATA = b"Metadata-Version: 2.1\nName: trainer\nVersion: 0.1\n"
WHEEL = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
SDIST_FILES = {
    "trainer-0.1/PKG-INFO": PKG_INFO,
    "trainer-0.1/setup.py": b"from setuptools import setup\nsetup()\n",
    "trainer-0.1/trainer/__init__.py": b"",
    "trainer-0.1/trainer/task.py": b"print('training')\n",
}
WHEEL_FILES = {
    "trainer/__init__.py": b"",
    "trainer/task.py": b"print('training')\n",
    "trainer-0.1.dist-info/METADATA": METADATA,
    "trainer-0.1.dist-info/WHEEL": WHEEL,
    "trainer-0.1.dist-info/RECORD": b"",
}
ZEROS_11_MIB = bytes(11 * 1024 * 1024)


# ---------------------------------------------------------------------------
# Archive builders
# ---------------------------------------------------------------------------


def tar_file(name: str, data: bytes = b"", mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def tar_entry(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info, None


def add_entries(tar: tarfile.TarFile, entries) -> None:
    for info, data in entries:
        tar.addfile(info, io.BytesIO(data) if data is not None else None)


def write_tar(path: Path, entries, mode: str = "w:gz", **kwargs) -> Path:
    with tarfile.open(path, mode, **kwargs) as tar:
        add_entries(tar, entries)
    return path


def sdist_entries(extra=(), files=None):
    files = SDIST_FILES if files is None else files
    return [tar_file(name, data) for name, data in files.items()] + list(extra)


def make_sdist(tmp_path: Path, extra=(), name: str = "trainer-0.1.tar.gz", **kwargs) -> Path:
    return write_tar(tmp_path / name, sdist_entries(extra), **kwargs)


def write_zip(path: Path, files: dict, extra_infos=()) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for info, data in extra_infos:
            zf.writestr(info, data)
    return path


def zip_info(name: str, file_type: int, perms: int = 0o644) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix, so external_attr carries st_mode
    info.external_attr = (file_type | perms) << 16
    return info


def make_wheel(tmp_path: Path, files=None, name: str = "trainer-0.1-py3-none-any.whl", extra_infos=()):
    return write_zip(tmp_path / name, WHEEL_FILES if files is None else files, extra_infos)


def package(filename: str, *modules: str, packages=()) -> PackageInfo:
    return PackageInfo(filename, "sdist", None, None, frozenset(modules), frozenset(packages))


# ---------------------------------------------------------------------------
# Valid packages
# ---------------------------------------------------------------------------


def test_valid_sdist_gives_name_version_and_modules(tmp_path):
    info = inspect_package(make_sdist(tmp_path))
    assert (info.filename, info.kind, info.name, info.version) == (
        "trainer-0.1.tar.gz",
        "sdist",
        "trainer",
        "0.1",
    )
    assert info.modules == {"setup", "trainer", "trainer.task"}
    assert info.packages == {"trainer"}


def test_valid_wheel_gives_name_version_and_modules(tmp_path):
    info = inspect_package(make_wheel(tmp_path))
    assert (info.kind, info.name, info.version) == ("wheel", "trainer", "0.1")
    assert info.modules == {"trainer", "trainer.task"}


def test_wheel_modules_include_purelib_data_and_extension_modules(tmp_path):
    files = dict(WHEEL_FILES)
    files["trainer-0.1.data/purelib/helpers/util.py"] = b""
    files["trainer-0.1.data/scripts/run.py"] = b""
    files["trainer/_fast.cpython-311-x86_64-linux-gnu.so"] = b"\x7fELF"
    info = inspect_package(make_wheel(tmp_path, files))
    assert {"helpers", "helpers.util", "trainer._fast"} <= info.modules
    assert "run" not in info.modules


def test_sdist_src_layout_modules_are_relative_to_src(tmp_path):
    files = {
        "trainer-0.1/pyproject.toml": b"[project]\nname='trainer'\n",
        "trainer-0.1/src/trainer/__init__.py": b"",
        "trainer-0.1/src/trainer/task.py": b"",
        "trainer-0.1/src/trainer/sub/__main__.py": b"",
    }
    path = write_tar(tmp_path / "trainer-0.1.tar.gz", sdist_entries(files=files))
    info = inspect_package(path)
    assert info.modules == {"trainer", "trainer.task", "trainer.sub", "trainer.sub.__main__"}
    # Without PKG-INFO, name and version come from the top directory.
    assert (info.name, info.version) == ("trainer", "0.1")


def test_leading_dot_slash_names_are_normalised(tmp_path):
    entries = [tar_entry(".", tarfile.DIRTYPE)]
    entries += [tar_file(f"./{name}", data) for name, data in SDIST_FILES.items()]
    info = inspect_package(write_tar(tmp_path / "trainer-0.1.tar.gz", entries))
    assert (info.name, "trainer.task" in info.modules) == ("trainer", True)


def test_filename_argument_is_used_for_messages_and_suffix(tmp_path):
    path = make_sdist(tmp_path, name="upload.bin")
    assert inspect_package(path, filename="trainer-0.1.tar.gz").filename == "trainer-0.1.tar.gz"


@pytest.mark.parametrize(("suffix", "mode"), [(".tar.bz2", "w:bz2"), (".tar.xz", "w:xz"), (".tar", "w")])
def test_other_tar_compressions_are_accepted(tmp_path, suffix, mode):
    info = inspect_package(make_sdist(tmp_path, name=f"trainer-0.1{suffix}", mode=mode))
    assert "trainer.task" in info.modules


def test_zip_sdist_is_accepted(tmp_path):
    info = inspect_package(write_zip(tmp_path / "trainer-0.1.zip", SDIST_FILES))
    assert (info.kind, info.name) == ("sdist", "trainer")


def test_symlink_inside_sdist_is_allowed(tmp_path):
    link = tar_entry("trainer-0.1/trainer/alias.py", tarfile.SYMTYPE, "task.py")
    info = inspect_package(make_sdist(tmp_path, [link]))
    assert "trainer.alias" in info.modules


# ---------------------------------------------------------------------------
# Not a package / wrong format
# ---------------------------------------------------------------------------


def test_rejects_random_bytes(tmp_path):
    path = tmp_path / "trainer-0.1.tar.gz"
    path.write_bytes(bytes((i * 37 + 11) % 251 for i in range(600)))
    with pytest.raises(ArchiveError, match="is not a Python package: expected an sdist"):
        inspect_package(path)


def test_rejects_text_file_named_tar_gz(tmp_path):
    path = tmp_path / "trainer-0.1.tar.gz"
    path.write_text("hello, this is not an archive\n" * 40)
    with pytest.raises(ArchiveError, match=r"^trainer-0\.1\.tar\.gz is not a Python package"):
        inspect_package(path)


def test_rejects_empty_file(tmp_path):
    path = tmp_path / "trainer-0.1.tar.gz"
    path.touch()
    with pytest.raises(ArchiveError, match="the file is empty"):
        inspect_package(path)


def test_rejects_archive_with_unknown_suffix(tmp_path):
    with pytest.raises(ArchiveError, match="is not a Python package"):
        inspect_package(make_sdist(tmp_path, name="trainer.rar"))


def test_rejects_wheel_renamed_to_tar_gz(tmp_path):
    path = make_wheel(tmp_path, name="trainer-0.1.tar.gz")
    with pytest.raises(ArchiveError, match="ends in .tar.gz.*but the file is a zip archive"):
        inspect_package(path)


def test_rejects_sdist_renamed_to_whl(tmp_path):
    path = make_sdist(tmp_path, name="trainer-0.1-py3-none-any.whl")
    with pytest.raises(ArchiveError, match="ends in .whl.*gzip-compressed tar"):
        inspect_package(path)


def test_rejects_file_that_is_both_tar_and_zip(tmp_path):
    polyglot = make_sdist(tmp_path).read_bytes() + make_wheel(tmp_path).read_bytes()
    path = tmp_path / "polyglot-0.1.tar.gz"
    path.write_bytes(polyglot)
    with pytest.raises(ArchiveError, match="both a tar and a zip archive"):
        inspect_package(path)


def test_rejects_truncated_tar_gz(tmp_path):
    path = make_sdist(tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ArchiveError, match="corrupt or truncated"):
        inspect_package(path)


def test_rejects_truncated_uncompressed_tar(tmp_path):
    big = tar_file("trainer-0.1/data.bin", b"x" * 5000)
    path = make_sdist(tmp_path, [big], name="trainer-0.1.tar", mode="w")
    path.write_bytes(path.read_bytes()[:3000])
    with pytest.raises(ArchiveError, match="corrupt or truncated"):
        inspect_package(path)


def test_rejects_truncated_wheel(tmp_path):
    path = make_wheel(tmp_path)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(ArchiveError, match="corrupt or truncated"):
        inspect_package(path)


# ---------------------------------------------------------------------------
# Member paths
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "a/../../x", "trainer-0.1/../../etc/passwd"])
def test_rejects_member_escaping_with_dotdot(tmp_path, name):
    path = make_sdist(tmp_path, [tar_file(name, b"x")])
    with pytest.raises(ArchiveError, match=f"member '{name}' points outside the archive"):
        inspect_package(path)


def test_rejects_absolute_member_path(tmp_path):
    path = make_sdist(tmp_path, [tar_file("/etc/passwd", b"x")])
    with pytest.raises(ArchiveError, match=r"^trainer-0\.1\.tar\.gz: member '/etc/passwd' points outside"):
        inspect_package(path)


@pytest.mark.parametrize("name", ["C:/Windows/x.py", "trainer-0.1/c:x"])
def test_rejects_windows_drive_letter(tmp_path, name):
    path = write_zip(tmp_path / "trainer-0.1.zip", {**SDIST_FILES, name: b"x"})
    with pytest.raises(ArchiveError, match="Windows drive letter"):
        inspect_package(path)


def test_rejects_backslash_in_member_name(tmp_path):
    path = write_zip(tmp_path / "trainer-0.1.zip", {**SDIST_FILES, "trainer-0.1\\..\\..\\x": b"x"})
    with pytest.raises(ArchiveError, match="contains a backslash"):
        inspect_package(path)


def test_rejects_nul_byte_hidden_in_zip_name(tmp_path):
    path = write_zip(tmp_path / "trainer-0.1.zip", SDIST_FILES)
    data = path.read_bytes().replace(b"trainer-0.1/setup.py", b"trainer-0.1/setup\x00py")
    path.write_bytes(data)
    with pytest.raises(ArchiveError, match="control characters"):
        inspect_package(path)


# ---------------------------------------------------------------------------
# Links and special files
# ---------------------------------------------------------------------------


def test_rejects_tar_symlink_pointing_outside(tmp_path):
    link = tar_entry("trainer-0.1/evil", tarfile.SYMTYPE, "../../etc/passwd")
    with pytest.raises(ArchiveError, match="'trainer-0.1/evil' is a symbolic link to '../../etc/passwd'"):
        inspect_package(make_sdist(tmp_path, [link]))


def test_rejects_tar_symlink_with_absolute_target(tmp_path):
    link = tar_entry("trainer-0.1/evil", tarfile.SYMTYPE, "/etc/passwd")
    with pytest.raises(ArchiveError, match="points outside the archive"):
        inspect_package(make_sdist(tmp_path, [link]))


def test_rejects_symlink_escaping_through_another_symlink(tmp_path):
    # Textually "up/../x" stays inside, but "up" is the root, so ".." leaves it.
    links = [
        tar_entry("trainer-0.1/up", tarfile.SYMTYPE, ".."),
        tar_entry("trainer-0.1/evil", tarfile.SYMTYPE, "up/../x"),
    ]
    with pytest.raises(ArchiveError, match="'trainer-0.1/evil' is a symbolic link"):
        inspect_package(make_sdist(tmp_path, links))


def test_rejects_symlink_loop(tmp_path):
    links = [
        tar_entry("trainer-0.1/a", tarfile.SYMTYPE, "b/x"),
        tar_entry("trainer-0.1/b", tarfile.SYMTYPE, "a/y"),
    ]
    with pytest.raises(ArchiveError, match="loop"):
        inspect_package(make_sdist(tmp_path, links))


def test_rejects_member_inside_symlinked_directory(tmp_path):
    entries = [
        tar_entry("trainer-0.1/link", tarfile.SYMTYPE, "trainer"),
        tar_file("trainer-0.1/link/x.py", b""),
    ]
    with pytest.raises(ArchiveError, match="inside 'trainer-0.1/link', which is a symbolic link"):
        inspect_package(make_sdist(tmp_path, entries))


def test_rejects_zip_symlink_pointing_outside(tmp_path):
    link = zip_info("trainer-0.1/evil", stat.S_IFLNK, 0o777)
    path = write_zip(tmp_path / "trainer-0.1.zip", SDIST_FILES, [(link, "../../../etc/passwd")])
    with pytest.raises(ArchiveError, match="symbolic link to '../../../etc/passwd'"):
        inspect_package(path)


def test_rejects_any_link_in_a_wheel(tmp_path):
    link = zip_info("trainer/alias.py", stat.S_IFLNK, 0o777)
    path = make_wheel(tmp_path, extra_infos=[(link, "task.py")])
    with pytest.raises(ArchiveError, match="wheels may not contain links"):
        inspect_package(path)


def test_rejects_hardlink_pointing_outside(tmp_path):
    link = tar_entry("trainer-0.1/evil", tarfile.LNKTYPE, "../../etc/passwd")
    with pytest.raises(ArchiveError, match="hard link to '../../etc/passwd'.*points outside"):
        inspect_package(make_sdist(tmp_path, [link]))


def test_rejects_hardlink_to_missing_member(tmp_path):
    link = tar_entry("trainer-0.1/copy.py", tarfile.LNKTYPE, "trainer-0.1/nowhere.py")
    with pytest.raises(ArchiveError, match="not a regular file earlier in the archive"):
        inspect_package(make_sdist(tmp_path, [link]))


@pytest.mark.parametrize(
    ("kind", "description"),
    [
        (tarfile.CHRTYPE, "character device"),
        (tarfile.BLKTYPE, "block device"),
        (tarfile.FIFOTYPE, "FIFO"),
    ],
)
def test_rejects_device_and_fifo_tar_members(tmp_path, kind, description):
    path = make_sdist(tmp_path, [tar_entry("trainer-0.1/dev", kind)])
    with pytest.raises(ArchiveError, match=f"'trainer-0.1/dev' is a {description}"):
        inspect_package(path)


def test_rejects_sparse_tar_member(tmp_path):
    sparse = tar_entry("trainer-0.1/sparse.bin", tarfile.GNUTYPE_SPARSE)
    path = make_sdist(tmp_path, [sparse], format=tarfile.GNU_FORMAT)
    with pytest.raises(ArchiveError, match="sparse files are not allowed"):
        inspect_package(path)


def test_rejects_device_zip_member(tmp_path):
    device = zip_info("trainer-0.1/dev", stat.S_IFCHR)
    path = write_zip(tmp_path / "trainer-0.1.zip", SDIST_FILES, [(device, b"")])
    with pytest.raises(ArchiveError, match="is a character device"):
        inspect_package(path)


# ---------------------------------------------------------------------------
# Limits and bombs
# ---------------------------------------------------------------------------


def test_rejects_too_many_members(tmp_path):
    with pytest.raises(ArchiveError, match="more than 3 members"):
        inspect_package(make_sdist(tmp_path), max_members=3)


def test_rejects_total_size_over_limit(tmp_path):
    path = make_sdist(tmp_path, [tar_file("trainer-0.1/data.bin", b"x" * 2000)])
    with pytest.raises(ArchiveError, match="unpacks to more than the limit of 1000 bytes"):
        inspect_package(path, max_total_bytes=1000)


def test_rejects_zip_bomb_by_expansion_ratio(tmp_path):
    path = make_wheel(tmp_path, {**WHEEL_FILES, "trainer/zeros.bin": ZEROS_11_MIB})
    with pytest.raises(ArchiveError, match="decompression bomb"):
        inspect_package(path, max_ratio=100)


def test_rejects_tar_gz_bomb_by_expansion_ratio(tmp_path):
    path = make_sdist(tmp_path, [tar_file("trainer-0.1/zeros.bin", ZEROS_11_MIB)])
    with pytest.raises(ArchiveError, match="decompression bomb"):
        inspect_package(path)


def test_rejects_tar_gz_with_hidden_padding_after_the_archive(tmp_path):
    # Headers declare almost nothing; only counting the decompressed stream catches it.
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        add_entries(tar, sdist_entries())
    path = tmp_path / "trainer-0.1.tar.gz"
    path.write_bytes(gzip.compress(buffer.getvalue() + ZEROS_11_MIB))
    with pytest.raises(ArchiveError, match="decompression bomb"):
        inspect_package(path)


def test_small_archive_with_high_ratio_is_not_flagged(tmp_path):
    path = make_wheel(tmp_path, {**WHEEL_FILES, "trainer/zeros.bin": bytes(1024 * 1024)})
    assert inspect_package(path, max_ratio=2).name == "trainer"


def test_rejects_zip_with_lying_stored_size(tmp_path):
    path = tmp_path / "trainer-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in WHEEL_FILES.items():
            zf.writestr(name, data)
    data = path.read_bytes()
    # The central directory entry of trainer/task.py keeps its uncompressed size at offset 24.
    entry = data.index(b"trainer/task.py", data.index(b"PK\x01\x02")) - 46
    assert data[entry : entry + 4] == b"PK\x01\x02"
    patched = data[: entry + 24] + (10**6).to_bytes(4, "little") + data[entry + 28 :]
    path.write_bytes(patched)
    with pytest.raises(ArchiveError, match="declares inconsistent sizes"):
        inspect_package(path)


def test_rejects_huge_tar_extended_header(tmp_path):
    info, data = tar_file("trainer-0.1/x.py", b"")
    info.pax_headers = {"comment": "x" * (2 * 1024 * 1024)}
    path = make_sdist(tmp_path, [(info, data)], format=tarfile.PAX_FORMAT)
    with pytest.raises(ArchiveError, match="extended tar header .* too large"):
        inspect_package(path)


def test_rejects_zip_whose_local_header_disagrees_with_directory(tmp_path):
    path = make_wheel(tmp_path)
    data = path.read_bytes()
    first = data.index(b"trainer/task.py")  # the local header comes before the directory
    path.write_bytes(data[:first] + b"trainer/tesk.py" + data[first + 15 :])
    with pytest.raises(ArchiveError, match="described differently"):
        inspect_package(path)


def test_rejects_zip_with_data_before_first_entry(tmp_path):
    path = make_wheel(tmp_path)
    path.write_bytes(b"#!/bin/sh\necho hidden\n" + path.read_bytes())
    with pytest.raises(ArchiveError, match="does not list"):
        inspect_package(path)


# ---------------------------------------------------------------------------
# Package structure
# ---------------------------------------------------------------------------


def test_rejects_duplicate_member_in_wheel(tmp_path):
    path = make_wheel(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we want
        with zipfile.ZipFile(path, "a") as zf:
            zf.writestr("trainer/task.py", b"print('other')\n")
    with pytest.raises(ArchiveError, match="'trainer/task.py' appears more than once"):
        inspect_package(path)


def test_rejects_wheel_without_metadata(tmp_path):
    files = {k: v for k, v in WHEEL_FILES.items() if not k.endswith("METADATA")}
    with pytest.raises(ArchiveError, match="no trainer-0.1.dist-info/METADATA"):
        inspect_package(make_wheel(tmp_path, files))


def test_rejects_wheel_without_dist_info(tmp_path):
    files = {k: v for k, v in WHEEL_FILES.items() if ".dist-info" not in k}
    with pytest.raises(ArchiveError, match="no .dist-info directory"):
        inspect_package(make_wheel(tmp_path, files))


def test_rejects_badly_named_wheel(tmp_path):
    with pytest.raises(ArchiveError, match="name-version-python-abi-platform.whl"):
        inspect_package(make_wheel(tmp_path, name="trainer.whl"))


def test_rejects_wheel_whose_metadata_names_another_project(tmp_path):
    with pytest.raises(ArchiveError, match="METADATA says 'trainer'"):
        inspect_package(make_wheel(tmp_path, name="other-0.1-py3-none-any.whl"))


def test_rejects_sdist_with_files_at_top_level(tmp_path):
    path = make_sdist(tmp_path, [tar_file("setup.py", b"")])
    with pytest.raises(ArchiveError, match="single top-level directory"):
        inspect_package(path)


def test_rejects_sdist_without_package_markers(tmp_path):
    files = {"trainer-0.1/trainer/task.py": b""}
    path = write_tar(tmp_path / "trainer-0.1.tar.gz", sdist_entries(files=files))
    with pytest.raises(ArchiveError, match="no PKG-INFO, setup.py or pyproject.toml"):
        inspect_package(path)


# ---------------------------------------------------------------------------
# require_module
# ---------------------------------------------------------------------------


def test_require_module_reports_what_the_packages_provide(tmp_path):
    packages = [
        package("trainer-0.1.tar.gz", "trainer", "trainer.model", packages=["trainer"]),
        package("util-1.0-py3-none-any.whl"),
    ]
    with pytest.raises(ArchiveError) as excinfo:
        require_module(packages, "trainer.task")
    assert str(excinfo.value) == (
        "The module trainer.task was not found in the trainer packages "
        "(trainer-0.1.tar.gz, util-1.0-py3-none-any.whl). The packages provide: trainer, trainer.model"
    )


def test_require_module_lists_at_most_ten_modules():
    many = package("big-1.0.tar.gz", *(f"mod{i:02d}" for i in range(15)))
    with pytest.raises(ArchiveError, match=r"mod09 and 5 more$"):
        require_module([many], "trainer.task")


def test_require_module_finds_module_across_two_packages(tmp_path):
    util = package("util-1.0-py3-none-any.whl", "util")
    trainer = inspect_package(make_sdist(tmp_path))
    assert require_module([util, trainer], "trainer.task") is trainer
    assert require_module([util, trainer], "util") is util


def test_require_module_needs_main_to_run_a_package(tmp_path):
    info = inspect_package(make_sdist(tmp_path))
    with pytest.raises(ArchiveError, match="package without a __main__.py"):
        require_module([info], "trainer")
    runnable = package("t.tar.gz", "trainer", "trainer.__main__", packages=["trainer"])
    assert require_module([runnable], "trainer") is runnable


@pytest.mark.parametrize("name", ["", "trainer-task", "trainer..task", "1trainer", "trainer.class", "a/b"])
def test_require_module_rejects_invalid_module_names(name):
    with pytest.raises(ArchiveError, match="not a valid Python module name"):
        require_module([package("t.tar.gz", "trainer")], name)


# ---------------------------------------------------------------------------
# safe_extract
# ---------------------------------------------------------------------------


def test_safe_extract_writes_files_with_safe_modes(tmp_path):
    setuid = tar_file("trainer-0.1/run.sh", b"#!/bin/sh\n", mode=0o4777)
    link = tar_entry("trainer-0.1/trainer/alias.py", tarfile.SYMTYPE, "task.py")
    path = make_sdist(tmp_path, [setuid, link])
    dest = tmp_path / "out"
    created = safe_extract(path, dest)
    assert dest / "trainer-0.1/trainer/task.py" in created
    assert (dest / "trainer-0.1/trainer/task.py").read_bytes() == b"print('training')\n"
    assert stat.S_IMODE((dest / "trainer-0.1/run.sh").stat().st_mode) & ~0o755 == 0
    assert stat.S_IMODE((dest / "trainer-0.1/setup.py").stat().st_mode) & ~0o644 == 0
    alias = dest / "trainer-0.1/trainer/alias.py"
    assert alias.is_symlink() and os.readlink(alias) == "task.py"


def test_safe_extract_handles_zip_archives(tmp_path):
    dest = tmp_path / "out"
    created = safe_extract(make_wheel(tmp_path), dest)
    assert sorted(p.relative_to(dest).as_posix() for p in created) == sorted(WHEEL_FILES)


def test_safe_extract_refuses_non_empty_destination(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "existing").touch()
    with pytest.raises(FileExistsError):
        safe_extract(make_sdist(tmp_path), dest)


def test_safe_extract_refuses_what_inspection_refuses(tmp_path):
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match="points outside the archive"):
        safe_extract(make_sdist(tmp_path, [tar_file("../x", b"x")]), dest)
    assert not dest.exists()
    assert not (tmp_path / "x").exists()


def test_safe_extract_removes_partial_output_when_crc_shows_a_lie(tmp_path):
    path = make_wheel(tmp_path)
    data = bytearray(path.read_bytes())
    # Corrupt task.py's compressed bytes: sizes stay plausible, the content does not match.
    start = data.index(b"trainer/task.py") + len("trainer/task.py")
    data[start + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match="corrupt or truncated"):
        safe_extract(path, dest)
    assert not dest.exists()


class _Liar(io.BytesIO):
    """Stands in for a decoder that yields more bytes than the header declared."""


def _lying_extractfile(payload: bytes):
    real = tarfile.TarFile.extractfile

    def extractfile(self, member):
        handle = real(self, member)
        if member.name.endswith("data.bin"):
            handle.close()
            return _Liar(payload)
        return handle

    return extractfile


def test_safe_extract_stops_when_written_bytes_exceed_the_limit(tmp_path, monkeypatch):
    path = make_sdist(tmp_path, [tar_file("trainer-0.1/data.bin", b"x" * 100)])
    monkeypatch.setattr(tarfile.TarFile, "extractfile", _lying_extractfile(b"x" * 5_000_000))
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ArchiveError, match="unpacks to more than the limit of 1.0 KiB"):
        safe_extract(path, dest, max_total_bytes=1024)
    assert list(dest.iterdir()) == []  # pre-existing empty directory is kept, but emptied


def test_safe_extract_stops_when_a_member_outgrows_its_header(tmp_path, monkeypatch):
    path = make_sdist(tmp_path, [tar_file("trainer-0.1/data.bin", b"x" * 100)])
    monkeypatch.setattr(tarfile.TarFile, "extractfile", _lying_extractfile(b"x" * 101))
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match="more data than its header declares"):
        safe_extract(path, dest)
    assert not dest.exists()


def test_safe_extract_accepts_any_archive_name(tmp_path):
    path = write_tar(tmp_path / "model.tgz", [tar_file("saved_model.pb", b"graph")])
    created = safe_extract(path, tmp_path / "out")
    assert [p.name for p in created] == ["saved_model.pb"]


def test_safe_extract_hardlink_becomes_a_link_to_the_extracted_file(tmp_path):
    entries = [
        tar_file("model/weights.bin", b"w" * 10),
        tar_entry("model/copy.bin", tarfile.LNKTYPE, "model/weights.bin"),
    ]
    dest = tmp_path / "out"
    safe_extract(write_tar(tmp_path / "model.tar.gz", entries), dest)
    assert (dest / "model/copy.bin").read_bytes() == b"w" * 10
    assert not (dest / "model/copy.bin").is_symlink()


def test_module_level_limits_are_the_documented_defaults():
    assert archives.MAX_MEMBERS == 20_000
    assert archives.MAX_TOTAL_BYTES == 4 * 1024**3
    assert archives.MAX_RATIO == 200.0

"""Extraction: writing the members ``safe_extract`` has checked, without following any link.

The archive is read again and must yield exactly the members the checks approved; files are
created with O_EXCL and O_NOFOLLOW and their bytes counted as written, directories level by level,
symbolic links last.
"""

import os
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from aiconsole.archives.errors import ArchiveError
from aiconsole.archives.limits import COPY_CHUNK, Limits, too_large
from aiconsole.archives.members import Member, Scan
from aiconsole.archives.tars import open_tar_stream, tar_member
from aiconsole.archives.zips import with_zip_link_targets, zip_entries


class ByteBudget:
    """Counts bytes really written during extraction, whatever the headers said."""

    def __init__(self, display: str, limit: int):
        self._display = display
        self._limit = limit
        self.used = 0

    def spend(self, count: int) -> None:
        """Account for ``count`` more bytes, refusing to go past the limit."""
        self.used += count
        if self.used > self._limit:
            raise too_large(self._display, self._limit)


def prepare_destination(dest: Path) -> bool:
    """Make sure ``dest`` is a fresh, empty directory; True when it was created here."""
    if dest.is_symlink():
        raise FileExistsError(f"extraction destination {dest} is a symbolic link")
    if dest.exists():
        if not dest.is_dir() or any(dest.iterdir()):
            raise FileExistsError(f"extraction destination {dest} must be an empty directory")
        return False
    dest.mkdir(mode=0o755, parents=True)
    return True


def discard_output(dest: Path, created: bool) -> None:
    if created:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _expect(display: str, member: Member, expected: Iterator[Member]) -> None:
    """Extraction may only create what the checks approved."""
    if next(expected, None) != member:
        raise ArchiveError(f"{display}: the archive changed while it was being extracted")


def _make_dirs(dest: Path, relative: str) -> Path:
    """Create ``dest/relative`` level by level, refusing anything that is not a real directory."""
    current = dest
    for part in relative.split("/") if relative else ():
        current = current / part
        try:
            os.mkdir(current, 0o755)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                raise
    return current


def _file_mode(mode: int) -> int:
    # Like tarfile's data filter: executable only if the owner could execute it.
    return 0o755 if mode & 0o100 else 0o644


def _write_file(display: str, dest: Path, member: Member, source: BinaryIO, budget: ByteBudget) -> Path:
    """Copy ``source`` into a new file, counting every byte written."""
    parent, _, leaf = member.name.rpartition("/")
    target = _make_dirs(dest, parent) / leaf
    # O_EXCL and O_NOFOLLOW: never reuse or write through an existing path or link.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(target, flags, _file_mode(member.mode)), "wb") as out:
        written = 0
        while chunk := source.read(COPY_CHUNK):
            budget.spend(len(chunk))
            written += len(chunk)
            if written > member.size:
                raise ArchiveError(f"{display}: member {member.name!r} holds more data than its header declares")
            out.write(chunk)
    return target


def _make_hardlink(dest: Path, member: Member) -> Path:
    parent, _, leaf = member.name.rpartition("/")
    target = _make_dirs(dest, parent) / leaf
    os.link(dest / (member.target or ""), target, follow_symlinks=False)
    return target


def _make_symlinks(dest: Path, links: list[Member]) -> list[Path]:
    """Create symlinks last, so that no file is ever written through one."""
    created = []
    for member in links:
        parent, _, leaf = member.name.rpartition("/")
        target = _make_dirs(dest, parent) / leaf
        os.symlink(member.target or "", target)
        created.append(target)
    return created


def _extract_member(
    display: str,
    dest: Path,
    member: Member,
    open_source: Callable[[], BinaryIO],
    budget: ByteBudget,
) -> Path | None:
    """Create one non-symlink member; return its path unless it is a directory."""
    if member.kind == "dir":
        _make_dirs(dest, member.name)
        return None
    if member.kind == "hardlink":
        return _make_hardlink(dest, member)
    with open_source() as source:
        return _write_file(display, dest, member, source, budget)


def _apply_data_filter(display: str, info: tarfile.TarInfo, dest: Path) -> None:
    """tarfile's own "data" filter, as a second opinion on every member."""
    data_filter = getattr(tarfile, "data_filter", None)  # Python 3.11.4 and later
    if data_filter is None:
        return
    try:
        data_filter(info, str(dest))
    except tarfile.TarError as exc:
        raise ArchiveError(f"{display}: member {info.name!r} was refused: {exc}") from exc


def extract_tar(path: Path, display: str, scan: Scan, limits: Limits, dest: Path, budget: ByteBudget) -> list[Path]:
    created: list[Path] = []
    links: list[Member] = []
    expected = iter(scan.members)
    with open_tar_stream(path, display, scan.fmt, limits) as (tar, _reader):
        for info in tar:
            member = tar_member(display, info)
            if member is None:
                continue
            _expect(display, member, expected)
            _apply_data_filter(display, info, dest)
            if member.kind == "symlink":
                links.append(member)
                continue
            path_created = _extract_member(display, dest, member, lambda info=info: tar.extractfile(info), budget)
            if path_created is not None:
                created.append(path_created)
    return created + _make_symlinks(dest, links)


def extract_zip(path: Path, display: str, scan: Scan, limits: Limits, dest: Path, budget: ByteBudget) -> list[Path]:
    created: list[Path] = []
    links: list[Member] = []
    expected = iter(scan.members)
    with zipfile.ZipFile(path) as zf:
        entries = zip_entries(display, zf, limits, path.stat().st_size)
        entries = with_zip_link_targets(display, zf, entries)
        for info, member in entries:
            _expect(display, member, expected)
            if member.kind == "symlink":
                links.append(member)
                continue
            path_created = _extract_member(display, dest, member, lambda info=info: zf.open(info), budget)
            if path_created is not None:
                created.append(path_created)
    return created + _make_symlinks(dest, links)

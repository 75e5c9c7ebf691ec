"""Scanning an archive: list and check every member, then the whole tree.

Shared by ``inspect_package`` and ``safe_extract``: one pass over a tar stream or a zip's
directory, reading only the small text files the caller wants (package metadata), then the
whole-tree checks (``aiconsole.archives.tree``).
"""

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from aiconsole.archives.errors import reading
from aiconsole.archives.limits import MIB, Limits, check_member_count, check_ratio, check_total
from aiconsole.archives.members import ZIP, Format, Member, Scan
from aiconsole.archives.tars import open_tar_stream, tar_member
from aiconsole.archives.tree import check_tree
from aiconsole.archives.zips import check_zip_layout, with_zip_link_targets, zip_entries

# Metadata files (PKG-INFO, METADATA, WHEEL) only need their headers, which
# come first, so a bounded prefix is enough.
_METADATA_READ_LIMIT = MIB


def scan(
    path: Path,
    display: str,
    fmt: Format,
    limits: Limits,
    wanted: Callable[[str], bool],
) -> Scan:
    """List and check every member; read the small text files ``wanted`` selects."""
    with reading(display):
        if fmt.container == "zip":
            scan = _scan_zip(path, display, limits, wanted)
        else:
            scan = _scan_tar(path, display, fmt, limits, wanted)
    check_tree(display, scan.members, limits, path.stat().st_size)
    return scan


def _scan_tar(path: Path, display: str, fmt: Format, limits: Limits, wanted: Callable[[str], bool]) -> Scan:
    compressed_size = path.stat().st_size
    members: list[Member] = []
    texts: dict[str, str] = {}
    declared = 0
    with open_tar_stream(path, display, fmt, limits) as (tar, reader):
        for count, info in enumerate(tar, start=1):
            check_member_count(display, count, limits)
            member = tar_member(display, info)
            if member is None:
                continue
            members.append(member)
            # Refuse on declared sizes before decompressing the data itself.
            declared += member.size
            check_total(display, declared, limits)
            check_ratio(display, declared, compressed_size, limits)
            if member.kind == "file" and wanted(member.name):
                texts[member.name] = _read_text(tar.extractfile(info))
        reader.drain()
    return Scan(fmt, members, texts)


def _scan_zip(path: Path, display: str, limits: Limits, wanted: Callable[[str], bool]) -> Scan:
    compressed_size = path.stat().st_size
    with zipfile.ZipFile(path) as zf:
        entries = zip_entries(display, zf, limits, compressed_size)
        # Layout first: nothing is decompressed until the entries are known not to overlap.
        with path.open("rb") as handle:
            check_zip_layout(display, handle, zf.infolist(), zf.start_dir)
        entries = with_zip_link_targets(display, zf, entries)
        texts = {
            member.name: _read_text(zf.open(info))
            for info, member in entries
            if member.kind == "file" and wanted(member.name)
        }
    return Scan(ZIP, [member for _, member in entries], texts)


def _read_text(handle: BinaryIO | None) -> str:
    if handle is None:
        return ""
    with handle:
        return handle.read(_METADATA_READ_LIMIT).decode("utf-8", errors="replace")

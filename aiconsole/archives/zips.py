"""Reading zip archives: the central directory, checked entry by entry, and the file's layout.

Sizes are checked as declared before anything is decompressed; the local headers must agree with
the directory and the entries must tile the file exactly (no overlaps, no hidden data), because
streaming installers read the local headers.
"""

import stat
import struct
import zipfile
from collections.abc import Iterable
from dataclasses import replace
from typing import BinaryIO

from aiconsole.archives.errors import ArchiveError
from aiconsole.archives.limits import (
    RATIO_MIN_BYTES,
    Limits,
    check_member_count,
    check_ratio,
    check_total,
    format_bytes,
)
from aiconsole.archives.members import Member, link_target, member_name

_MAX_LINK_TARGET_BYTES = 4096

# A zip data descriptor (optionally signed, optionally zip64) is at most this long.
_ZIP_DESCRIPTOR_MAX_BYTES = 24
_ZIP_FLAG_ENCRYPTED = 0x1
_ZIP_FLAG_DATA_DESCRIPTOR = 0x8
_ZIP_FLAG_UTF8 = 0x800
_ZIP_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})
_ZIP_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_ZIP_LOCAL_SIGNATURE = b"PK\x03\x04"


def _zip_file_type(mode: int) -> str:
    kinds = {
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFIFO: "a FIFO (named pipe)",
        stat.S_IFSOCK: "a socket",
    }
    return kinds.get(stat.S_IFMT(mode), "of an unsupported file type")


def _check_zip_sizes(display: str, info: zipfile.ZipInfo, limits: Limits) -> None:
    """Refuse declared sizes that cannot be honest or that expand suspiciously."""
    name = info.orig_filename
    inconsistent = (info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size) or (
        info.file_size > 0 and info.compress_size == 0
    )
    if inconsistent:
        raise ArchiveError(f"{display}: member {name!r} declares inconsistent sizes")
    if info.file_size > RATIO_MIN_BYTES and info.file_size > limits.max_ratio * info.compress_size:
        raise ArchiveError(
            f"{display}: member {name!r} expands from {format_bytes(info.compress_size)} to "
            f"{format_bytes(info.file_size)}, more than {limits.max_ratio:g} times "
            "(a likely decompression bomb)"
        )


def _zip_member(display: str, info: zipfile.ZipInfo, limits: Limits) -> Member | None:
    """Check one central-directory entry without reading its data.

    Symlink members come back without a target; see with_zip_link_targets.
    """
    # orig_filename keeps anything after a NUL byte, which zipfile would hide.
    raw = info.orig_filename
    name = member_name(display, raw)
    if info.flag_bits & _ZIP_FLAG_ENCRYPTED:
        raise ArchiveError(f"{display}: member {raw!r} is encrypted")
    if info.compress_type not in _ZIP_METHODS:
        raise ArchiveError(f"{display}: member {raw!r} uses an unsupported compression method")
    _check_zip_sizes(display, info, limits)
    mode = info.external_attr >> 16
    file_type = stat.S_IFMT(mode)
    named_as_dir = raw.endswith("/")
    if file_type == stat.S_IFLNK and not named_as_dir:
        kind = "symlink"
    elif named_as_dir and file_type in (0, stat.S_IFDIR):
        kind = "dir"
    elif not named_as_dir and file_type in (0, stat.S_IFREG):
        kind = "file"
    elif file_type in (stat.S_IFDIR, stat.S_IFREG, stat.S_IFLNK):
        raise ArchiveError(f"{display}: member {raw!r} has a type that contradicts its name")
    else:
        raise ArchiveError(
            f"{display}: member {raw!r} is {_zip_file_type(mode)}; "
            "only regular files, directories and links are allowed"
        )
    if not name:
        if kind == "dir":
            return None
        raise ArchiveError(f"{display}: member {raw!r} has no usable name")
    size = info.file_size if kind == "file" else 0
    return Member(name, kind, size, mode)


def zip_entries(
    display: str, zf: zipfile.ZipFile, limits: Limits, compressed_size: int
) -> list[tuple[zipfile.ZipInfo, Member]]:
    """Check the central directory and pair each entry with its checked member."""
    infos = zf.infolist()
    check_member_count(display, len(infos), limits)
    entries = []
    declared = 0
    for info in infos:
        member = _zip_member(display, info, limits)
        declared += info.file_size
        check_total(display, declared, limits)
        check_ratio(display, declared, compressed_size, limits)
        if member is not None:
            entries.append((info, member))
    return entries


def check_zip_layout(display: str, handle: BinaryIO, infos: Iterable[zipfile.ZipInfo], start_dir: int) -> None:
    """Make sure the entries tile the file exactly as the central directory says.

    This refuses overlapping entries (the non-recursive zip bomb), local
    headers that disagree with the directory, and data the directory does
    not list; streaming installers read local headers, so hidden or renamed
    entries would install something that was never inspected.
    """
    spans = []
    for info in infos:
        handle.seek(info.header_offset)
        header = handle.read(_ZIP_LOCAL_HEADER.size)
        if len(header) != _ZIP_LOCAL_HEADER.size:
            raise ArchiveError(f"{display}: the zip archive is truncated")
        signature, _, flags, method, _, _, _, _, _, name_length, extra_length = _ZIP_LOCAL_HEADER.unpack(header)
        raw_name = handle.read(name_length)
        encoding = "utf-8" if flags & _ZIP_FLAG_UTF8 else "cp437"
        local_name = raw_name.decode(encoding, errors="replace")
        if signature != _ZIP_LOCAL_SIGNATURE or local_name != info.orig_filename or method != info.compress_type:
            raise ArchiveError(
                f"{display}: member {info.orig_filename!r} is described differently in its "
                "local header and in the zip directory"
            )
        start = info.header_offset
        end = start + _ZIP_LOCAL_HEADER.size + name_length + extra_length + info.compress_size
        slack = _ZIP_DESCRIPTOR_MAX_BYTES if flags & _ZIP_FLAG_DATA_DESCRIPTOR else 0
        spans.append((start, end, slack))
    position, allowed_gap = 0, 0
    for start, end, slack in sorted(spans):
        _check_zip_gap(display, start - position, allowed_gap)
        position, allowed_gap = end, slack
    _check_zip_gap(display, start_dir - position, allowed_gap)


def _check_zip_gap(display: str, gap: int, allowed: int) -> None:
    if gap < 0:
        raise ArchiveError(f"{display}: zip entries overlap (a zip bomb technique)")
    if gap > allowed:
        raise ArchiveError(f"{display}: the zip archive contains data its directory does not list")


def _read_zip_link(display: str, zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> str:
    """A zip symlink stores its target as the member's content."""
    if info.file_size > _MAX_LINK_TARGET_BYTES:
        raise ArchiveError(f"{display}: member {name!r} is a symbolic link with an oversized target")
    try:
        target = zf.read(info).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"{display}: member {name!r} is a symbolic link whose target is not UTF-8") from exc
    return link_target(display, info.orig_filename, target, "symbolic link")


def with_zip_link_targets(
    display: str, zf: zipfile.ZipFile, entries: list[tuple[zipfile.ZipInfo, Member]]
) -> list[tuple[zipfile.ZipInfo, Member]]:
    return [
        (info, replace(member, target=_read_zip_link(display, zf, info, member.name)))
        if member.kind == "symlink"
        else (info, member)
        for info, member in entries
    ]

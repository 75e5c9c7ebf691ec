"""What an archive is made of once checked: its format, its members, and a scan of them.

A member's name is checked and normalised here before anything else looks at it (no absolute
paths, drive letters, "..", control characters or backslashes), and so is the text of a link
target; where a symbolic link really resolves is checked once every member is known
(``aiconsole.archives.tree``).
"""

import re
from dataclasses import dataclass

from aiconsole.archives.errors import ArchiveError

_MAX_NAME_COMPONENT_BYTES = 255

_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class Format:
    container: str  # "tar" or "zip"
    compression: str | None  # "gz", "bz2", "xz" or None
    description: str


GZIP_TAR = Format("tar", "gz", "a gzip-compressed tar archive")
BZIP2_TAR = Format("tar", "bz2", "a bzip2-compressed tar archive")
XZ_TAR = Format("tar", "xz", "an xz-compressed tar archive")
PLAIN_TAR = Format("tar", None, "an uncompressed tar archive")
ZIP = Format("zip", None, "a zip archive")


@dataclass(frozen=True)
class Member:
    """One archive entry after its name has been checked and normalised."""

    name: str  # "/"-separated, no ".", "..", empty or trailing components
    kind: str  # "file", "dir", "symlink" or "hardlink"
    size: int
    mode: int
    target: str | None = None  # symlink target as stored; hardlink target normalised


@dataclass(frozen=True)
class Scan:
    fmt: Format
    members: list[Member]
    texts: dict[str, str]


def _path_problem(path: str) -> tuple[str, bool] | None:
    """Say why an archive path is unsafe: (reason, escapes the root), or None."""
    if not path:
        return "is empty", False
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        return "contains control characters", False
    if any("\ud800" <= char <= "\udfff" for char in path):
        return "is not valid UTF-8", False
    if "\\" in path:
        # Windows tools treat a backslash as a separator, so it can hide "..".
        return "contains a backslash", False
    if path.startswith("/"):
        return "it is an absolute path", True
    if any(_DRIVE_LETTER.match(part) for part in path.split("/")):
        return "it contains a Windows drive letter", True
    return None


def member_name(display: str, raw: str) -> str:
    """Validate a member name and return it normalised ("" for the archive root)."""
    problem = _path_problem(raw)
    if problem is not None:
        reason, escapes = problem
        if escapes:
            raise ArchiveError(f"{display}: member {raw!r} points outside the archive ({reason})")
        raise ArchiveError(f"{display}: member name {raw!r} {reason}")
    parts = raw.split("/")
    if ".." in parts:
        raise ArchiveError(f"{display}: member {raw!r} points outside the archive")
    clean = [part for part in parts if part not in ("", ".")]
    if any(len(part.encode("utf-8")) > _MAX_NAME_COMPONENT_BYTES for part in clean):
        raise ArchiveError(f"{display}: member {raw!r} has a path component that is too long")
    return "/".join(clean)


def link_target(display: str, name: str, target: str, what: str) -> str:
    """Check the text of a link target; where it resolves is checked later."""
    problem = _path_problem(target)
    if problem is not None:
        reason, escapes = problem
        if escapes:
            raise ArchiveError(
                f"{display}: member {name!r} is a {what} to {target!r}, which points outside the archive"
            )
        raise ArchiveError(f"{display}: member {name!r} is a {what} whose target {reason}")
    return target


def hardlink_target(display: str, name: str, target: str) -> str:
    """Hard link targets name another member, relative to the archive root."""
    link_target(display, name, target, "hard link")
    parts = target.split("/")
    if ".." in parts:
        raise ArchiveError(f"{display}: member {name!r} is a hard link to {target!r}, which points outside the archive")
    return "/".join(part for part in parts if part not in ("", "."))

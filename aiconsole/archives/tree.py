"""Checks that need every member at once: duplicates, parents, links and the effective size.

A member may not sit below a file or a symbolic link, a hard link must point to a regular file
earlier in the archive, and a symbolic link must resolve inside the archive, following the other
links in it the way the OS would.
"""

from collections import deque

from aiconsole.archives.errors import ArchiveError
from aiconsole.archives.limits import Limits, check_ratio, check_total
from aiconsole.archives.members import Member

_MAX_LINK_HOPS = 40


def check_tree(display: str, members: list[Member], limits: Limits, compressed_size: int) -> None:
    """Checks that need every member: duplicates, parents, links, effective size."""
    kinds: dict[str, str] = {}
    first_index: dict[str, int] = {}
    for index, member in enumerate(members):
        previous = kinds.get(member.name)
        if previous is not None and not (previous == "dir" and member.kind == "dir"):
            raise ArchiveError(f"{display}: member {member.name!r} appears more than once")
        kinds.setdefault(member.name, member.kind)
        first_index.setdefault(member.name, index)
    symlinks = {m.name: m.target for m in members if m.kind == "symlink" and m.target is not None}
    sizes = {m.name: m.size for m in members if m.kind == "file"}
    total = 0
    for index, member in enumerate(members):
        _check_parents(display, member, kinds)
        if member.kind == "file":
            total += member.size
        elif member.kind == "hardlink":
            _check_hardlink(display, member, index, kinds, first_index)
            # Installers may copy hard links, so each one costs its target's size.
            total += sizes[member.target]
        elif member.kind == "symlink":
            _check_symlink(display, member, symlinks)
    check_total(display, total, limits)
    check_ratio(display, total, compressed_size, limits)


def _check_parents(display: str, member: Member, kinds: dict[str, str]) -> None:
    """A member may not sit below a file or a symlink: writing it would follow the link."""
    parts = member.name.split("/")
    for depth in range(1, len(parts)):
        parent = "/".join(parts[:depth])
        kind = kinds.get(parent)
        if kind == "symlink":
            raise ArchiveError(f"{display}: member {member.name!r} is inside {parent!r}, which is a symbolic link")
        if kind in ("file", "hardlink"):
            raise ArchiveError(f"{display}: member {member.name!r} is inside {parent!r}, which is a file")


def _check_hardlink(
    display: str, member: Member, index: int, kinds: dict[str, str], first_index: dict[str, int]
) -> None:
    target = member.target or ""
    if kinds.get(target) != "file" or first_index[target] >= index:
        raise ArchiveError(
            f"{display}: member {member.name!r} is a hard link to {target!r}, "
            "which is not a regular file earlier in the archive"
        )


def _check_symlink(display: str, member: Member, symlinks: dict[str, str]) -> None:
    target = member.target or ""
    if not _resolves_inside(display, member.name, target, symlinks):
        raise ArchiveError(
            f"{display}: member {member.name!r} is a symbolic link to {target!r}, which points outside the archive"
        )


def _resolves_inside(display: str, name: str, target: str, symlinks: dict[str, str]) -> bool:
    """Resolve a link target the way the OS would, following links in the archive.

    A purely textual check is not enough: with ``up -> .``, the target
    ``up/../x`` looks harmless but really climbs out of the archive root.
    """
    current = name.split("/")[:-1]
    pending = deque(target.split("/"))
    hops = 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return False
            current.pop()
            continue
        candidate = "/".join([*current, part])
        if candidate in symlinks:
            hops += 1
            if hops > _MAX_LINK_HOPS:
                raise ArchiveError(f"{display}: member {name!r} is part of a symbolic link loop")
            pending.extendleft(reversed(symlinks[candidate].split("/")))
        else:
            current.append(part)
    return True

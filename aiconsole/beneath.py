"""Files and folders reached beneath a trusted folder, one component at a time, never through a link.

A root console works in folders that trainers write: job dirs, replicas' working dirs, a
project's storage area. A path checked once and used again later can be changed in between: a
trainer that owns a folder on it swaps that folder for a link to the data dir, and root's next
``chmod`` or ``open`` lands on the secret key. So every operation on such a path starts at a folder
no trainer can change (the storage dir, a shared root, the work dir) and opens each component from
its parent's descriptor with ``O_NOFOLLOW``: a link anywhere on the way fails the operation
(``ELOOP``, ``ENOTDIR``) instead of being followed, and the owner and mode are then changed on the
descriptor (``fchown``, ``fchmod``), so what is checked is what is changed.

A trainer can also hard-link a file it may reach by name into its own folder where the kernel
allows that (``fs.protected_hardlinks`` off): a file the console owns with more than one link is
never read, lent or handed over.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# An entry itself, not what it holds: fstat and, through /proc/self/fd, chown and chmod.
ENTRY = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 64


class Refused(OSError):
    """The path cannot be used safely (a link on the way, outside its folder, too deep)."""


def relative_parts(base: Path, path: Path) -> tuple[str, ...]:
    """The components of ``path`` below ``base`` (both absolute, already resolved)."""
    path, base = PurePath(path), PurePath(base)
    if not path.is_relative_to(base):
        raise Refused(f"{path} is not inside {base}")
    parts = path.relative_to(base).parts
    if any(part in ("..", ".") for part in parts):
        raise Refused(f"{path}: no '.' or '..' components")
    return parts


@contextmanager
def folder(
    base: Path, path: Path, *, create: bool = False, mode: int = 0o700, made: Callable[[int], None] | None = None
) -> Iterator[int]:
    """A descriptor of the folder ``path``, opened from ``base`` one component at a time without
    following links. ``create`` makes missing folders (``mode``, then ``made(fd)`` on each new one)."""
    descriptor = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in relative_parts(base, path):
            try:
                child = os.open(part, DIRECTORY, dir_fd=descriptor)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, mode, dir_fd=descriptor)
                except FileExistsError:
                    pass
                child = os.open(part, DIRECTORY, dir_fd=descriptor)
                if made is not None:
                    made(child)
            os.close(descriptor)
            descriptor = child
        yield descriptor
    finally:
        os.close(descriptor)


def open_file(base: Path, path: Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of the file ``path`` beneath ``base``; no component, the last included, may be
    a link. A regular file the console owns with other hard links is refused."""
    path = Path(path)
    with folder(base, path.parent) as parent:
        descriptor = os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY, mode, dir_fd=parent)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path} is not a regular file")
        if suspicious_link_count(info):
            raise Refused(f"{path} has other hard links; the console does not use it")
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def suspicious_link_count(info: os.stat_result) -> bool:
    """A regular file the console owns, linked from more than one place: perhaps a secret of the
    console's linked into a trainer's folder."""
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1 and info.st_uid == os.geteuid()


def read_file(base: Path, path: Path, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of a file beneath ``base`` (the caller refuses more)."""
    descriptor = open_file(base, path)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(limit + 1)


def write_file(base: Path, path: Path, data: bytes, *, owner: tuple[int, int] | None = None, mode: int = 0o600) -> None:
    """Write ``path`` beneath ``base`` whole: a new file renamed over the old entry, so a link or
    a hard-linked file in its place is replaced, never written through. ``owner`` (uid, gid) and
    ``mode`` are set on the new file before it appears."""
    path = Path(path)
    with folder(base, path.parent) as parent:
        scratch = f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}"
        descriptor = os.open(
            scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
        )
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                if owner is not None:
                    os.fchown(handle.fileno(), *owner)
                os.fchmod(handle.fileno(), mode)
            os.rename(scratch, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            try:
                os.unlink(scratch, dir_fd=parent)
            except OSError:
                pass
            raise


# --- trees -------------------------------------------------------------------------------------


@contextmanager
def entry(parent: int, name: str) -> Iterator[int]:
    """A descriptor of the entry ``name`` itself (``O_PATH``, a link is not followed)."""
    descriptor = os.open(name, ENTRY, dir_fd=parent)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def change(descriptor: int, *, uid: int = -1, gid: int = -1, mode: int | None = None) -> None:
    """chown and chmod the very file or folder ``descriptor`` names (an ``O_PATH`` descriptor
    cannot be given to fchown, but its /proc entry leads to the same inode, not to a path)."""
    target = f"/proc/self/fd/{descriptor}"
    if uid != -1 or gid != -1:
        os.chown(target, uid, gid)
    if mode is not None:
        os.chmod(target, mode)


def tree(
    base: Path, path: Path, visit: Callable[[int, os.stat_result], None], *, max_entries: int, what: str = ""
) -> None:
    """Call ``visit(descriptor, stat)`` on ``path`` and everything below it that is a regular file
    or a folder, folders before what they hold, each reached without following a link; links,
    devices and sockets are skipped. ``descriptor`` is ``O_PATH`` for files (use :func:`change`)
    and a real folder descriptor for folders. At most ``max_entries`` entries and ``MAX_DEPTH``
    levels, else :class:`Refused` naming ``what``."""
    path = Path(path)
    if path == Path(base):
        top = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            visit(top, os.fstat(top))
        except BaseException:
            os.close(top)
            raise
    else:
        with folder(base, path.parent) as parent:
            top = _visit_child(parent, path.name, visit, missing_ok=False)
        if top is None:
            return  # a file, visited
    seen = 0
    stack = [(top, _names(top))]
    try:
        while stack:
            parent, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(stack.pop()[0])
                continue
            seen += 1
            if seen > max_entries:
                raise Refused(
                    f"{what or path} holds more than {max_entries} files and folders, the most "
                    "the console walks (AICONSOLE_WALK_MAX_ENTRIES)."
                )
            child = _visit_child(parent, name, visit)
            if child is not None:
                if len(stack) >= MAX_DEPTH:
                    os.close(child)
                    raise Refused(f"{what or path} is nested deeper than {MAX_DEPTH} folders.")
                stack.append((child, _names(child)))
    finally:
        for descriptor, _ in stack:
            os.close(descriptor)


def _names(descriptor: int) -> Iterator[str]:
    with os.scandir(descriptor) as entries:
        names = [item.name for item in entries]
    return iter(sorted(names))


def _visit_child(parent: int, name: str, visit, missing_ok: bool = True) -> int | None:
    """Visit one entry; the descriptor of a folder, to walk into next."""
    try:
        child = os.open(name, DIRECTORY, dir_fd=parent)
    except NotADirectoryError:
        child = None
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except OSError:  # ELOOP: a link, never followed
        if missing_ok:
            return None
        raise
    if child is not None:
        try:
            visit(child, os.fstat(child))
        except BaseException:
            os.close(child)
            raise
        return child
    try:
        with entry(parent, name) as descriptor:
            info = os.fstat(descriptor)
            if stat.S_ISREG(info.st_mode):
                visit(descriptor, info)
    except FileNotFoundError:
        if not missing_ok:
            raise
    return None

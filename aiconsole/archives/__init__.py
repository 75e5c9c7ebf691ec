"""Safety checks for user-supplied Python package archives.

Trainer packages (sdists and wheels) come from users, so every archive is
inspected here before anything installs or runs it.  Malformed or hostile
archives are refused with an :class:`ArchiveError` whose message names the
file and the rule it broke, so it can be shown to the user unchanged.

The module is pure: it reads the archive it is given and nothing else, and it
never extracts anything except through :func:`safe_extract`, which repeats
every check and then writes the members itself without following links.
"""

import bz2
import gzip
import keyword
import lzma
import os
import re
import shutil
import stat
import struct
import tarfile
import zipfile
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

# Default limits; every public function takes them as keyword arguments.
MAX_MEMBERS = 20_000
MAX_TOTAL_BYTES = 4 * 1024**3
MAX_RATIO = 200.0
# Below this uncompressed size the expansion ratio is not checked: small
# archives of text compress very well and cannot hurt anyone.
RATIO_MIN_BYTES = 10 * 1024**2

_MIB = 1024**2
_COPY_CHUNK = _MIB
# Metadata files (PKG-INFO, METADATA, WHEEL) only need their headers, which
# come first, so a bounded prefix is enough.
_METADATA_READ_LIMIT = _MIB
# tarfile reads pax and GNU long-name headers into memory in one piece.
_MAX_TAR_METADATA_HEADER = _MIB
# Headers, pax records and padding a tar stream may add on top of the data.
_TAR_OVERHEAD_PER_MEMBER = 4096
_TAR_OVERHEAD_SLACK = _MIB
_MAX_LINK_TARGET_BYTES = 4096
_MAX_LINK_HOPS = 40
_MAX_NAME_COMPONENT_BYTES = 255
# A zip data descriptor (optionally signed, optionally zip64) is at most this long.
_ZIP_DESCRIPTOR_MAX_BYTES = 24
_ZIP_FLAG_ENCRYPTED = 0x1
_ZIP_FLAG_DATA_DESCRIPTOR = 0x8
_ZIP_FLAG_UTF8 = 0x800
_ZIP_METHODS = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)
_ZIP_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_ZIP_LOCAL_SIGNATURE = b"PK\x03\x04"

_TAR_METADATA_TYPES = frozenset(
    {
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
    }
)
_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")
_WHEEL_FILENAME = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)"
    r"-(?P<version>[^-\s]+)"
    r"(?:-(?P<build>\d[^-\s]*))?"
    r"-(?P<python>[^-\s]+)-(?P<abi>[^-\s]+)-(?P<platform>[^-\s]+)\.whl$",
    re.IGNORECASE,
)
_SDIST_MARKERS = ("PKG-INFO", "setup.py", "pyproject.toml")
_EXTENSION_SUFFIXES = (".so", ".pyd")
_MAX_LISTED_MODULES = 10


class ArchiveError(ValueError):
    """An archive was refused; the message is written for the user who uploaded it."""


@dataclass(frozen=True)
class PackageInfo:
    """What inspecting a trainer package found.

    ``modules`` holds every dotted module name importable once the package is
    installed, packages included; ``packages`` is the subset that are
    packages (directories) rather than module files, which decides whether
    ``python -m`` can run them.
    """

    filename: str
    kind: str
    name: str | None
    version: str | None
    modules: frozenset[str]
    packages: frozenset[str] = frozenset()
    requires: tuple[str, ...] = ()  # what it declares it needs (Requires-Dist, egg-info requires.txt)


@dataclass(frozen=True)
class _Limits:
    max_members: int
    max_total_bytes: int
    max_ratio: float


@dataclass(frozen=True)
class _Format:
    container: str  # "tar" or "zip"
    compression: str | None  # "gz", "bz2", "xz" or None
    description: str


_GZIP_TAR = _Format("tar", "gz", "a gzip-compressed tar archive")
_BZIP2_TAR = _Format("tar", "bz2", "a bzip2-compressed tar archive")
_XZ_TAR = _Format("tar", "xz", "an xz-compressed tar archive")
_PLAIN_TAR = _Format("tar", None, "an uncompressed tar archive")
_ZIP = _Format("zip", None, "a zip archive")

_MAGIC_NUMBERS = (
    (b"\x1f\x8b", _GZIP_TAR),
    (b"BZh", _BZIP2_TAR),
    (b"\xfd7zXZ\x00", _XZ_TAR),
    (b"PK\x03\x04", _ZIP),
    (b"PK\x05\x06", _ZIP),  # an empty zip starts with its end record
)
_PACKAGE_SUFFIXES = (
    (".tar.gz", "sdist", _GZIP_TAR),
    (".tgz", "sdist", _GZIP_TAR),
    (".tar.bz2", "sdist", _BZIP2_TAR),
    (".tar.xz", "sdist", _XZ_TAR),
    (".tar", "sdist", _PLAIN_TAR),
    (".zip", "sdist", _ZIP),
    (".whl", "wheel", _ZIP),
)


@dataclass(frozen=True)
class _Member:
    """One archive entry after its name has been checked and normalised."""

    name: str  # "/"-separated, no ".", "..", empty or trailing components
    kind: str  # "file", "dir", "symlink" or "hardlink"
    size: int
    mode: int
    target: str | None = None  # symlink target as stored; hardlink target normalised


@dataclass(frozen=True)
class _Scan:
    fmt: _Format
    members: list[_Member]
    texts: dict[str, str]


class _BrokenTar(Exception):
    """A tar stream that tarfile would otherwise silently cut short or over-read."""


# Low-level errors that mean "this archive is damaged"; OSErrors only count
# when they carry no errno, i.e. come from a decoder rather than the disk.
_CORRUPT_ERRORS = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    struct.error,
    NotImplementedError,
    ValueError,
    OSError,
    _BrokenTar,
)


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def inspect_package(
    path: Path,
    *,
    filename: str | None = None,
    max_members: int = MAX_MEMBERS,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_ratio: float = MAX_RATIO,
) -> PackageInfo:
    """Check that ``path`` is a safe, well-formed sdist or wheel and describe it.

    ``filename`` is the name the user gave the file (defaults to
    ``path.name``); it appears in error messages and its suffix must agree
    with the archive format found in the content.  Nothing is extracted and
    tar streams are read once, member by member.  Raises ArchiveError.
    """
    display = filename or path.name
    limits = _Limits(max_members, max_total_bytes, max_ratio)
    fmt = _detect_format(path, display)
    kind = _package_kind(display, fmt)
    wanted = _wheel_metadata_wanted if kind == "wheel" else _sdist_metadata_wanted
    scan = _scan(path, display, fmt, limits, wanted)
    if kind == "wheel":
        return _wheel_info(display, scan)
    return _sdist_info(display, scan)


def require_module(packages: list[PackageInfo], python_module: str) -> PackageInfo:
    """Return the first package that lets ``python -m python_module`` run.

    The module must be a module file, or a package with a ``__main__``
    module.  Raises ArchiveError naming the packages and what they provide.
    """
    if not _is_dotted_name(python_module):
        raise ArchiveError(
            f"{python_module!r} is not a valid Python module name "
            "(expected dotted identifiers such as trainer.task)"
        )
    if not packages:
        raise ArchiveError(
            f"The module {python_module} cannot be run: no trainer packages were given"
        )
    for package in packages:
        if _is_runnable(package, python_module):
            return package
    for package in packages:
        if python_module in package.modules:
            raise ArchiveError(
                f"The module {python_module} in {package.filename} is a package without a "
                f"__main__.py, so python -m {python_module} cannot run it"
            )
    filenames = ", ".join(package.filename for package in packages)
    raise ArchiveError(
        f"The module {python_module} was not found in the trainer packages ({filenames}). "
        f"{_describe_provided(packages)}"
    )


def safe_extract(
    path: Path,
    dest: Path,
    *,
    max_members: int = MAX_MEMBERS,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_ratio: float = MAX_RATIO,
) -> list[Path]:
    """Check the archive at ``path`` like inspect_package, then extract it into ``dest``.

    ``dest`` must not exist or be an empty directory.  Any tar or zip archive
    is accepted (the package-layout rules do not apply).  Files get mode 0o644
    or 0o755, links are never followed, symlinks are created last, and the
    bytes actually written are counted so that lying headers cannot exceed
    ``max_total_bytes``.  On any failure the partial output is removed.
    Returns the paths created for files and hard links (in archive order),
    then for symlinks.
    """
    display = path.name
    limits = _Limits(max_members, max_total_bytes, max_ratio)
    fmt = _detect_format(path, display)
    scan = _scan(path, display, fmt, limits, _nothing_wanted)
    created = _prepare_destination(dest)
    budget = _ByteBudget(display, max_total_bytes)
    try:
        with _reading(display):
            if fmt.container == "zip":
                return _extract_zip(path, display, scan, limits, dest, budget)
            return _extract_tar(path, display, scan, limits, dest, budget)
    except BaseException:
        # Nothing half-written may survive, whatever the reason.
        _discard_output(dest, created)
        raise


# --------------------------------------------------------------------------
# Format detection
# --------------------------------------------------------------------------


def _not_a_package(display: str) -> str:
    return f"{display} is not a Python package: expected an sdist (.tar.gz) or a wheel (.whl)"


def _detect_format(path: Path, display: str) -> _Format:
    """Identify the archive format from the file's content, never its name."""
    if path.stat().st_size == 0:
        raise ArchiveError(f"{display}: the file is empty")
    with path.open("rb") as handle:
        head = handle.read(16)
    fmt = next((fmt for magic, fmt in _MAGIC_NUMBERS if head.startswith(magic)), None)
    if fmt is None:
        if _is_zip(path):
            fmt = _ZIP
        elif _is_plain_tar(path):
            fmt = _PLAIN_TAR
        else:
            raise ArchiveError(_not_a_package(display))
    if fmt.container == "zip" and not _is_zip(path):
        raise ArchiveError(f"{display}: the zip archive is corrupt or truncated")
    if fmt.container == "tar" and _is_zip(path):
        # Installers that sniff content could read such a file differently.
        raise ArchiveError(
            f"{display}: the file is both a tar and a zip archive, which is ambiguous"
        )
    return fmt


def _is_zip(path: Path) -> bool:
    return zipfile.is_zipfile(path)


def _is_plain_tar(path: Path) -> bool:
    """True when the file opens as an uncompressed tar archive."""
    try:
        with tarfile.open(path, "r:", tarinfo=_GuardedTarInfo):
            return True
    except _CORRUPT_ERRORS:
        return False


def _package_kind(display: str, fmt: _Format) -> str:
    """Return "sdist" or "wheel" from the name, which must agree with the content."""
    lowered = display.lower()
    for suffix, kind, expected in _PACKAGE_SUFFIXES:
        if lowered.endswith(suffix):
            if fmt != expected:
                raise ArchiveError(
                    f"{display}: the name ends in {suffix}, which means {expected.description}, "
                    f"but the file is {fmt.description}"
                )
            return kind
    raise ArchiveError(_not_a_package(display))


# --------------------------------------------------------------------------
# Scanning (shared by inspect_package and safe_extract)
# --------------------------------------------------------------------------


@contextmanager
def _reading(display: str) -> Iterator[None]:
    """Turn decoder and parser errors into a user-facing ArchiveError."""
    try:
        yield
    except ArchiveError:
        raise
    except OSError as exc:
        if exc.errno is not None:
            raise  # a real I/O problem on our side, not a damaged archive
        raise _corrupt(display, exc) from exc
    except _CORRUPT_ERRORS as exc:
        raise _corrupt(display, exc) from exc


def _corrupt(display: str, exc: BaseException) -> ArchiveError:
    reason = str(exc) or type(exc).__name__
    return ArchiveError(f"{display}: the archive is corrupt or truncated ({reason})")


def _scan(
    path: Path,
    display: str,
    fmt: _Format,
    limits: _Limits,
    wanted: Callable[[str], bool],
) -> _Scan:
    """List and check every member; read the small text files ``wanted`` selects."""
    with _reading(display):
        if fmt.container == "zip":
            scan = _scan_zip(path, display, limits, wanted)
        else:
            scan = _scan_tar(path, display, fmt, limits, wanted)
    _check_tree(display, scan.members, limits, path.stat().st_size)
    return scan


def _check_member_count(display: str, count: int, limits: _Limits) -> None:
    if count > limits.max_members:
        raise ArchiveError(f"{display}: the archive has more than {limits.max_members} members")


def _too_large(display: str, limit: int) -> ArchiveError:
    return ArchiveError(f"{display}: unpacks to more than the limit of {_format_bytes(limit)}")


def _check_total(display: str, total: int, limits: _Limits) -> None:
    if total > limits.max_total_bytes:
        raise _too_large(display, limits.max_total_bytes)


def _check_ratio(display: str, uncompressed: int, compressed: int, limits: _Limits) -> None:
    if uncompressed > RATIO_MIN_BYTES and uncompressed > limits.max_ratio * compressed:
        raise ArchiveError(
            f"{display}: expands from {_format_bytes(compressed)} to over "
            f"{_format_bytes(uncompressed)}, more than {limits.max_ratio:g} times its size "
            "(a likely decompression bomb)"
        )


def _format_bytes(count: float) -> str:
    if count < 1024:
        return f"{int(count)} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        count /= 1024
        if count < 1024 or unit == "GiB":
            break
    return f"{count:.1f} {unit}"


# --------------------------------------------------------------------------
# Member names and link targets
# --------------------------------------------------------------------------


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


def _member_name(display: str, raw: str) -> str:
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


def _link_target(display: str, name: str, target: str, what: str) -> str:
    """Check the text of a link target; where it resolves is checked later."""
    problem = _path_problem(target)
    if problem is not None:
        reason, escapes = problem
        if escapes:
            raise ArchiveError(
                f"{display}: member {name!r} is a {what} to {target!r}, "
                "which points outside the archive"
            )
        raise ArchiveError(f"{display}: member {name!r} is a {what} whose target {reason}")
    return target


def _hardlink_target(display: str, name: str, target: str) -> str:
    """Hard link targets name another member, relative to the archive root."""
    _link_target(display, name, target, "hard link")
    parts = target.split("/")
    if ".." in parts:
        raise ArchiveError(
            f"{display}: member {name!r} is a hard link to {target!r}, "
            "which points outside the archive"
        )
    return "/".join(part for part in parts if part not in ("", "."))


# --------------------------------------------------------------------------
# Tar archives
# --------------------------------------------------------------------------


class _GuardedTarInfo(tarfile.TarInfo):
    """TarInfo that refuses what tarfile would otherwise tolerate.

    tarfile quietly stops at a damaged or truncated header after the first
    member, and reads pax and GNU long-name headers into memory whole; both
    are refused here.
    """

    __slots__ = ()

    @classmethod
    def frombuf(cls, buf, encoding, errors):
        """Parse one header block, refusing damaged ones instead of stopping quietly."""
        try:
            return super().frombuf(buf, encoding, errors)
        except (
            tarfile.EmptyHeaderError,
            tarfile.TruncatedHeaderError,
            tarfile.InvalidHeaderError,
        ) as exc:
            # An all-zero block (EOFHeaderError) is the normal end marker and passes.
            raise _BrokenTar(f"bad tar header: {exc}") from exc

    def _proc_member(self, tarfile_):
        if self.type in _TAR_METADATA_TYPES and self.size > _MAX_TAR_METADATA_HEADER:
            raise _BrokenTar(f"an extended tar header of {self.size} bytes is too large")
        if self.type == tarfile.GNUTYPE_SPARSE:
            # Sparse maps can chain header blocks without bound; packages never need them.
            raise _BrokenTar("sparse files are not allowed")
        return super()._proc_member(tarfile_)

    def _refuse_sparse(self, *args):
        raise _BrokenTar("sparse files are not allowed")

    # The pax flavours of GNU sparse files are decoded by these hooks; the 1.0
    # format reads its map from the data stream, again without bound.
    _proc_gnusparse_00 = _refuse_sparse
    _proc_gnusparse_01 = _refuse_sparse
    _proc_gnusparse_10 = _refuse_sparse


class _CountingReader:
    """Read-only stream wrapper that counts the bytes a decompressor really yields.

    Tar headers declare sizes, but only the decompressed stream tells the
    truth, so the stream is stopped as soon as it grows past the limits.
    """

    def __init__(self, stream: BinaryIO, display: str, limits: _Limits, compressed_size: int):
        self._stream = stream
        self._display = display
        self._limits = limits
        self._compressed_size = compressed_size
        self._cap = (
            limits.max_total_bytes
            + limits.max_members * _TAR_OVERHEAD_PER_MEMBER
            + _TAR_OVERHEAD_SLACK
        )
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        """Read at most ``size`` bytes (one chunk when unbounded), enforcing the limits."""
        if size is None or size < 0:
            size = _COPY_CHUNK
        data = self._stream.read(size)
        self.count += len(data)
        if self.count > self._cap:
            raise _too_large(self._display, self._limits.max_total_bytes)
        _check_ratio(self._display, self.count, self._compressed_size, self._limits)
        return data

    def drain(self) -> None:
        """Read to the end so trailing data is counted and checksums are verified."""
        while self.read(_COPY_CHUNK):
            pass


def _decompressor(raw: BinaryIO, compression: str | None) -> BinaryIO:
    if compression == "gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bz2":
        return bz2.BZ2File(raw)
    if compression == "xz":
        return lzma.LZMAFile(raw)
    return raw


@contextmanager
def _open_tar_stream(
    path: Path, display: str, fmt: _Format, limits: _Limits
) -> Iterator[tuple[tarfile.TarFile, _CountingReader]]:
    """Open a tar archive as a forward-only stream behind a counting reader."""
    with path.open("rb") as raw, _decompressor(raw, fmt.compression) as stream:
        reader = _CountingReader(stream, display, limits, os.fstat(raw.fileno()).st_size)
        with tarfile.open(fileobj=reader, mode="r|", tarinfo=_GuardedTarInfo) as tar:
            yield tar, reader


def _tar_type(info: tarfile.TarInfo) -> str:
    if info.ischr():
        return "a character device"
    if info.isblk():
        return "a block device"
    if info.isfifo():
        return "a FIFO (named pipe)"
    return f"of unsupported tar type {info.type!r}"


def _tar_member(display: str, info: tarfile.TarInfo) -> _Member | None:
    """Check one tar header; None for the archive root entry ("./")."""
    name = _member_name(display, info.name)
    if not name:
        if info.isdir():
            return None
        raise ArchiveError(f"{display}: member {info.name!r} has no usable name")
    if info.size < 0:
        raise ArchiveError(f"{display}: member {info.name!r} declares a negative size")
    if info.issparse():
        raise ArchiveError(
            f"{display}: member {info.name!r} is a sparse file, which is not allowed"
        )
    if info.isreg():
        return _Member(name, "file", info.size, info.mode)
    if info.isdir():
        return _Member(name, "dir", 0, info.mode)
    if info.issym():
        target = _link_target(display, info.name, info.linkname, "symbolic link")
        return _Member(name, "symlink", 0, info.mode, target)
    if info.islnk():
        target = _hardlink_target(display, info.name, info.linkname)
        return _Member(name, "hardlink", 0, info.mode, target)
    raise ArchiveError(
        f"{display}: member {info.name!r} is {_tar_type(info)}; "
        "only regular files, directories and links are allowed"
    )


def _scan_tar(
    path: Path, display: str, fmt: _Format, limits: _Limits, wanted: Callable[[str], bool]
) -> _Scan:
    compressed_size = path.stat().st_size
    members: list[_Member] = []
    texts: dict[str, str] = {}
    declared = 0
    with _open_tar_stream(path, display, fmt, limits) as (tar, reader):
        for count, info in enumerate(tar, start=1):
            _check_member_count(display, count, limits)
            member = _tar_member(display, info)
            if member is None:
                continue
            members.append(member)
            # Refuse on declared sizes before decompressing the data itself.
            declared += member.size
            _check_total(display, declared, limits)
            _check_ratio(display, declared, compressed_size, limits)
            if member.kind == "file" and wanted(member.name):
                texts[member.name] = _read_text(tar.extractfile(info))
        reader.drain()
    return _Scan(fmt, members, texts)


# --------------------------------------------------------------------------
# Zip archives
# --------------------------------------------------------------------------


def _zip_file_type(mode: int) -> str:
    kinds = {
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFIFO: "a FIFO (named pipe)",
        stat.S_IFSOCK: "a socket",
    }
    return kinds.get(stat.S_IFMT(mode), "of an unsupported file type")


def _check_zip_sizes(display: str, info: zipfile.ZipInfo, limits: _Limits) -> None:
    """Refuse declared sizes that cannot be honest or that expand suspiciously."""
    name = info.orig_filename
    inconsistent = (
        info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size
    ) or (info.file_size > 0 and info.compress_size == 0)
    if inconsistent:
        raise ArchiveError(f"{display}: member {name!r} declares inconsistent sizes")
    if info.file_size > RATIO_MIN_BYTES and info.file_size > limits.max_ratio * info.compress_size:
        raise ArchiveError(
            f"{display}: member {name!r} expands from {_format_bytes(info.compress_size)} to "
            f"{_format_bytes(info.file_size)}, more than {limits.max_ratio:g} times "
            "(a likely decompression bomb)"
        )


def _zip_member(display: str, info: zipfile.ZipInfo, limits: _Limits) -> _Member | None:
    """Check one central-directory entry without reading its data.

    Symlink members come back without a target; see _with_zip_link_targets.
    """
    # orig_filename keeps anything after a NUL byte, which zipfile would hide.
    raw = info.orig_filename
    name = _member_name(display, raw)
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
    return _Member(name, kind, size, mode)


def _zip_entries(
    display: str, zf: zipfile.ZipFile, limits: _Limits, compressed_size: int
) -> list[tuple[zipfile.ZipInfo, _Member]]:
    """Check the central directory and pair each entry with its checked member."""
    infos = zf.infolist()
    _check_member_count(display, len(infos), limits)
    entries = []
    declared = 0
    for info in infos:
        member = _zip_member(display, info, limits)
        declared += info.file_size
        _check_total(display, declared, limits)
        _check_ratio(display, declared, compressed_size, limits)
        if member is not None:
            entries.append((info, member))
    return entries


def _check_zip_layout(
    display: str, handle: BinaryIO, infos: Iterable[zipfile.ZipInfo], start_dir: int
) -> None:
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
        signature, _, flags, method, _, _, _, _, _, name_length, extra_length = (
            _ZIP_LOCAL_HEADER.unpack(header)
        )
        raw_name = handle.read(name_length)
        encoding = "utf-8" if flags & _ZIP_FLAG_UTF8 else "cp437"
        local_name = raw_name.decode(encoding, errors="replace")
        if (
            signature != _ZIP_LOCAL_SIGNATURE
            or local_name != info.orig_filename
            or method != info.compress_type
        ):
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
        raise ArchiveError(
            f"{display}: member {name!r} is a symbolic link with an oversized target"
        )
    try:
        target = zf.read(info).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArchiveError(
            f"{display}: member {name!r} is a symbolic link whose target is not UTF-8"
        ) from exc
    return _link_target(display, info.orig_filename, target, "symbolic link")


def _with_zip_link_targets(
    display: str, zf: zipfile.ZipFile, entries: list[tuple[zipfile.ZipInfo, _Member]]
) -> list[tuple[zipfile.ZipInfo, _Member]]:
    return [
        (info, replace(member, target=_read_zip_link(display, zf, info, member.name)))
        if member.kind == "symlink"
        else (info, member)
        for info, member in entries
    ]


def _scan_zip(path: Path, display: str, limits: _Limits, wanted: Callable[[str], bool]) -> _Scan:
    compressed_size = path.stat().st_size
    with zipfile.ZipFile(path) as zf:
        entries = _zip_entries(display, zf, limits, compressed_size)
        # Layout first: nothing is decompressed until the entries are known not to overlap.
        with path.open("rb") as handle:
            _check_zip_layout(display, handle, zf.infolist(), zf.start_dir)
        entries = _with_zip_link_targets(display, zf, entries)
        texts = {
            member.name: _read_text(zf.open(info))
            for info, member in entries
            if member.kind == "file" and wanted(member.name)
        }
    return _Scan(_ZIP, [member for _, member in entries], texts)


# --------------------------------------------------------------------------
# Whole-tree checks
# --------------------------------------------------------------------------


def _check_tree(
    display: str, members: list[_Member], limits: _Limits, compressed_size: int
) -> None:
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
    _check_total(display, total, limits)
    _check_ratio(display, total, compressed_size, limits)


def _check_parents(display: str, member: _Member, kinds: dict[str, str]) -> None:
    """A member may not sit below a file or a symlink: writing it would follow the link."""
    parts = member.name.split("/")
    for depth in range(1, len(parts)):
        parent = "/".join(parts[:depth])
        kind = kinds.get(parent)
        if kind == "symlink":
            raise ArchiveError(
                f"{display}: member {member.name!r} is inside {parent!r}, which is a symbolic link"
            )
        if kind in ("file", "hardlink"):
            raise ArchiveError(
                f"{display}: member {member.name!r} is inside {parent!r}, which is a file"
            )


def _check_hardlink(
    display: str, member: _Member, index: int, kinds: dict[str, str], first_index: dict[str, int]
) -> None:
    target = member.target or ""
    if kinds.get(target) != "file" or first_index[target] >= index:
        raise ArchiveError(
            f"{display}: member {member.name!r} is a hard link to {target!r}, "
            "which is not a regular file earlier in the archive"
        )


def _check_symlink(display: str, member: _Member, symlinks: dict[str, str]) -> None:
    target = member.target or ""
    if not _resolves_inside(display, member.name, target, symlinks):
        raise ArchiveError(
            f"{display}: member {member.name!r} is a symbolic link to {target!r}, "
            "which points outside the archive"
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


# --------------------------------------------------------------------------
# Package metadata
# --------------------------------------------------------------------------


def _read_text(handle: BinaryIO | None) -> str:
    if handle is None:
        return ""
    with handle:
        return handle.read(_METADATA_READ_LIMIT).decode("utf-8", errors="replace")


def _parse_headers(text: str) -> dict[str, str]:
    """Parse RFC 822 style metadata headers (first occurrence wins, keys lowercased)."""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the body (long description) starts after the first blank line
        if line[0] in " \t":
            continue  # a folded continuation; Name and Version never fold
        key, separator, value = line.partition(":")
        if separator:
            headers.setdefault(key.strip().lower(), value.strip())
    return headers


def _requires_dist(text: str | None) -> tuple[str, ...]:
    """Every Requires-Dist header of a METADATA or PKG-INFO file, extras' requirements left out."""
    found = []
    for line in (text or "").splitlines():
        if not line.strip():
            break
        key, separator, value = line.partition(":")
        if separator and key.strip().lower() == "requires-dist" and "extra ==" not in value:
            found.append(value.strip())
    return tuple(found)


def _egg_info_requires(text: str | None) -> tuple[str, ...]:
    """The unconditional requirements of an sdist's ``*.egg-info/requires.txt``."""
    found = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("["):
            break  # [extra] and [:marker] sections follow the unconditional ones
        if line and not line.startswith("#"):
            found.append(line)
    return tuple(found)


def _canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _nothing_wanted(name: str) -> bool:
    return False


def _wheel_metadata_wanted(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in ("WHEEL", "METADATA")


def _sdist_metadata_wanted(name: str) -> bool:
    parts = name.split("/")
    if len(parts) == 3 and parts[1].endswith(".egg-info") and parts[2] == "requires.txt":
        return True
    return len(parts) == 2 and parts[1] == "PKG-INFO"


def _basename(display: str) -> str:
    return display.replace("\\", "/").rsplit("/", 1)[-1]


def _wheel_info(display: str, scan: _Scan) -> PackageInfo:
    match = _WHEEL_FILENAME.match(_basename(display))
    if match is None:
        raise ArchiveError(
            f"{display}: a wheel's name must look like name-version-python-abi-platform.whl "
            "(for example trainer-0.1-py3-none-any.whl)"
        )
    for member in scan.members:
        if member.kind in ("symlink", "hardlink"):
            raise ArchiveError(
                f"{display}: member {member.name!r} is a link; wheels may not contain links"
            )
    dist_info = _wheel_dist_info(display, scan.members)
    _check_wheel_file(display, dist_info, scan.texts.get(f"{dist_info}/WHEEL"))
    metadata_text = scan.texts.get(f"{dist_info}/METADATA")
    if metadata_text is None:
        raise ArchiveError(f"{display}: the wheel has no {dist_info}/METADATA file")
    metadata = _parse_headers(metadata_text)
    name, version = metadata.get("name"), metadata.get("version")
    if not name or not version:
        raise ArchiveError(f"{display}: {dist_info}/METADATA does not give a Name and a Version")
    if _canonical_name(name) != _canonical_name(match["name"]):
        raise ArchiveError(
            f"{display}: the file name says the project is {match['name']!r} "
            f"but its METADATA says {name!r}"
        )
    modules, packages = _modules_from_paths(_wheel_module_paths(scan.members))
    return PackageInfo(display, "wheel", name, version, modules, packages, _requires_dist(metadata_text))


def _wheel_dist_info(display: str, members: list[_Member]) -> str:
    found = sorted(
        {m.name.split("/")[0] for m in members if m.name.split("/")[0].endswith(".dist-info")}
    )
    if not found:
        raise ArchiveError(f"{display}: the wheel has no .dist-info directory")
    if len(found) > 1:
        raise ArchiveError(
            f"{display}: the wheel has several .dist-info directories: {', '.join(found)}"
        )
    return found[0]


def _check_wheel_file(display: str, dist_info: str, text: str | None) -> None:
    if text is None:
        raise ArchiveError(f"{display}: the wheel has no {dist_info}/WHEEL file")
    wheel_version = _parse_headers(text).get("wheel-version", "")
    if not re.fullmatch(r"1(\.\d+)*", wheel_version):
        raise ArchiveError(
            f"{display}: {dist_info}/WHEEL has an unsupported Wheel-Version {wheel_version!r}"
        )


def _wheel_module_paths(members: list[_Member]) -> Iterator[str]:
    """Installed paths of a wheel's files, relative to site-packages."""
    for member in members:
        if member.kind == "dir":
            continue
        parts = member.name.split("/")
        top = parts[0]
        if top.endswith(".dist-info"):
            continue
        if top.endswith(".data"):
            # Only purelib/platlib land in site-packages; scripts, headers, data do not.
            if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
                yield "/".join(parts[2:])
            continue
        yield member.name


def _sdist_info(display: str, scan: _Scan) -> PackageInfo:
    top = _sdist_top_directory(display, scan.members)
    files = {m.name for m in scan.members if m.kind != "dir"}
    if not any(f"{top}/{marker}" in files for marker in _SDIST_MARKERS):
        raise ArchiveError(
            f"{display}: {top}/ contains no PKG-INFO, setup.py or pyproject.toml, "
            "so it is not a Python source package"
        )
    pkg_info = scan.texts.get(f"{top}/PKG-INFO")
    name, version = _sdist_name_version(top, pkg_info)
    modules, packages = _modules_from_paths(_sdist_module_paths(top, scan.members))
    egg_info = next((text for path, text in sorted(scan.texts.items()) if path.endswith(".egg-info/requires.txt")), None)
    requires = _requires_dist(pkg_info) or _egg_info_requires(egg_info)
    return PackageInfo(display, "sdist", name, version, modules, packages, requires)


def _sdist_top_directory(display: str, members: list[_Member]) -> str:
    tops = sorted({m.name.split("/")[0] for m in members})
    if len(tops) != 1:
        found = ", ".join(tops[:5]) if tops else "nothing"
        if len(tops) > 5:
            found += ", ..."
        raise ArchiveError(
            f"{display}: an sdist must contain a single top-level directory "
            f"(like trainer-0.1/), but it contains {found}"
        )
    top = tops[0]
    if any(m.name == top and m.kind != "dir" for m in members):
        raise ArchiveError(
            f"{display}: an sdist must contain a single top-level directory, not a file"
        )
    return top


def _sdist_name_version(top: str, pkg_info: str | None) -> tuple[str | None, str | None]:
    """Name and version from PKG-INFO, falling back to the ``name-version`` directory."""
    headers = _parse_headers(pkg_info) if pkg_info else {}
    dir_name, dash, dir_version = top.rpartition("-")
    if not dash or not dir_name or not dir_version[:1].isdigit():
        dir_name, dir_version = top, ""
    return headers.get("name") or dir_name or None, headers.get("version") or dir_version or None


def _sdist_module_paths(top: str, members: list[_Member]) -> Iterator[str]:
    prefix = f"{top}/"
    for member in members:
        if member.kind == "dir" or not member.name.startswith(prefix):
            continue
        relative = member.name[len(prefix) :]
        # src layout: src/trainer/task.py installs as trainer/task.py.
        yield relative.removeprefix("src/")


def _module_stem(filename: str) -> str | None:
    if filename.endswith(".py"):
        return filename[: -len(".py")]
    if filename.endswith(_EXTENSION_SUFFIXES):
        # trainer/_fast.cpython-311-x86_64-linux-gnu.so imports as trainer._fast
        return filename.split(".", 1)[0]
    return None


def _is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _is_dotted_name(name: str) -> bool:
    return bool(name) and all(_is_identifier(part) for part in name.split("."))


def _modules_from_paths(paths: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """Dotted module names (and the package subset) importable from these file paths."""
    modules: set[str] = set()
    packages: set[str] = set()
    for path in paths:
        *directories, filename = path.split("/")
        stem = _module_stem(filename)
        if stem is None or not all(_is_identifier(d) for d in directories):
            continue
        if stem != "__init__" and not _is_identifier(stem):
            continue
        for depth in range(1, len(directories) + 1):
            package = ".".join(directories[:depth])
            packages.add(package)
            modules.add(package)
        if stem != "__init__":
            modules.add(".".join([*directories, stem]))
    return frozenset(modules), frozenset(packages)


def _is_runnable(package: PackageInfo, module: str) -> bool:
    """``python -m`` runs module files, and packages only through their __main__."""
    if module not in package.modules:
        return False
    return module not in package.packages or f"{module}.__main__" in package.modules


def _describe_provided(packages: list[PackageInfo]) -> str:
    provided = sorted(
        set().union(*(package.modules for package in packages)),
        key=lambda module: (module.count("."), module),
    )
    if not provided:
        return "The packages provide no Python modules."
    listed = ", ".join(provided[:_MAX_LISTED_MODULES])
    more = len(provided) - _MAX_LISTED_MODULES
    if more > 0:
        listed += f" and {more} more"
    return f"The packages provide: {listed}"


# --------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------


class _ByteBudget:
    """Counts bytes really written during extraction, whatever the headers said."""

    def __init__(self, display: str, limit: int):
        self._display = display
        self._limit = limit
        self.used = 0

    def spend(self, count: int) -> None:
        """Account for ``count`` more bytes, refusing to go past the limit."""
        self.used += count
        if self.used > self._limit:
            raise _too_large(self._display, self._limit)


def _prepare_destination(dest: Path) -> bool:
    """Make sure ``dest`` is a fresh, empty directory; True when it was created here."""
    if dest.is_symlink():
        raise FileExistsError(f"extraction destination {dest} is a symbolic link")
    if dest.exists():
        if not dest.is_dir() or any(dest.iterdir()):
            raise FileExistsError(f"extraction destination {dest} must be an empty directory")
        return False
    dest.mkdir(mode=0o755, parents=True)
    return True


def _discard_output(dest: Path, created: bool) -> None:
    if created:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _expect(display: str, member: _Member, expected: Iterator[_Member]) -> None:
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


def _write_file(
    display: str, dest: Path, member: _Member, source: BinaryIO, budget: _ByteBudget
) -> Path:
    """Copy ``source`` into a new file, counting every byte written."""
    parent, _, leaf = member.name.rpartition("/")
    target = _make_dirs(dest, parent) / leaf
    # O_EXCL and O_NOFOLLOW: never reuse or write through an existing path or link.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(target, flags, _file_mode(member.mode)), "wb") as out:
        written = 0
        while chunk := source.read(_COPY_CHUNK):
            budget.spend(len(chunk))
            written += len(chunk)
            if written > member.size:
                raise ArchiveError(
                    f"{display}: member {member.name!r} holds more data than its header declares"
                )
            out.write(chunk)
    return target


def _make_hardlink(dest: Path, member: _Member) -> Path:
    parent, _, leaf = member.name.rpartition("/")
    target = _make_dirs(dest, parent) / leaf
    os.link(dest / (member.target or ""), target, follow_symlinks=False)
    return target


def _make_symlinks(dest: Path, links: list[_Member]) -> list[Path]:
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
    member: _Member,
    open_source: Callable[[], BinaryIO],
    budget: _ByteBudget,
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


def _extract_tar(
    path: Path, display: str, scan: _Scan, limits: _Limits, dest: Path, budget: _ByteBudget
) -> list[Path]:
    created: list[Path] = []
    links: list[_Member] = []
    expected = iter(scan.members)
    with _open_tar_stream(path, display, scan.fmt, limits) as (tar, _reader):
        for info in tar:
            member = _tar_member(display, info)
            if member is None:
                continue
            _expect(display, member, expected)
            _apply_data_filter(display, info, dest)
            if member.kind == "symlink":
                links.append(member)
                continue
            path_created = _extract_member(
                display, dest, member, lambda info=info: tar.extractfile(info), budget
            )
            if path_created is not None:
                created.append(path_created)
    return created + _make_symlinks(dest, links)


def _extract_zip(
    path: Path, display: str, scan: _Scan, limits: _Limits, dest: Path, budget: _ByteBudget
) -> list[Path]:
    created: list[Path] = []
    links: list[_Member] = []
    expected = iter(scan.members)
    with zipfile.ZipFile(path) as zf:
        entries = _zip_entries(display, zf, limits, path.stat().st_size)
        entries = _with_zip_link_targets(display, zf, entries)
        for info, member in entries:
            _expect(display, member, expected)
            if member.kind == "symlink":
                links.append(member)
                continue
            path_created = _extract_member(
                display, dest, member, lambda info=info: zf.open(info), budget
            )
            if path_created is not None:
                created.append(path_created)
    return created + _make_symlinks(dest, links)

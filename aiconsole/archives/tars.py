"""Reading tar archives: one forward-only pass, each header checked as it comes.

tarfile is made stricter (``_GuardedTarInfo``: damaged headers, oversized extended headers and
sparse files are refused) and the decompressed stream is counted as it is read
(``_CountingReader``), so a header that lies about sizes cannot unpack more than the limits.
"""

import bz2
import gzip
import lzma
import os
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from aiconsole.archives.errors import CORRUPT_ERRORS, ArchiveError, BrokenTar
from aiconsole.archives.limits import COPY_CHUNK, MIB, Limits, check_ratio, too_large
from aiconsole.archives.members import Format, Member, hardlink_target, link_target, member_name

# tarfile reads pax and GNU long-name headers into memory in one piece.
_MAX_TAR_METADATA_HEADER = MIB
# Headers, pax records and padding a tar stream may add on top of the data.
_TAR_OVERHEAD_PER_MEMBER = 4096
_TAR_OVERHEAD_SLACK = MIB

_TAR_METADATA_TYPES = frozenset(
    {
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
    }
)


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
            raise BrokenTar(f"bad tar header: {exc}") from exc

    def _proc_member(self, tarfile_):
        if self.type in _TAR_METADATA_TYPES and self.size > _MAX_TAR_METADATA_HEADER:
            raise BrokenTar(f"an extended tar header of {self.size} bytes is too large")
        if self.type == tarfile.GNUTYPE_SPARSE:
            # Sparse maps can chain header blocks without bound; packages never need them.
            raise BrokenTar("sparse files are not allowed")
        return super()._proc_member(tarfile_)

    def _refuse_sparse(self, *args):
        raise BrokenTar("sparse files are not allowed")

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

    def __init__(self, stream: BinaryIO, display: str, limits: Limits, compressed_size: int):
        self._stream = stream
        self._display = display
        self._limits = limits
        self._compressed_size = compressed_size
        self._cap = limits.max_total_bytes + limits.max_members * _TAR_OVERHEAD_PER_MEMBER + _TAR_OVERHEAD_SLACK
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        """Read at most ``size`` bytes (one chunk when unbounded), enforcing the limits."""
        if size is None or size < 0:
            size = COPY_CHUNK
        data = self._stream.read(size)
        self.count += len(data)
        if self.count > self._cap:
            raise too_large(self._display, self._limits.max_total_bytes)
        check_ratio(self._display, self.count, self._compressed_size, self._limits)
        return data

    def drain(self) -> None:
        """Read to the end so trailing data is counted and checksums are verified."""
        while self.read(COPY_CHUNK):
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
def open_tar_stream(
    path: Path, display: str, fmt: Format, limits: Limits
) -> Iterator[tuple[tarfile.TarFile, _CountingReader]]:
    """Open a tar archive as a forward-only stream behind a counting reader."""
    with path.open("rb") as raw, _decompressor(raw, fmt.compression) as stream:
        reader = _CountingReader(stream, display, limits, os.fstat(raw.fileno()).st_size)
        with tarfile.open(fileobj=reader, mode="r|", tarinfo=_GuardedTarInfo) as tar:
            yield tar, reader


def is_plain_tar(path: Path) -> bool:
    """True when the file opens as an uncompressed tar archive."""
    try:
        with tarfile.open(path, "r:", tarinfo=_GuardedTarInfo):
            return True
    except CORRUPT_ERRORS:
        return False


def _tar_type(info: tarfile.TarInfo) -> str:
    if info.ischr():
        return "a character device"
    if info.isblk():
        return "a block device"
    if info.isfifo():
        return "a FIFO (named pipe)"
    return f"of unsupported tar type {info.type!r}"


def tar_member(display: str, info: tarfile.TarInfo) -> Member | None:
    """Check one tar header; None for the archive root entry ("./")."""
    name = member_name(display, info.name)
    if not name:
        if info.isdir():
            return None
        raise ArchiveError(f"{display}: member {info.name!r} has no usable name")
    if info.size < 0:
        raise ArchiveError(f"{display}: member {info.name!r} declares a negative size")
    if info.issparse():
        raise ArchiveError(f"{display}: member {info.name!r} is a sparse file, which is not allowed")
    if info.isreg():
        return Member(name, "file", info.size, info.mode)
    if info.isdir():
        return Member(name, "dir", 0, info.mode)
    if info.issym():
        target = link_target(display, info.name, info.linkname, "symbolic link")
        return Member(name, "symlink", 0, info.mode, target)
    if info.islnk():
        target = hardlink_target(display, info.name, info.linkname)
        return Member(name, "hardlink", 0, info.mode, target)
    raise ArchiveError(
        f"{display}: member {info.name!r} is {_tar_type(info)}; only regular files, directories and links are allowed"
    )

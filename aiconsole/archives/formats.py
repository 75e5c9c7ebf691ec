"""Which archive format a file is, from its content, and whether its name agrees.

The content decides (magic numbers, then whether it opens as a zip or a plain tar); a file that is
both a tar and a zip is refused as ambiguous. A package's name must end in the suffix of the
format found (``.tar.gz`` for a gzip-compressed tar, ``.whl`` for a zip, ...).
"""

import zipfile
from pathlib import Path

from aiconsole.archives.errors import ArchiveError
from aiconsole.archives.members import BZIP2_TAR, GZIP_TAR, PLAIN_TAR, XZ_TAR, ZIP, Format
from aiconsole.archives.tars import is_plain_tar

_MAGIC_NUMBERS = (
    (b"\x1f\x8b", GZIP_TAR),
    (b"BZh", BZIP2_TAR),
    (b"\xfd7zXZ\x00", XZ_TAR),
    (b"PK\x03\x04", ZIP),
    (b"PK\x05\x06", ZIP),  # an empty zip starts with its end record
)
_PACKAGE_SUFFIXES = (
    (".tar.gz", "sdist", GZIP_TAR),
    (".tgz", "sdist", GZIP_TAR),
    (".tar.bz2", "sdist", BZIP2_TAR),
    (".tar.xz", "sdist", XZ_TAR),
    (".tar", "sdist", PLAIN_TAR),
    (".zip", "sdist", ZIP),
    (".whl", "wheel", ZIP),
)


def _not_a_package(display: str) -> str:
    return f"{display} is not a Python package: expected an sdist (.tar.gz) or a wheel (.whl)"


def detect_format(path: Path, display: str) -> Format:
    """Identify the archive format from the file's content, never its name."""
    if path.stat().st_size == 0:
        raise ArchiveError(f"{display}: the file is empty")
    with path.open("rb") as handle:
        head = handle.read(16)
    fmt = next((fmt for magic, fmt in _MAGIC_NUMBERS if head.startswith(magic)), None)
    if fmt is None:
        if _is_zip(path):
            fmt = ZIP
        elif is_plain_tar(path):
            fmt = PLAIN_TAR
        else:
            raise ArchiveError(_not_a_package(display))
    if fmt.container == "zip" and not _is_zip(path):
        raise ArchiveError(f"{display}: the zip archive is corrupt or truncated")
    if fmt.container == "tar" and _is_zip(path):
        # Installers that sniff content could read such a file differently.
        raise ArchiveError(f"{display}: the file is both a tar and a zip archive, which is ambiguous")
    return fmt


def _is_zip(path: Path) -> bool:
    return zipfile.is_zipfile(path)


def package_kind(display: str, fmt: Format) -> str:
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

"""How a refused or damaged archive is reported.

``ArchiveError`` carries a message written for the user who uploaded the file; ``reading`` turns
the low-level errors of decoders and parsers (``CORRUPT_ERRORS``) into one that says the archive
is corrupt or truncated, and lets real I/O errors on our side through.
"""

import lzma
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager


class ArchiveError(ValueError):
    """An archive was refused; the message is written for the user who uploaded it."""


class BrokenTar(Exception):
    """A tar stream that tarfile would otherwise silently cut short or over-read."""


# Low-level errors that mean "this archive is damaged"; OSErrors only count
# when they carry no errno, i.e. come from a decoder rather than the disk.
CORRUPT_ERRORS = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    struct.error,
    NotImplementedError,
    ValueError,
    OSError,
    BrokenTar,
)


@contextmanager
def reading(display: str) -> Iterator[None]:
    """Turn decoder and parser errors into a user-facing ArchiveError."""
    try:
        yield
    except ArchiveError:
        raise
    except OSError as exc:
        if exc.errno is not None:
            raise  # a real I/O problem on our side, not a damaged archive
        raise _corrupt(display, exc) from exc
    except CORRUPT_ERRORS as exc:
        raise _corrupt(display, exc) from exc


def _corrupt(display: str, exc: BaseException) -> ArchiveError:
    reason = str(exc) or type(exc).__name__
    return ArchiveError(f"{display}: the archive is corrupt or truncated ({reason})")

"""The limits every archive is held to, and the checks that enforce them.

How many members, how many bytes once unpacked, how many times its own size it may expand to
(above a floor, so small archives of text pass). Tar and zip reading, the whole-tree checks and
extraction all call these, so the messages are the same wherever a limit is hit.
"""

from dataclasses import dataclass

from aiconsole.archives.errors import ArchiveError

# Default limits; every public function takes them as keyword arguments.
MAX_MEMBERS = 20_000
MAX_TOTAL_BYTES = 4 * 1024**3
MAX_RATIO = 200.0
# Below this uncompressed size the expansion ratio is not checked: small
# archives of text compress very well and cannot hurt anyone.
RATIO_MIN_BYTES = 10 * 1024**2

MIB = 1024**2
COPY_CHUNK = MIB


@dataclass(frozen=True)
class Limits:
    max_members: int
    max_total_bytes: int
    max_ratio: float


def check_member_count(display: str, count: int, limits: Limits) -> None:
    if count > limits.max_members:
        raise ArchiveError(f"{display}: the archive has more than {limits.max_members} members")


def too_large(display: str, limit: int) -> ArchiveError:
    return ArchiveError(f"{display}: unpacks to more than the limit of {format_bytes(limit)}")


def check_total(display: str, total: int, limits: Limits) -> None:
    if total > limits.max_total_bytes:
        raise too_large(display, limits.max_total_bytes)


def check_ratio(display: str, uncompressed: int, compressed: int, limits: Limits) -> None:
    if uncompressed > RATIO_MIN_BYTES and uncompressed > limits.max_ratio * compressed:
        raise ArchiveError(
            f"{display}: expands from {format_bytes(compressed)} to over "
            f"{format_bytes(uncompressed)}, more than {limits.max_ratio:g} times its size "
            "(a likely decompression bomb)"
        )


def format_bytes(count: float) -> str:
    if count < 1024:
        return f"{int(count)} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        count /= 1024
        if count < 1024 or unit == "GiB":
            break
    return f"{count:.1f} {unit}"

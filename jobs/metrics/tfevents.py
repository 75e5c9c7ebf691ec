"""Scalars from TensorFlow summary event files, read without TensorFlow.

Hyperparameter tuning needs each trial's metric. Besides the hypertune file, the original AI
Platform Training read ``hyperparameterMetricTag`` from the TF event files a trainer wrote under
its job dir (``tf.summary.scalar``, Keras' TensorBoard callback, Estimator, ``tf.compat.v1``
summaries). :class:`EventScanner` polls a folder for ``events.out.tfevents.*`` files and returns
the scalars written since its last poll; :func:`scalars_under` reads them once.

The TFRecord framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data) is
read here: tensorboard's ``RawEventFileLoader`` resumes a truncated tail correctly, but it treats
a bad CRC the same way (a debug log, then nothing more, forever) and keeps every file open.
Events are parsed with tensorboard's protos and ``tensor_util``.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2
from tensorboard.util import tensor_util

from aiconsole import beneath, storage, walks

try:
    from google_crc32c import value as _crc32c
except ImportError:  # pragma: no cover - google-crc32c comes with google-cloud-storage
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c as _crc32c

logger = logging.getLogger(__name__)

EVENT_FILE_PREFIX = "events.out.tfevents."
WALK_SECONDS = 5.0  # one poll's walk of a trial's job dir, at most
# A longer record is taken for a corrupt file (a scalar's event is tens of bytes; an image's a few
# MB): a trainer's 2 GB "record" would otherwise be read into the console's memory.
MAX_RECORD_BYTES = 16 * 1024 * 1024
_NUMERIC_DTYPES = frozenset(
    getattr(types_pb2, f"DT_{name}")
    for name in "HALF FLOAT DOUBLE INT8 INT16 INT32 INT64 UINT8 UINT16 UINT32 UINT64".split()
)


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    value: float
    wall_time: float  # seconds since the epoch, from the event
    run: str  # the event file's folder relative to the root, '' for the root itself


class CorruptRecordError(Exception):
    """A record whose CRC does not match: the rest of its file cannot be trusted."""


def masked_crc32c(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(stream: BinaryIO) -> Iterator[bytes]:
    """Complete TFRecords from the stream's position; stops quietly at a truncated tail.

    After each record is yielded, ``stream.tell()`` is the offset of the next one. Bytes appended
    after the call began are left for the next call.
    """
    start = stream.tell()
    end = stream.seek(0, os.SEEK_END)
    stream.seek(start)
    while True:
        header = stream.read(12)
        if len(header) < 12:
            return
        length, length_crc = struct.unpack("<QI", header)
        if masked_crc32c(header[:8]) != length_crc:
            raise CorruptRecordError(f"bad length CRC at offset {stream.tell() - 12}")
        if length > MAX_RECORD_BYTES:
            raise CorruptRecordError(f"a record of {length:,} bytes at offset {stream.tell() - 12}")
        if stream.tell() + length + 4 > end:
            return  # still being written
        body = stream.read(length + 4)
        if len(body) < length + 4:
            return
        data = body[:length]
        if masked_crc32c(data) != struct.unpack("<I", body[length:])[0]:
            raise CorruptRecordError(f"bad data CRC at offset {stream.tell() - length - 16}")
        yield data


def scalar_value(value: summary_pb2.Summary.Value) -> float | None:
    """The number in a summary value, or None when it is not a numeric scalar."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return value.simple_value
    if kind != "tensor" or value.tensor.dtype not in _NUMERIC_DTYPES:
        return None
    dims = [dim.size for dim in value.tensor.tensor_shape.dim]
    is_scalars_plugin = value.metadata.plugin_data.plugin_name == "scalars"
    if dims and not (is_scalars_plugin and all(size == 1 for size in dims)):
        return None
    try:
        array = tensor_util.make_ndarray(value.tensor)
    except (ValueError, TypeError):
        return None
    return float(array.item()) if array.size == 1 else None


def event_scalars(record: bytes, run: str, tags: frozenset[str] | None) -> list[Scalar]:
    event = event_pb2.Event.FromString(record)
    if event.WhichOneof("what") != "summary":
        return []
    scalars = []
    for value in event.summary.value:
        if tags is not None and value.tag not in tags:
            continue
        number = scalar_value(value)
        if number is not None:
            scalars.append(Scalar(value.tag, event.step, number, event.wall_time, run))
    return scalars


def find_event_files(root: Path, max_entries: int) -> Iterator[tuple[Path, int, float]]:
    """(path, size, last modified) of event files under root: the bounded walk that never follows
    links (aiconsole.walks); stops quietly after ``max_entries`` entries or ``WALK_SECONDS``."""
    try:
        for path in walks.walk_files(root, max_entries=max_entries, max_seconds=WALK_SECONDS):
            if path.name.startswith(EVENT_FILE_PREFIX):
                try:
                    info = path.stat(follow_symlinks=False)
                    yield path, info.st_size, info.st_mtime
                except OSError:
                    continue  # gone since it was listed
    except walks.WalkLimitError as error:
        logger.debug("Stopped looking for event files: %s", error)


@dataclass
class _FileState:
    offset: int = 0
    corrupt: bool = False
    earlier: bool = False  # last written before ``since``: another run's, never read


class EventScanner:
    """Incremental reader of every events.out.tfevents.* file under a folder: a local one, or a
    ``gs://bucket/prefix`` one (listed and read in ranges through the console's Cloud Storage
    client, the credentials trainers write with).

    With ``max_bytes``, a poll reads that many bytes of records at most (a record more, past
    it) and ``behind`` says there was more: a trainer that writes a GB of summaries between two
    polls costs the console a few MB at a time."""

    def __init__(
        self,
        root: Path | str,
        *,
        tags: set[str] | None = None,
        max_files: int = 1000,
        max_entries: int = 20000,
        base: Path | None = None,
        max_bytes: int | None = None,
        since: float | None = None,
    ):
        self.gcs = isinstance(root, str) and root.startswith("gs://")
        self.root = root.rstrip("/") if self.gcs else Path(root)
        # Files are opened from ``base`` (a folder no trainer can change: the job dir's storage
        # root) down, never through a link; by default from the root itself.
        self.base = None if self.gcs else Path(base or root)
        self.tags = frozenset(tags) if tags is not None else None
        self.max_files = max_files
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        # Files last written before this (a Unix time: the job's creation) are another job's, one that
        # used the same folder before: never read as this one's.
        self.since = since
        self.earlier_files = 0
        self.behind = False
        self._files: dict[Path | str, _FileState] = {}

    @property
    def position(self) -> int:
        """Bytes read so far, all files together: a poll that read nothing left it unchanged."""
        return sum(state.offset for state in self._files.values())

    def poll(self) -> list[Scalar]:
        """Scalars written since the last poll (on the first poll: all so far)."""
        grown = []
        listed = (
            find_gcs_event_files(self.root, self.max_entries)
            if self.gcs
            else find_event_files(self.root, self.max_entries)
        )
        for path, size, modified in listed:
            if path not in self._files and len(self._files) < self.max_files:
                earlier = self.since is not None and modified < self.since
                self._files[path] = _FileState(earlier=earlier)
                self.earlier_files += earlier
            state = self._files.get(path)
            if state is not None and not state.corrupt and not state.earlier and size > state.offset:
                grown.append(path)
        scalars, budget = [], self.max_bytes
        self.behind = False
        for path in sorted(grown, key=str):
            if budget is not None and budget <= 0:
                self.behind = True
                break
            state = self._files[path]
            before = state.offset
            scalars.extend(self._read_new(path, state, budget))
            if budget is not None:
                budget -= state.offset - before
                self.behind |= budget <= 0
        return scalars

    def _run(self, path: Path | str) -> str:
        if self.gcs:
            run = path[len(self.root) + 1 :].rpartition("/")[0]
            return run
        run = path.parent.relative_to(self.root).as_posix()
        return "" if run == "." else run

    def _open_at(self, path: Path | str, offset: int, length: int | None = None) -> BinaryIO:
        """The file from ``offset`` on; for an object, only the bytes past it (``length`` of
        them at most) are fetched."""
        if not self.gcs:
            stream = os.fdopen(beneath.open_file(self.base, path), "rb")  # a trainer's folder: no link followed
            stream.seek(offset)
            return stream
        from aiconsole import storage  # the Cloud Storage client, only for gs:// job dirs

        bucket, name = storage.parse_gcs_uri(path)
        end = offset + length - 1 if length is not None else None
        return io.BytesIO(storage.gcs_client().bucket(bucket).blob(name).download_as_bytes(start=offset, end=end))

    def _read_new(self, path: Path | str, state: _FileState, budget: int | None = None) -> list[Scalar]:
        run = self._run(path)
        scalars = []
        start = state.offset
        try:
            # An object is fetched a budget's worth at a time; a record cut by the range's end is
            # read whole on the next poll.
            fetch = max(budget, MAX_RECORD_BYTES + 16) if self.gcs and budget is not None else None
            with self._open_at(path, state.offset, fetch) as stream:
                base = state.offset - stream.tell()  # a fetched range starts at 0
                for record in read_records(stream):
                    state.offset = base + stream.tell()
                    try:
                        scalars.extend(event_scalars(record, run, self.tags))
                    except DecodeError as error:
                        logger.warning("Skipping an unreadable event in %s: %s", path, error)
                    if budget is not None and state.offset - start >= budget:
                        break
        except CorruptRecordError as error:
            state.corrupt = True
            logger.warning("Skipping the rest of event file %s: %s", path, error)
        except Exception as error:  # OSError, or any Cloud Storage error: try again on the next poll
            logger.warning("Cannot read event file %s: %s", path, error)
        return scalars


def find_gcs_event_files(root: str, max_entries: int) -> Iterator[tuple[str, int, float]]:
    """(gs:// URI, size, last modified) of event files under a gs:// folder, listing at most
    ``max_entries`` objects; a listing that fails (no credentials, no bucket) yields nothing, logged."""

    try:
        bucket, prefix = storage.parse_gcs_uri(root, require_object=False)
        prefix = f"{prefix.rstrip('/')}/" if prefix else ""
        blobs = storage.gcs_client().list_blobs(bucket, prefix=prefix, max_results=max_entries, timeout=WALK_SECONDS)
        for blob in blobs:
            if blob.name.rpartition("/")[2].startswith(EVENT_FILE_PREFIX):
                updated = blob.updated.timestamp() if blob.updated is not None else float("inf")
                yield f"gs://{bucket}/{blob.name}", blob.size or 0, updated
    except Exception as error:
        logger.warning("Cannot list event files under %s: %s", root, error)


def scalars_under(root: Path | str, tags: set[str] | None = None) -> list[Scalar]:
    """Every scalar in the event files under root, read once."""
    return EventScanner(root, tags=tags).poll()

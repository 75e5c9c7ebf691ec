"""Reading a job's outputs for the console: list a folder, preview a file, download it.

Every call is a read of the job's data: it needs ``ml.jobs.get`` on the job and writes a Data
Access audit entry (one per folder page, preview or download; the checks the page repeats do not).

Nothing leaves the job's folder. A path is a list of names below it: ``..``, ``.``, empty names and
anything absolute are refused before the disk is touched, and a local folder is then opened from
its storage root one component at a time without following a link (``aiconsole.beneath``): a link
a trainer left in its job dir, pointing at another project's files or at the console's own, is
listed as a link and never opened. A ``gs://`` job dir is read through the storage client, below
its own prefix only.

Everything is bounded: a folder page holds at most ``PAGE_ENTRIES`` entries (sorted folders first,
then by name, continued after the last name shown), a folder is read to at most ``SCAN_ENTRIES``
names, and a preview reads at most ``PREVIEW_BYTES`` from the start of the file, however large it
is: a 100 MB CSV shows its first rows after reading 64 KiB.
"""

from __future__ import annotations

import bisect
import csv
import errno
import io
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from aiconsole import audit, beneath, storage
from aiconsole.errors import FailedPrecondition, InvalidArgument
from aiconsole.iam import NotFound
from jobs import kinds
from jobs.models import Job

OUTPUT_SERVICE = "aiconsole.OutputService"
PAGE_ENTRIES = 200  # entries on one page of a folder
SCAN_ENTRIES = 100_000  # names read from one folder, at most, to sort a page of them
PREVIEW_BYTES = 64 * 1024  # read from the start of a file to preview it
PREVIEW_ROWS = 50  # rows of a CSV or JSON-lines table
IMAGE_BYTES = 8 * 1024 * 1024  # an image shown in the page, at most
CHUNK_BYTES = 256 * 1024
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class OutsideJobDir(InvalidArgument):
    """The path would leave the job's folder: ``..``, an absolute path, or a link on its way."""


class NoJobDir(FailedPrecondition):
    """The job names no folder for its outputs (a training job without ``jobDir``)."""


@dataclass
class Entry:
    name: str
    path: str  # below the job dir, "/"-separated
    kind: str  # "folder", "file", "link" or "other" (a FIFO, a socket, a device: nothing to open)
    size: int | None = None
    modified: datetime | None = None


@dataclass
class Listing:
    root: str  # the job dir (a trial's, a batch job's output path), as the job names it
    path: str  # the folder shown, below the root ("" for the root itself)
    entries: list[Entry]
    more_after: str = ""  # the last name shown, when more follow
    scanned_all: bool = True  # False: the folder holds more names than are read
    missing: bool = False  # the folder does not exist (yet)


@dataclass
class Preview:
    entry: Entry
    kind: str  # "text", "table", "json", "image", "binary" or "empty"
    text: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    truncated: bool = False  # only the start of the file is shown
    more_rows: bool = False  # a table: the file holds rows past those shown
    bytes_read: int = 0


@dataclass
class Download:
    name: str
    size: int | None
    chunks: Iterator[bytes]
    content_type: str = "application/octet-stream"


def job_dir(job: Job, trial_id: str = "") -> str:
    """The folder a job's outputs are under (a trial's for ``trial_id``); FailedPrecondition when it
    has none. The kind of job says which folder: a training job's jobDir, a batch prediction's
    outputPath."""
    root = kinds.of_job(job).outputs(job)
    if not root:
        raise NoJobDir(
            f"Job {job.job_id} names no job directory (trainingInput.jobDir), so it has no outputs to browse."
        )
    if trial_id:
        if not job.trials.filter(trial_id=trial_id).exists():
            raise NotFound(f"{job.resource_name}/trials/{trial_id}")
        root = f"{root.rstrip('/')}/{trial_id}"
    return root


def clean_path(path: str) -> str:
    """A path below the job dir, "/"-separated; InvalidArgument for one that could leave it. Names
    are taken as they are: a name may begin or end with a space (trimmed, it names another file)."""
    path = (path or "").rstrip("/")
    if not path:
        return ""
    parts = path.split("/")
    if path.startswith("/") or "\x00" in path or "\\" in path or any(part in ("", ".", "..") for part in parts):
        raise OutsideJobDir(
            f"{path!r} is not a path inside the job's folder: use names separated by '/', without '.' or '..'."
        )
    return "/".join(parts)


def _audit(job: Job, actor, method: str, path: str, trial_id: str, *, audited: bool = True) -> str:
    """Check ``ml.jobs.get`` on the job, then the path (someone who may not read the job learns
    nothing of it from a bad path: 404, and the refusal is audited), then record the read. Answers
    the path cleaned."""
    audit.authorize(actor, "ml.jobs.get", job, method=f"{OUTPUT_SERVICE}.{method}", data_access=True)
    path = clean_path(path)
    if not audited:
        return path
    audit.record(
        actor=actor,
        project=job.project,
        method=f"{OUTPUT_SERVICE}.{method}",
        resource_name=f"{job.resource_name}/outputs/{f'{trial_id}/' if trial_id else ''}{path}",
        permission="ml.jobs.get",
        data_access=True,
        request={"path": path, **({"trial": trial_id} if trial_id else {})},
    )
    return path


# --- local folders ----------------------------------------------------------------------------------


def _local_root(job: Job, root: str) -> tuple[Path, Path]:
    """The job dir resolved (it must lie in the job's project area) and the storage root it lies in."""
    try:
        resolved = storage.resolve_local_path(root, project=job.project, must_exist=False)
        return resolved, storage.base_of(resolved)
    except storage.StorageError as error:
        raise FailedPrecondition(str(error)) from None


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _local_listing(job: Job, root: str, path: str, after: str, limit: int) -> Listing:
    folder, base = _local_root(job, root)
    target = folder.joinpath(*path.split("/")) if path else folder
    try:
        with beneath.folder(base, target) as descriptor:
            names = []
            scanned_all = True
            with os.scandir(descriptor) as found:
                for count, item in enumerate(found):
                    if count >= SCAN_ENTRIES:
                        scanned_all = False
                        break
                    kind = _kind(item)
                    names.append((kind != "folder", item.name, kind))
            names.sort()
            start = _start_after(names, after)
            shown = names[start : start + limit + 1]
            entries = [_local_entry(descriptor, path, name, kind) for _, name, kind in shown[:limit]]
    except FileNotFoundError:
        if path:
            raise NotFound(f"{job.resource_name}/outputs/{path}") from None
        return Listing(root, path, [], missing=True)
    except (beneath.Refused, NotADirectoryError, OSError) as error:
        raise _refused(path, error) from None
    more = entries[-1].name if len(shown) > limit else ""
    return Listing(root, path, entries, more_after=more, scanned_all=scanned_all)


def _kind(item: os.DirEntry) -> str:
    if item.is_symlink():
        return "link"
    if item.is_dir(follow_symlinks=False):
        return "folder"
    return "file" if item.is_file(follow_symlinks=False) else "other"


def _start_after(names: list[tuple[bool, str, str]], after: str) -> int:
    """The index of the first entry after the one named ``after`` (keyset paging: the next page
    starts where the last ended, even if entries came or went meanwhile)."""
    if not after:
        return 0
    for index, (_, name, _) in enumerate(names):
        if name == after:
            return index + 1
    return bisect.bisect_right(names, (True, after, "~"))  # gone meanwhile: among the files, by name


def _local_entry(descriptor: int, folder: str, name: str, kind: str) -> Entry:
    entry = Entry(name=name, path=f"{folder}/{name}" if folder else name, kind=kind)
    try:
        info = os.stat(name, dir_fd=descriptor, follow_symlinks=False)
    except OSError:
        return entry
    entry.modified = _stamp(info.st_mtime)
    if stat.S_ISREG(info.st_mode):
        entry.size = info.st_size
    return entry


def _refused(path: str, error: Exception) -> Exception:
    shown = path or "the job's folder"
    if isinstance(error, IsADirectoryError):
        return InvalidArgument(f"{shown} is a folder: open it in the list instead.")
    if isinstance(error, beneath.Refused) and "regular file" not in str(error):
        return OutsideJobDir(f"{shown}: {error}")
    # ENXIO: a socket (opening one is refused by the kernel before it can be checked).
    if isinstance(error, NotADirectoryError | beneath.Refused) or getattr(error, "errno", None) in (
        errno.ELOOP,
        errno.ENOTDIR,
        errno.ENXIO,
    ):
        return OutsideJobDir(
            f"{shown} is a link, or lies behind one, or is not a plain file: the console opens only the job's own "
            "files and folders, never a link out of its folder."
        )
    return FailedPrecondition(f"{shown} cannot be read ({getattr(error, 'strerror', None) or error}).")


def _open_local(job: Job, root: str, path: str) -> tuple[io.BufferedReader, Entry]:
    folder, base = _local_root(job, root)
    try:
        # O_NONBLOCK: a FIFO a trainer left there is refused at once (not a regular file), not waited on.
        descriptor = beneath.open_file(base, folder.joinpath(*path.split("/")), os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise NotFound(f"{job.resource_name}/outputs/{path}") from None
    except (beneath.Refused, IsADirectoryError, OSError) as error:
        raise _refused(path, error) from None
    info = os.fstat(descriptor)
    name = path.rsplit("/", 1)[-1]
    entry = Entry(name=name, path=path, kind="file", size=info.st_size, modified=_stamp(info.st_mtime))
    return os.fdopen(descriptor, "rb"), entry


# --- gs:// folders --------------------------------------------------------------------------------


def _gcs_prefix(root: str, path: str) -> tuple[str, str]:
    try:
        bucket, prefix = storage.parse_gcs_uri(root, require_object=False)
    except storage.StorageError as error:
        raise FailedPrecondition(str(error)) from None
    prefix = "/".join(part for part in (prefix.strip("/"), path) if part)
    return bucket, prefix


def _gcs_listing(root: str, path: str, after: str, limit: int) -> Listing:
    """A page of a ``gs://`` folder in name order (the bucket's own order: a folder-first order
    would need every name of a large folder read first), from the name after ``after``: the
    bucket is asked for about one page of entries, however many the folder holds."""
    bucket, prefix = _gcs_prefix(root, path)
    below = f"{prefix}/" if prefix else ""
    entries: list[Entry] = []
    try:
        pages = (
            storage.gcs_client()
            .list_blobs(
                bucket,
                prefix=below or None,
                delimiter="/",
                start_offset=f"{below}{after}" if after else None,
                page_size=limit + 1,
                timeout=30,
            )
            .pages
        )
        for page in pages:
            for blob in page:
                name = blob.name[len(below) :]
                if name and name > after:  # past ``after``, also where a server ignores startOffset
                    entries.append(Entry(name, f"{path}/{name}" if path else name, "file", blob.size, blob.updated))
            for folder in page.prefixes:
                name = folder[len(below) :].rstrip("/")
                if name and name > after and all(e.name != name for e in entries):
                    entries.append(Entry(name, f"{path}/{name}" if path else name, "folder"))
            if len(entries) > limit:
                break
    except storage.StorageError as error:
        raise FailedPrecondition(str(error)) from None
    except Exception as error:  # the client's transport and HTTP errors: say which folder
        raise FailedPrecondition(f"{root}: cannot list it ({error})") from None
    entries.sort(key=lambda entry: entry.name)
    more = entries[limit - 1].name if len(entries) > limit else ""
    return Listing(root, path, entries[:limit], more_after=more, missing=not entries and not after and not path)


def _gcs_blob(job: Job, root: str, path: str):
    bucket, name = _gcs_prefix(root, path)
    try:
        blob = storage.gcs_client().bucket(bucket).get_blob(name, timeout=30)
    except Exception as error:  # as above
        raise FailedPrecondition(f"gs://{bucket}/{name}: cannot read it ({error})") from None
    if blob is None:
        raise NotFound(f"{job.resource_name}/outputs/{path}")
    entry = Entry(path.rsplit("/", 1)[-1], path, "file", blob.size, blob.updated)
    return blob, entry


# --- the service ----------------------------------------------------------------------------------


def list_folder(
    job: Job, path: str = "", *, actor, trial_id: str = "", after: str = "", limit: int | None = None, audited=True
) -> Listing:
    """One page of a folder of the job's outputs, folders first then files, each by name.
    ``audited=False``: a page that already audited its read of the job lists its files (the
    permission is still checked)."""
    path = _audit(job, actor, "ListOutputs", path, trial_id, audited=audited)
    root = job_dir(job, trial_id)
    limit = limit or PAGE_ENTRIES
    if storage.is_gcs_uri(root):
        return _gcs_listing(root, path, after, limit)
    return _local_listing(job, root, path, after, limit)


def _read_start(job: Job, root: str, path: str, limit: int) -> tuple[bytes, Entry]:
    if storage.is_gcs_uri(root):
        blob, entry = _gcs_blob(job, root, path)
        data = blob.download_as_bytes(start=0, end=limit - 1) if blob.size else b""
        return data, entry
    handle, entry = _open_local(job, root, path)
    with handle:
        return handle.read(limit), entry


def preview_file(job: Job, path: str, *, actor, trial_id: str = "") -> Preview:
    """The start of a file, as the page shows it: text, a table of a CSV's or JSON lines' first
    rows, JSON pretty-printed, an image (its bytes come from ``download``), or "binary"."""
    path = _audit(job, actor, "GetOutput", path, trial_id)
    if not path:
        raise InvalidArgument("Name a file of the job's folder to preview.")
    root = job_dir(job, trial_id)
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in IMAGE_TYPES:
        _, entry = _read_start(job, root, path, 1)
        kind = "image" if (entry.size or 0) <= IMAGE_BYTES else "binary"
        return Preview(entry, kind, truncated=kind == "binary")
    data, entry = _read_start(job, root, path, PREVIEW_BYTES + 1)
    truncated = len(data) > PREVIEW_BYTES
    data = data[:PREVIEW_BYTES]
    preview = Preview(entry, "empty" if not data else "text", truncated=truncated, bytes_read=len(data))
    if not data:
        return preview
    text = _decode(data, truncated)
    if text is None:
        preview.kind = "binary"
        return preview
    preview.text = text
    name = PurePosixPath(path).name
    if suffix in (".csv", ".tsv") or name.startswith("prediction.results") and _looks_csv(text):
        _as_table(preview, text, "\t" if suffix == ".tsv" else ",")
    elif suffix in (".json", ".jsonl", ".ndjson") or name.startswith(("prediction.results", "prediction.errors_stats")):
        _as_json(preview, text)
    return preview


def _decode(data: bytes, truncated: bool) -> str | None:
    """UTF-8 text (a character cut at the end of what was read is dropped), None for binary."""
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        if truncated and error.start >= len(data) - 4:
            return data[: error.start].decode("utf-8")
        return None


def _looks_csv(text: str) -> bool:
    return not text.lstrip().startswith(("{", "["))


def _complete_lines(text: str, truncated: bool) -> list[str]:
    lines = text.splitlines()
    return lines[:-1] if truncated and not text.endswith("\n") and len(lines) > 1 else lines


def _as_table(preview: Preview, text: str, delimiter: str) -> None:
    lines = _complete_lines(text, preview.truncated)
    rows = list(csv.reader(lines[: PREVIEW_ROWS + 1], delimiter=delimiter))
    if not rows:
        return
    preview.kind = "table"
    width = max(len(row) for row in rows)
    header = rows[0]
    # A first row of names (not numbers) is the header; otherwise the columns are numbered.
    if all(cell and not _number(cell) for cell in header):
        preview.columns, preview.rows = header, rows[1:]
        preview.more_rows = len(lines) > PREVIEW_ROWS + 1
    else:
        preview.columns, preview.rows = [str(n) for n in range(1, width + 1)], rows[:PREVIEW_ROWS]
        preview.more_rows = len(lines) > PREVIEW_ROWS


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _as_json(preview: Preview, text: str) -> None:
    if not preview.truncated:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        else:
            if _table_of(preview, value if isinstance(value, list) else None):
                return
            preview.kind, preview.text = "json", json.dumps(value, indent=2, ensure_ascii=False)
            return
    records = []
    lines = _complete_lines(text, preview.truncated)
    for line in lines[:PREVIEW_ROWS]:
        try:
            records.append(json.loads(line))
        except ValueError:
            return  # neither JSON nor JSON lines: shown as text
    if _table_of(preview, records):
        preview.more_rows = len(lines) > PREVIEW_ROWS


def _table_of(preview: Preview, records: list | None) -> bool:
    """JSON objects (a list of them, or JSON lines) as a table of their first rows and keys."""
    if not records or not all(isinstance(r, dict) for r in records[:PREVIEW_ROWS]):
        return False
    columns: list[str] = []
    for record in records[:PREVIEW_ROWS]:
        columns += [key for key in record if key not in columns]
    preview.kind, preview.columns = "table", columns
    preview.rows = [[_cell(record.get(key)) for key in columns] for record in records[:PREVIEW_ROWS]]
    preview.more_rows = len(records) > PREVIEW_ROWS
    return True


def _cell(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def download(job: Job, path: str, *, actor, trial_id: str = "") -> Download:
    """The whole file, in chunks, for the browser to save (or show, for an image)."""
    path = _audit(job, actor, "DownloadOutput", path, trial_id)
    if not path:
        raise InvalidArgument("Name a file of the job's folder to download.")
    root = job_dir(job, trial_id)
    content_type = IMAGE_TYPES.get(PurePosixPath(path).suffix.lower(), "application/octet-stream")
    if storage.is_gcs_uri(root):
        blob, entry = _gcs_blob(job, root, path)
        return Download(entry.name, entry.size, _gcs_chunks(blob), content_type)
    handle, entry = _open_local(job, root, path)
    return Download(entry.name, entry.size, _file_chunks(handle, entry.size or 0), content_type)


def _file_chunks(handle, size: int) -> Iterator[bytes]:
    """The file's first ``size`` bytes, its length when opened (Content-Length): a file a running
    trainer still writes may grow meanwhile, and more bytes than promised break the answer."""
    with handle:
        while size > 0 and (chunk := handle.read(min(CHUNK_BYTES, size))):
            size -= len(chunk)
            yield chunk


def _gcs_chunks(blob) -> Iterator[bytes]:
    start, size = 0, blob.size or 0
    while start < size:
        end = min(start + 4 * CHUNK_BYTES, size) - 1
        yield blob.download_as_bytes(start=start, end=end)
        start = end + 1

"""Reading trainer packages and writing job outputs, on Google Cloud Storage or local disk.

A URI is either ``gs://bucket/object`` or a local path (``/abs/path`` or ``file:///abs/path``).
Local paths are only honoured inside the storage roots this server serves
(``settings.STORAGE_ROOTS``): users name them in job requests, so anything else would let a
request read or write arbitrary server files. Containment is checked on the fully resolved path,
so neither ``..`` nor a symlink can lead out of a root.

Paths named on behalf of a project (``project=``) are held to that project's area: inside the
storage dir (``settings.STORAGE_DIR``, the first root) only ``<STORAGE_DIR>/<folder>/<project>/…``,
the layout the console itself writes (``packages/<project>/``, ``job-dirs/<project>/``); outside
it, only the shared roots an admin lists in ``AICONSOLE_STORAGE_ROOTS``, which every project may
use. So one project can neither read nor write another project's files.

A checked path is used from its storage root down, one component at a time, never through a link
(``aiconsole.beneath``): trainers own folders in these areas, and one that swapped a folder for a
link after the check would otherwise have the console read or write wherever the link leads.

Defaults come from ``django.conf.settings`` and are read inside each function, so callers (and
tests) that pass every parameter explicitly do not need Django configured.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from aiconsole import beneath

if TYPE_CHECKING:
    from google.cloud import storage as gcs

GCS_SCHEME = "gs://"
CHUNK_BYTES = 1024 * 1024
CREDENTIALS_HELP = (
    "no usable Google Cloud credentials: set GOOGLE_APPLICATION_CREDENTIALS to the path of a "
    "service-account key file readable by the server (or run `gcloud auth application-default "
    "login` as the server's user), and AICONSOLE_GCS_PROJECT to the project to bill"
)

# Lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit.
_BUCKET_RE = re.compile(r"[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?")
_BUCKET_RULE = (
    "3-63 characters of lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
)
_MAX_OBJECT_NAME_BYTES = 1024
_SAFE_FILENAME_RE = re.compile(r"[A-Za-z0-9._+-]+")
_FILENAME_RULE = (
    "a package file name must be non-empty, must not start with '.', and may only contain "
    "letters, digits, '.', '_', '+' and '-'"
)
_PROJECT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_MAX_FILENAME_CHARS = 255


class StorageError(ValueError):
    """A URI that cannot be used; the message names the URI and says what is wrong."""


class StoragePermissionError(StorageError):
    """A local path outside the area of the project that names it."""


# --- URIs ----------------------------------------------------------------------------------


def is_gcs_uri(uri: str) -> bool:
    """Whether ``uri`` names Google Cloud Storage (``gs://...``)."""
    return isinstance(uri, str) and uri.startswith(GCS_SCHEME)


def _valid_bucket_name(name: str) -> bool:
    if not _BUCKET_RE.fullmatch(name):
        return False
    if "." in name:
        # Dotted (domain-style) names may be longer, but each label keeps the 63 limit.
        return 3 <= len(name) <= 222 and all(0 < len(part) <= 63 for part in name.split("."))
    return 3 <= len(name) <= 63


def parse_gcs_uri(uri: str, *, require_object: bool = True) -> tuple[str, str]:
    """Split ``gs://bucket/object`` into ``(bucket, object_name)``, validating both.

    With ``require_object`` (files) the object name must be non-empty and must not end in
    ``/``; without it (a jobDir) ``gs://bucket`` and ``gs://bucket/prefix/`` are accepted.
    """
    if not is_gcs_uri(uri):
        raise StorageError(f"{uri}: not a gs:// URI")
    bucket, _, name = uri[len(GCS_SCHEME) :].partition("/")
    if not _valid_bucket_name(bucket):
        raise StorageError(f"{uri}: invalid bucket name ({_BUCKET_RULE})")
    if require_object and not name:
        raise StorageError(f"{uri}: no object name (expected gs://bucket/path/to/file)")
    if require_object and name.endswith("/"):
        raise StorageError(f"{uri}: names a folder, not an object")
    if len(name.encode("utf-8")) > _MAX_OBJECT_NAME_BYTES or any(c in name for c in "\r\n\0"):
        raise StorageError(f"{uri}: invalid object name (at most 1024 bytes, no line breaks or NUL)")
    return bucket, name


def _local_path_from_uri(uri: str) -> Path:
    """The unresolved absolute path a local URI names."""
    if not isinstance(uri, str) or not uri:
        raise StorageError(f"{uri!r}: empty path")
    if uri.startswith("file:"):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise StorageError(f"{uri}: file URIs must name a local path (file:///abs/path)")
        if parts.query or parts.fragment:
            # urlsplit would silently drop them, naming a different file than the user meant.
            raise StorageError(f"{uri}: percent-encode '?' and '#' in file URIs")
        raw = unquote(parts.path)
    elif "://" in uri:
        raise StorageError(f"{uri}: unsupported URI scheme (use gs://, file:// or a path)")
    else:
        raw = uri
    if "\0" in raw:
        raise StorageError(f"{uri!r}: path contains a NUL character")
    path = Path(raw)
    if not path.is_absolute():
        raise StorageError(f"{uri}: local paths must be absolute")
    return path


def _storage_roots(roots: list[Path] | None) -> list[Path]:
    if roots is None:
        from django.conf import settings

        roots = settings.STORAGE_ROOTS
    return [Path(root).resolve() for root in roots]


def _project_id(project: Any) -> str:
    """A Project's id (or the id itself), which must be one safe path component."""
    project_id = getattr(project, "project_id", project)
    if not isinstance(project_id, str) or not _PROJECT_RE.fullmatch(project_id):
        raise StorageError(f"{project_id!r}: invalid project name")
    return project_id


def in_project_area(path: Path, project: Any, *, roots: list[Path] | None = None) -> bool:
    """Whether the resolved ``path`` lies in ``project``'s own area or in a shared root.

    ``roots`` (default ``settings.STORAGE_ROOTS``): the first is the storage dir, whose
    ``<folder>/<project>/`` subtrees belong to that project; the others are shared by every
    project. A shared root that contains the storage dir does not open the storage dir up.
    """
    project_id = _project_id(project)
    storage_dir, *shared = _storage_roots(roots) or [None]
    if storage_dir is not None and path.is_relative_to(storage_dir):
        parts = path.relative_to(storage_dir).parts
        if len(parts) >= 2 and parts[1] == project_id:
            return True
        return any(root.is_relative_to(storage_dir) and path.is_relative_to(root) for root in shared)
    return any(path.is_relative_to(root) for root in shared)


def _denied(uri: str, project: Any, roots: list[Path] | None) -> StoragePermissionError:
    project_id = _project_id(project)
    storage_dir, *shared = _storage_roots(roots) or [Path("<STORAGE_DIR>")]
    where = ", ".join(str(root) for root in shared) or "none configured"
    return StoragePermissionError(
        f"Permission denied: projects/{project_id} cannot use {uri}; local paths must lie under "
        f"{storage_dir}/<folder>/{project_id}/ or a shared storage root ({where})."
    )


def resolve_local_path(
    uri: str,
    *,
    roots: list[Path] | None = None,
    must_exist: bool = True,
    project: Any = None,
) -> Path:
    """Resolve a local path or ``file://`` URI and require it to lie inside a storage root.

    With ``project`` (a Project or its id) the path must lie in that project's area or a shared
    root (``in_project_area``), else StoragePermissionError. Symlinks and ``..`` are resolved
    before the containment check, so a link inside a root that points elsewhere is refused.
    Containment is checked before existence so that errors never reveal whether a file outside
    the allowed area exists. ``roots`` defaults to ``settings.STORAGE_ROOTS``.
    """
    path = _local_path_from_uri(uri)
    allowed = _storage_roots(roots)
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop on older Pythons
        raise StorageError(f"{uri}: cannot resolve path ({exc})") from exc
    if not any(resolved.is_relative_to(root) for root in allowed):
        served = ", ".join(str(root) for root in allowed) or "none configured"
        raise StorageError(f"{uri} is not inside a storage root this server serves ({served})")
    if project is not None and not in_project_area(resolved, project, roots=allowed):
        raise _denied(uri, project, allowed)
    if must_exist and not resolved.exists():
        raise StorageError(f"{uri} does not exist")
    return resolved


def base_of(path: Path, roots: list[Path] | None = None) -> Path:
    """The storage root a resolved ``path`` lies in (the innermost): where using it safely starts."""
    candidates = [root for root in _storage_roots(roots) if path.is_relative_to(root)]
    if not candidates:
        raise StorageError(f"{path} is not inside a storage root this server serves")
    return max(candidates, key=lambda root: len(root.parts))


def _unsafe(uri: str, exc: OSError) -> StorageError:
    """What an operation that met a link (or a folder that became one) on its way says."""
    if isinstance(exc, beneath.Refused):
        return StorageError(f"{uri}: {exc}")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a link where a folder or the file was when checked
        return StorageError(
            f"{uri}: a link lies on its path (or a folder on it was replaced by one while it "
            "was used); the console follows no link there"
        )
    return StorageError(f"{uri}: cannot use it ({exc.strerror or exc})")


def open_local(uri: str, *, roots: list[Path] | None = None, project: Any = None) -> IO[bytes]:
    """A local file inside a storage root (with ``project``, in its area), opened for reading
    from its root down without following a link; the caller closes it."""
    path = resolve_local_path(uri, roots=roots, project=project)
    try:
        descriptor = beneath.open_file(base_of(path, roots), path)
    except beneath.Refused as exc:
        raise StorageError(f"{uri} is not a file" if "regular file" in str(exc) else f"{uri}: {exc}") from exc
    except IsADirectoryError as exc:
        raise StorageError(f"{uri} is not a file") from exc
    except OSError as exc:
        raise _unsafe(uri, exc) from exc
    return os.fdopen(descriptor, "rb")


def open_trainer_file(path: Path) -> IO[bytes]:
    """A file the console reads in a folder trainers write (a replica's working dir, a job dir),
    opened from the work dir or the storage root it lies in, never through a link. OSError when it
    cannot be (a link on its way included)."""
    from django.conf import settings

    path = Path(path)
    bases = [Path(settings.WORK_DIR), *_storage_roots(None)]
    base = max((b for b in bases if path.is_relative_to(b)), key=lambda b: len(b.parts), default=None)
    if base is None:
        raise beneath.Refused(f"{path} is in none of the folders the console reads trainers' files from")
    return os.fdopen(beneath.open_file(base, path), "rb")


def make_local_dir(uri: str, *, roots: list[Path] | None = None, project: Any = None) -> Path:
    """Create a local folder inside a storage root (with ``project``, in its area) with its parents,
    from the root down without following a link; return its resolved path."""
    path = resolve_local_path(uri, roots=roots, must_exist=False, project=project)
    try:
        with beneath.folder(base_of(path, roots), path, create=True):
            pass
    except FileExistsError as exc:
        raise StorageError(f"{uri} exists and is not a directory") from exc
    except NotADirectoryError as exc:
        raise StorageError(f"{uri} exists and is not a directory") from exc
    except OSError as exc:
        raise _unsafe(uri, exc) from exc
    return path


# --- Google Cloud Storage client -------------------------------------------------------------

_client_lock = threading.Lock()
_client: Any = None
_client_key: tuple[str | None, str | None] | None = None


def gcs_client() -> gcs.Client:
    """The shared ``google.cloud.storage.Client``, created on first use.

    With ``STORAGE_EMULATOR_HOST`` set (tests, local development) it talks to that emulator
    with anonymous credentials and project ``AICONSOLE_GCS_PROJECT`` (default ``aiconsole``).
    Otherwise it uses Application Default Credentials. Raises StorageError when no
    credentials can be found. The client is rebuilt if either variable changes.
    """
    # deferred: Google's client libraries (with requests, gRPC and cryptography) are a sixth of a
    # Django process's imports, and only a gs:// URI needs them
    from google.auth import exceptions as auth_exceptions

    try:
        return _cached_client()
    except auth_exceptions.GoogleAuthError as exc:
        raise StorageError(f"Google Cloud Storage: {CREDENTIALS_HELP} ({exc})") from exc


def _cached_client() -> gcs.Client:
    # Raises google-auth errors unchanged so that _gcs_errors can name the URI being used.
    global _client, _client_key
    from django.conf import settings  # late, as elsewhere in this module
    from google.auth.credentials import AnonymousCredentials  # deferred: as in gcs_client
    from google.cloud import storage as gcs  # deferred: as in gcs_client

    emulator = os.environ.get("STORAGE_EMULATOR_HOST") or None
    project = settings.GCS_PROJECT or None
    key = (emulator, project)
    with _client_lock:
        if _client is not None and _client_key == key:
            return _client
        if emulator:
            client = gcs.Client(project=project or "aiconsole", credentials=AnonymousCredentials())
        else:
            client = gcs.Client(project=project)
        _client, _client_key = client, key
        return client


def reset_gcs_client() -> None:
    """Forget the cached client so the next call rebuilds it (tests switch emulators)."""
    global _client, _client_key
    with _client_lock:
        _client, _client_key = None, None


@contextmanager
def _gcs_errors(uri: str, not_found: str | None = None) -> Iterator[None]:
    """Turn client-library exceptions into StorageErrors that name ``uri``.

    Raw auth and HTTP exceptions would surface as server errors with no hint of the cause.
    """
    try:
        yield
    except Exception as exc:
        error = _gcs_error(uri, exc, not_found)
        if error is None:
            raise
        raise error from exc


def _gcs_error(uri: str, exc: Exception, not_found: str | None) -> StorageError | None:
    """The StorageError for a client library's exception; None for any other exception."""
    # deferred: as in gcs_client (a gs:// call has loaded them already)
    import requests
    from google.api_core import exceptions as api_exceptions
    from google.auth import exceptions as auth_exceptions
    from google.cloud.storage import exceptions as gcs_exceptions

    # The first kind the exception is decides (NotFound before the GoogleAPIError it derives from).
    messages = (
        (api_exceptions.NotFound, not_found or f"{uri} does not exist"),
        (api_exceptions.Unauthorized, f"{uri}: {CREDENTIALS_HELP}"),
        (api_exceptions.Forbidden, f"{uri}: permission denied; the server's credentials cannot access it"),
        (auth_exceptions.GoogleAuthError, f"{uri}: {CREDENTIALS_HELP} ({exc})"),
        (api_exceptions.GoogleAPIError, f"{uri}: Google Cloud Storage error: {exc}"),
        (gcs_exceptions.DataCorruption, f"{uri}: download failed its checksum; try again"),
        (requests.RequestException, f"{uri}: cannot reach Google Cloud Storage ({exc})"),
    )
    return next((StorageError(message) for kind, message in messages if isinstance(exc, kind)), None)


# --- Byte limits -----------------------------------------------------------------------------


def _max_package_bytes(max_bytes: int | None) -> int:
    if max_bytes is not None:
        return max_bytes
    from django.conf import settings

    return settings.MAX_PACKAGE_BYTES


def _too_large(what: str, limit: int) -> StorageError:
    return StorageError(f"{what} is larger than the {limit} byte limit (AICONSOLE_MAX_PACKAGE_BYTES)")


class _LimitedWriter:
    """File-like sink that counts bytes as they arrive and aborts past the limit.

    Counting actual bytes, not trusting a declared size, also catches objects that grow
    (or lie about their size) while being read.
    """

    def __init__(self, sink: IO[bytes], limit: int, uri: str) -> None:
        self.sink, self.limit, self.uri, self.written = sink, limit, uri, 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        if self.written > self.limit:
            raise _too_large(self.uri, self.limit)
        return self.sink.write(data)


def _copy_limited(chunks: Iterator[bytes], sink: _LimitedWriter) -> None:
    for chunk in chunks:
        sink.write(chunk)


def _read_chunks(fileobj: Any) -> Iterator[bytes]:
    """Chunks of an upload: Django UploadedFiles have ``.chunks()``, other files ``.read()``."""
    if hasattr(fileobj, "chunks"):
        yield from fileobj.chunks(CHUNK_BYTES)
        return
    while chunk := fileobj.read(CHUNK_BYTES):
        yield chunk


def _write_atomically(dest: Path, fill: Callable[[IO[bytes]], None]) -> None:
    """Write ``dest`` through a temporary file beside it, so a failed or oversized transfer
    never leaves a partial file under the final name (and the partial one is deleted)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
        os.replace(tmp_name, dest)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


# --- Packages --------------------------------------------------------------------------------


def _destination(uri: str, base_name: str, dest_dir: Path) -> Path:
    # An object named "dir/.." has base name "..", which would write outside dest_dir.
    if base_name in ("", ".", "..") or "/" in base_name or "\0" in base_name:
        raise StorageError(f"{uri}: cannot derive a file name from it")
    return dest_dir / base_name


def fetch(
    uri: str,
    dest_dir: Path,
    *,
    roots: list[Path] | None = None,
    max_bytes: int | None = None,
    project: Any = None,
) -> Path:
    """Copy a package (local path inside a storage root, or a ``gs://`` object) into
    ``dest_dir``, keeping its base name, and return the new file's path. With ``project``, a
    local path must lie in that project's area (``resolve_local_path``).

    At most ``max_bytes`` (default ``settings.MAX_PACKAGE_BYTES``) are accepted; a larger
    package is aborted and nothing is left behind. An existing file of the same name in
    ``dest_dir`` is replaced.
    """
    limit = _max_package_bytes(max_bytes)
    dest_dir = Path(dest_dir)
    if is_gcs_uri(uri):
        bucket_name, object_name = parse_gcs_uri(uri)
        dest = _destination(uri, object_name.rsplit("/", 1)[-1], dest_dir)
        try:
            with _gcs_errors(uri):
                blob = _cached_client().bucket(bucket_name).get_blob(object_name)
                if blob is None:
                    raise StorageError(f"{uri} does not exist")
                if blob.size is not None and blob.size > limit:
                    raise _too_large(uri, limit)
                _write_atomically(dest, lambda handle: blob.download_to_file(_LimitedWriter(handle, limit, uri)))
        except OSError as exc:  # the local side: dest_dir unwritable, disk full
            raise StorageError(f"{uri}: cannot write to {dest} ({exc.strerror or exc})") from exc
        return dest

    dest = _destination(uri, _local_path_from_uri(uri).name, dest_dir)
    try:
        with open_local(uri, roots=roots, project=project) as src:
            if os.fstat(src.fileno()).st_size > limit:
                raise _too_large(uri, limit)
            _write_atomically(
                dest,
                lambda handle: _copy_limited(_read_chunks(src), _LimitedWriter(handle, limit, uri)),
            )
    except OSError as exc:
        raise StorageError(f"{uri}: cannot copy ({exc.strerror or exc})") from exc
    return dest


def file_digest(path: Path) -> str:
    """The SHA-256 of a local file, in hex: how packages and lock files are recorded and compared."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _safe_filename(filename: str) -> str:
    # Keep only the last component, as browsers may send a client-side path
    # (e.g. C:\Users\me\trainer.tar.gz); what remains must match the rule exactly.
    name = re.split(r"[/\\]", filename or "")[-1]
    if not name or name.startswith(".") or len(name) > _MAX_FILENAME_CHARS or not _SAFE_FILENAME_RE.fullmatch(name):
        raise StorageError(f"{filename!r}: invalid file name; {_FILENAME_RULE}")
    return name


def save_upload(
    fileobj: Any,
    filename: str,
    *,
    project: str,
    storage_dir: Path | None = None,
    max_bytes: int | None = None,
) -> Path:
    """Store an uploaded trainer package and return its absolute path.

    The file lands at ``<storage_dir>/packages/<project>/<16 random hex>/<filename>``, so
    uploads never overwrite each other and the result is a valid local package URI (the storage
    dir is the first storage root). ``filename`` is reduced to its last path component (so
    ``../../x.tar.gz`` and ``a/b.whl`` become ``x.tar.gz`` and ``b.whl``); the remainder must be
    non-empty, must not start with ``.`` and may only use ``A-Za-z0-9._+-``, else StorageError.
    ``project`` must be a slug (letters, digits, ``_``, ``-``; starting with a letter or
    digit; at most 63 characters). ``fileobj`` is read in chunks (``.chunks()`` for Django
    uploads, else ``.read(n)``); more than ``max_bytes`` (default
    ``settings.MAX_PACKAGE_BYTES``) aborts the upload and removes what was written.
    """
    name = _safe_filename(filename)
    if not isinstance(project, str) or not _PROJECT_RE.fullmatch(project):
        raise StorageError(
            f"{project!r}: invalid project name (letters, digits, '_' and '-', "
            "starting with a letter or digit, at most 63 characters)"
        )
    limit = _max_package_bytes(max_bytes)
    if storage_dir is None:
        from django.conf import settings

        storage_dir = settings.STORAGE_DIR
    upload_dir = Path(storage_dir).resolve() / "packages" / project / secrets.token_hex(8)
    upload_dir.mkdir(parents=True)
    dest = upload_dir / name
    try:
        _write_atomically(
            dest,
            lambda handle: _copy_limited(_read_chunks(fileobj), _LimitedWriter(handle, limit, name)),
        )
    except BaseException:
        # The random directory exists only for this upload; don't leave it empty behind.
        upload_dir.rmdir()
        raise
    return dest


# --- Job dirs and small files ----------------------------------------------------------------


def prepare_job_dir(uri: str, *, roots: list[Path] | None = None, project: Any = None) -> str:
    """Validate a jobDir and, for a local one, create it; return the URI to hand the trainer.

    A ``gs://`` jobDir is returned unchanged (GCS has no folders to create). A local one must
    lie inside a storage root (with ``project``, in that project's area); it is created with its
    parents and returned as an absolute resolved path.
    """
    if is_gcs_uri(uri):
        parse_gcs_uri(uri, require_object=False)
        return uri
    return str(make_local_dir(uri, roots=roots, project=project))


def write_text(uri: str, text: str, *, roots: list[Path] | None = None, project: Any = None) -> None:
    """Write ``text`` (UTF-8) to a ``gs://`` object or a local file inside a storage root,
    creating local parent directories."""
    data = text.encode("utf-8")
    if is_gcs_uri(uri):
        bucket_name, object_name = parse_gcs_uri(uri)
        with _gcs_errors(uri, not_found=f"{uri}: bucket gs://{bucket_name} does not exist"):
            blob = _cached_client().bucket(bucket_name).blob(object_name)
            blob.upload_from_string(data, content_type="text/plain; charset=utf-8")
        return
    path = resolve_local_path(uri, roots=roots, must_exist=False, project=project)
    make_local_dir(str(path.parent), roots=roots, project=project)
    try:
        beneath.write_file(base_of(path, roots), path, data)
    except OSError as exc:
        raise _unsafe(uri, exc) from exc


def object_version(uri: str) -> tuple[int, int]:
    """A ``gs://`` object's generation and size: what tells one version of it from the next."""
    bucket_name, object_name = parse_gcs_uri(uri)
    with _gcs_errors(uri):
        blob = _cached_client().bucket(bucket_name).get_blob(object_name)
    if blob is None:
        raise StorageError(f"{uri} does not exist")
    return blob.generation, blob.size


def read_bytes(
    uri: str, *, roots: list[Path] | None = None, max_bytes: int | None = None, project: Any = None
) -> bytes:
    """Read a whole ``gs://`` object or local file inside a storage root, refusing more than
    ``max_bytes`` (default ``settings.MAX_PACKAGE_BYTES``)."""
    limit = _max_package_bytes(max_bytes)
    if is_gcs_uri(uri):
        bucket_name, object_name = parse_gcs_uri(uri)
        buffer = io.BytesIO()
        with _gcs_errors(uri):
            blob = _cached_client().bucket(bucket_name).get_blob(object_name)
            if blob is None:
                raise StorageError(f"{uri} does not exist")
            if blob.size is not None and blob.size > limit:
                raise _too_large(uri, limit)
            blob.download_to_file(_LimitedWriter(buffer, limit, uri))
        return buffer.getvalue()
    with open_local(uri, roots=roots, project=project) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise StorageError(f"{uri}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > limit:
        raise _too_large(uri, limit)
    return data

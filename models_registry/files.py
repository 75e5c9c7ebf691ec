"""Model files and batch data on local storage roots or Cloud Storage.

A deploymentUri is a folder (local, inside a storage root, or ``gs://bucket/prefix``) holding
at most 1000 files, a single model file, or an archive (.tar.gz, .zip) that is checked and
extracted with ``archives.safe_extract``. ``detect_model`` decides the framework from what is
there and refuses what does not fit. Batch prediction expands input wildcards (``*`` within a
path segment, ``**`` across them) and writes its output shards through ``OutputDir``.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit

from aiconsole import archives, beneath, storage, trainer_user, walks
from models_registry import conf

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip", ".tar.bz2", ".tar.xz")
MODEL_FILES = {
    "TENSORFLOW": ("saved_model.pb", "saved_model.pbtxt"),
    "XGBOOST": ("model.bst", "model.json", "model.ubj", "model.joblib", "model.pkl"),
    "SCIKIT_LEARN": ("model.joblib", "model.pkl"),
}
# Which framework a file means when the version does not say (first match wins).
DETECTION_ORDER = (
    ("TENSORFLOW", ("saved_model.pb", "saved_model.pbtxt")),
    ("XGBOOST", ("model.bst", "model.json", "model.ubj")),
    ("SCIKIT_LEARN", ("model.joblib", "model.pkl")),
)
EXPECTED = (
    "model.joblib or model.pkl (scikit-learn), model.bst, model.json or model.ubj (XGBoost, which also "
    "loads model.joblib and model.pkl), or saved_model.pb (TensorFlow)"
)


class DeployError(Exception):
    """The model files cannot be used; the message becomes the version's errorMessage."""


# --- fetching ---------------------------------------------------------------------------------------


def _safe_relative(name: str) -> str:
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise DeployError(f"Refusing the file name {name!r} in the deployment folder.")
    return "/".join(parts)


def _gcs_listing(uri: str) -> list:
    bucket_name, prefix = storage.parse_gcs_uri(uri, require_object=False)
    client = storage.gcs_client()
    folder = prefix.rstrip("/") + "/" if prefix else ""
    try:
        blobs = [
            b
            for b in client.list_blobs(bucket_name, prefix=folder, max_results=conf.max_files() + 1)
            if not b.name.endswith("/")
        ]
        if not blobs and prefix and not prefix.endswith("/"):
            blob = client.bucket(bucket_name).get_blob(prefix)
            blobs = [blob] if blob is not None else []
    except Exception as error:  # the client's own errors, and transport ones: say which URI
        raise DeployError(f"Cannot read {uri}: {error}") from None
    return blobs


def _check_count(uri: str, count: int) -> None:
    limit = conf.max_files()
    if count > limit:
        raise DeployError(f"{uri} holds more than {limit} files; a model version may have at most {limit}.")


def fetch_deployment(uri: str, dest: Path, check_cancel: Callable[[], None] | None = None, *, project=None) -> None:
    """Copy (or extract) the deployment's files into ``dest``, which must not exist yet.

    With ``project``, a local uri (and every file a link in it leads to) must lie in that
    project's storage area or a shared root, also for versions and jobs stored before that rule.

    A local folder is walked within bounds (``aiconsole.walks``), calling ``check_cancel``."""
    dest.mkdir(parents=True)
    if storage.is_gcs_uri(uri):
        _fetch_gcs(uri, dest)
        return
    try:
        source = storage.resolve_local_path(uri, project=project)
    except storage.StorageError as error:
        raise DeployError(f"The deploymentUri cannot be used: {error}") from None
    if source.is_dir():
        _copy_local_dir(uri, source, dest, check_cancel, project=project)
    else:
        _take_file(uri, source, dest, project)


def _copy_file(uri: str, target: Path, *, project=None, limit: int | None = None) -> int:
    """Copy a stored file (opened from its storage root down, never through a link) to ``target``;
    its size. More than ``limit`` bytes is refused."""
    try:
        with storage.open_local(uri, project=project) as source:
            size = os.fstat(source.fileno()).st_size
            if limit is not None and size > limit:
                raise DeployError(f"{uri} is larger than {limit} bytes (AICONSOLE_MODEL_MAX_BYTES).")
            with open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    except storage.StorageError as error:
        raise DeployError(f"The deploymentUri cannot be used: {error}") from None
    return size


def _take_file(uri: str, path: Path, dest: Path, project=None) -> None:
    _copy_file(str(path), dest / path.name, project=project, limit=conf.max_model_bytes())
    if path.name.endswith(ARCHIVE_SUFFIXES):
        archive = dest / path.name
        try:
            archives.safe_extract(
                archive, dest / "extracted", max_members=conf.max_files(), max_total_bytes=conf.max_model_bytes()
            )
        except archives.ArchiveError as error:
            raise DeployError(f"The model archive cannot be used: {error}") from None
        finally:
            archive.unlink()
        for item in (dest / "extracted").iterdir():
            item.rename(dest / item.name)
        (dest / "extracted").rmdir()


def _copy_local_dir(uri: str, source: Path, dest: Path, check_cancel=None, *, project=None) -> None:
    files = []
    try:
        for path in walks.walk_files(source, check_cancel=check_cancel, file_links=True):
            files.append(path)
            _check_count(uri, len(files))
    except walks.WalkLimitError as error:
        raise DeployError(f"The deploymentUri cannot be used: {error}") from None
    total = 0
    for path in files:
        try:
            real = storage.resolve_local_path(str(path), project=project)
        except storage.StorageError as error:
            raise DeployError(f"The deployment folder links outside the storage roots: {error}") from None
        if not real.is_file():
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        total += _copy_file(str(real), target, project=project, limit=conf.max_model_bytes() - total)
        if total > conf.max_model_bytes():
            raise DeployError(f"{uri} is larger than {conf.max_model_bytes()} bytes (AICONSOLE_MODEL_MAX_BYTES).")


def _fetch_gcs(uri: str, dest: Path) -> None:
    blobs = _gcs_listing(uri)
    _check_count(uri, len(blobs))
    _, prefix = storage.parse_gcs_uri(uri, require_object=False)
    folder = prefix.rstrip("/") + "/" if prefix else ""
    if len(blobs) == 1 and blobs[0].name == prefix:
        try:
            path = storage.fetch(uri, dest, max_bytes=conf.max_model_bytes())
        except storage.StorageError as error:
            raise DeployError(str(error)) from None
        if path.name.endswith(ARCHIVE_SUFFIXES):
            moved = path.rename(path.parent.parent / f".{path.name}")
            try:
                _take_file(moved, dest)
            finally:
                moved.unlink(missing_ok=True)
        return
    total = 0
    for blob in blobs:
        total += blob.size or 0
        if total > conf.max_model_bytes():
            raise DeployError(f"{uri} is larger than {conf.max_model_bytes()} bytes (AICONSOLE_MODEL_MAX_BYTES).")
        target = dest / _safe_relative(blob.name[len(folder) :])
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            blob.download_to_filename(str(target))
        except Exception as error:
            raise DeployError(f"Cannot download gs://{blob.bucket.name}/{blob.name}: {error}") from None


# --- detection ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Detected:
    framework: str
    model_dir: Path
    model_file: str


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def detect_model(folder: Path, framework: str, uri: str) -> Detected:
    """The framework and model file of a fetched deployment; DeployError says what is wrong."""
    names = _names(folder)
    candidates = [n for files in MODEL_FILES.values() for n in files if n in names]
    if not candidates:
        subfolders = [folder / n for n in names if (folder / n).is_dir()]
        if len(subfolders) == 1 and len(names) == 1:  # an archive with one top folder
            return detect_model(subfolders[0], framework, uri)
        found = ", ".join(names[:10]) + (" …" if len(names) > 10 else "") if names else "nothing"
        raise DeployError(f"There is no model in {uri}: expected {EXPECTED}; found {found}.")
    if framework in MODEL_FILES:
        matching = [n for n in MODEL_FILES[framework] if n in names]
        if not matching:
            raise DeployError(
                f"The framework is {framework}, which needs "
                f"{' or '.join(MODEL_FILES[framework])} in {uri}; found "
                f"{', '.join(sorted(set(candidates)))}."
            )
        chosen_framework = framework
    else:
        chosen_framework, matching = next(
            (fw, [n for n in files if n in names]) for fw, files in DETECTION_ORDER if any(n in names for n in files)
        )
    if chosen_framework != "TENSORFLOW" and len(matching) > 1:
        raise DeployError(f"{uri} holds more than one model file ({', '.join(matching)}); keep exactly one.")
    return Detected(chosen_framework, folder, matching[0])


# --- batch prediction input and output -------------------------------------------------------------------


_WILDCARD = re.compile(r"[*?\[]")


def _pattern(text: str) -> re.Pattern:
    """gsutil wildcards: ``**`` crosses folders, ``*`` and ``?`` stay within one."""
    out, index = [], 0
    while index < len(text):
        if text.startswith("**", index):
            out.append(".*")
            index += 2
        elif text[index] == "*":
            out.append("[^/]*")
            index += 1
        elif text[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(text[index]))
            index += 1
    return re.compile("".join(out) + r"\Z")


def expand_inputs(paths: list[str], check_cancel: Callable[[], None] | None = None, *, project=None) -> list[str]:
    """Every input file the paths name, in order, each once; DeployError when one matches nothing.
    With ``project``, local ones must lie in its storage area or a shared root.

    Local wildcards are expanded by a bounded walk (``aiconsole.walks``) that calls
    ``check_cancel``; one that hits a bound is a DeployError naming the path and the limit."""
    found: list[str] = []
    for path in paths:
        if storage.is_gcs_uri(path):
            matches = _expand_gcs(path)
        else:
            matches = _expand_local(path, check_cancel, project)
        if not matches:
            raise DeployError(f"No input files match {path}.")
        found += [m for m in matches if m not in found]
    return found


def _expand_gcs(path: str) -> list[str]:
    bucket_name, name = storage.parse_gcs_uri(path, require_object=False)
    wildcard = _WILDCARD.search(name)
    try:
        if not wildcard:
            blob = storage.gcs_client().bucket(bucket_name).get_blob(name)
            return [path] if blob is not None else []
        pattern = _pattern(name)
        blobs = storage.gcs_client().list_blobs(bucket_name, prefix=name[: wildcard.start()])
        return [f"gs://{bucket_name}/{b.name}" for b in blobs if pattern.match(b.name) and not b.name.endswith("/")]
    except Exception as error:
        raise DeployError(f"Cannot list {path}: {error}") from None


def _expand_local(path: str, check_cancel=None, project=None) -> list[str]:
    try:
        raw = Path(unquote(urlsplit(path).path)) if path.startswith("file:") else Path(path)
        if not raw.is_absolute():
            raise storage.StorageError(f"{path}: local paths must be absolute")
        parts = raw.parts
        first = next((i for i, part in enumerate(parts) if _WILDCARD.search(part)), len(parts))
        base = storage.resolve_local_path(str(Path(*parts[:first])), must_exist=False, project=project)
    except storage.StorageError as error:
        raise DeployError(f"The input path cannot be used: {error}") from None
    if first == len(parts):
        candidates = [base]
    else:
        pattern = parts[first:]
        depth = None if "**" in pattern else len(pattern)
        try:
            walked = walks.walk_files(base, check_cancel=check_cancel, max_depth=depth, file_links=True)
            candidates = [found for found in walked if _glob_match(found.relative_to(base).parts, pattern)]
        except walks.WalkLimitError as error:
            raise DeployError(f"The input path {path} cannot be expanded: {error}") from None
    files = []
    for candidate in sorted(candidates):
        try:
            linked = candidate.is_symlink()
            resolved = storage.resolve_local_path(str(candidate), project=project) if linked else candidate
        except storage.StorageError:
            continue  # a link out of the storage roots is never read
        if resolved.is_file():
            files.append(str(resolved))
    return files


def _glob_match(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """glob.glob(recursive=True)'s rule, segment by segment: ``**`` spans zero or more folders,
    and a name starting with a dot only matches a pattern that starts with one. Iterative, so a
    very deep tree cannot exhaust the stack."""

    def skip_globstars(positions: set[int]) -> set[int]:
        reached = set(positions)
        for j in positions:
            while j < len(pattern) and pattern[j] == "**":
                j += 1
                reached.add(j)
        return reached

    positions = skip_globstars({0})
    for name in parts:
        hidden = name.startswith(".")
        following = set()
        for j in positions:
            if j == len(pattern):
                continue
            if pattern[j] == "**":
                if not hidden:
                    following.add(j)
            elif (not hidden or pattern[j].startswith(".")) and fnmatch.fnmatchcase(name, pattern[j]):
                following.add(j + 1)
        positions = skip_globstars(following)
        if not positions:
            return False
    return len(pattern) in positions


def read_lines(uri: str, scratch: Path, *, project=None) -> Iterator[str]:
    """The lines of an input file (a gs:// one is downloaded to ``scratch`` first)."""
    if storage.is_gcs_uri(uri):
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            local = storage.fetch(uri, scratch)
        except storage.StorageError as error:
            raise DeployError(str(error)) from None
        opened = open(local, "rb")
    else:
        try:
            opened = storage.open_local(uri, project=project)
        except storage.StorageError as error:
            raise DeployError(str(error)) from None
    with io.TextIOWrapper(opened, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.rstrip("\r\n")
            if line.strip():
                yield line


class OutputDir:
    """Where a batch job's shards go: written locally, uploaded at the end for gs://."""

    def __init__(self, uri: str, scratch: Path, *, project=None):
        self.uri = uri.rstrip("/")
        self.owner = None  # a local output in a project's area goes to the project's account
        if storage.is_gcs_uri(uri):
            storage.parse_gcs_uri(self.uri, require_object=False)
            self.local = scratch / "output"
            shutil.rmtree(self.local, ignore_errors=True)
            self.local.mkdir(parents=True)
            self.base = self.local
        else:
            try:
                self.local = Path(storage.prepare_job_dir(uri, project=project))
                self.base = storage.base_of(self.local)
            except storage.StorageError as error:
                raise DeployError(f"The output path cannot be used: {error}") from None
            account = trainer_user.for_project(project) if project is not None else None
            if account is not None and storage.in_project_area(self.local, project):
                self.owner = (account.uid, account.gid)

    def path(self, name: str) -> Path:
        return self.local / name

    def create(self, name: str) -> IO[str]:
        """A new file ``name`` in the output folder, for writing: whatever was there (a link, a
        hard link) is removed first, never written through, and the folder is reached from its
        storage root without following a link."""
        with beneath.folder(self.base, self.local) as folder:
            try:
                os.unlink(name, dir_fd=folder)
            except FileNotFoundError:
                pass
            descriptor = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640, dir_fd=folder
            )
        if self.owner is not None:
            os.fchown(descriptor, *self.owner)
        return open(descriptor, "w", encoding="utf-8")

    def publish(self, names: list[str]) -> None:
        if not storage.is_gcs_uri(self.uri):
            return
        bucket_name, prefix = storage.parse_gcs_uri(self.uri, require_object=False)
        bucket = storage.gcs_client().bucket(bucket_name)
        for name in names:
            object_name = f"{prefix}/{name}" if prefix else name
            try:
                bucket.blob(object_name).upload_from_filename(str(self.local / name))
            except Exception as error:
                raise DeployError(f"Cannot write gs://{bucket_name}/{object_name}: {error}") from None

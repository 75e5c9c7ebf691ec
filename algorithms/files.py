"""Reading inputs and writing the job dir, for local paths and gs:// URIs alike.

A gs:// job dir is written to a local staging folder and uploaded when the algorithm finishes,
so a failed run leaves no half-written model behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from algorithms.table import DataError


def is_gcs(uri: str) -> bool:
    return uri.startswith("gs://")


def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(
            project=os.environ.get("AICONSOLE_GCS_PROJECT") or "aiconsole", credentials=AnonymousCredentials()
        )
    return storage.Client()


def _split(uri: str) -> tuple[str, str]:
    bucket, _, name = uri[len("gs://") :].partition("/")
    return bucket, name


def size_of(uri: str) -> int:
    if is_gcs(uri):
        bucket, name = _split(uri)
        blob = _client().bucket(bucket).get_blob(name)
        if blob is None:
            raise DataError(f"{uri} does not exist.")
        return int(blob.size or 0)
    try:
        return os.path.getsize(uri)
    except OSError:
        raise DataError(f"{uri} does not exist.") from None


def read_bytes(uri: str) -> bytes:
    if is_gcs(uri):
        bucket, name = _split(uri)
        blob = _client().bucket(bucket).get_blob(name)
        if blob is None:
            raise DataError(f"{uri} does not exist.")
        return blob.download_as_bytes()
    try:
        return Path(uri).read_bytes()
    except FileNotFoundError:
        raise DataError(f"{uri} does not exist.") from None
    except IsADirectoryError:
        raise DataError(f"{uri} is a folder, not a CSV file.") from None


def join(base: str, *parts: str) -> str:
    if is_gcs(base):
        return "/".join([base.rstrip("/"), *parts])
    return str(Path(base, *parts))


class Output:
    """Where the algorithm writes: ``path(name)`` gives a local file to write, ``commit`` publishes."""

    def __init__(self, uri: str):
        self.uri = uri
        self.staging = Path(tempfile.mkdtemp(prefix="builtin-output-")) if is_gcs(uri) else Path(uri)
        self.staging.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        target = self.staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def folder(self, name: str) -> Path:
        target = self.staging / name
        target.mkdir(parents=True, exist_ok=True)
        return target

    def commit(self) -> None:
        if not is_gcs(self.uri):
            return
        bucket_name, prefix = _split(self.uri.rstrip("/") + "/")
        bucket = _client().bucket(bucket_name)
        for path in sorted(self.staging.rglob("*")):
            if path.is_file():
                bucket.blob(prefix + path.relative_to(self.staging).as_posix()).upload_from_filename(str(path))
        shutil.rmtree(self.staging, ignore_errors=True)

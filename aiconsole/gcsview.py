"""``/gcs/<bucket>/<path>``: Cloud Storage as a folder, as Vertex AI gives every replica.

Vertex AI mounts Cloud Storage at ``/gcs/`` in every replica, and trainers (and the Vertex SDK's
own ``from_local_script`` command) read and write ``/gcs/<bucket>/…`` instead of ``gs://…``. The
console runs this file system for a job while its replicas run: a FUSE file system over the
google-cloud-storage client, with the credentials the job's trainers have
(``GOOGLE_APPLICATION_CREDENTIALS``, or ``STORAGE_EMULATOR_HOST``), so a replica sees through it
exactly what it could reach with ``gs://`` and nothing more.

``python -m aiconsole.gcsview MOUNTPOINT UID GID``, as root with the trainers' environment and no
other: it mounts (root may let other users in: ``allow_other``), then, before it serves a single
request, becomes the project's account (UID:GID) for good. Nothing of Django is imported; the
console unmounts it when the job ends, which ends the process.

Semantics, as gcsfuse's with implicit folders: a bucket is a folder at the top (looked up by
name; the top lists nothing); an object is a file; a folder is any prefix some object has, or one
made with ``mkdir`` (a zero-byte ``prefix/`` object, as gcsfuse writes). A file opened for reading
is fetched whole into a private scratch folder; one written is uploaded when closed (or flushed).
Rename copies and deletes, as Cloud Storage has no rename. Owners and modes are the account's
(``0644`` files, ``0755`` folders); ``chmod``, ``chown`` and times are accepted and ignored.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time

BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
LISTED_MOST = 100_000  # objects one folder listing reads
RENAMED_MOST = 10_000  # objects one folder rename may move


def _client():
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return storage.Client(
            project=os.environ.get("GOOGLE_CLOUD_PROJECT") or "aiconsole", credentials=AnonymousCredentials()
        )
    return storage.Client(project=os.environ.get("GOOGLE_CLOUD_PROJECT") or None)


class _Open:
    """An open file: its local copy, and whether it changed."""

    def __init__(self, bucket: str, name: str, path: str):
        self.bucket, self.name, self.path = bucket, name, path
        self.dirty = False
        self.lock = threading.Lock()


class View:
    """The file system's operations (fusepy's ``Operations`` shape)."""

    def __init__(self, client, uid: int, gid: int, scratch: str):
        self.client = client
        self.uid, self.gid = uid, gid
        self.scratch = scratch
        self.opened: dict[int, _Open] = {}
        self.next_handle = 1
        self.lock = threading.Lock()
        self.buckets: dict[str, bool] = {}
        self.started = time.time()

    # --- paths ---------------------------------------------------------------------------------

    def _split(self, path: str) -> tuple[str, str]:
        parts = path.strip("/").split("/", 1)
        bucket = parts[0]
        name = parts[1] if len(parts) > 1 else ""
        if bucket and not self._bucket_exists(bucket):
            raise _error(errno.ENOENT)
        return bucket, name

    def _bucket_exists(self, bucket: str) -> bool:
        if not BUCKET.match(bucket):
            return False
        with self.lock:
            known = self.buckets.get(bucket)
        if known is None:
            try:
                known = self.client.lookup_bucket(bucket) is not None
            except Exception:  # noqa: BLE001 - refused (403) or unreachable: not a folder here
                known = False
            with self.lock:
                self.buckets[bucket] = known
        return known

    def _attributes(self, folder: bool, size: int = 0, mtime: float | None = None) -> dict:
        when = mtime if mtime is not None else self.started
        mode = (stat.S_IFDIR | 0o755) if folder else (stat.S_IFREG | 0o644)
        return {
            "st_mode": mode,
            "st_nlink": 2 if folder else 1,
            "st_size": size,
            "st_uid": self.uid,
            "st_gid": self.gid,
            "st_atime": when,
            "st_mtime": when,
            "st_ctime": when,
        }

    def _blob(self, bucket: str, name: str):
        return self.client.bucket(bucket).get_blob(name)

    def _is_folder(self, bucket: str, name: str) -> bool:
        prefix = name.rstrip("/") + "/"
        listed = self.client.list_blobs(bucket, prefix=prefix, max_results=1)
        return any(True for _ in listed)

    # --- reading -------------------------------------------------------------------------------

    def getattr(self, path, fh=None):
        bucket, name = self._split(path)
        if not bucket or not name:
            return self._attributes(True)
        with self.lock:
            opened = next((o for o in self.opened.values() if (o.bucket, o.name) == (bucket, name)), None)
        if opened is not None:
            return self._attributes(False, os.path.getsize(opened.path), os.path.getmtime(opened.path))
        blob = self._blob(bucket, name)
        if blob is not None:
            updated = blob.updated.timestamp() if blob.updated else None
            return self._attributes(False, blob.size or 0, updated)
        if self._is_folder(bucket, name):
            return self._attributes(True)
        raise _error(errno.ENOENT)

    def readdir(self, path, fh):
        bucket, name = self._split(path)
        entries = [".", ".."]
        if not bucket:
            return entries
        prefix = name.rstrip("/") + "/" if name else ""
        listed = self.client.list_blobs(bucket, prefix=prefix, delimiter="/", max_results=LISTED_MOST)
        files = [blob.name[len(prefix) :] for blob in listed if blob.name != prefix]
        folders = [p[len(prefix) :].rstrip("/") for p in listed.prefixes]
        return entries + sorted(set(folders)) + sorted(f for f in files if f)

    def open(self, path, flags):
        bucket, name = self._split(path)
        if not name:
            raise _error(errno.EISDIR)
        descriptor, local = tempfile.mkstemp(dir=self.scratch)
        os.close(descriptor)
        blob = self._blob(bucket, name)
        if blob is None:
            os.unlink(local)
            raise _error(errno.ENOENT)
        if not flags & os.O_TRUNC:
            blob.download_to_filename(local)
        opened = _Open(bucket, name, local)
        opened.dirty = bool(flags & os.O_TRUNC)
        return self._keep(opened)

    def read(self, path, size, offset, fh):
        opened = self.opened[fh]
        with opened.lock, open(opened.path, "rb") as handle:
            handle.seek(offset)
            return handle.read(size)

    def statfs(self, path):
        return {
            "f_bsize": 4096,
            "f_frsize": 4096,
            "f_blocks": 2**30,
            "f_bfree": 2**30,
            "f_bavail": 2**30,
            "f_namemax": 1024,
        }

    # --- writing -------------------------------------------------------------------------------

    def create(self, path, mode, fi=None):
        bucket, name = self._split(path)
        if not bucket or not name:
            raise _error(errno.EACCES)
        descriptor, local = tempfile.mkstemp(dir=self.scratch)
        os.close(descriptor)
        opened = _Open(bucket, name, local)
        opened.dirty = True
        handle = self._keep(opened)
        self._upload(opened)  # the object exists from now on, as a file just created does
        return handle

    def write(self, path, data, offset, fh):
        opened = self.opened[fh]
        with opened.lock, open(opened.path, "r+b") as handle:
            handle.seek(offset)
            handle.write(data)
            opened.dirty = True
        return len(data)

    def truncate(self, path, length, fh=None):
        if fh is not None and fh in self.opened:
            opened = self.opened[fh]
            with opened.lock:
                os.truncate(opened.path, length)
                opened.dirty = True
            return
        bucket, name = self._split(path)
        handle = self.open(path, os.O_RDWR)
        try:
            self.truncate(path, length, handle)
        finally:
            self.release(path, handle)

    def flush(self, path, fh):
        self._upload(self.opened[fh])

    def fsync(self, path, datasync, fh):
        self._upload(self.opened[fh])

    def release(self, path, fh):
        with self.lock:
            opened = self.opened.pop(fh, None)
        if opened is not None:
            try:
                self._upload(opened)
            finally:
                os.unlink(opened.path)

    def unlink(self, path):
        bucket, name = self._split(path)
        blob = self._blob(bucket, name) if name else None
        if blob is None:
            raise _error(errno.ENOENT)
        blob.delete()

    def mkdir(self, path, mode):
        bucket, name = self._split(path)
        if not bucket or not name:
            raise _error(errno.EACCES)
        self.client.bucket(bucket).blob(name.rstrip("/") + "/").upload_from_string(b"")

    def rmdir(self, path):
        bucket, name = self._split(path)
        if not name:
            raise _error(errno.EACCES)
        prefix = name.rstrip("/") + "/"
        inside = [blob for blob in self.client.list_blobs(bucket, prefix=prefix, max_results=2) if blob.name != prefix]
        if inside:
            raise _error(errno.ENOTEMPTY)
        marker = self._blob(bucket, prefix)
        if marker is not None:
            marker.delete()

    def rename(self, old, new):
        bucket, name = self._split(old)
        target_bucket, target = self._split(new)
        if not name or not target:
            raise _error(errno.EACCES)
        source = self.client.bucket(bucket)
        destination = self.client.bucket(target_bucket)
        blob = source.get_blob(name)
        if blob is not None:
            source.copy_blob(blob, destination, target)
            blob.delete()
            return
        prefix = name.rstrip("/") + "/"
        moved = list(self.client.list_blobs(bucket, prefix=prefix, max_results=RENAMED_MOST + 1))
        if not moved:
            raise _error(errno.ENOENT)
        if len(moved) > RENAMED_MOST:
            raise _error(errno.EFBIG)
        for item in moved:
            source.copy_blob(item, destination, target.rstrip("/") + "/" + item.name[len(prefix) :])
            item.delete()

    def chmod(self, path, mode):
        return 0

    def chown(self, path, uid, gid):
        return 0

    def utimens(self, path, times=None):
        return 0

    # --- helpers -------------------------------------------------------------------------------

    def _keep(self, opened: _Open) -> int:
        with self.lock:
            handle = self.next_handle
            self.next_handle += 1
            self.opened[handle] = opened
        return handle

    def _upload(self, opened: _Open) -> None:
        with opened.lock:
            if not opened.dirty:
                return
            self.client.bucket(opened.bucket).blob(opened.name).upload_from_filename(opened.path)
            opened.dirty = False


def _error(code: int) -> Exception:
    from fuse import FuseOSError

    return FuseOSError(code)


def _operations(view: View, uid: int, gid: int):
    """fusepy's Operations around ``view``: every Cloud Storage error an EIO (ENOENT, EACCES for
    404 and 403), and the account taken on at ``init``, before any request."""
    from fuse import FuseOSError, Operations
    from google.api_core import exceptions

    class Served(Operations):
        def init(self, path):
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)

        def __call__(self, operation, *args):
            method = getattr(view, operation, None)
            if method is None:  # init, and what fusepy's Operations answers itself (access, opendir…)
                return getattr(self, operation)(*args)
            try:
                return method(*args)
            except FuseOSError:
                raise
            except exceptions.NotFound:
                raise FuseOSError(errno.ENOENT) from None
            except exceptions.Forbidden:
                raise FuseOSError(errno.EACCES) from None
            except Exception as error:  # noqa: BLE001 - Cloud Storage unreachable, refused: the caller sees EIO
                print(f"gcsview: {operation} {args[:1]}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
                raise FuseOSError(errno.EIO) from None

    return Served()


def _warm(client) -> None:
    """Import now what the client imports lazily: once the process is the project's account, the
    console's interpreter and libraries may lie where that account cannot read (root's home)."""
    import datetime
    import importlib

    datetime.datetime.strptime("2026-01-01T00:00:00.000000Z", "%Y-%m-%dT%H:%M:%S.%fZ")
    for module in (
        "google.cloud.storage.blob",
        "google.cloud.storage.bucket",
        "google.resumable_media.requests",
        "google.api_core.exceptions",
        "email.utils",
        "mimetypes",
        "hashlib",
        "base64",
        "encodings.idna",
    ):
        importlib.import_module(module)
    import mimetypes

    mimetypes.init()
    try:  # an error answer's path, read as the account would read it
        client.lookup_bucket("ai-console-warm-up-bucket-that-is-not-there")
    except Exception:  # noqa: BLE001 - only warming up
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: python -m aiconsole.gcsview MOUNTPOINT UID GID", file=sys.stderr)
        return 2
    from fuse import FUSE

    mountpoint, uid, gid = argv[1], int(argv[2]), int(argv[3])
    scratch = tempfile.mkdtemp(prefix="gcsview-")
    os.chown(scratch, uid, gid)
    try:
        client = _client()
        _warm(client)
        view = View(client, uid, gid, scratch)
        FUSE(
            _operations(view, uid, gid),
            mountpoint,
            foreground=True,
            nothreads=False,
            allow_other=True,
            fsname="gcs",
            subtype="aiconsole",
            big_writes=True,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Tests for aiconsole.storage: local containment, uploads, job dirs, and gs:// via the emulator.

GCS tests need the ``gcs_emulator`` fixture from tests/gcs_emulator.py.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from google.auth.exceptions import DefaultCredentialsError

from aiconsole import storage
from aiconsole.storage import StorageError


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A storage root, with a package file in it."""
    served = tmp_path / "root"
    (served / "pkgs").mkdir(parents=True)
    (served / "pkgs" / "trainer-0.1.tar.gz").write_bytes(b"package bytes")
    return served


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file next to the root, which must never be reachable."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    return secret


# --- URIs ----------------------------------------------------------------------------------


def test_is_gcs_uri():
    assert storage.is_gcs_uri("gs://bucket/x")
    assert not storage.is_gcs_uri("/srv/x")
    assert not storage.is_gcs_uri("file:///srv/x")


def test_parse_gcs_uri():
    assert storage.parse_gcs_uri("gs://my-bucket/a/b/trainer.tar.gz") == (
        "my-bucket",
        "a/b/trainer.tar.gz",
    )
    assert storage.parse_gcs_uri("gs://my.bucket_1/out/", require_object=False) == (
        "my.bucket_1",
        "out/",
    )


@pytest.mark.parametrize(
    "uri, problem",
    [
        ("gs://Bad_Bucket/x", "invalid bucket name"),
        ("gs://ab/x", "invalid bucket name"),
        ("gs://" + "a" * 64 + "/x", "invalid bucket name"),
        ("gs://-bucket/x", "invalid bucket name"),
        ("gs://bucket", "no object name"),
        ("gs://bucket/", "no object name"),
        ("gs://bucket/dir/", "names a folder"),
        ("gs://bucket/a\nb", "invalid object name"),
    ],
)
def test_parse_gcs_uri_rejects(uri, problem):
    with pytest.raises(StorageError, match=problem) as caught:
        storage.parse_gcs_uri(uri)
    assert uri.split("\n")[0] in str(caught.value)


# --- Local paths ---------------------------------------------------------------------------


def test_path_inside_root(root):
    target = root / "pkgs" / "trainer-0.1.tar.gz"
    assert storage.resolve_local_path(str(target), roots=[root]) == target.resolve()


def test_file_uri(root):
    target = root / "pkgs" / "trainer-0.1.tar.gz"
    assert storage.resolve_local_path(f"file://{target}", roots=[root]) == target.resolve()
    assert storage.resolve_local_path(target.as_uri(), roots=[root]) == target.resolve()


def test_file_uri_with_host_rejected(root):
    with pytest.raises(StorageError, match="local path"):
        storage.resolve_local_path(f"file://otherhost{root}/pkgs/x", roots=[root])


def test_outside_root_rejected(root, outside):
    with pytest.raises(StorageError, match="not inside a storage root") as caught:
        storage.resolve_local_path(str(outside), roots=[root])
    assert str(root.resolve()) in str(caught.value)


def test_etc_passwd_rejected(root):
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.resolve_local_path("file:///etc/passwd", roots=[root])


def test_dotdot_escape_rejected(root, outside):
    escape = f"{root}/pkgs/../../{outside.name}"
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.resolve_local_path(escape, roots=[root])


def test_symlink_out_of_root_rejected(root, outside):
    link = root / "pkgs" / "sneaky.tar.gz"
    link.symlink_to(outside)
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.resolve_local_path(str(link), roots=[root])
    # A symlinked directory is no way out either, even for paths that don't exist yet.
    (root / "dirlink").symlink_to(outside.parent)
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.resolve_local_path(str(root / "dirlink" / "new"), roots=[root], must_exist=False)


def test_symlinked_root_is_resolved(tmp_path, root):
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    target = storage.resolve_local_path(str(alias / "pkgs" / "trainer-0.1.tar.gz"), roots=[alias])
    assert target == (root / "pkgs" / "trainer-0.1.tar.gz").resolve()


@pytest.mark.parametrize("uri", ["pkgs/trainer.tar.gz", "./x", "~/x", "file:relative/x"])
def test_relative_path_rejected(root, uri):
    with pytest.raises(StorageError, match="must be absolute"):
        storage.resolve_local_path(uri, roots=[root])


@pytest.mark.parametrize("uri", ["s3://bucket/x", "http://example.com/x.tar.gz"])
def test_other_schemes_rejected(root, uri):
    with pytest.raises(StorageError, match="unsupported URI scheme"):
        storage.resolve_local_path(uri, roots=[root])


def test_missing_file(root):
    missing = root / "pkgs" / "missing.tar.gz"
    with pytest.raises(StorageError, match="does not exist"):
        storage.resolve_local_path(str(missing), roots=[root])
    assert storage.resolve_local_path(str(missing), roots=[root], must_exist=False) == missing


def test_second_root_served(tmp_path, root):
    other = tmp_path / "datasets"
    other.mkdir()
    (other / "t.whl").write_bytes(b"w")
    assert storage.resolve_local_path(str(other / "t.whl"), roots=[root, other]).exists()


def test_default_roots_from_settings(settings, root, outside):
    settings.STORAGE_ROOTS = [root]
    assert storage.resolve_local_path(str(root / "pkgs" / "trainer-0.1.tar.gz"))
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.resolve_local_path(str(outside))


# --- fetch (local) -------------------------------------------------------------------------


def test_fetch_copies_local(root, tmp_path):
    dest_dir = tmp_path / "work" / "job-1"
    got = storage.fetch(str(root / "pkgs" / "trainer-0.1.tar.gz"), dest_dir, roots=[root], max_bytes=1024)
    assert got == dest_dir / "trainer-0.1.tar.gz"
    assert got.read_bytes() == b"package bytes"


def test_fetch_refuses_outside_root(root, outside, tmp_path):
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.fetch(str(outside), tmp_path / "work", roots=[root], max_bytes=1024)


def test_fetch_refuses_directory(root, tmp_path):
    with pytest.raises(StorageError, match="not a file"):
        storage.fetch(str(root / "pkgs"), tmp_path / "work", roots=[root], max_bytes=1024)


def test_fetch_enforces_max_bytes(root, tmp_path):
    dest_dir = tmp_path / "work"
    dest_dir.mkdir()
    with pytest.raises(StorageError, match="larger than the 4 byte limit"):
        storage.fetch(str(root / "pkgs" / "trainer-0.1.tar.gz"), dest_dir, roots=[root], max_bytes=4)
    assert list(dest_dir.iterdir()) == []


def test_fetch_default_limit_from_settings(settings, root, tmp_path):
    settings.MAX_PACKAGE_BYTES = 5
    with pytest.raises(StorageError, match="5 byte limit"):
        storage.fetch(str(root / "pkgs" / "trainer-0.1.tar.gz"), tmp_path / "w", roots=[root])


# --- save_upload ---------------------------------------------------------------------------


def test_save_upload_stores_under_project(tmp_path):
    got = storage.save_upload(
        io.BytesIO(b"abc" * 1000),
        "trainer-0.1.tar.gz",
        project="my-project",
        storage_dir=tmp_path,
        max_bytes=10_000,
    )
    assert got.is_absolute()
    assert got.read_bytes() == b"abc" * 1000
    assert got.name == "trainer-0.1.tar.gz"
    random_dir = got.parent
    assert random_dir.parent == tmp_path.resolve() / "packages" / "my-project"
    assert len(random_dir.name) == 16 and int(random_dir.name, 16) >= 0
    # The stored package is a valid local URI for the storage root.
    assert storage.resolve_local_path(str(got), roots=[tmp_path]) == got


def test_save_upload_uses_chunks_of_django_uploads(tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("ignored.whl", b"wheel bytes")
    got = storage.save_upload(upload, "t-1.0-py3-none-any.whl", project="p", storage_dir=tmp_path, max_bytes=100)
    assert got.read_bytes() == b"wheel bytes"


def test_save_upload_twice_does_not_collide(tmp_path):
    first = storage.save_upload(io.BytesIO(b"1"), "t.tar.gz", project="p", storage_dir=tmp_path)
    second = storage.save_upload(io.BytesIO(b"2"), "t.tar.gz", project="p", storage_dir=tmp_path)
    assert first != second
    assert first.read_bytes() == b"1" and second.read_bytes() == b"2"


@pytest.mark.parametrize(
    "filename, stored",
    [
        ("../../x.tar.gz", "x.tar.gz"),
        ("a/b.whl", "b.whl"),
        ("C:\\Users\\me\\trainer.tar.gz", "trainer.tar.gz"),
    ],
)
def test_save_upload_keeps_only_base_name(tmp_path, filename, stored):
    got = storage.save_upload(io.BytesIO(b"x"), filename, project="p", storage_dir=tmp_path)
    assert got.name == stored
    assert got.parent.parent == tmp_path.resolve() / "packages" / "p"


@pytest.mark.parametrize(
    "filename", [".hidden", "", "dir/", "..", "a/..", "trainer v1.tar.gz", "x;rm -rf.whl", "é.whl"]
)
def test_save_upload_rejects_bad_filenames(tmp_path, filename):
    with pytest.raises(StorageError, match="invalid file name"):
        storage.save_upload(io.BytesIO(b"x"), filename, project="p", storage_dir=tmp_path)
    assert not (tmp_path / "packages").exists()


@pytest.mark.parametrize("project", ["", "../etc", "a/b", ".p", "-p", "x" * 64])
def test_save_upload_rejects_bad_project(tmp_path, project):
    with pytest.raises(StorageError, match="invalid project name"):
        storage.save_upload(io.BytesIO(b"x"), "t.tar.gz", project=project, storage_dir=tmp_path)


def test_save_upload_enforces_max_bytes(tmp_path):
    with pytest.raises(StorageError, match="larger than the 1024 byte limit"):
        storage.save_upload(io.BytesIO(b"x" * 5000), "t.tar.gz", project="p", storage_dir=tmp_path, max_bytes=1024)
    # Neither the partial file nor its random directory is left behind.
    assert list((tmp_path / "packages" / "p").iterdir()) == []


def test_save_upload_defaults_from_settings(settings, tmp_path):
    settings.STORAGE_DIR = tmp_path
    got = storage.save_upload(io.BytesIO(b"x"), "t.tar.gz", project="p")
    assert got.is_relative_to(tmp_path.resolve() / "packages" / "p")


# --- prepare_job_dir -----------------------------------------------------------------------


def test_prepare_job_dir_creates_local(root):
    got = storage.prepare_job_dir(f"file://{root}/jobs/job-1/out", roots=[root])
    assert got == str((root / "jobs" / "job-1" / "out").resolve())
    assert Path(got).is_dir()
    # Idempotent: an existing dir is fine.
    assert storage.prepare_job_dir(got, roots=[root]) == got


def test_prepare_job_dir_refuses_outside_roots(root, tmp_path):
    target = tmp_path / "elsewhere" / "out"
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.prepare_job_dir(str(target), roots=[root])
    assert not target.exists()
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.prepare_job_dir(f"{root}/../escape", roots=[root])


def test_prepare_job_dir_refuses_file(root):
    with pytest.raises(StorageError, match="not a directory"):
        storage.prepare_job_dir(str(root / "pkgs" / "trainer-0.1.tar.gz"), roots=[root])


def test_prepare_job_dir_gcs_unchanged():
    assert storage.prepare_job_dir("gs://my-bucket/jobs/1") == "gs://my-bucket/jobs/1"
    assert storage.prepare_job_dir("gs://my-bucket") == "gs://my-bucket"
    with pytest.raises(StorageError, match="invalid bucket name"):
        storage.prepare_job_dir("gs://Bad_Bucket/jobs")


# --- write_text / read_bytes (local) -------------------------------------------------------


def test_local_write_read_round_trip(root):
    uri = f"{root}/jobs/1/metrics.json"
    storage.write_text(uri, '{"loss": 0.5} é', roots=[root])
    assert storage.read_bytes(uri, roots=[root]) == '{"loss": 0.5} é'.encode()
    with pytest.raises(StorageError, match="larger than the 3 byte limit"):
        storage.read_bytes(uri, roots=[root], max_bytes=3)


def test_local_write_refuses_outside_roots(root, tmp_path):
    with pytest.raises(StorageError, match="not inside a storage root"):
        storage.write_text(str(tmp_path / "x.txt"), "x", roots=[root])
    assert not (tmp_path / "x.txt").exists()


# --- Google Cloud Storage (emulator) -------------------------------------------------------


def test_gcs_fetch_small(gcs_emulator, tmp_path):
    uri = gcs_emulator.upload("aic-packages", "trainers/trainer-0.1.tar.gz", b"tiny package")
    got = storage.fetch(uri, tmp_path / "work", max_bytes=1024)
    assert got == tmp_path / "work" / "trainer-0.1.tar.gz"
    assert got.read_bytes() == b"tiny package"


def test_gcs_fetch_three_megabytes(gcs_emulator, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 123)
    uri = gcs_emulator.upload("aic-packages", "big/trainer-0.2.tar.gz", data)
    got = storage.fetch(uri, tmp_path, max_bytes=10 * 1024 * 1024)
    assert got.read_bytes() == data


def test_gcs_fetch_enforces_max_bytes(gcs_emulator, tmp_path):
    uri = gcs_emulator.upload("aic-packages", "too-big.tar.gz", b"x" * 4096)
    with pytest.raises(StorageError, match="larger than the 1024 byte limit"):
        storage.fetch(uri, tmp_path, max_bytes=1024)
    assert list(tmp_path.iterdir()) == []


def test_gcs_fetch_not_found(gcs_emulator, tmp_path):
    gcs_emulator.make_bucket("aic-packages")
    with pytest.raises(StorageError) as caught:
        storage.fetch("gs://aic-packages/nope.tar.gz", tmp_path, max_bytes=1024)
    assert str(caught.value) == "gs://aic-packages/nope.tar.gz does not exist"
    with pytest.raises(StorageError, match="does not exist"):
        storage.fetch("gs://no-such-bucket/x.tar.gz", tmp_path, max_bytes=1024)
    assert list(tmp_path.iterdir()) == []


def test_gcs_fetch_invalid_bucket(gcs_emulator, tmp_path):
    with pytest.raises(StorageError, match=r"gs://Bad_Bucket/x: invalid bucket name"):
        storage.fetch("gs://Bad_Bucket/x", tmp_path, max_bytes=1024)


def test_gcs_fetch_refuses_dotdot_base_name(gcs_emulator, tmp_path):
    with pytest.raises(StorageError, match="cannot derive a file name"):
        storage.fetch("gs://aic-packages/a/..", tmp_path / "work", max_bytes=1024)


def test_gcs_write_read_round_trip(gcs_emulator):
    gcs_emulator.make_bucket("aic-jobs")
    uri = "gs://aic-jobs/job-1/out/result.txt"
    storage.write_text(uri, "accuracy=0.93 ✓")
    assert storage.read_bytes(uri, max_bytes=1024) == "accuracy=0.93 ✓".encode()
    with pytest.raises(StorageError, match="larger than the 4 byte limit"):
        storage.read_bytes(uri, max_bytes=4)
    with pytest.raises(StorageError, match="does not exist"):
        storage.read_bytes("gs://aic-jobs/job-1/missing", max_bytes=1024)


def test_gcs_write_to_missing_bucket(gcs_emulator):
    with pytest.raises(StorageError, match="bucket gs://no-such-bucket-w does not exist"):
        storage.write_text("gs://no-such-bucket-w/x.txt", "x")


def test_gcs_client_uses_emulator(gcs_emulator):
    client = storage.gcs_client()
    assert client is storage.gcs_client()
    assert client.project == "aiconsole"


def test_missing_credentials_explained(monkeypatch, tmp_path):
    # Without an emulator, the client falls back to Application Default Credentials; a key
    # file that doesn't exist fails fast and offline, like a server with nothing configured.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing-key.json"))
    storage.reset_gcs_client()
    try:
        with pytest.raises(StorageError, match="GOOGLE_APPLICATION_CREDENTIALS") as caught:
            storage.fetch("gs://aic-packages/t.tar.gz", tmp_path / "work", max_bytes=1024)
        assert str(caught.value).startswith("gs://aic-packages/t.tar.gz: ")
        assert isinstance(caught.value.__cause__, DefaultCredentialsError)
        with pytest.raises(StorageError, match="GOOGLE_APPLICATION_CREDENTIALS"):
            storage.gcs_client()
    finally:
        storage.reset_gcs_client()


def test_gcs_fetch_counts_actual_bytes(gcs_emulator, tmp_path, monkeypatch):
    # An object whose metadata gives no size must still be cut off while streaming.
    from google.cloud.storage import Blob

    uri = gcs_emulator.upload("aic-packages", "sizeless.tar.gz", b"y" * 100_000)
    monkeypatch.setattr(Blob, "size", property(lambda self: None))
    with pytest.raises(StorageError, match="larger than the 1024 byte limit"):
        storage.fetch(uri, tmp_path, max_bytes=1024)
    assert list(tmp_path.iterdir()) == []

"""Pytest plugin: an in-memory Google Cloud Storage emulator for the test session.

Register with ``pytest_plugins = ["tests.gcs_emulator"]`` in the root conftest (or
``-p tests.gcs_emulator``), then request the ``gcs_emulator`` fixture.

The emulator (gcp-storage-emulator) runs in this process on a thread, bound to a free port on
127.0.0.1 and keeping objects in memory. While the session lasts, ``STORAGE_EMULATOR_HOST``
points at it, which google-cloud-storage honours, and which the settings pass through to
trainer subprocesses.

Quirk: the emulator serves one request at a time, and when a client aborts a download early
(e.g. a size limit tripping) it prints a ConnectionResetError traceback to stderr. Harmless.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from gcp_storage_emulator.server import create_server
from google.api_core.exceptions import Conflict
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs

from aiconsole import storage

STARTUP_TIMEOUT_SECONDS = 10.0


@dataclass
class GcsEmulator:
    """Handle on the running emulator, with helpers to seed buckets and objects."""

    host: str
    client: gcs.Client = field(repr=False)

    def make_bucket(self, name: str) -> gcs.Bucket:
        """Create bucket ``name``, or return it if an earlier test already created it."""
        try:
            return self.client.create_bucket(name)
        except Conflict:
            return self.client.bucket(name)

    def upload(self, bucket: str, name: str, data: bytes) -> str:
        """Store ``data`` as ``gs://bucket/name`` (creating the bucket) and return that URI."""
        self.make_bucket(bucket).blob(name).upload_from_string(data)
        return f"gs://{bucket}/{name}"


def _wait_until_answering(host: str, timeout: float) -> None:
    """Poll the emulator's health endpoint until it says OK, failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{host}/", timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"GCS emulator at {host} did not answer within {timeout}s")
        time.sleep(0.02)


def _bound_port(server) -> int:
    # Binding port 0 lets the OS pick a free port without a check-then-bind race; the emulator
    # keeps the bound socket on a private attribute, so fail clearly if that ever moves.
    try:
        return server._api._httpd.server_address[1]
    except AttributeError as exc:
        raise RuntimeError("cannot find the port gcp-storage-emulator bound to") from exc


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GcsEmulator]:
    """A running in-memory GCS emulator with ``STORAGE_EMULATOR_HOST`` set for the session."""
    # The emulator logs a warning per response and an error per 404; keep test output readable.
    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    try:
        host = f"http://127.0.0.1:{_bound_port(server)}"
        _wait_until_answering(host, STARTUP_TIMEOUT_SECONDS)
        os.environ["STORAGE_EMULATOR_HOST"] = host
        storage.reset_gcs_client()
        client = gcs.Client(project="aiconsole", credentials=AnonymousCredentials())
        yield GcsEmulator(host=host, client=client)
    finally:
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
        storage.reset_gcs_client()
        server.stop()

"""Cloud Storage for the client commands, which run without Django (``--staging-bucket``, a ``gs://``
``--job-dir``): what the server's storage module reads from the console's settings is read here
from this shell's environment.

- ``STORAGE_EMULATOR_HOST`` set: that emulator, with anonymous credentials;
- otherwise Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, or ``gcloud auth
  application-default login``), as gcloud's own upload used this machine's credentials.

The project billed is ``AICONSOLE_GCS_PROJECT``, else ``GOOGLE_CLOUD_PROJECT`` or
``CLOUDSDK_CORE_PROJECT`` (the emulator's default ``aiconsole`` when one is set).
"""

from __future__ import annotations

import os
from pathlib import Path

from console.cli.client import CliError

CREDENTIALS_HELP = (
    "no Google Cloud credentials on this machine: set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file, or run `gcloud auth application-default login`; with an emulator, "
    "set STORAGE_EMULATOR_HOST"
)


def project() -> str | None:
    for name in ("AICONSOLE_GCS_PROJECT", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        if os.environ.get(name):
            return os.environ[name]
    return None


def client():
    """A ``google.cloud.storage.Client`` for this shell, or CliError saying what is missing."""
    # deferred: google-cloud-storage costs a third of a second to import; only uploads need it
    from google.auth import exceptions as auth_errors
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    try:
        if os.environ.get("STORAGE_EMULATOR_HOST"):
            return storage.Client(project=project() or "aiconsole", credentials=AnonymousCredentials())
        return storage.Client(project=project())
    except auth_errors.GoogleAuthError as error:
        raise CliError(f"Cloud Storage: {CREDENTIALS_HELP} ({error})") from None


def upload(path: Path, uri: str) -> None:
    """Copy the local file ``path`` to ``uri`` (``gs://bucket/name``); CliError names the URI."""
    from google.api_core import exceptions as api_errors
    from google.auth import exceptions as auth_errors

    # deferred: importing the storage module reads no settings; only its pure URI parser is used
    from aiconsole.storage import StorageError, parse_gcs_uri

    try:
        bucket, name = parse_gcs_uri(uri)
    except StorageError as error:
        raise CliError(str(error), exit_code=2) from None
    try:
        client().bucket(bucket).blob(name).upload_from_filename(str(path))
    except api_errors.NotFound:
        raise CliError(f"uploading to {uri} failed: the bucket gs://{bucket} does not exist") from None
    except (api_errors.Unauthorized, auth_errors.GoogleAuthError):
        raise CliError(f"uploading to {uri} failed: {CREDENTIALS_HELP}") from None
    except api_errors.Forbidden:
        raise CliError(
            f"uploading to {uri} failed: this machine's credentials may not write to gs://{bucket}"
        ) from None
    except api_errors.GoogleAPIError as error:
        raise CliError(f"uploading to {uri} failed: {error}") from None
    except OSError as error:  # the emulator or Cloud Storage unreachable
        raise CliError(f"uploading to {uri} failed: cannot reach Cloud Storage ({error})") from None

"""google-cloud-logging is an optional extra: the console runs without it, and configuring the
export without it is refused at start with what to install, not failed entry by entry."""

from __future__ import annotations

import logging
import subprocess
import sys

import google.cloud
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from aiconsole import cloud_logging
from bench.support.waiting import wait_for


@pytest.fixture
def without_the_client(monkeypatch):
    """As if google-cloud-logging were not installed."""
    monkeypatch.setitem(sys.modules, "google.cloud.logging", None)
    monkeypatch.delattr(google.cloud, "logging", raising=False)


def test_the_core_imports_without_the_client():
    blocker = (
        "import sys\n"
        "class Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('google.cloud.logging'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Missing())\n"
        "import aiconsole.cloud_logging\n"
        "assert 'google.cloud.logging' not in sys.modules\n"
    )

    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr


def test_configured_without_the_client_the_console_refuses_to_start(settings, without_the_client):
    settings.CLOUD_LOGGING_PROJECT = "gcp-audit-sink"

    with pytest.raises(SystemCheckError) as refused:
        call_command("check")

    assert "aiconsole.E001" in str(refused.value)
    assert "pip install 'aiconsole[cloud-logging]'" in str(refused.value)


def test_not_configured_the_client_is_not_needed(settings, without_the_client):
    settings.CLOUD_LOGGING_PROJECT = ""

    assert cloud_logging.check_client_installed() == []


def test_configured_with_the_client_the_check_passes(settings):
    settings.CLOUD_LOGGING_PROJECT = "gcp-audit-sink"

    assert cloud_logging.check_client_installed() == []


def test_an_export_without_the_client_logs_what_to_install(settings, monkeypatch, without_the_client, caplog):
    settings.CLOUD_LOGGING_PROJECT = "gcp-audit-sink"
    monkeypatch.setattr(cloud_logging, "_client", None)
    caplog.set_level(logging.ERROR, logger=cloud_logging.__name__)

    cloud_logging._enqueue("aiconsole-audit-activity", {"info": {}})

    wait_for(
        lambda: any("aiconsole[cloud-logging]" in r.getMessage() for r in caplog.records),
        10,
        message="the export to say what is missing",
    )


def test_the_export_talks_http_never_grpc_in_processes_that_fork(settings, monkeypatch):
    import google.auth
    from google.auth.credentials import AnonymousCredentials

    settings.CLOUD_LOGGING_PROJECT = "gcp-audit-sink"
    monkeypatch.setattr(google.auth, "default", lambda *args, **kwargs: (AnonymousCredentials(), "gcp-audit-sink"))
    client = cloud_logging._make_client()
    assert client._use_grpc is False
    assert type(client.logging_api).__module__ == "google.cloud.logging_v2._http"

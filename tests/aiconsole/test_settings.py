"""Settings come from the environment through typed readers that fail loudly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from aiconsole import settings as console_settings


def _manage(args: list[str], tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    clean.update({"AICONSOLE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True, env=clean,
                          timeout=120)


def test_deploy_check_is_clean_for_production_settings(tmp_path):
    result = _manage(["check", "--deploy", "--fail-level", "WARNING"], tmp_path,
                     AICONSOLE_SECURE="true", AICONSOLE_SECRET_KEY="k" * 20 + "x7Q!mZ2#pL9$wR4^tY6&uI8*oP0(aS3)dF5",
                     AICONSOLE_ALLOWED_HOSTS="console.example.com")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_malformed_setting_fails_loudly_naming_the_variable(tmp_path):
    result = _manage(["check"], tmp_path, AICONSOLE_MAX_REPLICAS="many")
    assert result.returncode != 0
    assert "AICONSOLE_MAX_REPLICAS must be an integer, got 'many'" in result.stderr


def test_secrets_can_come_from_a_file(tmp_path, monkeypatch):
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    monkeypatch.setenv("AICONSOLE_SECRET_KEY_FILE", str(secret))
    assert console_settings.env_str("AICONSOLE_SECRET_KEY") == "from-a-file"


@pytest.mark.parametrize("reader, value, message", [
    (lambda: console_settings.env_bool("AICONSOLE_X", False), "maybe", "must be a boolean"),
    (lambda: console_settings.env_int("AICONSOLE_X", 1, minimum=1), "0", "must be at least 1"),
    (lambda: console_settings.env_float("AICONSOLE_X", 1.0), "fast", "must be a number"),
])
def test_typed_readers_reject_bad_values(monkeypatch, reader, value, message):
    monkeypatch.setenv("AICONSOLE_X", value)
    with pytest.raises(ImproperlyConfigured, match=message):
        reader()


def test_admin_activity_cannot_be_kept_for_less_than_400_days(tmp_path):
    result = _manage(["check"], tmp_path, AICONSOLE_AUDIT_ADMIN_ACTIVITY_RETENTION_DAYS="90")
    assert result.returncode != 0
    assert "AICONSOLE_AUDIT_ADMIN_ACTIVITY_RETENTION_DAYS must be at least 400, got 90" in result.stderr


def test_audit_retention_and_cloud_logging_defaults():
    assert console_settings.AUDIT_ADMIN_ACTIVITY_RETENTION_DAYS == 400
    assert console_settings.AUDIT_DATA_ACCESS_RETENTION_DAYS == 30
    assert console_settings.CLOUD_LOGGING_PROJECT is None

"""Settings come from the environment through typed readers that fail loudly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from console import settings as console_settings


def _manage(args: list[str], tmp_path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    clean.update({"AICONSOLE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True, env=clean, timeout=120)


def test_deploy_check_is_clean_for_production_settings(tmp_path):
    result = _manage(
        ["check", "--deploy", "--fail-level", "WARNING"],
        tmp_path,
        AICONSOLE_SECURE="true",
        AICONSOLE_SECRET_KEY="k" * 20 + "x7Q!mZ2#pL9$wR4^tY6&uI8*oP0(aS3)dF5",
        AICONSOLE_ALLOWED_HOSTS="console.example.com",
    )
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


@pytest.mark.parametrize(
    "reader, value, message",
    [
        (lambda: console_settings.env_bool("AICONSOLE_X", False), "maybe", "must be a boolean"),
        (lambda: console_settings.env_int("AICONSOLE_X", 1, minimum=1), "0", "must be at least 1"),
        (lambda: console_settings.env_float("AICONSOLE_X", 1.0), "fast", "must be a number"),
    ],
)
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


def _import_settings(data_dir, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    clean.update({"AICONSOLE_DATA_DIR": str(data_dir), **env})
    return subprocess.run(
        [sys.executable, "-c", "import console.settings"], capture_output=True, text=True, env=clean, timeout=60
    )


def test_importing_the_settings_touches_nothing_on_disk(tmp_path):
    data_dir = tmp_path / "not-yet"
    result = _import_settings(data_dir, AICONSOLE_SECRET_KEY="given")
    assert result.returncode == 0, result.stderr
    assert not data_dir.exists()

    # Without a key the settings say how to get one, and still make none.
    result = _import_settings(data_dir)
    assert result.returncode != 0
    assert "AICONSOLE_SECRET_KEY: not set, and" in result.stderr and "aiconsole up" in result.stderr
    assert not data_dir.exists()


@pytest.mark.slow
def test_an_entry_point_makes_the_data_dir_ready_once_with_a_private_key(tmp_path):
    data_dir = tmp_path / "data"
    assert _manage(["check"], data_dir).returncode == 0
    key = (data_dir / "secret_key").read_text()
    assert len(key) >= 64
    assert oct(os.stat(data_dir / "secret_key").st_mode & 0o777) == "0o600"
    assert oct(os.stat(data_dir).st_mode & 0o077) == "0o0"
    assert list(data_dir.glob(".secret_key.*")) == []  # no temporary file left behind

    assert _manage(["check"], data_dir).returncode == 0
    assert (data_dir / "secret_key").read_text() == key  # kept, not made again
    assert _import_settings(data_dir).returncode == 0


def test_console_processes_starting_together_agree_on_one_key(tmp_path):
    data_dir = tmp_path / "data"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    clean["AICONSOLE_DATA_DIR"] = str(data_dir)
    code = "from aiconsole import datadir; datadir.prepare(); from console import settings; print(settings.SECRET_KEY)"
    starts = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=clean) for _ in range(6)
    ]
    keys = {start.communicate(timeout=60)[0].strip() for start in starts}
    assert len(keys) == 1 and len(keys.pop()) >= 64

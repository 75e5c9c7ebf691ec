"""``aiconsole auth``: the config file, its permissions, and the order settings are taken in."""

from __future__ import annotations

import json
import stat

from console.cli import config


def test_login_writes_a_private_config_file_that_later_commands_use(cli, console, monkeypatch, tmp_path):
    path = tmp_path / "aiconsole-config.json"
    result = cli("auth", "login", "--url", console.url, "--token", console.token, "--project", "default-project")
    assert result.code == 0, result.err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": console.url, "token": console.token, "project": "default-project"}

    monkeypatch.delenv("AICONSOLE_URL")
    monkeypatch.delenv("AICONSOLE_TOKEN")
    listing = cli("jobs", "list", "--format", "json")
    assert listing.code == 0, listing.err

    status = cli("auth", "status")
    assert f"token:       {console.token[:4]}…" in status.out and f"(from {path})" in status.out
    assert cli("auth", "print-access-token").out.strip() == console.token

    assert cli("auth", "logout").code == 0
    assert json.loads(path.read_text()) == {"url": console.url, "project": "default-project"}
    unauthenticated = cli("jobs", "list")
    assert unauthenticated.code == 1 and "UNAUTHENTICATED" in unauthenticated.err
    assert "aiconsole auth login" in unauthenticated.err


def test_login_refuses_a_bad_token_and_saves_nothing(cli, console, tmp_path):
    result = cli("auth", "login", "--url", console.url, "--token", "aic_not-a-real-token")
    assert result.code == 1 and "refused the token" in result.err
    assert not (tmp_path / "aiconsole-config.json").exists()


def test_login_reads_the_token_from_stdin(run_aiconsole, console, tmp_path):
    path = tmp_path / "piped.json"
    result = _run_with_input(run_aiconsole, console.token + "\n", path, console.url)
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text())["token"] == console.token


def _run_with_input(run_aiconsole, text, path, url):
    import os
    import subprocess

    from tests.helpers.console import AICONSOLE

    return subprocess.run(
        [AICONSOLE, "auth", "login", "--url", url],
        input=text,
        capture_output=True,
        text=True,
        env={**os.environ, "AICONSOLE_CONFIG": str(path)},
        timeout=60,
    )


def test_unreachable_console_is_a_clear_error(cli):
    result = cli("jobs", "list", "--url", "http://127.0.0.1:9")
    assert result.code == 1
    assert "cannot reach the console at http://127.0.0.1:9" in result.err


def test_settings_come_from_flag_then_environment_then_file_then_default(monkeypatch, tmp_path):
    for name in ("AICONSOLE_URL", "AICONSOLE_TOKEN", "AICONSOLE_PROJECT", "AICONSOLE_REGION", "AICONSOLE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config.config_path() == tmp_path / "xdg" / "aiconsole" / "config.json"
    assert config.resolve().project == "default-project" and config.resolve().url == config.DEFAULT_URL

    written = config.save_file({"url": "http://file:1", "token": "file-token", "project": "file-project"})
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert config.resolve().project == "file-project"
    monkeypatch.setenv("AICONSOLE_PROJECT", "env-project")
    resolved = config.resolve({"url": "http://flag:2"})
    assert (resolved.url, resolved.token, resolved.project) == ("http://flag:2", "file-token", "env-project")
    assert resolved.sources == {
        "url": "--url flag",
        "token": str(written),
        "project": "$AICONSOLE_PROJECT",
        "region": "default",
    }

    written.write_text("{not json")
    try:
        config.resolve()
    except config.ConfigError as error:
        assert str(written) in str(error)
    else:
        raise AssertionError("a broken config file must be reported")

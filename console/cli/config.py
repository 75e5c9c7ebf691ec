"""Where the client commands find the console: its URL, an API token and the project.

Each setting comes from the first place that has it: the command-line flag, the environment
(``AICONSOLE_URL``, ``AICONSOLE_TOKEN``, ``AICONSOLE_PROJECT``, ``AICONSOLE_REGION``), then the
config file that ``aiconsole auth login`` writes, then a default. The file is
``$AICONSOLE_CONFIG`` when set, else ``$XDG_CONFIG_HOME/aiconsole/config.json`` (``~/.config``
when XDG_CONFIG_HOME is unset). It holds a token, so it is written with mode 0600 in a 0700
folder.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROJECT = "default-project"
KEYS = ("url", "token", "project", "region")


class ConfigError(Exception):
    """The config file exists but cannot be read; the message names it."""


def config_path() -> Path:
    override = os.environ.get("AICONSOLE_CONFIG")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "aiconsole" / "config.json"


def load_file() -> dict:
    """The config file's settings, or {} when there is none."""
    path = config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigError(f"cannot read the config file {path}: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConfigError(
            f"the config file {path} is not valid JSON ({error}); run 'aiconsole auth login' again or delete it"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"the config file {path} must hold a JSON object")
    return {key: str(value) for key, value in data.items() if key in KEYS and value not in (None, "")}


def save_file(settings: dict) -> Path:
    """Write the config file atomically, readable by its owner only."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".json")
    try:
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump({key: settings[key] for key in KEYS if settings.get(key)}, handle, indent=2)
            handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def delete_file() -> bool:
    try:
        config_path().unlink()
    except FileNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class Resolved:
    """The settings a client command uses, and where each came from (for ``auth status``)."""

    url: str
    token: str | None
    project: str
    region: str | None
    sources: dict[str, str]


_ENVIRONMENT = {
    "url": "AICONSOLE_URL",
    "token": "AICONSOLE_TOKEN",
    "project": "AICONSOLE_PROJECT",
    "region": "AICONSOLE_REGION",
}
_DEFAULTS = {"url": DEFAULT_URL, "token": None, "project": DEFAULT_PROJECT, "region": None}


def resolve(flags: dict[str, str | None] | None = None) -> Resolved:
    """Each setting from its flag, else the environment, else the config file, else the default."""
    flags = flags or {}
    from_file: dict | None = None
    values: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        if flags.get(key):
            values[key], sources[key] = flags[key], f"--{key} flag"
            continue
        variable = _ENVIRONMENT[key]
        if os.environ.get(variable):
            values[key], sources[key] = os.environ[variable], f"${variable}"
            continue
        if from_file is None:
            from_file = load_file()
        if from_file.get(key):
            values[key], sources[key] = from_file[key], str(config_path())
            continue
        values[key], sources[key] = _DEFAULTS[key], "default"
    return Resolved(
        url=(values["url"] or DEFAULT_URL).rstrip("/"),
        token=values["token"],
        project=values["project"] or DEFAULT_PROJECT,
        region=values["region"],
        sources=sources,
    )

"""The data dir: where it is, and making it ready.

Reading the settings touches nothing on disk. The console's entry points (every ``aiconsole``
command, ``manage.py``) call :func:`prepare` once before Django starts: it creates the data dir,
takes group and other access away from what an older console left readable, and creates the
embedded default's secret key. The settings only read that key.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

ROOT_DATA_DIR = Path("/var/lib/aiconsole")
SECRET_KEY_FILE = "secret_key"
STATIC_FOLDER = "staticfiles"


def location() -> Path:
    """``AICONSOLE_DATA_DIR``, else ``~/.aiconsole``; as root ``/var/lib/aiconsole``, since
    trainers then run as another user (aiconsole.trainer_user) who must reach it, and root's home
    is private. A root console that already keeps its database in ``~/.aiconsole`` keeps using it
    (and says how to move it)."""
    configured = os.environ.get("AICONSOLE_DATA_DIR", "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    home = Path.home() / ".aiconsole"
    if os.geteuid() != 0 or (home / "aiconsole.sqlite3").exists():
        return home.resolve()
    return ROOT_DATA_DIR


def prepare(data_dir: Path | None = None) -> Path:
    """Make the data dir ready for a console process; safe to call from every process, at once."""
    data_dir = data_dir or location()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    keep_private(data_dir, data_dir / SECRET_KEY_FILE, *data_dir.glob("*.sqlite3*"))
    if not os.environ.get("AICONSOLE_SECRET_KEY") and not os.environ.get("AICONSOLE_SECRET_KEY_FILE"):
        _create_secret_key(data_dir / SECRET_KEY_FILE)
    (data_dir / STATIC_FOLDER).mkdir(mode=0o700, exist_ok=True)
    return data_dir


def secret_key(data_dir: Path) -> str:
    """The embedded default's key, made by :func:`prepare`."""
    key_file = data_dir / SECRET_KEY_FILE
    try:
        key = key_file.read_text().strip()
    except FileNotFoundError:
        raise ImproperlyConfigured(
            f"AICONSOLE_SECRET_KEY: not set, and {key_file} does not exist. Start the console once "
            f"with `aiconsole up` (any `aiconsole` command makes the data dir ready), or set "
            f"AICONSOLE_SECRET_KEY."
        ) from None
    if not key:
        raise ImproperlyConfigured(f"AICONSOLE_SECRET_KEY: {key_file} is empty; delete it to have a new key made.")
    return key


def keep_private(*paths: Path) -> None:
    """Take group and other access away from what an older console (or another umask) left
    readable: the data dir holds the database with its sessions, and the secret key. What the
    console creates from now on is private already (the entry points set umask 077)."""
    for path in paths:
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        # Never a link, nothing of another user's, never a shared sticky folder such as /tmp.
        if info.st_uid != os.geteuid() or stat.S_ISLNK(info.st_mode) or info.st_mode & stat.S_ISVTX:
            continue
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            # Execute only: the projects' accounts traverse to their folders and list nothing.
            if mode & 0o076:
                path.chmod(mode & 0o701)
        elif mode & 0o077:
            path.chmod(0o600)


def _create_secret_key(key_file: Path) -> None:
    """Write the key in full to a private temporary file, then link it into place: no process
    ever sees it half-written or with looser permissions, and of two processes starting at once
    the first link wins and the other reads the same key."""
    if key_file.exists():
        return
    descriptor, temporary = tempfile.mkstemp(dir=key_file.parent, prefix=".secret_key.")  # mode 0600
    try:
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_urlsafe(64))
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, key_file)
        except FileExistsError:
            pass
    finally:
        os.unlink(temporary)

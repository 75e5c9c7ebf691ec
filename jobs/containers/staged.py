"""What a container is given through the console's private folder: the host folders it sees,
bound through no path a trainer can change, and its environment, read from no command line.

The engine resolves a bind mount's source path as root when the container starts. A job dir, a
replica's folder and a stored input lie in folders the project's account may write: a trainer of
the same project that owns a folder on the path can swap it for a link (``renameat2`` exchange)
between the console's checks and the engine's mount, and have any host folder mounted, read-write.

So each folder is opened first, beneath a folder no trainer can change, one component at a time,
never through a link (``TrainerUser.opened``); the descriptor is bound (``MS_BIND``) onto a fresh
mount point in the console's private ``DATA_DIR/mounts/<container>/``; and the engine is given that
mount point, which no trainer can reach, let alone swap. What the engine mounts is the very folder
that was opened. The mount points are unmounted when the container is removed, and a console that
was killed has what it left unmounted at its next start (:func:`sweep`).

A console that does not switch accounts (not root, or ``AICONSOLE_TRAINER_USER=root``) runs its
containers as the user its trainers are anyway, and gives the engine the paths themselves.

A container's variables (``TF_CONFIG`` with the whole job, a Vertex job's ``containerSpec.env``)
went to the engine as ``--env KEY=VALUE``, on a command line every account can read
(``/proc/*/cmdline``). They go in a file in the same private folder (``--env-file``); a value with
a line break, which such a file cannot hold, becomes a podman secret the container sees as that
variable (docker has no such secrets, and refuses it).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat
import time
from pathlib import Path

from django.conf import settings

from aiconsole import trainer_user
from jobs.containers import engine as engines

logger = logging.getLogger(__name__)

FOLDER = "staged"  # DATA_DIR/staged/<container>/: mount points and the env file
MS_BIND = 4096
MNT_DETACH = 2


class StagingRefused(Exception):
    """A folder or a variable cannot be given to a container safely; the message says which, and why."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def root() -> Path:
    return settings.DATA_DIR / FOLDER


ENV_FILE = "env"


class Staged:
    """What one container is given, staged in a private folder named after it."""

    def __init__(self, container: str, account: trainer_user.TrainerUser | None, engine: engines.Engine | None = None):
        self.container = container
        self.account = account
        self.engine = engine
        self.folder = root() / container
        self.secrets: list[str] = []

    def volumes(self, writable: list[Path], readable: list[Path]) -> list[str]:
        """The engine's ``--volume`` options: each folder at its own path in the container,
        ``writable`` read-write and ``readable`` read-only, staged where accounts switch."""
        wanted = [(path, "rw") for path in writable] + [(path, "ro") for path in readable]
        if self.account is None:
            return [option for path, mode in wanted for option in ("--volume", f"{path}:{path}:{mode}")]
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        options = []
        try:
            for index, (path, mode) in enumerate(wanted):
                if mode == "ro" and Path(path).is_relative_to(settings.ENV_DIR):
                    # A job's installed packages: written by the console, which no account may change.
                    options += ["--volume", f"{path}:{path}:ro"]
                    continue
                options += ["--volume", f"{self._stage(index, Path(path))}:{path}:{mode}"]
        except (OSError, trainer_user.TrainerUserError) as error:
            self.release()
            raise StagingRefused(
                f"{path} cannot be mounted in the container: {getattr(error, 'strerror', None) or error}. "
                "A folder on its path is a link, or changed while the console opened it."
            ) from None
        except BaseException:
            self.release()
            raise
        return options

    def _stage(self, index: int, path: Path) -> Path:
        assert self.account is not None
        with self.account.opened(path) as descriptor:
            point = self.folder / f"mount-{index}"
            if stat.S_ISDIR(os.fstat(descriptor).st_mode):
                point.mkdir(mode=0o700)
            else:
                point.touch(mode=0o600, exist_ok=False)
            if _libc().mount(f"/proc/self/fd/{descriptor}".encode(), str(point).encode(), None, MS_BIND, None) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"Could not mount {path} for the container: {os.strerror(code)}")
        return point

    def environment(self, env: dict[str, str]) -> list[str]:
        """The engine's options that give the container ``env``: a file only the console reads,
        and a secret per value with a line break."""
        assert self.engine is not None
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        lines, options = [], []
        for key, value in env.items():
            if "\n" not in value and "\r" not in value and "\0" not in value:
                lines.append(f"{key}={value}\n")
                continue
            if not self.engine.is_podman:
                raise StagingRefused(f"The variable {key} has a line break in its value, which docker cannot be given.")
            secret = f"{self.container}-env-{len(self.secrets)}"
            try:
                self.engine.call("secret", "rm", secret)  # one a killed console left under this name
            except engines.EngineError:
                pass
            self.engine.call("secret", "create", secret, "-", input=value.encode())
            self.secrets.append(secret)
            options += ["--secret", f"{secret},type=env,target={key}"]
        path = self.folder / ENV_FILE
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        return ["--env-file", str(path), *options]

    def release(self) -> None:
        """Unmount and remove the container's mount points, its env file and secrets (also those
        a killed console left)."""
        release_folder(self.folder)
        for secret in self.secrets:
            assert self.engine is not None  # it made them
            try:
                self.engine.call("secret", "rm", secret)
            except engines.EngineError as error:
                logger.warning("Could not remove the secret %s: %s", secret, error)
        self.secrets = []


def release_folder(folder: Path) -> None:
    """Unmount each mount point in ``folder`` and remove it; never a walk into what is mounted."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        point = folder / name
        if _libc().umount2(str(point).encode(), MNT_DETACH) != 0:
            code = ctypes.get_errno()
            if code not in (errno.EINVAL, errno.ENOENT):  # EINVAL: not (or no longer) a mount point
                logger.warning("Could not unmount %s: %s", point, os.strerror(code))
                continue
        try:
            if point.is_dir() and not point.is_symlink():
                point.rmdir()  # never a walk: a folder still mounted is left alone, never emptied
            else:
                point.unlink()
        except OSError as error:
            logger.warning("Could not remove the mount point %s: %s", point, error)
    try:
        folder.rmdir()
    except OSError:
        pass


def sweep(engine: engines.Engine, live: set[str], prefix: str, min_age: float = 0.0) -> None:
    """Release what containers that no longer exist were given (a console killed before it removed
    them): ``live``, the names of this console's containers that still do; ``prefix``, the start of
    every name this console gives its containers; ``min_age``, seconds a folder must have existed
    (scaled mode: another worker on this host may be staging a container it has not created yet)."""
    try:
        names = os.listdir(root())
    except FileNotFoundError:
        names = []
    now = time.time()
    for name in names:
        if name in live:
            continue
        try:
            if now - (root() / name).lstat().st_mtime < min_age:
                continue
        except FileNotFoundError:
            continue
        release_folder(root() / name)
    if not engine.is_podman:
        return
    try:
        secrets = engine.call("secret", "ls", "--format", "{{.Name}}").split()
    except engines.EngineError:
        return
    for secret in secrets:
        if secret.startswith(prefix) and secret.rsplit("-env-", 1)[0] not in live:
            try:
                engine.call("secret", "rm", secret)
            except engines.EngineError:
                pass


def release_all() -> None:
    """Release every mount point and env file (a test run's data dir, before it is removed: a
    removal that walked into a mount would empty the folder mounted there)."""
    for name in os.listdir(root()) if root().is_dir() else []:
        release_folder(root() / name)

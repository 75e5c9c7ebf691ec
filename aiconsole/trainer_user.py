"""Trainers run as an unprivileged user when the console runs as root.

A trainer is the user's own code. Run as the console's user, it could read what the console holds:
the process environment (``/proc/<pid>/environ``), the database file with its sessions, the secret
key. When the console runs as root, every trainer replica therefore runs as
``AICONSOLE_TRAINER_USER`` (default ``aiconsole-trainer``, a system account created on first use),
with that account's own group and no other:
- it owns its replica's working directory and its job dir, and nothing else;
- it may traverse (not list) the data dir, the work dir and the storage dir, which carry its group
  with the group-execute bit only, and read the Python environments (group read);
- the database, the secret key, the console's environment and every other job's packages stay
  the console's (0600/0700, owned by root).

An interpreter that the trainer cannot reach (pyenv under ``/root``, which is 0700) is copied once,
without its site-packages, into the environment cache, so runtime versions keep working.

``AICONSOLE_TRAINER_USER=root`` turns this off (trainers then run as root, as the console does; the
console says so at start). A console that does not run as root cannot switch users: its trainers
run as its own user, and SECURITY.md says what that isolates.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from aiconsole import datadir
from aiconsole.walks import WalkLimitError, walk_files

DEFAULT_NAME = "aiconsole-trainer"
# Where a copied interpreter goes, inside settings.ENV_DIR.
PYTHONS_FOLDER = "pythons"
SHARED_MARKER = ".trainer-readable"


class TrainerUserError(Exception):
    """The trainer user cannot be created or used; the message says what to change."""


@dataclass(frozen=True)
class TrainerUser:
    name: str
    uid: int
    gid: int

    def popen_options(self) -> dict:
        """subprocess.Popen's keywords that start a process as this user, with its group only."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def environment(self, home: Path) -> dict[str, str]:
        """What a process of this user is told about itself: its own folder is its home (the
        console's home is not its to write)."""
        return {"HOME": str(home), "USER": self.name, "LOGNAME": self.name}

    def reaper_option(self) -> list[str]:
        return ["--user", f"{self.uid}:{self.gid}"]

    # --- what a trainer may reach ----------------------------------------------------------

    def hand_over(self, path: Path, *, base: Path) -> None:
        """Give ``path`` (a replica's working dir, a job dir) and what it holds to this user, and
        let it traverse every folder from ``base`` down to it. Folders the console does not own
        (a shared storage root an admin made) are left as they are."""
        path = Path(path)
        self.traverse(path.parent, base=base)
        if path.lstat().st_uid == self.uid:
            return  # handed over before: what is in it is the trainers' own
        for entry in _tree(path):
            try:
                os.lchown(entry, self.uid, self.gid)
            except FileNotFoundError:
                continue

    def traverse(self, folder: Path, *, base: Path) -> None:
        """Group-execute (not read) on ``base`` and every folder below it down to ``folder``."""
        folder, base = Path(folder), Path(base)
        if not folder.is_relative_to(base):
            base = folder  # not below base: only the folder itself
        self._open(base)
        for part in folder.relative_to(base).parts:
            base = base / part
            self._open(base)

    def share(self, tree: Path) -> None:
        """Make an environment readable by this user's group (once; a marker remembers it).

        uv hard-links files from its cache, so the files carry the cache's owner and mode: the
        walk fixes every one. Nothing is made writable."""
        tree = Path(tree)
        marker = tree / SHARED_MARKER
        if marker.is_file() and marker.read_text().strip() == str(self.gid):
            return
        for entry in _tree(tree, bounded=False):
            self._let_group_read(entry)
        self.traverse(tree.parent, base=tree.parent)
        marker.write_text(f"{self.gid}\n")

    def share_files(self, path: Path) -> None:
        """Group-read on a file, or on a folder and what it holds (bounded; links are not
        followed), for files and folders the console owns."""

        entries = [path]
        if path.is_dir() and not path.is_symlink():
            files = list(walk_files(path))
            folders = {folder for f in files for folder in f.parents if folder.is_relative_to(path)}
            entries += sorted(folders - {path}) + files
        for entry in entries:
            self._let_group_read(entry)

    def _let_group_read(self, entry: Path) -> None:
        """Group-read (and group-execute on folders and executables) for this user's group, on
        a file or folder the console owns that others may not read already; never a link."""
        try:
            info = entry.lstat()
        except FileNotFoundError:
            return
        mode = stat.S_IMODE(info.st_mode)
        if info.st_uid != os.geteuid() or stat.S_ISLNK(info.st_mode) or mode & 0o004:
            return
        wanted = mode | 0o040 | (0o010 if mode & 0o100 or stat.S_ISDIR(info.st_mode) else 0)
        if info.st_gid != self.gid:
            os.chown(entry, -1, self.gid)
        if wanted != mode:
            os.chmod(entry, wanted)

    def _open(self, folder: Path) -> None:
        try:
            info = folder.lstat()
        except FileNotFoundError:
            return
        if info.st_uid != os.geteuid() or not stat.S_ISDIR(info.st_mode):
            return
        if info.st_gid != self.gid and not stat.S_IMODE(info.st_mode) & 0o001:
            os.chown(folder, -1, self.gid)
        if not stat.S_IMODE(info.st_mode) & 0o011:
            os.chmod(folder, stat.S_IMODE(info.st_mode) | 0o010)

    # --- interpreters ----------------------------------------------------------------------

    def can_run(self, python: str) -> bool:
        try:
            result = subprocess.run([python, "-I", "-S", "-c", "pass"], capture_output=True, timeout=60,
                                    cwd="/", env={"PATH": os.defpath}, **self.popen_options())
        except (OSError, subprocess.SubprocessError):
            return False
        return result.returncode == 0

    def reachable_python(self, python: str, log=lambda message: None) -> str:
        """``python``, or a copy of its installation this user can run, made once."""
        if self.can_run(python):
            return python
        prefix = Path(subprocess.run([python, "-I", "-S", "-c", "import sys; print(sys.base_prefix)"],
                                     capture_output=True, text=True, check=True).stdout.strip())
        relative = Path(python).resolve().relative_to(prefix.resolve())
        digest = hashlib.sha256(str(prefix.resolve()).encode()).hexdigest()[:12]
        target = settings.ENV_DIR / PYTHONS_FOLDER / f"{prefix.name}-{digest}"
        copied = target / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / f".{target.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one copy, whoever asks for it at the same time
            if not (target / SHARED_MARKER).is_file():
                log(f"The trainer user {self.name} cannot read {prefix}; copying that Python installation "
                    f"(without its site-packages) to {target}, once.")
                _copy_installation(prefix, target)
                self.share(target)
        if not self.can_run(str(copied)):
            raise TrainerUserError(
                f"Trainers run as {self.name}, which can read neither {python} nor its copy in {target}. "
                "Install that Python where every user can read it (for example under /usr/local) and "
                "name it in AICONSOLE_PYTHONS.")
        return str(copied)


def _tree(root: Path, *, bounded: bool = True):
    """``root`` and everything below it, folders before their contents, never through a link;
    ``bounded``: at most ``settings.WALK_MAX_ENTRIES`` entries (a job dir is the user's to fill;
    an environment is the console's own)."""

    yield root
    seen = 0
    for folder, folders, files in os.walk(root, followlinks=False):
        for name in folders + files:
            seen += 1
            if bounded and seen > settings.WALK_MAX_ENTRIES:
                raise WalkLimitError(f"{root} holds more than {settings.WALK_MAX_ENTRIES} files and folders, "
                                     "the most the console hands over to the trainer user (AICONSOLE_WALK_MAX_ENTRIES).")
            yield Path(folder) / name


def _copy_installation(prefix: Path, target: Path) -> None:
    """Copy a Python installation without site-packages, and point its executables' library
    search path at the copy (``$ORIGIN/../lib``), as a relocatable build would have it."""
    scratch = target.with_name(target.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(prefix, scratch, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n == "site-packages"])
    for name in os.listdir(scratch / "bin"):
        _relocate_runpath(scratch / "bin" / name, str(prefix / "lib"))
    for site in scratch.glob("lib/python*"):
        if site.is_dir():
            (site / "site-packages").mkdir(exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)


def _relocate_runpath(executable: Path, old: str) -> None:
    """Rewrite an ELF's RUNPATH entry ``old`` to ``$ORIGIN/../lib`` in place (padded with NULs):
    the string table keeps its size, so nothing else in the file moves."""
    if executable.is_symlink() or not executable.is_file():
        return
    data = executable.read_bytes()
    if not data.startswith(b"\x7fELF"):
        return
    needle = old.encode() + b"\0"
    new = b"$ORIGIN/../lib"
    if data.count(needle) != 1 or len(new) > len(old):
        return
    start = data.index(needle)
    executable.write_bytes(data[:start] + new + b"\0" * (len(needle) - len(new)) + data[start + len(needle):])


# --- who trainers run as ---------------------------------------------------------------------


def switching() -> bool:
    """Whether trainers run as another user than the console's: only a root console can."""
    return os.geteuid() == 0 and settings.TRAINER_USER not in ("", "root")


_creating = threading.Lock()


@functools.cache
def current() -> TrainerUser | None:
    """The user trainers run as, created on first use; None when they run as the console's user."""
    if not switching():
        return None
    with _creating:
        return _account(settings.TRAINER_USER)


def _account(name: str) -> TrainerUser:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _create(name)
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise TrainerUserError(f"AICONSOLE_TRAINER_USER={name} has user or group id 0: trainers would run as root. "
                               "Name an unprivileged account.")
    user = TrainerUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid)
    for folder in (settings.DATA_DIR, settings.WORK_DIR, settings.STORAGE_DIR, settings.ENV_DIR):
        folder.mkdir(parents=True, exist_ok=True)
        user.traverse(folder, base=folder)
        blocked = unreachable_ancestor(folder, gid=user.gid)
        if blocked:
            home = Path.home() / ".aiconsole"
            move = (f" This is the data dir of an earlier root console: move it with `mv {home} {datadir.ROOT_DATA_DIR}` "
                    "(then the default) and start again." if folder == home.resolve() else "")
            raise TrainerUserError(
                f"Trainers run as {name}, which cannot reach {folder}: {blocked} lets only its owner in.{move} "
                f"Otherwise choose a folder others may traverse (AICONSOLE_DATA_DIR, for example {datadir.ROOT_DATA_DIR}), "
                "or set AICONSOLE_TRAINER_USER=root to run trainers as root.")
    return user


def base_of(folder: Path, bases) -> Path:
    """The first of ``bases`` that holds ``folder`` (the folders from it down are opened to the
    trainer user), else ``folder`` itself."""
    return next((Path(base) for base in bases if Path(folder).is_relative_to(base)), Path(folder))


def give_job_dir(job_dir: str) -> str:
    """A local job dir becomes the trainer user's (it may write nothing else in storage)."""
    user = current()
    if user and not job_dir.startswith("gs://"):
        path = Path(job_dir)
        user.hand_over(path, base=base_of(path, settings.STORAGE_ROOTS))
    return job_dir


def lend_inputs(args: list[str], *, project) -> list[Path]:
    """Let the trainer user read the local files and folders a job names in its arguments
    (``--train-files=PATH`` or ``PATH``) that lie in the project's storage area or a shared root:
    a dataset the console stored is private to the console until a job of that project names it.
    Other paths are left alone (the trainer reads what the operating system lets it). Returns
    what was lent."""
    from aiconsole import storage  # storage is heavier (Cloud Storage client); only a job needs it

    user = current()
    if user is None:
        return []
    lent = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not value.startswith(("/", "file://")) or "\0" in value:
            continue
        try:
            path = storage.resolve_local_path(value, project=project)
        except storage.StorageError:
            continue
        user.traverse(path.parent, base=base_of(path.parent, settings.STORAGE_ROOTS))
        user.share_files(path)
        lent.append(path)
    return lent


def _create(name: str) -> None:
    """A system account with its own group, no home and no login shell."""
    nologin = next((p for p in ("/usr/sbin/nologin", "/sbin/nologin") if os.path.exists(p)), "/bin/false")
    commands = [["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                 "--shell", nologin, name],
                ["adduser", "-S", "-D", "-H", "-h", "/nonexistent", "-s", nologin, name]]  # busybox
    errors = []
    for command in commands:
        if not shutil.which(command[0]):
            continue
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode == 0 or _exists(name):  # another process made it at the same moment
            return
        errors.append(result.stderr.strip() or f"{command[0]} exited with {result.returncode}")
    raise TrainerUserError(f"Could not create the trainer user {name} (AICONSOLE_TRAINER_USER): "
                           + ("; ".join(errors) or "neither useradd nor adduser is installed") + ".")


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def unreachable_ancestor(folder: Path, *, gid: int) -> Path | None:
    """The first folder above ``folder`` that the group ``gid`` may not traverse, if any."""
    for parent in reversed(Path(folder).parents):
        try:
            info = parent.stat()
        except OSError:
            return parent
        if not (info.st_mode & 0o001 or (info.st_gid == gid and info.st_mode & 0o010)):
            return parent
    return None


def describe() -> str:
    """One line for the console's start-up output."""
    if os.geteuid() != 0:
        return f"Trainers run as {pwd.getpwuid(os.geteuid()).pw_name}, the console's own user."
    if not switching():
        return ("Trainers run as root (AICONSOLE_TRAINER_USER=root): they can read the console's secrets. "
                "Unset it to run them as an unprivileged user.")
    user = current()
    return f"Trainers run as {user.name} (uid {user.uid}), not as root."


"""Each project's code runs as an account of that project's own when the console runs as root.

A trainer, a TensorBoard reading its job dir and a deployed model (a pickle is code) are the
user's code. When the console runs as root, each runs as the account of its project: a user and a
group with one number from ``AICONSOLE_TRAINER_UIDS``, allocated once per project in the database
(so every worker host gives it the same number) and created on each host on first use. The kernel
then keeps projects apart: one project's code cannot read another's files or ``/proc/<pid>``,
signal its processes or attach a debugger to them, and none can reach the console's.

What an account may reach:
- the folders down to its own, by name (others may traverse the data, work, storage and
  environment dirs, list nothing); its project's areas (``STORAGE_DIR/<folder>/<project>/``,
  ``WORK_DIR/<project>/``) carry its group, with group-execute only;
- its replicas' working dirs, its job dirs and its boards' and serving processes' folders, which
  it owns (:meth:`TrainerUser.hand_over`);
- the runtime environments and interpreter copies (readable by all, writable by the console only),
  and its own job environments (readable by its group);
- a stored input a job of its project names in its arguments, for that job's life
  (:func:`lend_inputs`, :func:`take_back_inputs`).

Every change of owner or mode is made on a descriptor reached beneath a folder no trainer can
change, never through a path (``aiconsole.beneath``).

``AICONSOLE_TRAINER_USER=root`` turns this off (everything then runs as root; the console says so
at start). A console that does not run as root cannot switch users: everything runs as its own
user, and SECURITY.md says what that isolates.
"""

from __future__ import annotations

import fcntl
import functools
import grp
import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from aiconsole import beneath, datadir

# Where a copied interpreter goes, inside settings.ENV_DIR.
PYTHONS_FOLDER = "pythons"
SHARED_MARKER = ".trainer-readable"
NAME_PREFIX = "aic-"
LEGACY_ACCOUNT = "aiconsole-trainer"  # the one shared account of earlier versions
# Runs interpreters to see whether any unprivileged account can (no such account need exist).
PROBE_ID = 65534


class TrainerUserError(Exception):
    """A project's account cannot be created or used; the message says what to change."""


@dataclass(frozen=True)
class TrainerUser:
    """A project's account: user and group ``uid`` (the group has the same number)."""

    name: str
    uid: int
    project_id: str

    @property
    def gid(self) -> int:
        return self.uid

    def popen_options(self) -> dict:
        """subprocess.Popen's keywords that start a process as this account, with its group only."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def environment(self, home: Path) -> dict[str, str]:
        """What a process of this account is told about itself: its own folder is its home."""
        return {"HOME": str(home), "USER": self.name, "LOGNAME": self.name}

    def reaper_option(self) -> list[str]:
        return ["--user", f"{self.uid}:{self.gid}"]

    # --- what its processes may reach ------------------------------------------------------

    def hand_over(self, path: Path) -> None:
        """Give ``path`` (a replica's working dir, a job dir, a board's home) and what the console
        or an earlier account of trainers left in it to this account, and let it traverse the
        folders above it. Done once: a folder it owns already is its own, contents and all."""
        path = Path(path)
        base, area = self._place(path)
        self.traverse(path.parent)
        with beneath.folder(base, path) as descriptor:
            if os.fstat(descriptor).st_uid == self.uid:
                return
        takeable = {os.geteuid(), *_legacy_uid()}

        def take(descriptor: int, info: os.stat_result) -> None:
            if info.st_uid in takeable and not beneath.suspicious_link_count(info):
                beneath.change(descriptor, uid=self.uid, gid=self.gid)

        beneath.tree(base, path, take, max_entries=settings.WALK_MAX_ENTRIES, what=str(path))

    def traverse(self, folder: Path) -> None:
        """Execute (not read) on every folder from the trusted base down to ``folder``: for others
        above the project's area, for this account's group from the area down."""
        folder = Path(folder)
        base, area = self._place(folder, above=True)
        parts = beneath.relative_parts(base, folder)
        own_from = len(beneath.relative_parts(base, area)) if area else len(parts) + 1

        def open_up(descriptor: int, depth: int) -> None:
            info = os.fstat(descriptor)
            if info.st_uid != os.geteuid():
                return  # not the console's (a trainer's own folder, a shared root an admin made)
            mode = stat.S_IMODE(info.st_mode)
            if depth < own_from:
                if not mode & 0o001:
                    os.fchmod(descriptor, mode | 0o001)
                return
            wanted = mode | 0o010
            if info.st_gid != self.gid:
                os.fchown(descriptor, -1, self.gid)
                wanted = (mode & ~0o070) | 0o010  # what the folder's earlier group could do is not this group's
            if wanted != mode:
                os.fchmod(descriptor, wanted)

        _each_folder(base, parts, open_up)

    def lend(self, path: Path) -> bool:
        """Group-read for this account on a stored file, or a folder and what it holds (bounded,
        links never followed), in the project's area; True when anything was lent. Files of a
        shared root keep the permissions their operator gave them."""
        path = Path(path)
        base, area = self._place(path)
        if area is None:
            return False
        self.traverse(path.parent)
        lent = []

        def grant(descriptor: int, info: os.stat_result) -> None:
            if info.st_uid != os.geteuid() or beneath.suspicious_link_count(info):
                return
            mode = stat.S_IMODE(info.st_mode)
            wanted = 0o040 | (0o010 if stat.S_ISDIR(info.st_mode) or mode & 0o100 else 0)
            if info.st_gid != self.gid:
                beneath.change(descriptor, gid=self.gid, mode=(mode & ~0o070) | wanted)
            elif mode & wanted != wanted:
                beneath.change(descriptor, mode=mode | wanted)
            lent.append(True)

        beneath.tree(base, path, grant, max_entries=settings.WALK_MAX_ENTRIES, what=str(path))
        return bool(lent)

    def take_back(self, path: Path) -> None:
        """Undo :meth:`lend`: this group may no longer read what the console owns under ``path``.
        Folders keep group-execute, since other jobs' folders may lie below them."""
        path = Path(path)
        base, area = self._place(path)
        if area is None:
            return

        def revoke(descriptor: int, info: os.stat_result) -> None:
            if info.st_uid != os.geteuid() or info.st_gid != self.gid:
                return
            mode = stat.S_IMODE(info.st_mode)
            wanted = mode & ~(0o040 if stat.S_ISDIR(info.st_mode) else 0o070)
            if wanted != mode:
                beneath.change(descriptor, mode=wanted)

        try:
            beneath.tree(base, path, revoke, max_entries=settings.WALK_MAX_ENTRIES, what=str(path))
        except FileNotFoundError:
            pass

    def share(self, tree: Path) -> None:
        """Make a job environment (the project's packages on a runtime) readable by this group."""
        tree = Path(tree)
        marker = tree / SHARED_MARKER
        if marker.is_file() and marker.read_text().strip() == f"group {self.gid}":
            return

        def readable(descriptor: int, info: os.stat_result) -> None:
            if info.st_uid != os.geteuid():
                return
            mode = stat.S_IMODE(info.st_mode)
            wanted = 0o040 | (0o010 if stat.S_ISDIR(info.st_mode) or mode & 0o100 else 0)
            if info.st_gid != self.gid or mode & 0o077 != mode & 0o070 or mode & wanted != wanted:
                beneath.change(descriptor, gid=self.gid, mode=(mode & ~0o077) | (mode & 0o070) | wanted)

        beneath.tree(tree.parent, tree, readable, max_entries=2**31, what=str(tree))
        _open_to_others(tree.parent, tree.parent)
        marker.write_text(f"group {self.gid}\n")

    @contextmanager
    def opened(self, path: Path) -> Iterator[int]:
        """An ``O_PATH`` descriptor of the folder or regular file ``path``, reached beneath the
        folder no trainer can change that it lies under, through no link: what a bind mount of it
        then mounts is what was opened, whatever the path says by then (jobs/containers/mounts.py)."""
        path = Path(path)
        base, _ = self._place(path)
        if path == base:
            descriptor = os.open(base, os.O_PATH | os.O_CLOEXEC)
        else:
            with beneath.folder(base, path.parent) as parent:
                descriptor = os.open(path.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            info = os.fstat(descriptor)
            if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)) or beneath.suspicious_link_count(info):
                raise beneath.Refused(f"{path} is neither a folder nor a regular file of its own")
            yield descriptor
        finally:
            os.close(descriptor)

    # --- where a path lies -------------------------------------------------------------------

    def _place(self, path: Path, *, above: bool = False) -> tuple[Path, Path | None]:
        """The folder no trainer can change that ``path`` lies under, and the project's own area
        under it (None for a shared root, which belongs to every project). ``above``: ``path``
        may also be a folder every project shares on the way to the areas (``STORAGE_DIR/<folder>``),
        with no area of its own."""
        path = Path(path)
        storage_dir, *shared = settings.STORAGE_ROOTS
        per_project = [(storage_dir, 2), (settings.WORK_DIR, 1), (settings.MODELS_DIR, 1)]
        for base, depth in per_project:
            if path.is_relative_to(base):
                parts = path.relative_to(base).parts
                if len(parts) >= depth and parts[depth - 1] == self.project_id:
                    return base, base.joinpath(*parts[:depth])
                if above and len(parts) < depth:
                    return base, None
                if base == storage_dir and any(path.is_relative_to(root) for root in shared):
                    break  # a shared root inside the storage dir
                raise TrainerUserError(f"{path} is not in projects/{self.project_id}'s own folders.")
        for root in shared:
            if path.is_relative_to(root):
                return Path(root), None
        raise TrainerUserError(f"{path} is in none of the folders the console gives to trainers.")


def _each_folder(base: Path, parts: tuple[str, ...], visit) -> None:
    """``visit(descriptor, depth)`` on ``base`` (depth 0) and each folder below it along ``parts``,
    opened one at a time without following links; stops where a folder is missing."""
    descriptor = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        visit(descriptor, 0)
        for depth, part in enumerate(parts, start=1):
            try:
                child = os.open(part, beneath.DIRECTORY, dir_fd=descriptor)
            except FileNotFoundError:
                return
            os.close(descriptor)
            descriptor = child
            visit(descriptor, depth)
    finally:
        os.close(descriptor)


def _open_to_others(base: Path, folder: Path) -> None:
    """Others may traverse ``base`` and every folder down to ``folder`` that the console owns."""

    def open_up(descriptor: int, depth: int) -> None:
        info = os.fstat(descriptor)
        if info.st_uid == os.geteuid() and not info.st_mode & 0o001:
            os.fchmod(descriptor, stat.S_IMODE(info.st_mode) | 0o001)

    _each_folder(base, beneath.relative_parts(base, folder), open_up)


def open_to_all(tree: Path) -> None:
    """Make a runtime environment or an interpreter copy readable by every account (once; a marker
    remembers it). uv hard-links files from its cache, with the cache's owner and mode, so the walk
    fixes every one. Nothing is made writable. The console alone writes the environment dir."""
    tree = Path(tree)
    marker = tree / SHARED_MARKER
    if marker.is_file() and marker.read_text().strip() == "all":
        return

    def readable(descriptor: int, info: os.stat_result) -> None:
        if info.st_uid != os.geteuid():
            return
        mode = stat.S_IMODE(info.st_mode)
        wanted = 0o004 | (0o001 if stat.S_ISDIR(info.st_mode) or mode & 0o100 else 0)
        if mode & wanted != wanted:
            beneath.change(descriptor, mode=mode | wanted)

    beneath.tree(tree.parent, tree, readable, max_entries=2**31, what=str(tree))
    _open_to_others(tree.parent, tree.parent)
    marker.write_text("all\n")


@functools.cache
def _legacy_uid() -> tuple[int, ...]:
    try:
        return (pwd.getpwnam(LEGACY_ACCOUNT).pw_uid,)
    except KeyError:
        return ()


# --- interpreters -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def can_run(python: str) -> bool:
    """Whether an unprivileged account can run ``python``: asked once per interpreter and process
    (it starts the interpreter, tens of milliseconds every job would otherwise pay)."""
    return _probe_runs((python, "-I", "-S", "-c", "pass"))


def _probe_runs(command: tuple[str, ...]) -> bool:
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            timeout=60,
            cwd="/",
            env={"PATH": os.defpath},
            user=PROBE_ID,
            group=PROBE_ID,
            extra_groups=[],
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


_reachable: dict[str, str] = {}


def reachable_python(python: str, log=lambda message: None) -> str:
    """``python``, or a copy of its installation every account can run, made once (and looked up
    once per process: every job asks)."""
    if not switching():
        return python
    if python not in _reachable:
        _folders_ready()  # the copy goes under ENV_DIR, which accounts must be able to traverse
        _reachable[python] = _reachable_copy(python, log)
    return _reachable[python]


def _reachable_copy(python: str, log) -> str:
    if can_run(python):
        return python
    prefix = Path(
        subprocess.run(
            [python, "-I", "-S", "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    relative = Path(python).resolve().relative_to(prefix.resolve())
    digest = hashlib.sha256(str(prefix.resolve()).encode()).hexdigest()[:12]
    target = settings.ENV_DIR / PYTHONS_FOLDER / f"{prefix.name}-{digest}"
    copied = target / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one copy, whoever asks for it at the same time
        if not (target / SHARED_MARKER).is_file():
            log(
                f"Trainers cannot read {prefix}; copying that Python installation (without its "
                f"site-packages) to {target}, once."
            )
            _copy_installation(prefix, target)
        open_to_all(target)  # also a copy an earlier version shared with one account's group only
    if not can_run(str(copied)):
        raise TrainerUserError(
            f"Trainers run as accounts of their projects, which can read neither {python} nor its copy in "
            f"{target}. Install that Python where every user can read it (for example under /usr/local) and "
            "name it in AICONSOLE_PYTHONS."
        )
    return str(copied)


TOOLS_FOLDER = "tools"


@functools.lru_cache(maxsize=8)
def reachable_tool(executable: str) -> str:
    """``executable`` (a self-contained program: uv), or a copy every account can run, made once
    in the environment cache, for a console installed where accounts cannot reach (under /root)."""
    if not switching() or _probe_runs((executable, "--version")):
        return executable
    _folders_ready()
    source = Path(executable).resolve()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    target = settings.ENV_DIR / TOOLS_FOLDER / f"{source.name}-{digest}" / source.name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{source.name}.{os.getpid()}.partial")
        shutil.copyfile(source, scratch)
        scratch.chmod(0o755)
        scratch.replace(target)
        open_to_all(target.parent)
    return str(target)


def _copy_installation(prefix: Path, target: Path) -> None:
    """Copy a Python installation without site-packages, and point its executables' library
    search path at the copy (``$ORIGIN/../lib``), as a relocatable build would have it."""
    scratch = target.with_name(target.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(
        prefix, scratch, symlinks=True, ignore=lambda folder, names: [n for n in names if n == "site-packages"]
    )
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
    executable.write_bytes(data[:start] + new + b"\0" * (len(needle) - len(new)) + data[start + len(needle) :])


# --- whom a project's code runs as ----------------------------------------------------------------


def switching() -> bool:
    """Whether trainers run as other accounts than the console's: only a root console can."""
    return os.geteuid() == 0 and settings.TRAINER_USER != "root"


_accounts: dict[tuple[int, int], TrainerUser] = {}
_creating = threading.Lock()


def for_project(project) -> TrainerUser | None:
    """The account ``project``'s code runs as, allocated and created on first use; None when it
    runs as the console's own user."""
    if not switching():
        return None
    key = (project.pk, project.project_number)
    account = _accounts.get(key)
    if account is None:
        _folders_ready()
        with _creating:
            uid = _allocated_uid(project)
            account = _accounts[key] = _local_account(uid, project.project_id)
    return account


def console_tag() -> str:
    """Marks the accounts this console made, so consoles on one host never share one."""
    return hashlib.sha256(str(settings.DATA_DIR).encode()).hexdigest()[:10]


def _comment(project_id: str) -> str:
    where = "".join(c if c.isprintable() and c not in ":,\n" else "_" for c in str(settings.DATA_DIR))
    return f"AI Console {console_tag()} projects/{project_id} {where}"


def _ours(entry: pwd.struct_passwd) -> bool:
    return entry.pw_gecos.startswith(f"AI Console {console_tag()} ")


def _allocated_uid(project) -> int:
    """The project's number, from the database, or the first free one of the range, recorded."""
    # deferred: `aiconsole local train` loads this module without Django
    from aiconsole.models import TrainerAccount

    for _ in range(10):
        row = TrainerAccount.objects.filter(project=project).first()
        if row is not None:
            return row.uid
        uid = _free_uid(project.project_id, set(TrainerAccount.objects.values_list("uid", flat=True)))
        try:
            with transaction.atomic():
                TrainerAccount.objects.create(project=project, uid=uid)
            return uid
        except IntegrityError:
            continue  # another process took it at the same moment: look again
    raise TrainerUserError(f"Could not allocate an account for projects/{project.project_id}.")


def _free_uid(project_id: str, taken: set[int]) -> int:
    """An account this console made for the project before (its database was reset), else the
    first number of the range that no user or group on this host has."""
    marker = f"AI Console {console_tag()} projects/{project_id} "
    for entry in pwd.getpwall():
        if entry.pw_uid in settings.TRAINER_UIDS and entry.pw_uid not in taken and entry.pw_gecos.startswith(marker):
            return entry.pw_uid
    users = {entry.pw_uid for entry in pwd.getpwall()}
    groups = {entry.gr_gid for entry in grp.getgrall()}
    for uid in settings.TRAINER_UIDS:
        if uid not in taken and uid not in users and uid not in groups:
            return uid
    raise TrainerUserError(
        f"Every id of AICONSOLE_TRAINER_UIDS ({settings.TRAINER_UIDS.start}-"
        f"{settings.TRAINER_UIDS.stop - 1}) is in use on this host or by another project; "
        "widen the range."
    )


def _local_account(uid: int, project_id: str) -> TrainerUser:
    """This host's account with ``uid``, made if missing; refused if someone else has it."""
    name = f"{NAME_PREFIX}{uid}"
    entry = _passwd(uid)
    if entry is None:
        _create(name, uid, _comment(project_id))
        entry = _passwd(uid)
    if entry is None or not _ours(entry) or entry.pw_gid != uid:
        owner = entry.pw_name if entry else "nobody that can be found"
        raise TrainerUserError(
            f"Id {uid}, which this console gives projects/{project_id}, belongs on this host to {owner}, "
            "an account this console did not make. Choose AICONSOLE_TRAINER_UIDS free on every host."
        )
    return TrainerUser(name=entry.pw_name, uid=uid, project_id=project_id)


def _passwd(uid: int) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return None


def _create(name: str, uid: int, comment: str) -> None:
    """A system account with a group of the same number, no home and no login shell."""
    nologin = next((p for p in ("/usr/sbin/nologin", "/sbin/nologin") if os.path.exists(p)), "/bin/false")
    recipes = [
        [
            ["groupadd", "--gid", str(uid), name],
            [
                "useradd",
                "--system",
                "--uid",
                str(uid),
                "--gid",
                str(uid),
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                nologin,
                "--comment",
                comment,
                name,
            ],
        ],
        [
            ["addgroup", "-S", "-g", str(uid), name],  # busybox
            [
                "adduser",
                "-S",
                "-D",
                "-H",
                "-h",
                "/nonexistent",
                "-s",
                nologin,
                "-u",
                str(uid),
                "-G",
                name,
                "-g",
                comment,
                name,
            ],
        ],
    ]
    errors = []
    for commands in recipes:
        if not all(shutil.which(command[0]) for command in commands):
            continue
        for command in commands:
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0 and not _made(command, name):
                errors.append(result.stderr.strip() or f"{command[0]} exited with {result.returncode}")
                break
        else:
            return
    raise TrainerUserError(
        f"Could not create the account {name} (uid {uid}) for a project's trainers: "
        + ("; ".join(errors) or "neither useradd nor adduser is installed")
        + "."
    )


def _made(command: list[str], name: str) -> bool:
    """Whether what ``command`` makes exists (another process made it at the same moment)."""
    try:
        (grp.getgrnam if command[0] in ("groupadd", "addgroup") else pwd.getpwnam)(name)
    except KeyError:
        return False
    return True


def remove_accounts(under: list[Path], env_dirs: Sequence[Path] = ()) -> list[int]:
    """Delete the accounts made by consoles whose data dir lies in one of ``under`` (a test run's or
    a benchmark's consoles, at its end), and the job environments built for them in ``env_dirs``
    (shared environment caches); their ids."""
    removed = []
    for entry in pwd.getpwall():
        made = re.fullmatch(r"AI Console [0-9a-f]{10} projects/\S+ (.*)", entry.pw_gecos)
        if not made or entry.pw_uid < 1000 or not any(Path(made[1]).is_relative_to(folder) for folder in under):
            continue
        for command in (["userdel", entry.pw_name], ["groupdel", entry.pw_name]):
            if shutil.which(command[0]):
                subprocess.run(command, capture_output=True)
        removed.append(entry.pw_uid)
    for layer in (layer for folder in env_dirs for layer in Path(folder).glob("job-*")):
        if removed and layer.is_dir() and layer.stat().st_gid in removed:
            shutil.rmtree(layer, ignore_errors=True)
    return removed


# --- start-up ---------------------------------------------------------------------------------------


def check_folders() -> None:
    """Others may traverse the console's folders (never list them), and reach them from ``/``."""
    if not switching():
        return
    if not (shutil.which("useradd") or shutil.which("adduser")):
        raise TrainerUserError(
            "Trainers run as an account of their project, and neither useradd nor adduser "
            "is installed to create one. Install one (Debian: passwd), or set "
            "AICONSOLE_TRAINER_USER=root to run trainers as root."
        )
    for folder in (settings.DATA_DIR, settings.WORK_DIR, settings.STORAGE_DIR, settings.ENV_DIR):
        folder.mkdir(parents=True, exist_ok=True)
        _open_to_others(folder, folder)
        blocked = unreachable_ancestor(folder)
        if blocked:
            home = Path.home() / ".aiconsole"
            move = (
                f" This is the data dir of an earlier root console: move it with `mv {home} {datadir.ROOT_DATA_DIR}` "
                "(then the default) and start again."
                if folder == home.resolve()
                else ""
            )
            raise TrainerUserError(
                f"Trainers run as accounts of their projects, which cannot reach {folder}: {blocked} lets only "
                f"its owner in.{move} Otherwise choose a folder others may traverse (AICONSOLE_DATA_DIR, for "
                f"example {datadir.ROOT_DATA_DIR}), or set AICONSOLE_TRAINER_USER=root to run trainers as root."
            )


@functools.cache
def _folders_ready() -> None:
    check_folders()  # once per process, before the first account is used


def unreachable_ancestor(folder: Path) -> Path | None:
    """The first folder above ``folder`` that others may not traverse, if any."""
    for parent in reversed(Path(folder).parents):
        try:
            info = parent.stat()
        except OSError:
            return parent
        if not info.st_mode & 0o001:
            return parent
    return None


def describe() -> str:
    """One line for the console's start-up output (checking the folders as it goes)."""
    if os.geteuid() != 0:
        return f"Trainers run as {pwd.getpwuid(os.geteuid()).pw_name}, the console's own user."
    if not switching():
        return (
            "Trainers run as root (AICONSOLE_TRAINER_USER=root): they can read the console's secrets. "
            "Unset it to run them as an account of their project."
        )
    check_folders()
    uids = settings.TRAINER_UIDS
    return (
        f"Trainers, TensorBoards and models run as an account of their project (ids {uids.start}-"
        f"{uids.stop - 1}), not as root."
    )


# --- job dirs and inputs ----------------------------------------------------------------------------


def give_job_dir(job_dir: str, project) -> str:
    """A local job dir becomes the project's account's (it may write nothing else in storage)."""
    account = for_project(project)
    if account and not job_dir.startswith("gs://"):
        account.hand_over(Path(job_dir))
    return job_dir


def input_paths(args: list[str], *, project) -> list[Path]:
    """The stored files and folders a job's arguments name (``--train-files=PATH`` or ``PATH``)
    that lie in the project's area or a shared root."""
    from aiconsole import storage  # storage is heavier (Cloud Storage client); only a job needs it

    paths = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not value.startswith(("/", "file://")) or "\0" in value:
            continue
        try:
            path = storage.resolve_local_path(value, project=project)
        except storage.StorageError:
            continue
        if path not in paths:
            paths.append(path)
    return paths


# A path an argument names that does not exist yet, with one of these endings, is a file the
# trainer will write (its folder is made for it); any other is a folder it will write into.
FILE_SUFFIXES = (
    ".csv",
    ".json",
    ".jsonl",
    ".txt",
    ".h5",
    ".hdf5",
    ".keras",
    ".pkl",
    ".pickle",
    ".joblib",
    ".bst",
    ".pt",
    ".pth",
    ".ckpt",
    ".npz",
    ".npy",
    ".parquet",
    ".tfrecord",
    ".pb",
    ".onnx",
    ".log",
    ".yaml",
    ".yml",
    ".tar",
    ".gz",
    ".zip",
    ".png",
    ".model",
)


def argument_paths(args: list[str], *, project) -> list[Path]:
    """Every local path a job's arguments name (``--model-dir=PATH``, ``--model-dir PATH``, ``PATH``)
    in the project's area or a shared root, whether it exists yet or not."""
    from aiconsole import storage  # storage is heavier (Cloud Storage client); only a job needs it

    paths = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not value.startswith(("/", "file://")) or "\0" in value:
            continue
        try:
            path = storage.resolve_local_path(value, must_exist=False, project=project)
        except storage.StorageError:
            continue
        if path not in paths:
            paths.append(path)
    return paths


def give_output_folders(args: list[str], *, project) -> list[Path]:
    """The folders a job's arguments name that do not exist yet in the project's own area (an
    ``--model-dir`` beside the job dir), made and given to the project's account as a job dir is:
    a trainer, in a container or not, writes there as it would on Cloud Storage, where folders need
    no making. A missing path with a file's ending (``model.joblib``) gets its folder made. What
    exists is left as it is (an input stays read-only). The folders made."""
    from aiconsole import storage  # as in argument_paths

    made = []
    for path in argument_paths(args, project=project):
        folder = path.parent if path.suffix.lower() in FILE_SUFFIXES else path
        if folder.exists() or not _in_own_area(folder, project.project_id):
            continue
        storage.make_local_dir(str(folder), project=project)
        give_job_dir(str(folder), project)
        made.append(folder)
    return made


def _in_own_area(path: Path, project_id: str) -> bool:
    """Whether ``path`` lies in the project's own area of the storage dir (not a shared root)."""
    storage_dir, *shared = settings.STORAGE_ROOTS
    if not path.is_relative_to(storage_dir) or any(path.is_relative_to(root) for root in shared):
        return False
    parts = path.relative_to(storage_dir).parts
    return len(parts) >= 3 and parts[1] == project_id


def lend_inputs(args: list[str], *, project) -> list[Path]:
    """Let the project's account read the local files and folders a job names in its arguments
    (in the project's area): a dataset the console stored is private to the console until a job
    of that project names it, and again after (:func:`take_back_inputs`). Other paths are left
    alone (the trainer reads what the operating system lets it). Returns what was lent."""
    account = for_project(project)
    if account is None:
        return []
    return [path for path in input_paths(args, project=project) if account.lend(path)]


def take_back_inputs(args: list[str], *, project, still_named: list[list[str]]) -> None:
    """Take back what :func:`lend_inputs` lent for a job that ended, except what the arguments
    of the project's other running jobs (``still_named``) name too."""
    account = for_project(project)
    if account is None:
        return
    keep = [path for other in still_named for path in input_paths(other, project=project)]
    for path in input_paths(args, project=project):
        if any(path.is_relative_to(other) or other.is_relative_to(path) for other in keep):
            continue
        account.take_back(path)

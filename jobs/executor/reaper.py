"""Runs one replica's trainer and outlives none of its descendants.

``python reaper.py GRACE [OPTIONS] -- COMMAND...``: a standalone script
(standard library only, run with ``-I -S`` so it starts in milliseconds) between the executor and
the trainer. It marks itself a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), so a descendant
that leaves the trainer's process group or session (``setsid``, a double fork) is re-parented here
instead of to init. When the trainer exits, or the executor sends SIGTERM, every remaining
descendant gets SIGTERM, then SIGKILL after GRACE seconds; the reaper then ends the way the trainer
ended (its exit status, or the same signal), so the executor sees the trainer's outcome. Where the
system has no subreapers (not Linux), it only passes the trainer's outcome through.

``python reaper.py --ready`` is the same reaper started ahead of its replica (``replicas.SPARES``),
so that a replica's start does not wait for an interpreter: it starts with an empty environment,
makes itself ready, and waits for one line of JSON on stdin (``grace``, ``user``, ``command``,
``env``, ``cwd``, ``gcs``); then it runs that trainer as above. End of input before the line: it
exits 0.

``--gcs PATH`` (the job's view of Cloud Storage, ``jobs/executor/gcs.py``): the trainer starts in
a mount namespace of its own, where PATH is mounted at ``/gcs``, as Vertex AI's replicas have it;
nothing else of the host's mounts changes, and no other process sees it there.

``--user UID:GID``: the trainer runs as that user, with that group only.

``--lease FILE:SECONDS`` (scaled mode, ``jobs/cluster/agent.py``): the worker touches FILE each
time it renews its leases in the database. When FILE is older than SECONDS (the worker was frozen,
cut off from the database, or died without its death signal reaching here), the reaper stops the
trainer on its own, within a second: SECONDS is shorter than the lease, so the trainer is gone
before the coordinator presumes it lost and starts it elsewhere. Two copies never run at once.

``--on-stop JSON`` (a command, as a JSON list): run, and waited for, before the trainer is stopped
for any reason but its own exit: a container engine's client is the trainer, and stopping the
client would leave its container running (``podman stop NAME``).

``--no-subreaper``: the command is a container engine's client, whose monitor process must not
become the reaper's descendant (the container's own processes are the engine's to stop).

``--tty``: the command is an interactive shell (``jobs/webaccess``): it leads a session of its own
with the terminal on its stdin as its controlling terminal, so job control and Ctrl+C work in it.
"""

# The C module behind ``signal``, and fork/exec rather than ``subprocess``: those two imports (and
# the ``enum`` under them) took the reaper's start from 10 to 30 ms, on every replica's way to its
# first line.
import _signal as signal
import ctypes
import os
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18


def _prctl(option, value):
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root):
    """Every live process below ``root``, from /proc (empty where there is no /proc)."""
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] != b"Z":  # a zombie is already dead; it only waits to be reaped
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(sig):
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap_available():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep(grace):
    """SIGTERM every descendant, SIGKILL what is left after ``grace`` seconds, reap them all."""
    _signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while descendants(os.getpid()) and time.monotonic() < deadline:
        _reap_available()
        time.sleep(0.05)
    _signal_all(signal.SIGKILL)
    deadline = time.monotonic() + 5
    while descendants(os.getpid()) and time.monotonic() < deadline:
        _reap_available()
        time.sleep(0.02)
    _reap_available()


def yield_as_asked():
    """Make the niceness the reaper inherited hold for the trainer ('aiconsole up' runs its worker,
    and so its trainers, at nice 10 so that they yield the CPU to the web process).

    The reaper's new session is a new scheduler autogroup where the kernel has them (Linux's
    CONFIG_SCHED_AUTOGROUP, on in most distributions), and niceness only weighs against processes
    of the same group: a trainer at nice 10 in its own group still took as much CPU as the whole
    web process. The group gets the niceness too. (The idle scheduling class would yield even
    more, but it starves a trainer whenever anything else on the machine is busy.)
    """
    niceness = os.nice(0)
    if niceness <= 0:
        return
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write(str(niceness))
    except OSError:  # no autogroups here
        pass


def _bind_gcs(source):
    """``source`` at /gcs, in a mount namespace of this process's own (as root, before the switch
    to the trainer's user)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making the mounts private failed")
    os.makedirs("/gcs", mode=0o755, exist_ok=True)
    if libc.mount(os.fsencode(source), b"/gcs", None, MS_BIND | MS_REC, None) != 0:
        raise OSError(ctypes.get_errno(), f"mounting {source} at /gcs failed")


TIOCSCTTY = 0x540E


def start(command, user, env=None, gcs=None, tty=False):
    """Fork and exec the trainer: in a process group of its own (its children share it), as
    ``user`` (uid, gid) with that group only, dying with the reaper (set after the user switch,
    which would clear it), with ``env`` (else the reaper's own), and ``gcs`` at /gcs. ``tty``: in
    a session of its own instead, its stdin its controlling terminal. An exec that fails says why
    on stderr and exits 127, as a shell does."""
    pid = os.fork()
    if pid:
        return pid
    try:
        if tty:
            import fcntl

            os.setsid()
            fcntl.ioctl(0, TIOCSCTTY, 0)
        else:
            os.setpgid(0, 0)
        if gcs is not None:
            _bind_gcs(gcs)
        if user is not None:
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if env is None:
            os.execvp(command[0], command)
        else:
            os.execvpe(command[0], command, env)
    except OSError as error:
        os.write(2, f"{command[0]}: {error.strerror or error}\n".encode())
    os._exit(127)


USAGE = (
    "usage: reaper.py GRACE [--user UID:GID] [--gcs PATH] [--lease FILE:SECONDS] [--on-stop JSON] "
    "[--no-subreaper] [--tty] -- COMMAND... | reaper.py --ready"
)


def main(argv):
    if argv[1:] == ["--ready"]:
        return run_when_told()
    if len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    options: dict = {}
    rest = argv[2:]
    while rest and rest[0] != "--":
        if rest[0] in ("--no-subreaper", "--tty"):
            options[rest[0][2:].replace("-", "_")], rest = "yes", rest[1:]
        elif rest[0] in ("--user", "--gcs", "--lease", "--on-stop") and len(rest) > 1:
            options[rest[0][2:].replace("-", "_")], rest = rest[1], rest[2:]
        else:
            print(USAGE, file=sys.stderr)
            return 2
    if len(rest) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    # The trainer runs as this user and its group only; the reaper stays as it is, so it can still
    # stop every descendant.
    user = tuple(int(part) for part in options["user"].split(":")) if "user" in options else None
    if not options.get("no_subreaper"):
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    yield_as_asked()
    lease = None
    if "lease" in options:
        path, _, seconds = options["lease"].rpartition(":")
        lease = (path, float(seconds))
    on_stop = _json_loads(options["on_stop"]) if "on_stop" in options else None
    trainer = start(rest[1:], user, gcs=options.get("gcs"), tty=bool(options.get("tty")))
    return run(float(argv[1]), trainer, lease=lease, on_stop=on_stop)


def _json_loads(text):
    import json

    return json.loads(text)


def run_when_told():
    """``--ready``: everything but the trainer done ahead, then the trainer as one line on stdin
    says, with stdin itself given up (the trainer's is /dev/null, as for a reaper started for it)."""
    import json

    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    yield_as_asked()
    line = sys.stdin.buffer.readline()
    if not line.strip():
        return 0  # the executor went away, or closed its spare
    told = json.loads(line)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        os.chdir(told["cwd"])
    except OSError as error:
        os.write(2, f"{told['cwd']}: {error.strerror or error}\n".encode())
        return 127
    user = tuple(told["user"]) if told.get("user") else None
    lease = (told["lease"][0], float(told["lease"][1])) if told.get("lease") else None
    trainer = start(told["command"], user, told["env"], told.get("gcs"))
    return run(float(told["grace"]), trainer, lease=lease, on_stop=told.get("on_stop"))


LEASE_GRACE = 1.0  # seconds between SIGTERM and SIGKILL when the lease runs out: it must end first
LEASE_POLL = 0.2


def lease_age(path):
    """Seconds since the worker last renewed its leases (``--lease``); infinite when FILE is gone."""
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return float("inf")


def run_command(command):
    """Run ``command`` (``--on-stop``) to its end, with the reaper's own output and no input."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.execvp(command[0], command)
        except OSError as error:
            os.write(2, f"{command[0]}: {error.strerror or error}\n".encode())
        os._exit(127)
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def run(grace, trainer, lease=None, on_stop=None):
    """Wait for the trainer (reaping whatever is re-parented here meanwhile), sweep what it left,
    and end as it ended. ``lease``: (FILE, SECONDS), see ``--lease``; ``on_stop``: a command run
    before any stop that is not the trainer's own exit."""
    stopping: list = []

    def kill_all(signum, frame):
        _signal_all(signal.SIGKILL)

    def stop_now(seconds):
        if stopping:
            return
        stopping.append(True)
        if on_stop:
            run_command(on_stop)
        # SIGTERM everything now, SIGKILL what is left after the grace.
        _signal_all(signal.SIGTERM)
        signal.signal(signal.SIGALRM, kill_all)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))

    def stop(signum, frame):  # the executor stops the replica (or the worker died: its death signal)
        stop_now(grace)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG if lease else 0)  # reaps re-parented descendants too
        except ChildProcessError:
            return 1
        if pid == trainer:
            break
        if lease and pid == 0:
            if not stopping and lease_age(lease[0]) > lease[1]:
                os.write(
                    2,
                    b"The worker could not renew this replica's lease in time (it is frozen, cut off "
                    b"from the database, or gone); the replica is stopped here so that it never runs "
                    b"beside its replacement.\n",
                )
                stop_now(min(grace, LEASE_GRACE))
            time.sleep(LEASE_POLL)
    sweep(min(grace, LEASE_GRACE) if stopping and lease else grace)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:  # its handler cannot be set (nor need be): the kernel's OOM killer's signal
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

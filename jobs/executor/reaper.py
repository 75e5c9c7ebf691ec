"""Runs one replica's trainer and outlives none of its descendants.

``python reaper.py GRACE [--user UID:GID] [--gcs PATH] -- COMMAND...``: a standalone script
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


def start(command, user, env=None, gcs=None):
    """Fork and exec the trainer: in a process group of its own (its children share it), as
    ``user`` (uid, gid) with that group only, dying with the reaper (set after the user switch,
    which would clear it), with ``env`` (else the reaper's own), and ``gcs`` at /gcs. An exec
    that fails says why on stderr and exits 127, as a shell does."""
    pid = os.fork()
    if pid:
        return pid
    try:
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


def main(argv):
    if argv[1:] == ["--ready"]:
        return run_when_told()
    user = gcs = None
    if len(argv) > 3 and argv[2] == "--user":
        # The trainer runs as this user and its group only; the reaper stays as it is, so it can
        # still stop every descendant.
        user = tuple(int(part) for part in argv[3].split(":"))
        argv = argv[:2] + argv[4:]
    if len(argv) > 3 and argv[2] == "--gcs":
        gcs = argv[3]
        argv = argv[:2] + argv[4:]
    if len(argv) < 4 or argv[2] != "--":
        print("usage: reaper.py GRACE [--user UID:GID] [--gcs PATH] -- COMMAND... | reaper.py --ready", file=sys.stderr)
        return 2
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    yield_as_asked()
    return run(float(argv[1]), start(argv[3:], user, gcs=gcs))


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
    return run(float(told["grace"]), start(told["command"], user, told["env"], told.get("gcs")))


def run(grace, trainer):
    """Wait for the trainer (reaping whatever is re-parented here meanwhile), sweep what it left,
    and end as it ended."""

    def kill_all(signum, frame):
        _signal_all(signal.SIGKILL)

    def stop(signum, frame):
        # The executor stops the replica: SIGTERM everything now, SIGKILL what is left after GRACE.
        _signal_all(signal.SIGTERM)
        signal.signal(signal.SIGALRM, kill_all)
        signal.setitimer(signal.ITIMER_REAL, max(grace, 0.01))

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)  # reaps re-parented descendants too
        except ChildProcessError:
            return 1
        if pid == trainer:
            break
    sweep(grace)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

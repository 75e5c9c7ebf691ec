"""Commands that run on the server's own machine: ``up``, ``token create``, ``manage``.

They use the data dir (``AICONSOLE_DATA_DIR`` or ``--data-dir``) directly, not the REST API.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# What the console's processes create (database, secret key, uploads, job and working dirs) is
# readable by their user only; trainers run as that user and so can still use their dirs.
PRIVATE_UMASK = 0o077


def setup_django(data_dir: str | None) -> None:
    """Configure Django for commands that work on the data dir directly."""
    os.umask(PRIVATE_UMASK)  # before the data dir is made, on the very first start
    if data_dir:
        os.environ["AICONSOLE_DATA_DIR"] = os.path.abspath(os.path.expanduser(data_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import datadir

    datadir.prepare()
    django.setup()


# pg_advisory_lock key: "aiconsole migrate" (any constant, the same in every process).
MIGRATION_LOCK = 0x6169636F6E736F6C


def migrate() -> None:
    """Apply migrations, one process at a time: a web process and workers started together on a
    fresh database wait for each other instead of colliding in CREATE TABLE (PostgreSQL takes an
    advisory lock; SQLite serializes writers itself)."""
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        call_command("migrate", interactive=False, verbosity=0)
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK])
        try:
            call_command("migrate", interactive=False, verbosity=0)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK])


def cmd_up(args) -> int:
    setup_django(args.data_dir)
    if args.process:  # one of the processes the command below starts
        # deferred: Django is configured by setup_django() first; the client commands never load it
        from aiconsole.events import RELAY_VARIABLE

        if args.process == "grpc":
            return _run_grpc(args.host, args.port)
        if not os.environ.get(RELAY_VARIABLE):
            print(f"aiconsole up: --process {args.process} is started by 'aiconsole up' itself", file=sys.stderr)
            return 2
        return _run_worker() if args.process == "worker" else _run_web(args.host, args.port)
    migrate()
    from django.conf import settings

    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole.bootstrap import ensure_admin_and_project

    result = ensure_admin_and_project()
    url = f"http://{args.host}:{args.port}/"
    print(f"AI Console data dir: {settings.DATA_DIR}")
    if result.password:
        print(f"Created the admin account. Username: {result.username}  Password: {result.password}")
        print("This password is shown once; set AICONSOLE_ADMIN_PASSWORD to choose your own.")
    print(f"Default project: {result.project.project_id}")
    if settings.EXECUTOR == "inprocess" and not announce_trainer_user("aiconsole up"):
        return 2
    print(f"AI Console is running at {url}  (Ctrl+C to stop)", flush=True)
    if settings.EXECUTOR != "inprocess":
        return serve_web(args.host, args.port)
    return Supervisor(args.host, args.port).run()


def announce_trainer_user(command: str) -> bool:
    """Say whom trainers run as (creating the trainer user when the console is root); False,
    with the reason on stderr, when that user cannot be used."""
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import trainer_user

    try:
        print(trainer_user.describe(), flush=True)
    except trainer_user.TrainerUserError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return False
    return True


def serve_web(host: str, port: int) -> int:
    """Serve the ASGI application until Ctrl+C or SIGTERM (the web process; 'aiconsole web')."""
    import uvicorn

    _open_files_to_hard_limit()
    config = uvicorn.Config(
        "console.asgi:application",
        host=host,
        port=port,
        lifespan="off",
        http=_deadlined_protocol(),
        log_level=os.environ.get("AICONSOLE_SERVER_LOG_LEVEL", "warning"),
        ws="auto",
        # Each viewer's copy of a log batch would be compressed separately: at
        # hundreds of viewers that is the largest single cost (bench/logs.py).
        ws_per_message_deflate=False,
        # X-Forwarded-For is believed only from AICONSOLE_TRUSTED_PROXIES, by the
        # application (aiconsole/proxies.py); uvicorn's own trusts 127.0.0.1.
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler it found:
    # the default one would end the process before online prediction and TensorBoards are
    # stopped (docker stop, systemd). Ours turns it into an ordinary exit, as Ctrl+C is.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    server.run()
    return 0


def grpc_process(host: str, port: int) -> Child | None:
    """The process that serves Vertex AI over gRPC beside the web port (console/grpc_front.py), unless
    AICONSOLE_GRPC_PORT is off. A process of its own: the web process forks serving processes, and
    gRPC's threads must not be in a process that forks."""
    from django.conf import settings

    if settings.GRPC_PORT == "off":
        return None
    command = [sys.executable, "-c", CHILD_ENTRY, "up", "--host", host, "--port", str(port), "--process", "grpc"]
    return Child("grpc", command, dict(os.environ))


def _run_grpc(host: str, web_port: int) -> int:
    """The gRPC process: says where it serves (or why it does not), then serves until stopped."""
    from django.conf import settings

    # deferred: only this process reads the SDK's transports (a second or more of imports)
    from console import grpc_front

    received = _stop_on((signal.SIGTERM, signal.SIGINT))
    running = None
    missing = grpc_front.available()
    if missing:
        print(f'Vertex AI over gRPC is not served: {missing}; the SDK works with api_transport="rest".', flush=True)
    else:
        try:
            running = grpc_front.start(
                host,
                int(settings.GRPC_PORT),
                settings.DATA_DIR,
                web_url=grpc_front.web_address(host, web_port),
                extra_names=settings.GRPC_NAMES,
            )
            print(running.banner(host), flush=True)
        except RuntimeError as error:  # the port is taken: REST still serves; nothing to restart
            print(f"Vertex AI over gRPC is not served: port {settings.GRPC_PORT}: {error}", file=sys.stderr, flush=True)
    while not received:
        time.sleep(0.2)
    if running is not None:
        running.stop()
    return 0


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


# --- slow clients ------------------------------------------------------------------------------------
# Every connection holds a file descriptor, and systemd gives a service 1,024 by default: 800
# connections sending their request's head a byte every few seconds kept the console from
# accepting anyone else (uvicorn waits for a head for ever, and for a client to read for ever).

OPEN_FILES_CEILING = 1 << 20  # where the hard limit is "unlimited"


def _open_files_to_hard_limit() -> None:
    """The soft limit on open files up to the hard one, which an unprivileged process may do."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            pass  # a ceiling above the kernel's (nr_open): keep what we have


def _deadlined_protocol():
    """uvicorn's HTTP protocol, with deadlines for clients that hold a connection without using
    it: a request's head must arrive within ``AICONSOLE_CLIENT_TIMEOUT_SECONDS`` of the connection
    (or of the previous answer on a kept-alive one), and a request's body must not stop, nor an
    answer go unread, for that long. Such a connection is closed. WebSockets are uvicorn's once
    upgraded (it pings them and closes those that do not answer)."""
    from django.conf import settings
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    seconds = settings.CLIENT_TIMEOUT_SECONDS

    class DeadlinedProtocol(HttpToolsProtocol):
        _head = _body = _reading = None  # timers: the head's arrival, the body's next bytes, the answer read

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._head = self.loop.call_later(seconds, self._hang_up)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._body is not None:  # in a body: it may go on for as long as it moves
                self._body.cancel()
                self._body = self.loop.call_later(seconds, self._hang_up)

        def on_headers_complete(self) -> None:
            self._cancel("_head")
            super().on_headers_complete()
            if not (self.parser.should_upgrade() and self._should_upgrade()):
                self._body = self.loop.call_later(seconds, self._hang_up)

        def on_message_complete(self) -> None:
            self._cancel("_body")
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            idle = not self.pipeline and (self.cycle is None or self.cycle.response_complete)
            if idle and not self.transport.is_closing() and self._head is None:  # kept alive: the next head
                self._head = self.loop.call_later(seconds, self._hang_up)

        def pause_writing(self) -> None:
            super().pause_writing()
            self._cancel("_reading")
            self._reading = self.loop.call_later(seconds, self._hang_up)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel("_reading")

        def handle_websocket_upgrade(self) -> None:
            self._cancel_all()
            super().handle_websocket_upgrade()

        def connection_lost(self, exc) -> None:
            self._cancel_all()
            super().connection_lost(exc)

        def _cancel(self, name: str) -> None:
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

        def _cancel_all(self) -> None:
            for name in ("_head", "_body", "_reading"):
                self._cancel(name)

        def _hang_up(self) -> None:
            self.transport.abort()  # not close(): that waits for a reader that reads nothing

    return DeadlinedProtocol


# --- the processes of 'aiconsole up' ---------------------------------------------------------------
# A web process serves HTTP and WebSockets (and online prediction, as 'aiconsole web' does); a
# worker process runs the executor: the controller, the replicas and their log ingestion. The
# parent only starts them, starts again one that dies, and stops both. The worker forwards live
# log lines and state changes to the web process, and the web process wakes the worker when a job
# is submitted or cancelled, through Unix sockets in a folder only the console's user can open
# (aiconsole.events, jobs.executor.controller).

_PR_SET_PDEATHSIG = 1
CHILD_ENTRY = "import sys; from console.cli import main; sys.exit(main(sys.argv[1:]))"
RESTART_DELAYS = (0.5, 1, 2, 5, 10, 30)  # seconds before starting a process that died, again and again
STEADY_SECONDS = 30.0  # a process that ran this long before dying starts over at the shortest delay
STOP_SECONDS = 90.0  # a process not gone this long after SIGTERM is killed
# The worker and its trainers yield the CPU to the web process when both want it: a trainer
# printing flat out on a 2-core machine would otherwise take the time the console needs to answer
# (bench/flood.py). On an idle core the niceness changes nothing.
WORKER_NICE = 10


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when 'aiconsole up' itself is gone (even killed)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _ending(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


class ChildFailed(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class Child:
    """One process of 'aiconsole up', started again with a growing delay when it dies."""

    def __init__(self, role: str, command: list[str], env: dict[str, str]):
        self.role, self.command, self.env = role, command, env
        self.process: subprocess.Popen | None = None
        self.started = 0.0
        self.deaths = 0
        self.due = 0.0  # when to start it again, once it died

    def start(self) -> None:
        # deferred: Django is configured by setup_django() first; the client commands never load it
        from aiconsole import secret_env

        env, fds = dict(self.env), ()
        secrets = {name: secret_env.lookup(name) for name in secret_env.SECRET_VARIABLES}
        secrets = {name: value for name, value in secrets.items() if value}
        if secrets:  # handed over as the parent got them: never in an environment
            read_end, write_end = os.pipe()
            os.write(write_end, json.dumps(secrets).encode())
            os.close(write_end)
            env[secret_env.FD_VARIABLE], fds = str(read_end), (read_end,)
        try:
            self.process = subprocess.Popen(self.command, env=env, pass_fds=fds, preexec_fn=_die_with_parent)
        finally:
            for fd in fds:
                os.close(fd)
        self.started = time.monotonic()

    def check(self, now: float) -> None:
        """Start it again when due; notice (and say) that it died."""
        if self.process is None:
            if now >= self.due:
                self.start()
                print(
                    f"aiconsole up: the {self.role} process is running again (pid {self.process.pid}).",
                    file=sys.stderr,
                    flush=True,
                )
            return
        code = self.process.poll()
        if code is None:
            return
        if 0 < code < 128 and not self.deaths and now - self.started < STEADY_SECONDS:
            # It never got going (a port in use, a broken setup): starting it again would not help.
            raise ChildFailed(f"aiconsole up: the {self.role} process could not start ({_ending(code)}).", code)
        self.deaths = 1 if now - self.started >= STEADY_SECONDS else self.deaths + 1
        delay = RESTART_DELAYS[min(self.deaths, len(RESTART_DELAYS)) - 1]
        print(
            f"aiconsole up: the {self.role} process {_ending(code)}; starting it again in {delay:g} s.",
            file=sys.stderr,
            flush=True,
        )
        self.process, self.due = None, now + delay

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> None:
        if self.process is None:
            return
        try:
            self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"aiconsole up: the {self.role} process did not stop; killing it.", file=sys.stderr, flush=True)
            self.process.kill()
            self.process.wait()


class Supervisor:
    """The parent of 'aiconsole up': a worker and a web process; Ctrl+C or SIGTERM stops both."""

    def __init__(self, host: str, port: int):
        self.folder = tempfile.mkdtemp(prefix="aiconsole-up-")  # mode 0700: the console's user only
        # deferred: Django is configured by setup_django() first; the client commands never load it
        from aiconsole.events import RELAY_VARIABLE

        env = {**os.environ, RELAY_VARIABLE: self.folder}
        base = [sys.executable, "-c", CHILD_ENTRY, "up", "--host", host, "--port", str(port), "--process"]
        self.children = [Child("worker", [*base, "worker"], env), Child("web", [*base, "web"], env)]
        grpc = grpc_process(host, port)
        if grpc is not None:
            self.children.append(grpc)
        self.signals: list[int] = []

    def _on_signal(self, signum, frame) -> None:
        self.signals.append(signum)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            for child in self.children:
                child.start()
            while not self.signals:
                for child in self.children:
                    child.check(time.monotonic())
                time.sleep(0.1)
        except ChildFailed as failure:
            print(failure, file=sys.stderr, flush=True)
            return failure.code
        finally:
            for child in reversed(self.children):  # the web process first: nothing new is submitted
                child.stop()
            deadline = time.monotonic() + STOP_SECONDS
            for child in reversed(self.children):
                child.wait(deadline)
            shutil.rmtree(self.folder, ignore_errors=True)
        return 128 + signal.SIGTERM if signal.SIGTERM in self.signals else 0


def _stop_on(signals) -> list[int]:
    """SIGTERM and SIGINT end the wait below (a terminal's Ctrl+C reaches every process)."""
    received: list[int] = []
    for signum in signals:
        signal.signal(signum, lambda number, frame: received.append(number))
    return received


def _run_worker() -> int:
    """The worker process: the executor, its log ingestion, forwarding to the web process."""
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import events
    from jobs import dispatch
    from jobs.executor import controller

    received = _stop_on((signal.SIGTERM, signal.SIGINT))
    os.nice(WORKER_NICE)  # trainers inherit it
    events.forward_to(events.relay_path(events.RELAY_SOCKET))
    controller.start(serving=False)
    controller.listen_for_wakeups(events.relay_path(dispatch.WAKE_SOCKET))
    while not received:
        time.sleep(0.2)
    print("Stopping running jobs; they start again on the next 'aiconsole up'.", flush=True)
    controller.stop()
    return 0


def _run_web(host: str, port: int) -> int:
    """The web process: HTTP and WebSockets, live logs the worker forwards, online prediction."""
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import events
    from jobs import kinds

    events.receive_forwarded(events.relay_path(events.RELAY_SOCKET))
    kinds.start_services()
    try:
        return serve_web(host, port)
    finally:
        kinds.stop_services()


def _active_user(username: str):
    """The active user of that name, or None after saying so (server-side commands, Django set up)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        print(f"aiconsole: no active user named {username!r}", file=sys.stderr)
    return user


def cmd_token_create(args) -> int:
    setup_django(args.data_dir)
    migrate()

    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole.tokens import create_token

    user = _active_user(args.username)
    if user is None:
        return 2
    _, raw = create_token(user, name=args.name or "created with aiconsole token create")
    print(raw)
    return 0


def cmd_credentials_create(args) -> int:
    """A service-account key file for a user, which google.auth.default() reads unchanged."""
    setup_django(args.data_dir)
    migrate()

    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import service_keys

    user = _active_user(args.username)
    if user is None:
        return 2
    url = args.url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        print(f"aiconsole credentials create: --url: expected http(s)://HOST[:PORT], got {args.url!r}", file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    if os.path.lexists(output):
        print(
            f"aiconsole credentials create: --output: {output} exists; a key file is never written over",
            file=sys.stderr,
        )
        return 2
    content = service_keys.create_key(user, project_id=args.project, token_uri=f"{url}/oauth2/token")
    descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(service_keys.key_file_text(content))
    print(f"Wrote a service-account key for {user.get_username()} to {output} (keep it secret: it acts as them).")
    print(f"export GOOGLE_APPLICATION_CREDENTIALS={output}")
    return 0


def cmd_credentials_revoke(args) -> int:
    """Revoke a key: its file, and every token it was exchanged for, stop working at once."""
    setup_django(args.data_dir)
    migrate()
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from aiconsole import service_keys
    from aiconsole.models import ServiceAccountKey

    key = ServiceAccountKey.objects.select_related("user").filter(key_id=args.key_id).first()
    if key is None:
        print(f"aiconsole: no service-account key {args.key_id!r} (its file's private_key_id)", file=sys.stderr)
        return 2
    service_keys.revoke_key(key)
    print(f"Revoked the key {key.key_id} of {key.user.get_username()}, and the access tokens it was exchanged for.")
    return 0


def cmd_manage(args) -> int:
    setup_django(args.data_dir)
    from django.core.management import execute_from_command_line

    execute_from_command_line(["aiconsole manage", *args.rest])
    return 0


def register(commands) -> None:
    up = commands.add_parser("up", help="set up and serve the console with the embedded defaults")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8000)
    up.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    up.add_argument("--process", choices=["web", "worker", "grpc"], help=argparse.SUPPRESS)  # what 'up' starts
    up.set_defaults(func=cmd_up)

    token = commands.add_parser("token", help="API tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="print a new API token for a user")
    create.add_argument("username")
    create.add_argument("--name", help="a note to tell tokens apart")
    create.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    create.set_defaults(func=cmd_token_create)

    credentials = commands.add_parser("credentials", help="default credentials for Google's client libraries")
    credentials_commands = credentials.add_subparsers(dest="credentials_command", required=True)
    key = credentials_commands.add_parser(
        "create", help="write a service-account key file that google.auth.default() reads, acting as a user"
    )
    key.add_argument("username")
    key.add_argument("--output", required=True, help="the key file to write (it must not exist)")
    key.add_argument("--project", default="default-project", help="the file's project_id")
    key.add_argument("--url", default="http://127.0.0.1:8000", help="this console's address, for token_uri")
    key.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    key.set_defaults(func=cmd_credentials_create)
    revoke = credentials_commands.add_parser("revoke", help="revoke a key file (by its private_key_id)")
    revoke.add_argument("key_id")
    revoke.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    revoke.set_defaults(func=cmd_credentials_revoke)

    manage = commands.add_parser("manage", help="run a Django management command")
    manage.add_argument("rest", nargs=argparse.REMAINDER)
    manage.set_defaults(func=cmd_manage)

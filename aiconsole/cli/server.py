"""Commands that run on the server's own machine: ``up``, ``token create``, ``manage``.

They use the data dir (``AICONSOLE_DATA_DIR`` or ``--data-dir``) directly, not the REST API.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

# What the console's processes create (database, secret key, uploads, job and working dirs) is
# readable by their user only; trainers run as that user and so can still use their dirs.
PRIVATE_UMASK = 0o077


def setup_django(data_dir: str | None) -> None:
    """Configure Django for commands that work on the data dir directly."""
    os.umask(PRIVATE_UMASK)  # before the data dir is made, on the very first start
    if data_dir:
        os.environ["AICONSOLE_DATA_DIR"] = os.path.abspath(os.path.expanduser(data_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiconsole.settings")
    import django

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
    migrate()
    from django.conf import settings

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
    return _serve(args.host, args.port, with_executor=settings.EXECUTOR == "inprocess")


def announce_trainer_user(command: str) -> bool:
    """Say whom trainers run as (creating the trainer user when the console is root); False,
    with the reason on stderr, when that user cannot be used."""
    from aiconsole import trainer_user

    try:
        print(trainer_user.describe(), flush=True)
    except trainer_user.TrainerUserError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return False
    return True


def _serve(host: str, port: int, *, with_executor: bool) -> int:
    import uvicorn

    from jobs.executor import controller

    if with_executor:
        controller.start()
    config = uvicorn.Config("aiconsole.asgi:application", host=host, port=port, lifespan="off",
                            log_level=os.environ.get("AICONSOLE_SERVER_LOG_LEVEL", "warning"), ws="auto",
                            # Each viewer's copy of a log batch would be compressed separately: at
                            # hundreds of viewers that is the largest single cost (bench/logs.py).
                            ws_per_message_deflate=False)
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler it found:
    # the default one would end the process before the executor and TensorBoards are stopped
    # (docker stop, systemd). Ours turns it into an ordinary exit, as Ctrl+C is.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        server.run()
    finally:
        if with_executor:
            print("Stopping running jobs; they start again on the next 'aiconsole up'.", flush=True)
            controller.stop()
    return 0


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def cmd_token_create(args) -> int:
    setup_django(args.data_dir)
    migrate()
    from django.contrib.auth import get_user_model

    from aiconsole.tokens import create_token

    user = get_user_model().objects.filter(username=args.username, is_active=True).first()
    if user is None:
        print(f"aiconsole: no active user named {args.username!r}", file=sys.stderr)
        return 2
    _, raw = create_token(user, name=args.name or "created with aiconsole token create")
    print(raw)
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
    up.set_defaults(func=cmd_up)

    token = commands.add_parser("token", help="API tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="print a new API token for a user")
    create.add_argument("username")
    create.add_argument("--name", help="a note to tell tokens apart")
    create.add_argument("--data-dir", dest="data_dir", default=argparse.SUPPRESS)
    create.set_defaults(func=cmd_token_create)

    manage = commands.add_parser("manage", help="run a Django management command")
    manage.add_argument("rest", nargs=argparse.REMAINDER)
    manage.set_defaults(func=cmd_manage)

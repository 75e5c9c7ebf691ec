"""The ``aiconsole`` command.

Each module in COMMAND_MODULES adds its command groups through ``register(subparsers)``; a
command's handler is ``func(args) -> int`` (the exit status). Server-side commands (``up``,
``token``) work on the data dir; client commands (``jobs``, ``local``) talk to the REST API.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = [
    "console.cli.server",
    "console.cli.cluster",
    "console.cli.admin",
    "console.cli.auth",
    "console.cli.jobs",
    "console.cli.local",
    "console.cli.models",
    "console.cli.resources",
    "console.cli.runtimes",
    "console.cli.images",
    "console.cli.gcloud",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiconsole", description="AI Console: self-hosted AI Platform Training.")
    parser.add_argument(
        "--data-dir",
        help="data directory (default: $AICONSOLE_DATA_DIR, else ~/.aiconsole, or /var/lib/aiconsole as root)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(commands)
    return parser


# Long-running commands that hold the console's secrets while trainers run beside them.
SERVER_COMMANDS = {"up", "web", "worker"}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is None and args.command in SERVER_COMMANDS:
        # deferred: only the server's own commands hide their secrets; a client command never loads this
        from aiconsole import secret_env

        secret_env.reexec_without_secrets()  # returns only when there was nothing to hide
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""The ``aiconsole`` command.

Each module in COMMANDS adds its command groups through ``register(subparsers)``; a command's
handler is ``func(args) -> int`` (the exit status). Server-side commands (``up``, ``token``) work
on the data dir; client commands (``jobs``, ``local``) talk to the REST API.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Each command module and the top-level commands it registers, in the order ``--help`` lists them.
# A command line that names one of them builds only its module's part of the parser, so a command
# imports what it uses rather than every command's module (a third of a client command's start);
# anything else (``--help``, a mistyped command) builds all of it, and argparse lists every command.
COMMANDS = {
    "console.cli.server": ("up", "token", "credentials", "manage"),
    "console.cli.cluster": ("web", "worker", "workers"),
    "console.cli.admin": ("projects", "users", "audit", "gc"),
    "console.cli.auth": ("auth",),
    "console.cli.jobs": ("jobs",),
    "console.cli.local": ("local",),
    "console.cli.models": ("models", "versions", "predict"),
    "console.cli.resources": ("operations", "locations", "explain"),
    "console.cli.runtimes": ("runtimes",),
    "console.cli.images": ("images", "containers"),
    "console.cli.notifications": ("notifications",),
    "console.cli.quotas": ("quotas",),
    "console.cli.vertex": ("ai",),
    "console.cli.gcloud": ("gcloud-wrapper",),
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, for the command ``argv`` names when given (only its module is imported)."""
    parser = argparse.ArgumentParser(prog="aiconsole", description="AI Console: self-hosted AI Platform Training.")
    parser.add_argument(
        "--data-dir",
        help="data directory (default: $AICONSOLE_DATA_DIR, else ~/.aiconsole, or /var/lib/aiconsole as root)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    named = command_named(argv or [])
    for module, names in COMMANDS.items():
        if named is None or named in names:
            importlib.import_module(module).register(commands)
    return parser


def command_named(argv: list[str]) -> str | None:
    """The top-level command a command line names, when it names a known one before any other option."""
    words = iter(argv)
    for word in words:
        if word == "--data-dir":
            next(words, None)  # its value
        elif not word.startswith("--data-dir="):
            known = any(word in names for names in COMMANDS.values())
            return word if known else None
    return None


# Long-running commands that hold the console's secrets while trainers run beside them.
SERVER_COMMANDS = {"up", "web", "worker"}


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(words).parse_args(words)
    if argv is None and args.command in SERVER_COMMANDS:
        # deferred: only the server's own commands hide their secrets; a client command never loads this
        from aiconsole import secret_env

        secret_env.reexec_without_secrets()  # returns only when there was nothing to hide
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

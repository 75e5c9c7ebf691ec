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
    "aiconsole.cli.server",
    "aiconsole.cli.cluster",
    "aiconsole.cli.admin",
    "aiconsole.cli.auth",
    "aiconsole.cli.jobs",
    "aiconsole.cli.local",
    "aiconsole.cli.models",
    "aiconsole.cli.runtimes",
    "aiconsole.cli.gcloud",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiconsole", description="AI Console: self-hosted AI Platform Training.")
    parser.add_argument("--data-dir", help="data directory (default: $AICONSOLE_DATA_DIR or ~/.aiconsole)")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""What every client command shares: the parser class, common flags and error reporting."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from console.cli import config, output
from console.cli.client import Client, CliError


class Parser(argparse.ArgumentParser):
    """gcloud-like parsing: no abbreviated flags, and ``-- ARGS`` handed over untouched.

    A parser with ``user_args_dest`` set keeps everything after the first ``--`` for the
    trainer, even strings that look like flags, instead of letting argparse match them.
    """

    user_args_dest: str | None = None

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        if self.user_args_dest is None:
            return super().parse_known_args(args, namespace)
        args = list(sys.argv[1:] if args is None else args)
        rest: list[str] = []
        if "--" in args:
            split = args.index("--")
            args, rest = args[:split], args[split + 1:]
        parsed, extras = super().parse_known_args(args, namespace)
        setattr(parsed, self.user_args_dest, rest)
        return parsed, extras


def add_group(commands, name: str, help_text: str) -> argparse._SubParsersAction:
    """A command group (``jobs``, ``local``, ``auth``) whose subcommands use Parser."""
    group = commands.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND",
                                parser_class=Parser)


def connection_flags(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    group = parser.add_argument_group("console connection")
    group.add_argument("--url", help="the console's address (default: $AICONSOLE_URL, the config file, "
                                     f"or {config.DEFAULT_URL})")
    group.add_argument("--token", help="API token (default: $AICONSOLE_TOKEN or the config file)")
    group.add_argument("--project", help="project id (default: $AICONSOLE_PROJECT, the config file, "
                                         f"or {config.DEFAULT_PROJECT})")
    if formats:
        parser.add_argument("--format", type=output.parse_format, default=None,
                            help="output format: json, yaml or value(FIELD,...) (default: readable text)")


def settings(args) -> config.Resolved:
    return config.resolve({"url": getattr(args, "url", None), "token": getattr(args, "token", None),
                           "project": getattr(args, "project", None)})


def client(args) -> Client:
    return Client(settings(args))


def command(name: str) -> Callable:
    """Report CliError and ConfigError as ``ERROR: (aiconsole.NAME) message`` and exit non-zero."""

    def decorate(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(func)
        def run(args: argparse.Namespace) -> int:
            try:
                return func(args)
            except CliError as error:
                output.error(name, error.message)
                return error.exit_code
            except config.ConfigError as error:
                output.error(name, str(error))
                return 1
            except KeyboardInterrupt:
                output.status("\nInterrupted.")
                return 130

        return run

    return decorate

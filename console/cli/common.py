"""What every client command shares: the parser class, common flags and error reporting."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable

import yaml

from aiconsole import yamlsafe
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
            args, rest = args[:split], args[split + 1 :]
        parsed, extras = super().parse_known_args(args, namespace)
        setattr(parsed, self.user_args_dest, rest)
        return parsed, extras


# How the user called this CLI, for the commands its hints suggest: ``gcloud ai-platform`` when the
# gcloud wrapper ran it (console.cli.gcloud), so a script's user is told in gcloud's words.
spoken_as = "aiconsole"


def spoken(words: str) -> str:
    """A command to suggest, in the words the user called this CLI with: ``aiconsole jobs describe
    J``, or ``gcloud ai-platform jobs describe J`` through the gcloud wrapper."""
    return f"{spoken_as} {words}"


def add_group(commands, name: str, help_text: str) -> argparse._SubParsersAction:
    """A command group (``jobs``, ``local``, ``auth``) whose subcommands use Parser."""
    group = commands.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND", parser_class=Parser)


# gcloud's regional endpoints for models, versions, operations and predictions (its
# ``command_lib/ml_engine/constants.SUPPORTED_REGIONS_WITH_GLOBAL``).
ENDPOINT_REGIONS = (
    "global",
    "asia-east1",
    "asia-northeast1",
    "asia-southeast1",
    "australia-southeast1",
    "europe-west1",
    "europe-west2",
    "europe-west3",
    "europe-west4",
    "northamerica-northeast1",
    "us-central1",
    "us-east1",
    "us-east4",
    "us-west1",
)


def endpoint_region(text: str) -> str:
    if text not in ENDPOINT_REGIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a region with an AI Platform Prediction endpoint; "
            f"choose from: {', '.join(ENDPOINT_REGIONS)}"
        )
    return text


def region_flag(parser: argparse.ArgumentParser) -> None:
    """gcloud's ``--region`` for models, versions and operations: it picks the global or a regional
    endpoint there; this console serves every region at its one address, so it is checked and kept."""
    parser.add_argument(
        "--region",
        type=endpoint_region,
        metavar="REGION",
        help="gcloud's endpoint: 'global' or a region such as us-central1 (the console serves them all at one address)",
    )


def connection_flags(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    # gcloud's global --quiet answers its prompts; aiconsole never prompts, so scripts may keep it.
    parser.add_argument("--quiet", "-q", action="store_true", help="accepted for gcloud's scripts: nothing asks")
    group = parser.add_argument_group("console connection")
    group.add_argument(
        "--url", help=f"the console's address (default: $AICONSOLE_URL, the config file, or {config.DEFAULT_URL})"
    )
    group.add_argument("--token", help="API token (default: $AICONSOLE_TOKEN or the config file)")
    group.add_argument(
        "--project", help=f"project id (default: $AICONSOLE_PROJECT, the config file, or {config.DEFAULT_PROJECT})"
    )
    if formats:
        parser.add_argument(
            "--format",
            type=output.parse_format,
            default=None,
            help="output format: json, yaml or value(FIELD,...) (default: readable text)",
        )


def settings(args) -> config.Resolved:
    return config.resolve(
        {
            "url": getattr(args, "url", None),
            "token": getattr(args, "token", None),
            "project": getattr(args, "project", None),
        }
    )


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


def read_yaml_file(path: str, flag: str):
    """A YAML (or JSON) file a flag names, within the bounds every YAML the console reads has
    (aiconsole.yamlsafe), with a message naming the flag and the file for every problem."""
    try:
        data = yamlsafe.read_file(path)
        return json.loads(data) if data.lstrip().startswith(b"{") else yamlsafe.load(data)
    except yamlsafe.YamlLimitError as error:
        raise CliError(f"{flag} {path} is refused: {error}", exit_code=2) from None
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise CliError(f"{flag} {path}: not JSON or YAML ({error})", exit_code=2) from None

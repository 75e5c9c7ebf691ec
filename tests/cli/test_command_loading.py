"""A command imports the module that defines it, not every command's: a user's script pays for what
it runs (console/cli/__init__.py, COMMANDS)."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from console.cli import COMMANDS, build_parser, command_named


def test_each_module_registers_the_commands_it_is_listed_with():
    for module, names in COMMANDS.items():
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(commands)
        assert tuple(commands.choices) == names, module


def _modules_loaded_for(*argv: str) -> set[str]:
    code = (
        "import sys; from console.cli import build_parser; build_parser(sys.argv[1:]); "
        "print(' '.join(m for m in sys.modules if m.startswith('console.cli.')))"
    )
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True, timeout=60)
    return set(done.stdout.split())


def test_a_client_command_loads_only_its_own_module_and_no_admin_or_server_code():
    loaded = _modules_loaded_for("--data-dir", "/tmp/somewhere", "jobs", "list")
    assert "console.cli.jobs" in loaded
    assert not loaded & {"console.cli.admin", "console.cli.server", "console.cli.local", "console.cli.images"}


def test_help_and_an_unknown_command_still_list_every_command(capsys):
    assert command_named(["--help"]) is None and command_named(["jbos", "list"]) is None
    with pytest.raises(SystemExit):
        build_parser(["jbos"]).parse_args(["jbos"])
    said = capsys.readouterr().err
    assert "invalid choice: 'jbos'" in said
    assert all(name in said for names in COMMANDS.values() for name in names)

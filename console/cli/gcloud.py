"""A ``gcloud`` for existing shell scripts: ``gcloud ai-platform …`` and ``gcloud ml-engine …`` (and
their ``beta`` and ``alpha`` forms), and Vertex AI's ``gcloud ai custom-jobs|hp-tuning-jobs …``, reach
the console, ``gcloud config get-value|list|set`` answer
for the console's project and region (build scripts name images ``gcr.io/$PROJECT_ID/…`` from
them), every other ``gcloud`` command goes to Google's own when it is
installed.

``aiconsole gcloud-wrapper DIR`` writes ``DIR/gcloud``; put DIR first on ``PATH``. The wrapper
runs this module, which rewrites the command line into ``aiconsole``'s (the same groups and
flags: ``jobs``, ``local``, ``models``, ``versions``, ``predict``) and drops gcloud's global flags
that have no meaning here (``--quiet``, ``--verbosity``, ``--account``, …).
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

GROUPS = {"ai-platform", "ml-engine", "ai"}  # "ai": Vertex AI's custom-jobs and hp-tuning-jobs (console.cli.vertex)
# gcloud's release tracks: ``gcloud beta ai-platform …`` runs the same commands (their beta flags too).
TRACKS = {"beta", "alpha"}
WRAPPER_DIR_VARIABLE = "AICONSOLE_GCLOUD_WRAPPER_DIR"
VERTEX_GROUPS = {"custom-jobs", "hp-tuning-jobs"}
# gcloud's global flags: kept (aiconsole's commands take them) or dropped, and whether each takes a value.
KEPT = {"--project": True, "--format": True, "--region": True}
DROPPED = {
    "--quiet": False,
    "-q": False,
    "--verbosity": True,
    "--account": True,
    "--configuration": True,
    "--impersonate-service-account": True,
    "--billing-project": True,
    "--trace-token": True,
    "--log-http": False,
    "--user-output-enabled": False,
    "--no-user-output-enabled": False,
    "--flatten": True,
    "--flags-file": True,
    "--access-token-file": True,
}


def translate(argv: list[str]) -> list[str] | None:
    """The ``aiconsole`` arguments for a ``gcloud`` command line, or None when it is not ours."""
    kept: list[str] = []
    rest: list[str] = []
    group_seen = track_seen = False
    group = ""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            rest += argv[index:]
            break
        name = token.split("=", 1)[0]
        table = KEPT if name in KEPT else DROPPED if name in DROPPED else None
        if table is not None:
            takes_value = table[name] and "=" not in token
            words = argv[index : index + (2 if takes_value else 1)]
            if table is KEPT:
                kept += words
            index += len(words)
            continue
        if not group_seen and not track_seen and token in TRACKS:
            track_seen = True
        elif not group_seen and not token.startswith("-"):
            if token not in GROUPS:
                return None
            group_seen, group = True, token
        elif group_seen:
            rest.append(token)
        else:
            return None  # a flag of gcloud's we do not know, before the group: not ours to guess
        index += 1
    if not group_seen:
        return None
    if group == "ai":  # ``aiconsole ai …``: only the groups served here; any other goes to Google's gcloud
        if not rest or rest[0] not in VERTEX_GROUPS:
            return None
        rest = ["ai", *rest]
    cut = rest.index("--") if "--" in rest else len(rest)
    return rest[:cut] + kept + rest[cut:]


def spoken_prefix(argv: list[str]) -> str:
    """``gcloud beta ai-platform``: the words the user called the wrapper with, up to the group."""
    words = ["gcloud"]
    for token in argv:
        if token in TRACKS or token in GROUPS:
            words.append(token)
        if token in GROUPS:
            break
    return " ".join(words)


def real_gcloud() -> str | None:
    """Google's gcloud on PATH, skipping the wrapper's own folder."""
    skip = os.environ.get(WRAPPER_DIR_VARIABLE)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or (skip and os.path.realpath(folder) == os.path.realpath(skip)):
            continue
        found = shutil.which("gcloud", path=folder)
        if found:
            return found
    return None


CONFIG_PROPERTIES = {
    "project": "project",
    "core/project": "project",
    "core.project": "project",
    "ai_platform/region": "region",
    "ai_platform.region": "region",
}

# gcloud's global flags that take their value as the next word
VALUED_FLAGS = {"--format", "--project", "--configuration", "--account", "--verbosity", "--billing-project"}


def config_answer(argv: list[str]) -> tuple[str, str] | None:
    """What ``gcloud config get-value|get|list|set`` does here for the properties this console
    keeps (the project, and ``ai_platform/region``), as gcloud prints it: (stdout, stderr). The
    values are the ones this CLI's commands use (--project, $AICONSOLE_PROJECT, the config file,
    the default); ``set`` writes the config file. None for any other command, which goes on to
    Google's gcloud. ``--format 'value(core.project)'`` prints the bare value."""
    words, skip = [], False
    for word in argv:
        if not skip and not word.startswith("-"):
            words.append(word)
        skip = word in VALUED_FLAGS
    if len(words) < 2 or words[0] != "config" or words[1] not in ("get-value", "get", "list", "set"):
        return None
    verb, asked = words[1], words[2:]
    if verb == "set":
        if len(asked) != 2 or asked[0] not in CONFIG_PROPERTIES:
            return None
    elif (verb != "list" and len(asked) != 1) or not set(asked) <= set(CONFIG_PROPERTIES):
        return None
    from console.cli import config  # deferred: the wrapper answers most commands without it

    if verb == "set":
        key, value = CONFIG_PROPERTIES[asked[0]], asked[1]
        config.save_file({**config.load_file(), key: value})
        section = "core" if key == "project" else "ai_platform"
        return "", f"Updated property [{section}/{key}].\n"
    settings = config.resolve({"project": _flag_value(argv, "--project")})
    values: dict[str, str | None] = {"project": settings.project, "region": settings.region}
    if verb in ("get-value", "get"):
        shown = values[CONFIG_PROPERTIES[asked[0]]]
        return (shown + "\n", "") if shown else ("", "(unset)\n")
    keys = [CONFIG_PROPERTIES[name] for name in asked] or ["project", "region"]
    shape = _flag_value(argv, "--format") or ""
    if shape.startswith("value(") and shape.endswith(")"):
        named = [field.strip() for field in shape[len("value(") : -1].split(",")]
        if not set(named) <= set(CONFIG_PROPERTIES):
            return None
        return "\t".join(values[CONFIG_PROPERTIES[field]] or "" for field in named) + "\n", ""
    lines = []
    if "project" in keys:
        lines += ["[core]", f"project = {values['project']}", ""]
    if "region" in keys and values["region"]:
        lines += ["[ai_platform]", f"region = {values['region']}", ""]
    return "\n".join(lines) + "\n", "Your active configuration is: [default]\n"


def _flag_value(argv: list[str], name: str) -> str | None:
    for index, word in enumerate(argv):
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
        if word == name and index + 1 < len(argv):
            return argv[index + 1]
    return None


def run(argv: list[str]) -> int:
    from console.cli.config import ConfigError  # deferred, as in config_answer

    try:
        answer = config_answer(argv)
    except ConfigError as error:
        print(f"ERROR: (gcloud.config) {error}", file=sys.stderr)
        return 1
    if answer is not None:
        sys.stdout.write(answer[0])
        sys.stderr.write(answer[1])
        return 0
    translated = translate(argv)
    if translated is not None:
        # deferred: console.cli imports this module (its gcloud-compatible entry)
        from console.cli import common, main

        common.spoken_as = spoken_prefix(argv)
        return main(translated)
    real = real_gcloud()
    if real is None:
        print(
            "gcloud: AI Console handles only `gcloud ai-platform …`, `gcloud ml-engine …` and `gcloud ai "
            "custom-jobs|hp-tuning-jobs …`, and no other "
            "gcloud (the Google Cloud SDK) is on PATH for: gcloud " + shlex.join(argv),
            file=sys.stderr,
        )
        return 127
    os.execv(real, [real, *argv])
    return 1  # not reached


def write_wrapper(folder: Path) -> Path:
    """``folder/gcloud``: a script that runs this module with this installation's Python."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gcloud"
    path.write_text(
        "#!/bin/sh\n"
        "# Written by `aiconsole gcloud-wrapper`: `gcloud ai-platform|ml-engine …` goes to AI Console,\n"
        "# any other gcloud command to Google's gcloud further along PATH.\n"
        f"{WRAPPER_DIR_VARIABLE}={shlex.quote(str(folder))} exec {shlex.quote(sys.executable)} "
        '-m console.cli.gcloud "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def cmd_wrapper(args) -> int:
    path = write_wrapper(Path(args.folder))
    print(f"Wrote {path}. Put its folder first on PATH, e.g.\n  export PATH={shlex.quote(str(path.parent))}:$PATH")
    return 0


def register(commands) -> None:
    parser = commands.add_parser("gcloud-wrapper", help="write a `gcloud` that sends `gcloud ai-platform …` here")
    parser.add_argument("folder", help="folder to write the `gcloud` script into (put it first on PATH)")
    parser.set_defaults(func=cmd_wrapper)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

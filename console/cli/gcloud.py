"""A ``gcloud`` for existing shell scripts: ``gcloud ai-platform …`` and ``gcloud ml-engine …`` (and
their ``beta`` and ``alpha`` forms) reach the console, every other ``gcloud`` command goes to
Google's own when it is installed.

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

GROUPS = {"ai-platform", "ml-engine"}
# gcloud's release tracks: ``gcloud beta ai-platform …`` runs the same commands (their beta flags too).
TRACKS = {"beta", "alpha"}
WRAPPER_DIR_VARIABLE = "AICONSOLE_GCLOUD_WRAPPER_DIR"
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
            group_seen = True
        elif group_seen:
            rest.append(token)
        else:
            return None  # a flag of gcloud's we do not know, before the group: not ours to guess
        index += 1
    if not group_seen:
        return None
    cut = rest.index("--") if "--" in rest else len(rest)
    return rest[:cut] + kept + rest[cut:]


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


def run(argv: list[str]) -> int:
    translated = translate(argv)
    if translated is not None:
        # deferred: console.cli imports this module (its gcloud-compatible entry)
        from console.cli import main

        return main(translated)
    real = real_gcloud()
    if real is None:
        print(
            "gcloud: AI Console handles only `gcloud ai-platform …` and `gcloud ml-engine …`, and no other "
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

"""``aiconsole runtimes list`` and ``aiconsole runtimes build VERSION``: this machine's runtime stacks.

They work on the data dir's environment cache (``AICONSOLE_ENV_DIR``), like the executor, so a
worker can build its runtimes before its first job.
"""

from __future__ import annotations

import sys

from console.cli.server import setup_django


def cmd_list(args) -> int:
    setup_django(args.data_dir)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs.executor.environments import inventory

    rows = inventory(with_sizes=True)
    header = (
        "RUNTIME",
        "PYTHON",
        "BUILD",
        "TENSORFLOW",
        "SCIKIT-LEARN",
        "XGBOOST",
        "PANDAS",
        "INTERPRETER",
        "BUILT",
        "SIZE",
    )
    table = [header] + [
        (
            row["runtimeVersion"],
            row["pythonVersion"],
            row["variant"],
            row["frameworks"].get("TensorFlow", "-"),
            row["frameworks"].get("scikit-learn", "-"),
            row["frameworks"].get("XGBoost", "-"),
            row["frameworks"].get("pandas", "-"),
            row["interpreter"] or "missing",
            "yes" if row["built"] else "no",
            _size(row["sizeBytes"]),
        )
        for row in rows
        if args.all or row["variant"] == "cpu"
    ]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    for row in rows:
        if row["variant"] == "cpu" and row["notes"] and args.notes:
            print(f"\n{row['runtimeVersion']}: " + "\n  ".join(row["notes"]))
    return 0


def _size(size: int | None) -> str:
    if not size:
        return "-"
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def cmd_build(args) -> int:
    setup_django(args.data_dir)
    # deferred: Django is configured by setup_django() first; the client commands never load it
    from jobs import runtimes
    from jobs.executor import environments

    runtime = runtimes.RUNTIMES.get(args.version)
    if runtime is None:
        print(
            f"aiconsole runtimes build: unknown runtime version {args.version!r}; known: "
            f"{', '.join(runtimes.RUNTIMES)}.",
            file=sys.stderr,
        )
        return 2
    python = args.python or runtimes.default_python(runtime)
    reason = runtimes.unavailable_reason(runtime.name, python)
    if reason:
        print(f"aiconsole runtimes build: {reason}", file=sys.stderr)
        return 2
    try:
        environment = environments.runtime_environment(
            runtime.name, lambda line: print(line, flush=True), python_version=python, variant=args.build
        )
    except environments.EnvironmentError_ as error:
        print(f"aiconsole runtimes build: {error}", file=sys.stderr)
        return 1
    print(environments.describe(environment, environment.frozen()))
    print(f"{environment.path} ({_size(environments.size_on_disk(environment.path))})")
    return 0


def register(commands) -> None:
    group = commands.add_parser("runtimes", help="runtime versions on this machine: list, build")
    sub = group.add_subparsers(dest="runtimes_command", required=True)
    listing = sub.add_parser("list", help="every runtime version, its Python and frameworks, built or not")
    listing.add_argument("--all", action="store_true", help="also list the GPU-capable builds")
    listing.add_argument("--notes", action="store_true", help="print where a runtime differs from the original's list")
    listing.set_defaults(func=cmd_list)
    build = sub.add_parser("build", help="build a runtime version's environment now (before a job needs it)")
    build.add_argument("version", help="runtime version, e.g. 2.11, 1.15 or current")
    build.add_argument("--python", help="Python version (default: the runtime's, 3.7 for the original's)")
    build.add_argument("--build", choices=["cpu", "gpu"], default="cpu", help="CPU (default) or GPU-capable build")
    build.set_defaults(func=cmd_build)

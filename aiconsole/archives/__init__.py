"""Safety checks for user-supplied Python package archives.

Trainer packages (sdists and wheels) come from users, so every archive is
inspected here before anything installs or runs it.  Malformed or hostile
archives are refused with an :class:`ArchiveError` whose message names the
file and the rule it broke, so it can be shown to the user unchanged.

This package is pure: it reads the archive it is given and nothing else, and it
never extracts anything except through :func:`safe_extract`, which repeats
every check and then writes the members itself without following links.

The public API lives here; the rest is split by what it checks: ``errors`` (how a refusal is
reported), ``limits`` (sizes and counts), ``formats`` (which archive a file is), ``members``
(names, link targets, what a scan yields), ``tars`` and ``zips`` (reading each format),
``tree`` (checks that need every member), ``scanning`` (one pass over an archive),
``packages`` (sdist and wheel layout and metadata) and ``extraction`` (writing the members).
"""

from pathlib import Path

from aiconsole.archives import scanning
from aiconsole.archives.errors import ArchiveError, reading
from aiconsole.archives.extraction import (
    ByteBudget,
    discard_output,
    extract_tar,
    extract_zip,
    prepare_destination,
)
from aiconsole.archives.formats import detect_format, package_kind
from aiconsole.archives.limits import (
    MAX_MEMBERS,
    MAX_RATIO,
    MAX_TOTAL_BYTES,
    RATIO_MIN_BYTES,
    Limits,
)
from aiconsole.archives.packages import (
    PackageInfo,
    describe_provided,
    is_dotted_name,
    is_runnable,
    nothing_wanted,
    sdist_info,
    sdist_metadata_wanted,
    wheel_info,
    wheel_metadata_wanted,
)

__all__ = [
    "MAX_MEMBERS",
    "MAX_RATIO",
    "MAX_TOTAL_BYTES",
    "RATIO_MIN_BYTES",
    "ArchiveError",
    "PackageInfo",
    "inspect_package",
    "require_module",
    "safe_extract",
]


def inspect_package(
    path: Path,
    *,
    filename: str | None = None,
    max_members: int = MAX_MEMBERS,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_ratio: float = MAX_RATIO,
) -> PackageInfo:
    """Check that ``path`` is a safe, well-formed sdist or wheel and describe it.

    ``filename`` is the name the user gave the file (defaults to
    ``path.name``); it appears in error messages and its suffix must agree
    with the archive format found in the content.  Nothing is extracted and
    tar streams are read once, member by member.  Raises ArchiveError.
    """
    display = filename or path.name
    limits = Limits(max_members, max_total_bytes, max_ratio)
    fmt = detect_format(path, display)
    kind = package_kind(display, fmt)
    wanted = wheel_metadata_wanted if kind == "wheel" else sdist_metadata_wanted
    scan = scanning.scan(path, display, fmt, limits, wanted)
    if kind == "wheel":
        return wheel_info(display, scan)
    return sdist_info(display, scan)


def require_module(packages: list[PackageInfo], python_module: str) -> PackageInfo:
    """Return the first package that lets ``python -m python_module`` run.

    The module must be a module file, or a package with a ``__main__``
    module.  Raises ArchiveError naming the packages and what they provide.
    """
    if not is_dotted_name(python_module):
        raise ArchiveError(
            f"{python_module!r} is not a valid Python module name (expected dotted identifiers such as trainer.task)"
        )
    if not packages:
        raise ArchiveError(f"The module {python_module} cannot be run: no trainer packages were given")
    for package in packages:
        if is_runnable(package, python_module):
            return package
    for package in packages:
        if python_module in package.modules:
            raise ArchiveError(
                f"The module {python_module} in {package.filename} is a package without a "
                f"__main__.py, so python -m {python_module} cannot run it"
            )
    filenames = ", ".join(package.filename for package in packages)
    raise ArchiveError(
        f"The module {python_module} was not found in the trainer packages ({filenames}). {describe_provided(packages)}"
    )


def safe_extract(
    path: Path,
    dest: Path,
    *,
    max_members: int = MAX_MEMBERS,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_ratio: float = MAX_RATIO,
) -> list[Path]:
    """Check the archive at ``path`` like inspect_package, then extract it into ``dest``.

    ``dest`` must not exist or be an empty directory.  Any tar or zip archive
    is accepted (the package-layout rules do not apply).  Files get mode 0o644
    or 0o755, links are never followed, symlinks are created last, and the
    bytes actually written are counted so that lying headers cannot exceed
    ``max_total_bytes``.  On any failure the partial output is removed.
    Returns the paths created for files and hard links (in archive order),
    then for symlinks.
    """
    display = path.name
    limits = Limits(max_members, max_total_bytes, max_ratio)
    fmt = detect_format(path, display)
    scan = scanning.scan(path, display, fmt, limits, nothing_wanted)
    created = prepare_destination(dest)
    budget = ByteBudget(display, max_total_bytes)
    try:
        with reading(display):
            if fmt.container == "zip":
                return extract_zip(path, display, scan, limits, dest, budget)
            return extract_tar(path, display, scan, limits, dest, budget)
    except BaseException:
        # Nothing half-written may survive, whatever the reason.
        discard_output(dest, created)
        raise

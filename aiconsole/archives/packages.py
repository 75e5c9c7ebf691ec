"""What a trainer package is and provides: sdist and wheel layout, metadata and modules.

A wheel must be named as wheels are and carry one ``.dist-info`` with a WHEEL and a METADATA that
agree with its name; an sdist holds one top-level directory with PKG-INFO, setup.py or
pyproject.toml. From the files, ``PackageInfo`` lists the modules ``python -m`` could run and the
requirements the package declares.
"""

import keyword
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from aiconsole.archives.errors import ArchiveError
from aiconsole.archives.members import Member, Scan

_WHEEL_FILENAME = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?)"
    r"-(?P<version>[^-\s]+)"
    r"(?:-(?P<build>\d[^-\s]*))?"
    r"-(?P<python>[^-\s]+)-(?P<abi>[^-\s]+)-(?P<platform>[^-\s]+)\.whl$",
    re.IGNORECASE,
)
_SDIST_MARKERS = ("PKG-INFO", "setup.py", "pyproject.toml")
_EXTENSION_SUFFIXES = (".so", ".pyd")
_MAX_LISTED_MODULES = 10


@dataclass(frozen=True)
class PackageInfo:
    """What inspecting a trainer package found.

    ``modules`` holds every dotted module name importable once the package is
    installed, packages included; ``packages`` is the subset that are
    packages (directories) rather than module files, which decides whether
    ``python -m`` can run them.
    """

    filename: str
    kind: str
    name: str | None
    version: str | None
    modules: frozenset[str]
    packages: frozenset[str] = frozenset()
    requires: tuple[str, ...] = ()  # what it declares it needs (Requires-Dist, egg-info requires.txt)


def _parse_headers(text: str) -> dict[str, str]:
    """Parse RFC 822 style metadata headers (first occurrence wins, keys lowercased)."""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the body (long description) starts after the first blank line
        if line[0] in " \t":
            continue  # a folded continuation; Name and Version never fold
        key, separator, value = line.partition(":")
        if separator:
            headers.setdefault(key.strip().lower(), value.strip())
    return headers


def _requires_dist(text: str | None) -> tuple[str, ...]:
    """Every Requires-Dist header of a METADATA or PKG-INFO file, extras' requirements left out."""
    found = []
    for line in (text or "").splitlines():
        if not line.strip():
            break
        key, separator, value = line.partition(":")
        if separator and key.strip().lower() == "requires-dist" and "extra ==" not in value:
            found.append(value.strip())
    return tuple(found)


def _egg_info_requires(text: str | None) -> tuple[str, ...]:
    """The unconditional requirements of an sdist's ``*.egg-info/requires.txt``."""
    found = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("["):
            break  # [extra] and [:marker] sections follow the unconditional ones
        if line and not line.startswith("#"):
            found.append(line)
    return tuple(found)


def _canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def nothing_wanted(name: str) -> bool:
    return False


def wheel_metadata_wanted(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in ("WHEEL", "METADATA")


def sdist_metadata_wanted(name: str) -> bool:
    parts = name.split("/")
    if len(parts) == 3 and parts[1].endswith(".egg-info") and parts[2] == "requires.txt":
        return True
    return len(parts) == 2 and parts[1] == "PKG-INFO"


def _basename(display: str) -> str:
    return display.replace("\\", "/").rsplit("/", 1)[-1]


def wheel_info(display: str, scan: Scan) -> PackageInfo:
    match = _WHEEL_FILENAME.match(_basename(display))
    if match is None:
        raise ArchiveError(
            f"{display}: a wheel's name must look like name-version-python-abi-platform.whl "
            "(for example trainer-0.1-py3-none-any.whl)"
        )
    for member in scan.members:
        if member.kind in ("symlink", "hardlink"):
            raise ArchiveError(f"{display}: member {member.name!r} is a link; wheels may not contain links")
    dist_info = _wheel_dist_info(display, scan.members)
    _check_wheel_file(display, dist_info, scan.texts.get(f"{dist_info}/WHEEL"))
    metadata_text = scan.texts.get(f"{dist_info}/METADATA")
    if metadata_text is None:
        raise ArchiveError(f"{display}: the wheel has no {dist_info}/METADATA file")
    metadata = _parse_headers(metadata_text)
    name, version = metadata.get("name"), metadata.get("version")
    if not name or not version:
        raise ArchiveError(f"{display}: {dist_info}/METADATA does not give a Name and a Version")
    if _canonical_name(name) != _canonical_name(match["name"]):
        raise ArchiveError(
            f"{display}: the file name says the project is {match['name']!r} but its METADATA says {name!r}"
        )
    modules, packages = _modules_from_paths(_wheel_module_paths(scan.members))
    return PackageInfo(display, "wheel", name, version, modules, packages, _requires_dist(metadata_text))


def _wheel_dist_info(display: str, members: list[Member]) -> str:
    found = sorted({m.name.split("/")[0] for m in members if m.name.split("/")[0].endswith(".dist-info")})
    if not found:
        raise ArchiveError(f"{display}: the wheel has no .dist-info directory")
    if len(found) > 1:
        raise ArchiveError(f"{display}: the wheel has several .dist-info directories: {', '.join(found)}")
    return found[0]


def _check_wheel_file(display: str, dist_info: str, text: str | None) -> None:
    if text is None:
        raise ArchiveError(f"{display}: the wheel has no {dist_info}/WHEEL file")
    wheel_version = _parse_headers(text).get("wheel-version", "")
    if not re.fullmatch(r"1(\.\d+)*", wheel_version):
        raise ArchiveError(f"{display}: {dist_info}/WHEEL has an unsupported Wheel-Version {wheel_version!r}")


def _wheel_module_paths(members: list[Member]) -> Iterator[str]:
    """Installed paths of a wheel's files, relative to site-packages."""
    for member in members:
        if member.kind == "dir":
            continue
        parts = member.name.split("/")
        top = parts[0]
        if top.endswith(".dist-info"):
            continue
        if top.endswith(".data"):
            # Only purelib/platlib land in site-packages; scripts, headers, data do not.
            if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
                yield "/".join(parts[2:])
            continue
        yield member.name


def sdist_info(display: str, scan: Scan) -> PackageInfo:
    top = _sdist_top_directory(display, scan.members)
    files = {m.name for m in scan.members if m.kind != "dir"}
    if not any(f"{top}/{marker}" in files for marker in _SDIST_MARKERS):
        raise ArchiveError(
            f"{display}: {top}/ contains no PKG-INFO, setup.py or pyproject.toml, so it is not a Python source package"
        )
    pkg_info = scan.texts.get(f"{top}/PKG-INFO")
    name, version = _sdist_name_version(top, pkg_info)
    modules, packages = _modules_from_paths(_sdist_module_paths(top, scan.members))
    egg_info = next(
        (text for path, text in sorted(scan.texts.items()) if path.endswith(".egg-info/requires.txt")), None
    )
    requires = _requires_dist(pkg_info) or _egg_info_requires(egg_info)
    return PackageInfo(display, "sdist", name, version, modules, packages, requires)


def _sdist_top_directory(display: str, members: list[Member]) -> str:
    tops = sorted({m.name.split("/")[0] for m in members})
    if len(tops) != 1:
        found = ", ".join(tops[:5]) if tops else "nothing"
        if len(tops) > 5:
            found += ", ..."
        raise ArchiveError(
            f"{display}: an sdist must contain a single top-level directory "
            f"(like trainer-0.1/), but it contains {found}"
        )
    top = tops[0]
    if any(m.name == top and m.kind != "dir" for m in members):
        raise ArchiveError(f"{display}: an sdist must contain a single top-level directory, not a file")
    return top


def _sdist_name_version(top: str, pkg_info: str | None) -> tuple[str | None, str | None]:
    """Name and version from PKG-INFO, falling back to the ``name-version`` directory."""
    headers = _parse_headers(pkg_info) if pkg_info else {}
    dir_name, dash, dir_version = top.rpartition("-")
    if not dash or not dir_name or not dir_version[:1].isdigit():
        dir_name, dir_version = top, ""
    return headers.get("name") or dir_name or None, headers.get("version") or dir_version or None


def _sdist_module_paths(top: str, members: list[Member]) -> Iterator[str]:
    prefix = f"{top}/"
    for member in members:
        if member.kind == "dir" or not member.name.startswith(prefix):
            continue
        relative = member.name[len(prefix) :]
        # src layout: src/trainer/task.py installs as trainer/task.py.
        yield relative.removeprefix("src/")


def _module_stem(filename: str) -> str | None:
    if filename.endswith(".py"):
        return filename[: -len(".py")]
    if filename.endswith(_EXTENSION_SUFFIXES):
        # trainer/_fast.cpython-311-x86_64-linux-gnu.so imports as trainer._fast
        return filename.split(".", 1)[0]
    return None


def _is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def is_dotted_name(name: str) -> bool:
    return bool(name) and all(_is_identifier(part) for part in name.split("."))


def _modules_from_paths(paths: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """Dotted module names (and the package subset) importable from these file paths."""
    modules: set[str] = set()
    packages: set[str] = set()
    for path in paths:
        *directories, filename = path.split("/")
        stem = _module_stem(filename)
        if stem is None or not all(_is_identifier(d) for d in directories):
            continue
        if stem != "__init__" and not _is_identifier(stem):
            continue
        for depth in range(1, len(directories) + 1):
            package = ".".join(directories[:depth])
            packages.add(package)
            modules.add(package)
        if stem != "__init__":
            modules.add(".".join([*directories, stem]))
    return frozenset(modules), frozenset(packages)


def is_runnable(package: PackageInfo, module: str) -> bool:
    """``python -m`` runs module files, and packages only through their __main__."""
    if module not in package.modules:
        return False
    return module not in package.packages or f"{module}.__main__" in package.modules


def describe_provided(packages: list[PackageInfo]) -> str:
    provided = sorted(
        set().union(*(package.modules for package in packages)),
        key=lambda module: (module.count("."), module),
    )
    if not provided:
        return "The packages provide no Python modules."
    listed = ", ".join(provided[:_MAX_LISTED_MODULES])
    more = len(provided) - _MAX_LISTED_MODULES
    if more > 0:
        listed += f" and {more} more"
    return f"The packages provide: {listed}"

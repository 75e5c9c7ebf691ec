"""Runtime versions as the original shipped them: their package lists, lock files and interpreters.

``runtimes.toml`` beside this file is the original's runtime version list (TensorFlow,
scikit-learn, XGBoost, pandas, … at the versions each image had) plus ``current``, our extension
for new code. ``locks/`` holds each runtime's full resolution with hashes, per Python and build
(``2.11-py3.7-cpu.txt``), made by ``scripts/lock-runtimes``; environments are installed from
those files only, so every worker and every rebuild gets the same bytes.

An interpreter for a runtime's Python is found (or installed) by ``pythons``. A pair that cannot be
had is refused at submit (``unavailable_reason``), never run on another Python.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from jobs.runtimes import pythons

HERE = Path(__file__).resolve().parent
LOCK_DIR = HERE / "locks"
CURRENT = "current"
DEFAULT_RUNTIME_VERSION = "2.11"  # what a job without runtimeVersion runs, as on the original
VARIANTS = ("cpu", "gpu")
# The frameworks that job logs and the catalogue name, by distribution (the builds' names too).
FRAMEWORKS = {
    "tensorflow": "TensorFlow",
    "tensorflow-cpu": "TensorFlow",
    "tensorflow-gpu": "TensorFlow",
    "scikit-learn": "scikit-learn",
    "xgboost": "XGBoost",
    "xgboost-cpu": "XGBoost",
    "pandas": "pandas",
    "numpy": "NumPy",
    "scipy": "SciPy",
}


@dataclass(frozen=True)
class Runtime:
    """One runtime version: the Pythons it runs on and the packages it provides."""

    name: str
    pythons: tuple[str, ...]  # the Pythons we have a lock for, first is the default
    original_pythons: tuple[str, ...]  # what the original accepted for pythonVersion
    tensorflow: str
    packages: tuple[str, ...]
    cpu: tuple[str, ...]
    gpu: tuple[str, ...]
    notes: tuple[str, ...]
    source: str

    @property
    def is_extension(self) -> bool:
        return self.name == CURRENT

    @property
    def accepted_pythons(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.original_pythons + self.pythons))

    def lock_path(self, python: str, variant: str = "cpu") -> Path:
        return LOCK_DIR / f"{self.name}-py{python}-{variant}.txt"

    def frameworks(self) -> dict[str, str]:
        """``{"TensorFlow": "2.11.0", "scikit-learn": "1.0.2", …}`` as its list pins them (CPU build)."""
        pins = dict(requirement.split("==", 1) for requirement in self.packages + self.cpu)
        return framework_versions({canonical_name(name): version for name, version in pins.items()})

    def pinned(self, name: str) -> str | None:
        """The version the runtime's list pins for a distribution (``pinned("pandas")``)."""
        wanted = canonical_name(name)
        for requirement in self.packages + self.cpu:
            pin_name, _, version = requirement.partition("==")
            if canonical_name(pin_name) == wanted:
                return version
        return None


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def framework_versions(packages: dict[str, str]) -> dict[str, str]:
    """The frameworks among ``{canonical name: version}``, by label, in FRAMEWORKS' order."""
    found: dict[str, str] = {}
    for name, label in FRAMEWORKS.items():
        if name in packages:
            found.setdefault(label, packages[name])
    return found


def distributions(sites: list[Path]) -> dict[str, str]:
    """Every distribution in ``sites`` (in the order an interpreter searches them) with its
    version, read from their metadata files (dist-info, and the egg-info Debian's packages carry):
    the first of a name wins, as imports do. Read here, never by the environment's interpreter,
    which would run the ``.pth`` files in it (a job's layer holds the user's code)."""
    seen: dict[str, str] = {}
    for site in sites:
        for entry in sorted(site.iterdir()) if site.is_dir() else []:
            if entry.name.endswith(".dist-info"):
                meta = entry / "METADATA"
            elif entry.name.endswith(".egg-info"):
                meta = entry if entry.is_file() else entry / "PKG-INFO"
            else:
                continue
            if not meta.is_file() or meta.is_symlink():
                continue
            headers = _headers(meta)
            name = canonical_name(headers.get("name", ""))
            if name and name not in seen:
                seen[name] = headers.get("version", "")
    return seen


def _headers(meta: Path) -> dict[str, str]:
    headers: dict[str, str] = {}
    with open(meta, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            headers.setdefault(key.strip().lower(), value.strip())
    return headers


def _load() -> dict[str, Runtime]:
    data = tomllib.loads((HERE / "runtimes.toml").read_text())["runtime"]
    runtimes = {}
    for name, entry in data.items():
        pythons = tuple(entry["pythons"])
        runtimes[name] = Runtime(
            name=name,
            pythons=pythons,
            original_pythons=tuple(entry.get("original_pythons", pythons)),
            tensorflow=entry["tensorflow"],
            packages=tuple(entry.get("packages", ())),
            cpu=tuple(entry.get("cpu", ())),
            gpu=tuple(entry.get("gpu", ())),
            notes=tuple(entry.get("notes", ())),
            source=entry.get("source", ""),
        )
    return dict(sorted(runtimes.items(), key=lambda item: _order(item[0])))


def _order(name: str) -> tuple:
    if name == CURRENT:
        return (1, ())
    return (0, tuple(int(part) for part in name.split(".")))


RUNTIMES: dict[str, Runtime] = _load()


def version_key(version: str) -> tuple:
    """``"3.11"`` → ``(3, 11)``: Pythons sorted as versions (3.7 before 3.11), never as strings."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def offered_pythons(runtime: Runtime) -> list[str]:
    """The Pythons a form offers for ``runtime``: those it has a package stack for, as versions
    (never 2.7, which nothing current installs packages for, and which submit refuses)."""
    return sorted(runtime.pythons, key=version_key)


def default_python(runtime: Runtime) -> str:
    """pythonVersion when a job leaves it out: 3.7 for the original's, the console's for current."""
    if runtime.is_extension:
        own = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return own if own in runtime.pythons else runtime.pythons[0]
    return runtime.pythons[0]


# What a job's log says once its environment is ready (jobs.executor.environments.describe), the
# record of the Python and build it ran on: ``Runtime version 2.11, Python 3.7.16 (CPU build): …``.
BUILD_LINE = re.compile(r"^Runtime version (?P<runtime>\S+), Python (?P<python>[\d.]+) \((?P<variant>CPU|GPU) build\)")


def describe_build(runtime_version: str, python: str, variant: str, frameworks: list[str]) -> str:
    return (
        f"Runtime version {runtime_version}, Python {python} ({variant.upper()} build): "
        f"{', '.join(frameworks) or 'no frameworks'}."
    )


def parse_build(line: str) -> dict | None:
    """``{"runtime": "2.11", "python": "3.7.16", "variant": "cpu"}`` from a build line, else None."""
    match = BUILD_LINE.match(line or "")
    return {**match.groupdict(), "variant": match["variant"].lower()} if match else None


def resolve_pair(runtime_version: str | None, python_version: str | None) -> tuple[Runtime, str]:
    """The Runtime and Python a job's runtimeVersion and pythonVersion mean (defaults filled in)."""
    runtime = RUNTIMES[runtime_version or DEFAULT_RUNTIME_VERSION]
    return runtime, python_version or default_python(runtime)


def python_choice(runtime_version: str | None, python_version: str | None) -> tuple[str, str, bool]:
    """The Python a job runs on, why, in words for its page and log, and whether that differs from
    what the original would have run (runtime 1.15 without pythonVersion ran Python 2.7 there)."""
    runtime, python = resolve_pair(runtime_version, python_version)
    if python_version:
        return python, f"Python {python}, as the job asks (pythonVersion).", False
    original = "2.7" if "2.7" in runtime.original_pythons else None
    if original and original not in runtime.pythons:
        return (
            python,
            (
                f"Python {python}: the job sets no pythonVersion, and on AI Platform runtime version "
                f"{runtime.name} then ran Python 2.7, which this console cannot provide (uv installs no "
                f"packages for Python 2.7). It runs on Python {python}, the runtime's other Python; set "
                f"pythonVersion to {python} to say so."
            ),
            True,
        )
    return python, f"Python {python}, runtime version {runtime.name}'s default (the job sets no pythonVersion).", False


def unavailable_reason(runtime_version: str | None, python_version: str | None) -> str | None:
    """Why a runtime/Python pair cannot run on this machine, or None when it can (checked at submit)."""
    runtime, python = resolve_pair(runtime_version, python_version)
    if python not in runtime.pythons:
        if python == "2.7":
            return (
                f"Python 2.7 for runtime version {runtime.name} cannot be provided: AI Console installs "
                "runtime stacks with uv, which does not install packages for Python 2.7, so there is no "
                f"Python 2.7 stack. Runtime version {runtime.name} also offered Python "
                f"{', '.join(runtime.pythons)}: set pythonVersion to {runtime.pythons[0]}."
            )
        return (
            f"Runtime version {runtime.name} has no package stack for Python {python}; it runs on "
            f"Python {', '.join(runtime.pythons)}."
        )
    try:
        if pythons.find_python(python):
            return None
    except pythons.PythonNotFound as error:
        return f"Runtime version {runtime.name} needs Python {python}: {error}"
    if pythons.downloads_allowed():
        return None  # installed with uv when the first job prepares, with progress in its log
    return (
        f"Runtime version {runtime.name} needs Python {python}, and no Python {python} interpreter "
        f"was found (looked in AICONSOLE_PYTHONS, the console's own, uv's and pyenv's interpreters; "
        f"downloads are off: AICONSOLE_PYTHON_DOWNLOADS=never). {pythons.how_to_provide(python)}"
    )

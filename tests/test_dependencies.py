"""Dependencies that match the code: what pyproject.toml declares, the one plotly.js the pages load,
and the committed lock file."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import plotly.offline
from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.imports import absolute_imports

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VENDORED_PLOTLY = ROOT / "static" / "vendor" / "plotly.min.js"


def requirements(group: list[str]) -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in map(Requirement, group)}


CORE = requirements(PYPROJECT["dependencies"])
EXTRAS = {name: requirements(group) for name, group in PYPROJECT["optional-dependencies"].items()}


def locked() -> dict[str, str]:
    text = (ROOT / "requirements.lock").read_text()
    return {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", text, re.MULTILINE)
    }


def test_django_is_a_supported_release():
    assert not CORE["django"].specifier.contains("5.1.9")
    assert CORE["django"].specifier.contains("5.2.1") and not CORE["django"].specifier.contains("6.0")


def test_numpy_is_declared_where_the_code_imports_it():
    assert "numpy" in CORE


def test_optuna_range_is_the_one_charts_py_works_on():
    # jobs/tuning/charts.py names its importance evaluator, so 4.x's default (fANOVA, which needs
    # scikit-learn) is never used; importances were checked the same on 4.0, 4.5 and 5.0.
    spec = CORE["optuna"].specifier
    assert spec.contains("4.0.0") and spec.contains("5.0.0") and not spec.contains("6.0.0")


def test_google_cloud_logging_is_an_optional_extra_the_tests_install():
    assert "google-cloud-logging" not in CORE
    assert "google-cloud-logging" in EXTRAS["cloud-logging"]
    assert "google-cloud-logging" in EXTRAS["test"]


def test_pages_load_the_one_vendored_plotly_js_that_the_plotly_package_builds_figures_for():
    header = VENDORED_PLOTLY.read_text(encoding="utf-8")[:200]
    vendored = re.search(r"plotly\.js v(\d+\.\d+)\.\d+", header).group(1)
    built_for = ".".join(plotly.offline.get_plotlyjs_version().split(".")[:2])
    assert vendored == built_for, (
        f"static/vendor/plotly.min.js is plotly.js {vendored}, the plotly package builds figures for "
        f"{built_for}: copy the package's plotly/package_data/plotly.min.js over it, or pin plotly"
    )
    assert CORE["plotly"].specifier.contains(plotly.__version__)
    sources = [path.read_text() for path in (ROOT / "templates").rglob("*.html")]
    # A script tag, or where a job page's tab with charts has static/charts.js load it from.
    pattern = r"(?:<script[^>]+src|data-plotly-src)=\"([^\"]*plotly[^\"]*)\""
    loads = {src for text in sources for src in re.findall(pattern, text)}
    assert loads == {"{% static 'vendor/plotly.min.js' %}"}  # no CDN, no second copy


def test_the_lock_pins_every_declared_requirement_within_its_range():
    pins = locked()
    for name, requirement in {**CORE, **EXTRAS["test"]}.items():
        assert name in pins, f"{name} is not in requirements.lock: regenerate it (README, Quick start)"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, outside {requirement.specifier}: regenerate it"
        )


OWN_PACKAGES = {"aiconsole", "algorithms", "bench", "console", "jobs", "models_registry"}


def installed_with(roots: dict[str, Requirement]) -> set[str]:
    """The distributions that installing ``roots`` brings: they, and what they require (with the
    extras asked for), all the way down."""
    found: set[str] = set()
    todo = [(name, set(requirement.extras)) for name, requirement in roots.items()]
    while todo:
        name, extras = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            requires = importlib.metadata.distribution(name).requires or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            marker = requirement.marker
            try:
                wanted = marker is None or any(marker.evaluate({"extra": extra}) for extra in extras | {""})
            except UndefinedEnvironmentName:
                wanted = False
            if wanted:
                todo.append((canonicalize_name(requirement.name), set(requirement.extras)))
    return found


def imported_by(folder: Path) -> dict[str, Path]:
    """Each top-level module the Python files under ``folder`` import (deferred imports too), and a
    file that imports it."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.py")):
        for _, module in absolute_imports(ast.parse(path.read_text(), str(path))):
            found.setdefault(module.split(".")[0], path)
    return found


def test_every_benchmark_runs_from_the_consoles_install_with_the_bench_extra():
    # README: `pip install -e '.[bench]'` is all bench/ asks beyond the console's install.
    allowed = installed_with({**CORE, **EXTRAS["bench"]})
    owners = importlib.metadata.packages_distributions()
    for module, path in imported_by(ROOT / "bench").items():
        if module in sys.stdlib_module_names or module in OWN_PACKAGES:
            continue
        distributions = {canonicalize_name(name) for name in owners.get(module, [])}
        assert distributions & allowed, (
            f"{path.relative_to(ROOT)} imports {module} ({', '.join(sorted(distributions)) or 'not installed'}), "
            "which neither the console's dependencies nor the bench extra in pyproject.toml bring"
        )
    assert set(EXTRAS["bench"]) <= set(EXTRAS["test"])  # the suite runs a short round of each benchmark

"""The project's packages import one way (ARCHITECTURE.md): the core app imports no other app,
apps import only what sits below them, and a function-local import of our own code is a deferral
on purpose that says why, never a dodge around an import cycle."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from tests.helpers.imports import absolute_imports

ROOT = Path(__file__).resolve().parent.parent

# What each top-level package may import, besides itself. Everything not named here is refused.
ALLOWED = {
    "algorithms": set(),
    "aiconsole": set(),
    "jobs": {"aiconsole", "algorithms"},
    "models_registry": {"aiconsole", "jobs", "algorithms"},
    "console": {"aiconsole", "jobs", "models_registry", "algorithms"},
}


def _source_files(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" not in path.parts:
            yield path


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the tests here (each walks the whole tree)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _imports_of(path: Path) -> tuple[tuple[ast.AST, str, bool], ...]:
    return tuple(_imports(_tree(path)))


def _imports(tree: ast.AST):
    """(node, module, inside a function) for every absolute import of one of our packages."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    for node, module in absolute_imports(tree):
        if module.split(".")[0] in ALLOWED:
            yield node, module, id(node) in inside


def _said_why(lines: list[str], node: ast.AST) -> bool:
    """A comment on the import's own lines, or on the line above the block of imports it is in."""
    if any("#" in line for line in lines[node.lineno - 1 : node.end_lineno]):
        return True
    above = node.lineno - 2
    while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def test_every_top_level_package_is_accounted_for():
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"tests", "bench", "docs", "scripts"}
    assert packages == set(ALLOWED)


def test_packages_import_only_what_sits_below_them():
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in _source_files(package):
            for node, module, _ in _imports_of(path):
                target = module.split(".")[0]
                if target != package and target not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert wrong == [], "\n".join(wrong)


def test_the_allowed_imports_have_no_cycle():
    order = []

    def visit(package, path=()):
        assert package not in path, f"cycle: {' -> '.join((*path, package))}"
        if package in order:
            return
        for below in sorted(ALLOWED[package]):
            visit(below, (*path, package))
        order.append(package)

    for package in ALLOWED:
        visit(package)


def test_a_function_local_import_of_our_own_code_says_why_it_is_deferred():
    silent = []
    for package in ALLOWED:
        for path in _source_files(package):
            lines = path.read_text().splitlines()
            for node, module, local in _imports_of(path):
                if not local:
                    continue
                if not _said_why(lines, node):
                    silent.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module} inside a function")
    assert silent == [], "\n".join(silent)


# What only the test suite installs (pyproject's "test" extra); the benchmarks run from the console's.
TEST_ONLY = {"tests", "pytest", "pytest_django", "playwright", "gcp_storage_emulator", "schemathesis", "hypertune"}
# The one module that imports Playwright for the two benchmarks that drive Chromium, or exits
# naming its install command; bench/vertex.py asks for the storage emulator the same way.
ASKS_FOR_ITS_INSTALL = {
    "bench/support/needs_playwright.py": {"playwright"},
    "bench/vertex.py": {"gcp_storage_emulator"},
}


def test_the_benchmarks_import_nothing_only_the_test_suite_installs():
    """bench/ runs from the README's console install: what it shares with the tests lives in
    bench/support/, which the tests import, never the other way round."""
    reaching = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for node, module in absolute_imports(_tree(path)):
            top = module.split(".")[0]
            if top in TEST_ONLY and top not in ASKS_FOR_ITS_INSTALL.get(name, set()):
                reaching.append(f"{name}:{node.lineno} imports {module}")
    assert reaching == [], "\n".join(reaching)


def _module_names(tree: ast.AST) -> dict[str, str]:
    """The names under which a file holds modules of ours (``from jobs import filters`` gives
    ``filters``; ``import jobs.filters as f`` gives ``f``)."""
    names = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] in ALLOWED
        ):
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}"):
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ALLOWED:
                    names[alias.asname or alias.name.split(".")[0]] = alias.name
    return names


def test_no_module_reaches_into_another_modules_private_names():
    """A module's underscore names are its own: whoever needs one asks for a public function."""
    reaches = []
    for package in ALLOWED:
        for path in _source_files(package):
            tree = _tree(path)
            modules = _module_names(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.level == 0
                    and node.module
                    and node.module.split(".")[0] in ALLOWED
                ):
                    reaches += [
                        f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}.{alias.name}"
                        for alias in node.names
                        if _private(alias.name)
                    ]
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in modules
                    and _private(node.attr)
                ):
                    reaches.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {modules[node.value.id]}.{node.attr}")
    assert reaches == [], "\n".join(reaches)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


# Inside ``jobs``, the role packages adapt and nothing else depends on them: pages (``web``) and
# REST (``api``) are reached from the URL maps only. The feature packages (``logs``, ``tuning``,
# ``metrics``, ``builtin``), the core at the top and the executor never import them.
ADAPTERS = ("jobs.web", "jobs.api")
ADAPTER_USERS = ("jobs/web/", "jobs/api/", "jobs/urls.py", "jobs/api_urls.py")


def test_only_the_url_maps_reach_the_jobs_pages_and_rest_adapters():
    wrong = []
    for package in ALLOWED:
        for path in _source_files(package):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(ADAPTER_USERS) or package == "console":
                continue
            for node, module, _ in _imports_of(path):
                names = [module] + [
                    f"{module}.{alias.name}" for alias in getattr(node, "names", []) if isinstance(node, ast.ImportFrom)
                ]
                if any(name == adapter or name.startswith(adapter + ".") for name in names for adapter in ADAPTERS):
                    wrong.append(f"{relative}:{node.lineno} imports {module}")
    assert wrong == [], "\n".join(wrong)


def test_the_jobs_app_keeps_its_top_level_small():
    """jobs/ is split by feature (ARCHITECTURE.md): its top holds what every feature shares."""
    modules = sorted(p.name for p in (ROOT / "jobs").glob("*.py"))
    assert len(modules) <= 12, modules


# Dotted names in strings (settings, app configs, lazy references) follow the same arrows as imports.
_DOTTED = re.compile(r"^([a-z_]+)(\.[A-Za-z_]\w*)+$")


def test_no_string_names_a_module_of_a_package_above():
    found = []
    for package, allowed in ALLOWED.items():
        for path in _source_files(package):
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    match = _DOTTED.match(node.value)
                    if match and match[1] in ALLOWED and match[1] != package and match[1] not in allowed:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} names {node.value}")
    assert found == [], "a lower package names an upper one: " + "; ".join(found)


# Every read and write goes through Django's connections; a driver of its own is one more way to read
# the database to keep in agreement. The leader lock needs a session that outlives Django's.
RAW_DRIVERS = {"sqlite3", "psycopg", "psycopg2"}
RAW_DRIVER_ALLOWED = {"jobs/cluster/coordinator.py"}


def test_no_module_opens_the_database_with_a_driver_of_its_own():
    found = []
    for package in ALLOWED:
        for path in _source_files(package):
            for node in ast.walk(_tree(path)):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module.split(".")[0]]
                for name in names:
                    if name in RAW_DRIVERS and str(path.relative_to(ROOT)) not in RAW_DRIVER_ALLOWED:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert found == [], "; ".join(found)


# Inside ``jobs`` (ARCHITECTURE.md): its subpackages and top-level modules, highest first. A unit
# imports only those below it, deferred imports included: the adapters and URL maps over the
# features; scaled mode over the executor, which runs jobs of every kind; TensorBoard on its own
# over the executor's environments; built-in algorithms over tuning and training pages; metrics
# collection below all who run or show jobs; the core (services, the v1 shapes, the validator, the
# registries, the catalogue, the models) at the bottom.
JOBS_ORDER = (
    "urls",
    "api_urls",
    "apps",
    "web",
    "api",
    "notifications",
    "cluster",
    "tensorboard",
    "executor",
    "webaccess",
    "usage",
    "builtin",
    "tuning",
    "training",
    "vertex",
    "logs",
    "templatetags",
    "metrics",
    "outputs",
    "services",
    "containers",
    "wire",
    "validation",
    "quotas",
    "filters",
    "dispatch",
    "kinds",
    "catalogue",
    "runtimes",
    "job_ids",
    "models",
)


def _jobs_unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "jobs" and len(parts) > 1 else None


def _jobs_units() -> set[str]:
    folder = ROOT / "jobs"
    modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in folder.glob("*/__init__.py") if path.parent.name != "migrations"}
    return modules | packages


def test_every_unit_of_jobs_has_its_place_in_the_order():
    assert _jobs_units() == set(JOBS_ORDER), "add the new unit to JOBS_ORDER where it belongs"


def test_inside_jobs_no_import_runs_back_up_the_order():
    rank = {unit: index for index, unit in enumerate(JOBS_ORDER)}
    upward = []
    for path in _source_files("jobs"):
        source = _jobs_unit(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for node, module, _ in _imports_of(path):
            targets = [module]
            if module == "jobs" and isinstance(node, ast.ImportFrom):
                targets = [f"jobs.{alias.name}" for alias in node.names]
            for target in filter(None, map(_jobs_unit, targets)):
                if source in rank and target != source and rank.get(target, len(rank)) < rank[source]:
                    upward.append(f"{path.relative_to(ROOT)}:{node.lineno} ({source}) imports {module} ({target})")
    assert upward == [], "\n".join(upward)

"""The project's packages import one way (ARCHITECTURE.md): the core app imports no other app,
apps import only what sits below them, and a function-local import of our own code is a deferral
on purpose that says why, never a dodge around an import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

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


def _imports(tree: ast.AST):
    """(node, module, inside a function) for every absolute import of one of our packages."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            if module.split(".")[0] in ALLOWED:
                yield node, module, id(node) in inside


def _said_why(lines: list[str], node: ast.AST) -> bool:
    """A comment on the import's own lines, or on the line above the block of imports it is in."""
    if any("#" in line for line in lines[node.lineno - 1:node.end_lineno]):
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
            for node, module, _ in _imports(ast.parse(path.read_text())):
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
            for node, module, local in _imports(ast.parse("\n".join(lines))):
                if not local:
                    continue
                if not _said_why(lines, node):
                    silent.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module} inside a function")
    assert silent == [], "\n".join(silent)

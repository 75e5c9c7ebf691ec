"""The absolute imports a Python file makes, deferred ones included: what the architecture and the
dependency tests read."""

from __future__ import annotations

import ast
from collections.abc import Iterator


def absolute_imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """(node, dotted module) for every ``import x`` and ``from x import y`` anywhere in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            yield node, module

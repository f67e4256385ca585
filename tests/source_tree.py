"""The package's source files, parsed and walked once per test session: several tests read the whole tree."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def walked(path: Path) -> tuple[ast.AST, ...]:
    """ast.walk of the file, as a tuple to walk again."""
    return tuple(ast.walk(parsed(path)))

"""The architecture holds (README "Architecture"): no import cycle between packages, no package but
the CLI imports the CLI, core/ is pure standard library, and package-level imports inside functions are
kept for optional heavy dependencies and lazily loaded commands."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "zeroplan"


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        yield path, rel.parts, ast.parse(path.read_text(encoding="utf-8"))


def _imported(node: ast.AST, parts: tuple[str, ...]) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = parts[:len(parts) - node.level]
            return [".".join(base + ((node.module,) if node.module else ()))]
        return [node.module] if node.module else []
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


def _package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path, parts, tree in _modules():
        if len(parts) < 2 or path.name == "__main__.py" or parts[1] == "__init__":
            continue  # zeroplan/__init__.py only loads the API lazily; top-level modules (api) count as packages
        here = parts[1]
        for node in ast.walk(tree):
            for name in _imported(node, parts):
                pieces = name.split(".")
                if len(pieces) > 1 and pieces[0] == "zeroplan" and pieces[1] != here and \
                        ((SRC / pieces[1]).is_dir() or (SRC / f"{pieces[1]}.py").is_file()):
                    edges.setdefault(here, set()).add(pieces[1])
    return edges


def test_no_import_cycle_between_packages():
    edges = _package_edges()
    edges.pop("cli", None)  # the entry point imports every command; nothing imports it (next test)
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt in path:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif len(path) < 12:
                visit(nxt, path + [nxt])

    for start in sorted(edges):
        visit(start, [start])
    assert not cycles, "\n".join(sorted(set(cycles)))


def test_only_the_cli_imports_the_cli():
    edges = _package_edges()
    assert [package for package, targets in edges.items() if "cli" in targets and package != "cli"] == []


def test_core_is_pure_standard_library():
    stdlib = set(sys.stdlib_module_names)
    offenders = []
    for path, parts, tree in _modules():
        if parts[1] != "core":
            continue
        for node in ast.walk(tree):
            for name in _imported(node, parts):
                top = name.split(".")[0]
                if top == "zeroplan":
                    if not name.startswith("zeroplan.core"):
                        offenders.append(f"{path.name}: {name}")
                elif top not in stdlib and top != "__future__":
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_one_error_hierarchy():
    """Errors the CLI reports derive from core.errors.ZeroplanError (InputError: 2, RunFailed: 1), so the
    entry point's one table maps them: no other class of ours subclasses RuntimeError or carries an exit_code
    (parsers' internal ValueErrors, caught where they are raised, are not reported errors)."""
    offenders = []
    for path, parts, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
                carries_status = any(isinstance(item, (ast.Assign, ast.AnnAssign)) and "exit_code" in ast.dump(item)
                                     for item in node.body)
                is_ours = bases & {"ZeroplanError", "InputError", "RunFailed"} or parts[1:] == ("core", "errors")
                is_exception = any(base.endswith(("Error", "Exception", "Failed")) for base in bases)
                if is_exception and ("RuntimeError" in bases or carries_status) and not is_ours:
                    offenders.append(f"{'/'.join(parts)}: {node.name}")
    assert offenders == []

"""The architecture holds (README "Architecture"): no import cycle between packages, no package but
the CLI imports the CLI, core/ is pure standard library, and package-level imports inside functions are
kept for optional heavy dependencies and lazily loaded commands."""

from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

from source_tree import parsed

SRC = Path(__file__).resolve().parents[1] / "src" / "zeroplan"


@lru_cache(maxsize=1)
def _modules() -> tuple[tuple[Path, tuple[str, ...], ast.Module], ...]:
    """Every source file parsed once per test session (the layout tests each walk all of them)."""
    return tuple((path, path.relative_to(SRC.parent).with_suffix("").parts, parsed(path))
                 for path in sorted(SRC.rglob("*.py")))


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
    return {package: set(targets) for package, targets in _package_edges_once().items()}


_WALKED: dict[int, tuple[ast.AST, ...]] = {}


def _walk(tree: ast.AST) -> tuple[ast.AST, ...]:
    """ast.walk of a parsed module, once: the trees live as long as _modules' cache, so their ids are stable."""
    if id(tree) not in _WALKED:
        _WALKED[id(tree)] = tuple(ast.walk(tree))
    return _WALKED[id(tree)]


@lru_cache(maxsize=1)
def _package_edges_once() -> dict[str, frozenset[str]]:
    edges: dict[str, set[str]] = {}
    for path, parts, tree in _modules():
        if len(parts) < 2 or path.name == "__main__.py" or parts[1] == "__init__":
            continue  # zeroplan/__init__.py only loads the API lazily; top-level modules (api) count as packages
        here = parts[1]
        for node in _walk(tree):
            for name in _imported(node, parts):
                pieces = name.split(".")
                if len(pieces) > 1 and pieces[0] == "zeroplan" and pieces[1] != here and \
                        ((SRC / pieces[1]).is_dir() or (SRC / f"{pieces[1]}.py").is_file()):
                    edges.setdefault(here, set()).add(pieces[1])
    return {package: frozenset(targets) for package, targets in edges.items()}


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
        for node in _walk(tree):
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
        for node in _walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
                carries_status = any(isinstance(item, (ast.Assign, ast.AnnAssign)) and "exit_code" in ast.dump(item)
                                     for item in node.body)
                is_ours = bases & {"ZeroplanError", "InputError", "RunFailed"} or parts[1:] == ("core", "errors")
                is_exception = any(base.endswith(("Error", "Exception", "Failed")) for base in bases)
                if is_exception and ("RuntimeError" in bases or carries_status) and not is_ours:
                    offenders.append(f"{'/'.join(parts)}: {node.name}")
    assert offenders == []


# Packages, lowest first: a package may import only packages before it in this order (cli imports them all and
# nothing imports cli). A back edge (a shared package reaching up into a command's pipeline) fails here.
PACKAGE_ORDER = ("core", "render", "inputs", "distributed", "planning", "deepspeed", "estimate", "search", "check",
                 "export", "trace", "validate", "bench", "api", "cli")

# core/ by concept, lowest first: errors/units/hardware/precision/options at the root, then each folder may
# import the root and the folders before it, never one after it.
CORE_ORDER = ("<root>", "model", "parallel", "memory", "timing", "evaluate", "layout")


def test_packages_import_only_packages_below_them():
    edges = _package_edges()
    assert set(edges) | {target for targets in edges.values() for target in targets} <= set(PACKAGE_ORDER), \
        "a new package: give it its place in PACKAGE_ORDER"
    rank = {name: index for index, name in enumerate(PACKAGE_ORDER)}
    back = [f"{source} -> {target}" for source, targets in edges.items() for target in targets
            if rank[target] >= rank[source]]
    assert back == [], f"imports against the package order {PACKAGE_ORDER}: {back}"


def _core_folder(parts: tuple[str, ...]) -> str:
    return parts[2] if len(parts) > 3 else "<root>"


def test_core_folders_import_only_folders_below_them():
    assert {p.name for p in (SRC / "core").iterdir() if p.is_dir() and p.name != "__pycache__"} == \
        set(CORE_ORDER) - {"<root>"}, "a new folder in core/: give it its place in CORE_ORDER"
    rank = {name: index for index, name in enumerate(CORE_ORDER)}
    back = []
    for path, parts, tree in _modules():
        if parts[1] != "core":
            continue
        here = _core_folder(parts)
        for node in _walk(tree):
            for name in _imported(node, parts):
                pieces = name.split(".")
                if pieces[:2] != ["zeroplan", "core"] or len(pieces) < 3:
                    continue
                target = pieces[2] if (SRC / "core" / pieces[2]).is_dir() else "<root>"
                if target != here and rank[target] > rank[here]:
                    back.append(f"{'/'.join(parts)} -> {name}")
    assert back == [], f"imports against core's order {CORE_ORDER}: {back}"


def test_the_root_of_core_holds_only_the_shared_vocabulary():
    assert sorted(p.stem for p in (SRC / "core").glob("*.py")) == \
        ["__init__", "errors", "hardware", "options", "precision", "units"]


def test_no_import_circle_between_files():
    """Module-level circles, type-only imports included (a type imported from the wrong file marks a definition
    in the wrong place)."""
    modules = {".".join(parts[:-1] if parts[-1] == "__init__" else parts): tree for _, parts, tree in _modules()}
    edges: dict[str, set[str]] = {}
    for (path, parts, tree) in _modules():
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in _walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                targets = _imported(node, parts)
            for target in targets:
                if target in modules and target != name and not name.startswith(target + "."):
                    edges.setdefault(name, set()).add(target)
    circles: set[str] = set()
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                circles.add(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    ignorable = {c for c in circles if c.split(" -> ")[0] in {"zeroplan", "zeroplan.api"}}
    assert sorted(circles - ignorable) == []


# Imports go at the top of a module. A function-level import is allowed only for (a) an optional or heavy
# third-party dependency, or an internal module that imports one at module level (found below, transitively),
# and (b) the places deliberately lazy for start-up time, listed here once with the reason.
OPTIONAL_DEPENDENCIES = {"torch", "transformers", "matplotlib", "huggingface_hub", "peft", "bitsandbytes", "deepspeed",
                         "numpy", "typer", "click", "rich", "yaml", "pydantic"}
LAZY_FOR_START_UP = {
    "cli/": "each command loads its own pipeline only when it runs (benchmarks/startup.py)",
    "__init__.py": "`import zeroplan` loads the Python API on first use",
    "check/__init__.py": "the package's API on first use",
    "estimate/__init__.py": "the package's API on first use",
    "__main__.py": "entry points hand over to the CLI",
    "bench/__main__.py": "entry point: hands over to the CLI",
    "validate/__main__.py": "entry point: hands over to the CLI",
    "core/evaluate/estimate.py": "the framework convention's partitioner and torch buffers, only when asked for",
    "planning/estimate_plan.py": "config.json families, the framework convention and calibration files, only when "
                                 "given: a plain `estimate --params` skips them",
    "inputs/training.py": "config.json and Hub readers, only for --model FILE or ORG/NAME",
    "inputs/presets.py": "the config.json families, only when a model preset is read; difflib on the error path",
    "render/sink.py": "tempfile and shutil only when a file is written (-o): a plain command writes none",
}


def _module_name(parts: tuple[str, ...]) -> str:
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _heavy_modules() -> set[str]:
    trees = {_module_name(parts): tree for _, parts, tree in _modules()}
    heavy: set[str] = set()
    grown = True
    while grown:
        grown = False
        for name, tree in trees.items():
            if name in heavy:
                continue
            for node in tree.body:
                targets = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
                if any(t.split(".")[0] in OPTIONAL_DEPENDENCIES or t in heavy for t in targets):
                    heavy.add(name)
                    grown = True
                    break
    return heavy


def test_imports_are_at_the_top_unless_optional_or_lazy_for_start_up():
    heavy = _heavy_modules()
    offenders = []
    for path, parts, tree in _modules():
        rel = "/".join(parts[1:]) + ".py"
        if any(rel == lazy or (lazy.endswith("/") and rel.startswith(lazy)) for lazy in LAZY_FOR_START_UP):
            continue
        for function in _walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                names = _imported(node, parts)
                if isinstance(node, ast.ImportFrom) and node.module:
                    names += [f"{node.module}.{alias.name}" for alias in node.names]
                if any(n.split(".")[0] in OPTIONAL_DEPENDENCIES or n in heavy for n in names):
                    continue
                offenders.append(f"{rel}:{node.lineno} {names[0]}")
    assert offenders == [], "move these imports to the module's top (or state why in LAZY_FOR_START_UP)"


def test_the_lazy_list_names_files_that_exist():
    for lazy in LAZY_FOR_START_UP:
        assert (SRC / lazy).exists(), lazy

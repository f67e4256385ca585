"""Every reference a reader follows resolves: each "docs/formulas.md §N" cited in the code, docs, README and
benchmarks names a section docs/formulas.md has; each module, file and dotted module name the docs, README,
code comments and benchmarks name exists; nothing cites the lead's private notes (FORMULAS.md), which are not
in the repository."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest
from source_tree import parsed

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "zeroplan"
FORMULAS = ROOT / "docs" / "formulas.md"
THIS = Path(__file__).resolve()

# Where references are read: the docs and README (prose), the code and benchmarks (comments, docstrings, messages).
TEXT_SUFFIXES = (".py", ".md", ".yaml", ".toml", ".json")


def _files(*roots: str) -> list[Path]:
    found = []
    for name in roots:
        path = ROOT / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in TEXT_SUFFIXES
                         and "__pycache__" not in p.parts and p.resolve() != THIS)
    return found


CITING = _files("src", "docs", "README.md", "benchmarks", "tests", "presets")
NAMING = _files("src", "docs", "README.md", "benchmarks", "tests", "presets")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ---- docs/formulas.md sections ----

_HEADING = re.compile(r"^(#{2,4}) (\d+(?:\.\d+)*)\.? ", re.MULTILINE)
_SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
# A § belongs to whatever is named just before it: docs/formulas.md ("docs/formulas.md §4", "formulas.md §4.2,
# §9", "docs/formulas.md §9-§14", "docs/formulas.md (ZeRO stages) §4") or another source ("ZeRO paper §3.1",
# "arXiv 2304.11277 §3.3", "Korthikanti et al. §4.2"). Inside docs/formulas.md a § with no source is its own.
_OURS = re.compile(r"formulas\.md[^§\n]{0,40}?(?:§\d+(?:\.\d+)*(?:\s*(?:,|-|–|and|or))+\s*)*$")
_THEIRS = re.compile(r"(?:paper|arXiv|et al\.?|Table|PR)\b[^§()\n;]{0,30}$")


def section_references(path: Path) -> list[tuple[int, str, str]]:
    """(line, section, whose) for every § in a file: whose is "ours", "theirs" or "unattributed"."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in _SECTION.finditer(line):
            before = line[max(0, match.start() - 80):match.start()]
            if _OURS.search(before):
                whose = "ours"
            elif _THEIRS.search(before):
                whose = "theirs"
            else:
                whose = "ours" if path == FORMULAS else "unattributed"
            found.append((number, match.group(1), whose))
    return found


def formula_sections() -> set[str]:
    return {number for _, number in _HEADING.findall(FORMULAS.read_text(encoding="utf-8"))}


def test_formulas_reference_is_numbered():
    sections = formula_sections()
    top = sorted(int(number) for number in sections if "." not in number)
    assert top and top == list(range(1, len(top) + 1)), f"top-level sections are not 1..N in order: {top}"
    for number in sections:  # every subsection sits under an existing parent
        if "." in number:
            assert number.rsplit(".", 1)[0] in sections, number


def test_every_formulas_citation_names_a_section():
    sections = formula_sections()
    missing = [f"{_rel(path)}:{line}: §{number}" for path in CITING
               for line, number, whose in section_references(path) if whose == "ours" and number not in sections]
    assert missing == [], "citations of docs/formulas.md sections that do not exist:\n" + "\n".join(missing)


def test_every_section_sign_says_whose_section_it_is():
    """A bare "§4" outside docs/formulas.md is a reference nobody can follow (the old private notes' numbers were
    cited that way): it names docs/formulas.md or its source (paper, arXiv id, author) right before it."""
    bare = [f"{_rel(path)}:{line}: §{number}" for path in CITING
            for line, number, whose in section_references(path) if whose == "unattributed"]
    assert bare == [], "section numbers without a source:\n" + "\n".join(bare)


@pytest.mark.parametrize("text, whose", [
    ("(docs/formulas.md §4)", ["ours"]), ("docs/formulas.md §9-§14", ["ours", "ours"]),
    ("docs/formulas.md §10, §13", ["ours", "ours"]), ("ZeRO paper §3.1, K = 12", ["theirs"]),
    ("[docs/formulas.md](formulas.md): §9-§14, and §17", ["ours", "ours", "ours"]),
    ("arXiv 2304.11277 §3.3-3.4", ["theirs"]), ("Pipeline (1F1B, §5)", ["unattributed"]),
])
def test_section_signs_are_attributed_as_written(tmp_path, text, whose):
    path = tmp_path / "x.md"
    path.write_text(text, encoding="utf-8")
    assert [entry[2] for entry in section_references(path)] == whose


def test_the_code_cites_its_formulas():
    """The reference is reached from the code: the core modules that hold formulas cite it."""
    cited = {path.relative_to(PACKAGE / "core").as_posix() for path in (PACKAGE / "core").rglob("*.py")
             if "docs/formulas.md" in path.read_text(encoding="utf-8")}
    for module in ("precision.py", "memory/model_states.py", "memory/deepspeed_estimator.py",
                   "memory/framework_partition.py", "memory/deepspeed_buffers.py", "memory/activations.py",
                   "memory/budget.py", "timing/collectives.py", "timing/dp_traffic.py", "timing/dp_offload.py",
                   "timing/step_time.py"):
        assert module in cited, f"core/{module} does not cite docs/formulas.md"


def test_nothing_cites_the_private_notes():
    """The lead's reference notes are not in the repository: `grep -rn "FORMULAS.md" src docs` finds nothing."""
    private = re.compile(r"FORMULAS(?:\.md|\s+§)")
    offenders = [f"{_rel(path)}:{number}" for path in CITING + _files("presets")
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if private.search(line)]
    assert offenders == []


# ---- files and modules named in prose ----

_PACKAGES = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
# A path: repo-relative (src/, tests/, benchmarks/, docs/, presets/) or package-relative (core/memory/x.py).
_PATH = re.compile(r"(?<![\w./-])((?:src|tests|benchmarks|docs|presets|" + "|".join(_PACKAGES)
                   + r")/[\w./-]*\w\.(?:py|md|json|yaml|csv))\b")
# External projects' files that share a first folder name with one of ours (DeepSpeed's own tree).
_EXTERNAL = re.compile(r"^deepspeed/(?:runtime|ops|utils|launcher|monitor|checkpoint|moe|module_inject|inference)/")
# A dotted name: zeroplan.x.y, or core.x.y (the form the docs and docstrings use inside the package).
_DOTTED = re.compile(r"(?<![\w./-])((?:zeroplan|core)(?:\.[A-Za-z_]\w*)+)")


def _path_exists(name: str) -> bool:
    return (ROOT / name).exists() or (PACKAGE / name).exists()


def _defined(module: Path, name: str) -> bool:
    tree = parsed(module)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
            # a name the module exports lazily (zeroplan.plan: __all__ and a module __getattr__)
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None \
                    and name in ast.literal_eval(node.value):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names):
                return True
    return False


def dotted_exists(name: str) -> bool:
    """zeroplan.core.memory.activations(.transformers_peak_moments(.attribute)): the longest prefix that is a module
    or package, then a name that module defines (a class's attributes are not followed)."""
    parts = name.split(".")
    if parts[0] == "zeroplan":
        parts = parts[1:]
    base = PACKAGE
    for index, part in enumerate(parts):
        folder, module = base / part, base / f"{part}.py"
        if folder.is_dir() and (folder / "__init__.py").exists():
            base = folder
            continue
        if module.is_file():
            rest = parts[index + 1:]
            return not rest or _defined(module, rest[0])
        # a name defined in the package's __init__.py
        init = base / "__init__.py"
        return init.is_file() and _defined(init, part)
    return True


# Another project's file, named after the project on the same line ("pytorch/torchtitan docs/performance.md").
_OTHER_PROJECT = re.compile(r"torchtitan|nccl-tests|ml-engineering|huggingface/transformers")


def _statements(node: ast.AST):
    """The node and every statement below it (docstrings are the first statement of a body; expressions are
    not walked, which keeps this a fraction of ast.walk)."""
    yield node
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, None) or ():
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                yield from _statements(child)


@lru_cache(maxsize=None)
def prose_lines(path: Path) -> tuple[tuple[int, str], ...]:
    """(line number, text) of what a reader reads: a Python file's docstrings and comments, any other file whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return tuple(enumerate(text.splitlines(), 1))
    lines = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            lines.append((token.start[0], token.string))
    for node in _statements(parsed(path)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.extend((first.lineno + offset, line)
                             for offset, line in enumerate(first.value.value.splitlines()))
    return tuple(lines)


def _names(pattern: re.Pattern, skip=lambda name: False) -> list[tuple[str, str]]:
    found = []
    for path in NAMING:
        for number, line in prose_lines(path):
            for match in pattern.finditer(line):
                name = match.group(1).rstrip(".")
                if not skip(name) and not _OTHER_PROJECT.search(line[:match.start()]):
                    found.append((f"{_rel(path)}:{number}", name))
    return found


def test_every_named_file_exists():
    named = _names(_PATH, skip=lambda name: bool(_EXTERNAL.match(name)))
    assert named, "the pattern found no file names at all"
    missing = [f"{where}: {name}" for where, name in named if not _path_exists(name)]
    assert missing == [], "files named that do not exist:\n" + "\n".join(missing)


def test_every_named_module_exists():
    named = _names(_DOTTED)
    assert named, "the pattern found no dotted names at all"
    missing = [f"{where}: {name}" for where, name in named if not dotted_exists(name)]
    assert missing == [], "modules or names that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("name, exists", [
    ("core.memory.activations", True), ("zeroplan.core.memory.activations.transformers_peak_moments", True),
    ("core.plan_memory", False), ("core.search.rank", False), ("core.layout.search.rank", True),
    ("core.memory.framework_partition.zero1_owners", True), ("core.layout.search.no_such_function", False),
])
def test_the_resolver_tells_real_names_from_stale_ones(name, exists):
    assert dotted_exists(name) is exists


# "`core/timing/dp_offload.py` `offload_traffic`, `offload_seconds`": names a docs table gives after a module.
_MODULE_AND_NAMES = re.compile(r"`((?:" + "|".join(_PACKAGES) + r")/[\w/]+\.py)`((?:\s*(?:,|→)?\s*`\w+`)+)")


def test_names_given_after_a_module_are_defined_there():
    named = []
    for path in _files("docs", "README.md"):
        for number, line in prose_lines(path):
            for match in _MODULE_AND_NAMES.finditer(line):
                module = PACKAGE / match.group(1)
                for name in re.findall(r"`(\w+)`", match.group(2)):
                    named.append((f"{_rel(path)}:{number}", module, name))
    assert named, "the pattern found no module with names"
    missing = [f"{where}: {module.relative_to(PACKAGE)} {name}" for where, module, name in named
               if module.is_file() and not _defined(module, name)]
    assert missing == [], "names a module does not define:\n" + "\n".join(missing)


def test_architecture_names_every_core_module_and_every_package():
    """docs/architecture.md stays true to the layout: each core module and each package is in its tables."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted(path.stem for path in (PACKAGE / "core").rglob("*.py") if path.stem != "__init__")
    packages = _PACKAGES + ["api.py"]
    missing = [name for name in modules if f"`{name}`" not in text]
    missing += [name for name in packages if f"`{name}/`" not in text and f"`{name}`" not in text]
    assert missing == [], f"docs/architecture.md does not name: {missing}"


def test_nothing_cites_files_outside_the_repository():
    """The lead's notes (shared/reference, FORMULAS.md) are not in the repository: a user cannot follow them."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    files = [root / "README.md", *root.glob("docs/*.md"), *root.glob("src/**/*.py"), *root.glob("benchmarks/**/*.py"),
             *root.glob("benchmarks/data/*.json")]
    found = [f"{path.relative_to(root)}:{number}" for path in files
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"shared/(reference|seeds)|FORMULAS\.md", line)]
    assert found == []

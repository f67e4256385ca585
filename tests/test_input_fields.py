"""Errors name fields; each reader sees the names they typed: the Python API its keywords (`gpus: ...`,
`use gpus=4`), the CLI its flags (`--gpus: ...`, `use --gpus 4`), the CLI's through the option declarations."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from source_tree import walked

import zeroplan
from zeroplan.cli.app import main
from zeroplan.core.errors import InputError, ref
from zeroplan.inputs import command_sections, sections
from zeroplan.inputs.flag_names import cli_message, flag_of, flags

CORE = Path(zeroplan.__file__).parent / "core"
FLAG = re.compile(r"--[a-z]")


def _cli_line(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    line = capsys.readouterr().err
    assert line.startswith("zeroplan: error: ") and line.count("\n") == 1, line
    return line[len("zeroplan: error: "):-1]


# One error from each folder of core/ (and its root), as the API and the CLI are given it.
#   (core module that raises, API call, its keywords, CLI command line, API line head, CLI line head, in both)
CASES = [
    ("core/precision.py", "estimate", {"params": "7B", "gpu": "v100-32g", "precision": "bf16"},
     ["estimate", "--params", "7B", "--gpu", "v100-32g", "--precision", "bf16"],
     "precision: ", "--precision: ", ("use precision=fp16", "use --precision fp16")),
    ("core/options.py", "estimate", {"params": "7B", "stage": 1, "offload_optimizer": "nvme"},
     ["estimate", "--params", "7B", "--stage", "1", "--offload-optimizer", "nvme"],
     "offload_optimizer: ", "--offload-optimizer: ",
     ("use stage=3 or offload_optimizer=cpu", "use --stage 3 or --offload-optimizer cpu")),
    ("core/model/spec.py", "plan", {"params": "7B", "layers": 2, "hidden": 512, "heads": 7, "vocab": 100, "gpus": 8,
                                    "global_batch": 8},
     ["plan", "--params", "7B", "--layers", "2", "--hidden", "512", "--heads", "7", "--vocab", "100", "--gpus", "8",
      "--global-batch", "8"], "heads: ", "--heads: ", ("", "")),
    ("core/parallel/grid.py", "estimate", {"params": "7B", "gpus": 6, "tp": 4},
     ["estimate", "--params", "7B", "--gpus", "6", "--tp", "4"],
     "gpus: ", "--gpus: ", ("use gpus=4 or change tp/pp", "use --gpus 4 or change --tp/--pp")),
    ("core/parallel/rules.py", "estimate", {"model": "gpt2", "gpus": 5, "tp": 5, "gpus_per_node": 5},
     ["estimate", "--model", "gpt2", "--gpus", "5", "--tp", "5", "--gpus-per-node", "5"], "tp: ", "--tp: ", ("", "")),
    ("core/memory/budget.py", "estimate", {"params": "7B", "fragmentation": "120%"},
     ["estimate", "--params", "7B", "--fragmentation", "120%"], "fragmentation: ", "--fragmentation: ", ("", "")),
    ("core/memory/activations.py", "estimate", {"model": "gpt2", "seq_len": 2 * 10**8},
     ["estimate", "--model", "gpt2", "--seq-len", str(2 * 10**8)], "seq_len: ", "--seq-len: ", ("", "")),
    ("core/timing/dp_traffic.py", "estimate", {"params": "7B", "stage": 2, "zeropp": "hpz"},
     ["estimate", "--params", "7B", "--stage", "2", "--zeropp", "hpz"], "zeropp: ", "--zeropp: ",
     ("(use stage=3)", "(use --stage 3)")),
    ("core/timing/machine.py", "plan", {"model": "llama-2-7b", "gpus": 8, "global_batch": 8, "efficiency": 2.0},
     ["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "8", "--efficiency", "2"],
     "efficiency: ", "--efficiency: ", ("", "")),
    ("core/evaluate/estimate.py", "estimate", {"params": "7B", "gpus": 8, "stage": 3, "zeropp": "hpz",
                                               "hpz_partition_size": 3},
     ["estimate", "--params", "7B", "--gpus", "8", "--stage", "3", "--zeropp", "hpz", "--hpz-partition-size", "3"],
     "hpz_partition_size: ", "--hpz-partition-size: ", ("", "")),
    ("core/layout/space.py", "plan", {"model": "llama-2-7b", "gpus": 8, "global_batch": 8, "tp": "3"},
     ["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "8", "--tp", "3"],
     "tp/pp: ", "--tp/--pp: ", ("divides gpus)", "divides --gpus)")),
]


@pytest.mark.parametrize(("where", "function", "keywords", "argv", "api_head", "cli_head", "said"), CASES,
                         ids=[case[0] for case in CASES])
def test_the_api_names_keywords_where_the_cli_names_flags(where, function, keywords, argv, api_head, cli_head, said,
                                                         capsys):
    with pytest.raises(InputError) as caught:
        getattr(zeroplan, function)(**keywords)
    api_line, cli_line = str(caught.value), _cli_line(argv, capsys)
    assert api_line.startswith(api_head) and cli_line.startswith(cli_head), (api_line, cli_line)
    assert not FLAG.search(api_line), api_line  # no flag reaches a Python caller
    assert cli_line == cli_message(caught.value)  # the same error, each name through the option declarations
    assert said[0] in api_line and said[1] in cli_line
    raised_in = Path(caught.traceback[-1].path).relative_to(CORE.parent).as_posix()
    assert raised_in == where


def test_fields_without_a_flag_are_written_as_they_are_and_files_are_not_fields():
    error = InputError("seq_len, num_micro_batches", f"{ref('seq_len')} too long; use {ref('pp', 2)}", ref("tp"))
    assert str(error) == "seq_len, num_micro_batches: seq_len too long; use pp=2 (tp)"
    assert cli_message(error) == "--seq-len, num_micro_batches: --seq-len too long; use --pp 2 (--tp)"
    for name in ("model/config.json", "plan.yaml: zero", "WORLD_SIZE", "--output out.json"):
        assert cli_message(InputError(name, "x")) == f"{name}: x"
    assert cli_message(InputError("stage/offload_*", "x")) == "--stage/--offload-*: x"
    placed = InputError(f"plan.yaml: {ref('kv_heads')}", "x", f"see {ref('tp/pp')}")  # a field inside a longer name
    assert (str(placed), cli_message(placed)) == ("plan.yaml: kv_heads: x (see tp/pp)",
                                                  "plan.yaml: --kv-heads: x (see --tp/--pp)")


def test_every_field_has_one_flag_across_the_sections():
    seen: dict[str, set[str]] = {}
    for module in (sections, command_sections):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, sections.Section) and dataclasses.is_dataclass(value):
                for item in dataclasses.fields(value):
                    if "flag" in item.metadata:
                        seen.setdefault(item.name, set()).add(item.metadata["flag"].name)
    assert {name: names for name, names in seen.items() if len(names) > 1} == {}
    assert flags()["presets_file"] == "--presets" and flag_of("gpus") == "--gpus" and flag_of("no_such") is None


def _strings(node: ast.AST) -> list[str]:
    """Every string inside node: each constant, and each f-string whole (its values as {})."""
    inside = {id(part) for n in ast.walk(node) if isinstance(n, ast.JoinedStr) for part in n.values}
    return [n.value if isinstance(n, ast.Constant) else
            "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in n.values)
            for n in ast.walk(node) if id(n) not in inside
            and (isinstance(n, ast.JoinedStr) or isinstance(n, ast.Constant) and isinstance(n.value, str))]


FIX = ("name the field, InputError(\"lora_rank\", ...) not \"--lora-rank\", and write an input inside a problem or fix "
       "as ref(\"stage\", 3), not \"--stage 3\" (docs/architecture.md, Errors name fields)")


def _flags_in_errors(paths, bare: bool) -> list[str]:
    """`--flag` texts inside InputError (or require_shape) calls, outside a command line in backticks; with
    `bare`, also every string that is a flag (the tables of names that feed those calls)."""
    found = []
    for path in paths:
        for node in walked(path):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("InputError", "PresetError", "require_shape"):
                    found += [f"{path.name}:{node.lineno}: {text!r}" for text in _strings(node)
                              if FLAG.search(re.sub(r"`[^`]*`?", "", text))]
            elif bare and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"--[a-z][a-z-]*(/--[a-z][a-z*-]*)*", node.value):
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_core_names_fields_not_flags():
    """core/ raises with field names and ref(): no `--flag` inside an InputError call, and no string that is
    a flag anywhere in core/."""
    assert _flags_in_errors(sorted(CORE.rglob("*.py")), bare=True) == [], FIX


def test_the_packages_the_python_api_runs_raise_with_fields():
    package = CORE.parent
    paths = [path for folder in ("core", "inputs", "planning", "estimate", "search", "deepspeed", "check")
             for path in sorted((package / folder).rglob("*.py"))] + [package / "api.py"]
    assert _flags_in_errors(paths, bare=False) == [], FIX


def test_every_api_keyword_is_a_declared_field():
    """The API names an input by its field, so each keyword a function takes must be the field of that name
    (the CLI's flag for it comes from the same declaration)."""
    from zeroplan.deepspeed.context import CheckContext
    from zeroplan.inputs.estimate_inputs import FIELDS as ESTIMATE
    from zeroplan.search.inputs import FIELDS as PLAN

    keywords = {name for table in (ESTIMATE, PLAN) for names in table.values() for name in names}
    keywords |= {item.name for item in dataclasses.fields(CheckContext) if item.init} - {"units", "origin"}
    assert sorted(keywords - set(flags())) == []


def test_check_context_parses_its_text_once_as_it_is_built():
    """check/export's context keeps what was given (reports, plan files) and its parsed values; nothing parses a
    context's text again."""
    import re

    from zeroplan.deepspeed.context import CheckContext

    context = CheckContext(params="13e9", largest_layer_params="165.6M", gpu_memory="80GiB")
    assert (context.params_count, context.largest_layer_count, context.gpu_memory_bytes) == \
        (13_000_000_000, 165_600_000, 80 * 2**30)
    assert context.params == "13e9"  # as given
    package = CORE.parent
    again = [f"{path.name}:{number}" for folder in ("deepspeed", "check", "search", "export")
             for path in sorted((package / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"(parse_\w+|as_count)\(context\.", line)]
    assert again == []

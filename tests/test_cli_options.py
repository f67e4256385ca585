"""Every option is declared once (zeroplan.inputs.sections), and every command still offers the options it did.

tests/data/cli_options.json was captured from the commands before the declarations moved into sections: each
command's options (names, help panel, required, hidden) and the --flags its --help printed.
"""

from __future__ import annotations

import ast
import io
import json
import re
from collections import Counter
from contextlib import redirect_stdout
from fractions import Fraction
from pathlib import Path

import pytest
import typer
from source_tree import walked

from zeroplan.cli.app import build_app, main

SRC = Path(__file__).resolve().parents[1] / "src" / "zeroplan"
RECORDED = json.loads((Path(__file__).parent / "data" / "cli_options.json").read_text(encoding="utf-8"))


def _calls(name: str) -> list[ast.Call]:
    """Every call of `name(...)` (a plain name: the declarations) or `x.name(...)` for a method (variant)."""
    found = []
    for path in SRC.rglob("*.py"):
        for node in walked(path):
            if isinstance(node, ast.Call):
                func = node.func
                called = (func.attr if isinstance(func, ast.Attribute) and name == "variant"
                          else getattr(func, "id", None))
                if called == name:
                    found.append(node)
    return found


def _strings(call: ast.Call) -> list[str]:
    return [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_each_flag_name_is_declared_once():
    names = [text for call in _calls("flag") for text in _strings(call)]
    assert len(names) > 70  # the scan found the declarations (sections.py's flag(...) calls)
    assert all(text.startswith("-") for text in names)
    repeated = [name for name, count in Counter(names).items() if count > 1]
    assert not repeated, f"declared more than once: {repeated}"
    # A variant (the same flag for a list, or another command's default) inherits the name: it never restates it.
    assert not [call for call in _calls("variant") if _keyword(call, "names") is not None]


def test_each_help_text_is_written_once():
    helps = [ast.unparse(_keyword(call, "help")) for call in _calls("flag") + _calls("variant")
             if _keyword(call, "help") is not None]
    repeated = [text for text, count in Counter(helps).items() if count > 1]
    assert not repeated, f"help written more than once: {repeated}"


def test_no_command_declares_its_own_options():
    """typer.Option is built in one place: the generator in cli/options.py (and app.py's --version, which
    belongs to the program, not to a command's inputs)."""
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path not in (SRC / "cli" / "options.py", SRC / "cli" / "app.py"):
            assert "typer.Option(" not in text, path
        if path.parent == SRC / "cli":
            assert ".strip().lower()" not in text, f"{path}: choices are normalised by sections.normalise"


def _command(path: list[str]):
    group = typer.main.get_command(build_app(path[0]))
    command = group.commands[path[0]]
    return command.commands[path[1]] if len(path) > 1 else command


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_every_command_keeps_its_options(name, monkeypatch):
    recorded = RECORDED[name]
    options = [p for p in _command(name.split()).params if p.param_type_name == "option"]

    def long_names(option_list):
        return {tuple(o for o in opts if o.startswith("--")) for opts in option_list}

    now = {tuple(o for o in sorted(p.opts) + sorted(p.secondary_opts) if o.startswith("--")):
           (getattr(p, "rich_help_panel", None), p.required, p.hidden) for p in options}
    before = {tuple(o for o in entry["opts"] if o.startswith("--")): (entry["panel"], entry["required"],
                                                                       entry["hidden"])
              for entry in recorded["options"]}
    assert now == before

    monkeypatch.setenv("COLUMNS", "200")
    shown = io.StringIO()
    with redirect_stdout(shown), pytest.raises(SystemExit) as done:
        main(name.split() + ["--help"])
    assert done.value.code == 0
    listed = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", shown.getvalue()))
    visible = {opt for entry in recorded["options"] if not entry["hidden"] for opt in entry["opts"]
               if opt.startswith("--")}
    assert visible <= listed


def test_a_choice_is_normalised_once_and_a_wrong_one_named(cli):
    code, out, _ = cli("estimate", "--params", "7e9", "--precision", " BF16 ", "--offload-optimizer", "CPU",
                       "-f", "json")
    assert code == 0
    assert json.loads(out)["inputs"]["precision"] == "bf16"
    assert json.loads(out)["inputs"]["offload_optimizer"] == "cpu"
    code, out, err = cli("estimate", "--params", "7e9", "--recompute", "sometimes")
    assert code == 2 and not out
    assert err == "zeroplan: error: --recompute: unknown mode 'sometimes' (use none, selective, full or selective-op)\n"


def test_sections_build_from_flat_values_and_echo_them():
    from zeroplan.inputs.estimate_inputs import EstimateInputs
    from zeroplan.search.inputs import PlanInputs

    inputs = EstimateInputs.of(gpus=8, model="llama-2-7b", recompute="Full", reduce_bucket_size=12345)
    assert (inputs.hardware.gpus, inputs.model.model, inputs.step.recompute) == (8, "llama-2-7b", "full")
    assert inputs.buffers.reduce_bucket_size == 12345  # a number stays a number: no text round trip
    assert inputs.echo()["gpus"] == 8 and inputs.echo()["units"] == "iec"
    plan = PlanInputs.of(gpus=8, recompute="none,full", tp="1,2")
    assert (plan.search.recompute, plan.search.tp, plan.step.recompute) == (("none", "full"), (1, 2), None)
    assert (plan.echo()["recompute"], plan.echo()["tp"]) == ("none,full", "1,2")  # parsed once, echoed as given
    sized = EstimateInputs.of(params="13B", cpu_memory="512GB", fragmentation="5%")
    assert (sized.model.params, sized.hardware.cpu_memory, sized.budget.fragmentation) == (13 * 10**9, 512 * 10**9,
                                                                                            Fraction(1, 20))
    assert (sized.echo()["params"], sized.echo()["cpu_memory"], sized.echo()["fragmentation"]) == ("13B", "512GB", "5%")
    with pytest.raises(TypeError):
        EstimateInputs.of(layers=4)  # estimate takes no --layers

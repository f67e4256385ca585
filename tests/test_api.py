"""The Python API: the same numbers as the commands (to_dict() == the command's JSON, key for key), typed
results, and the command's errors as exceptions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zeroplan
from zeroplan.cli.app import main

DEEPSPEED = Path(__file__).parent / "configs" / "deepspeed"


def _cli_json(argv, capsys) -> dict:
    with pytest.raises(SystemExit) as info:
        main([*argv, "-f", "json"])
    captured = capsys.readouterr()
    assert info.value.code in (0, 1), captured.err
    return json.loads(captured.out)


@pytest.mark.parametrize("kwargs,argv", [
    ({"params": 13e9, "gpus": 8}, ["--params", "13e9", "--gpus", "8"]),
    ({"model": "llama-2-13b", "gpus": 16, "tp": 2, "recompute": "full", "cpu_memory": "512GB"},
     ["--model", "llama-2-13b", "--gpus", "16", "--tp", "2", "--recompute", "full", "--cpu-memory", "512GB"]),
    ({"model": "llama-2-70b", "gpus": 8, "convention": "deepspeed"},
     ["--model", "llama-2-70b", "--gpus", "8", "--convention", "deepspeed"]),
])
def test_estimate_is_the_command(kwargs, argv, capsys):
    result = zeroplan.estimate(**kwargs)
    document = _cli_json(["estimate", *argv], capsys)
    document["inputs"] = result.to_dict()["inputs"]  # echoed as given: 13e9 (a float) beside "13e9" (text)
    assert result.to_dict() == document
    chosen = document["recommendation"]
    assert result.recommendation.key == chosen["key"] and result.recommendation.reason == chosen["reason"]
    assert [o.gpu_total_bytes for o in result.options] == [o["gpu_bytes"]["total"] for o in document["options"]]
    if result.recommendation.label is not None:
        assert result.option(result.recommendation.label).fits


def test_plan_is_the_command(capsys):
    result = zeroplan.plan(model="llama-2-7b", gpus=16, global_batch=64)
    document = _cli_json(["plan", "--model", "llama-2-7b", "--gpus", "16", "--global-batch", "64", "--no-progress"],
                         capsys)
    ours = result.to_dict()
    for timing in ("seconds", "plans_per_second", "summary"):  # how long this run's search took
        ours["search"].pop(timing), document["search"].pop(timing)
    assert ours == document
    assert [p.step_seconds for p in result.top] == [row["step_seconds"] for row in document["top"]]
    assert result.top[0].rank == 1 and result.top[0].step_seconds <= result.top[-1].step_seconds * 1.05


def test_check_is_the_command(capsys):
    files = [str(DEEPSPEED / "bad_fp16_bf16.json"), str(DEEPSPEED / "good_zero2.json")]
    result = zeroplan.check(*files, gpus=8, model="llama-2-7b")
    document = _cli_json(["check", *files, "--gpus", "8", "--model", "llama-2-7b"], capsys)
    assert result.to_dict() == document and result.failed
    errors = [(Path(f.file).name, f.rule) for f in result.findings if f.severity == "error"]
    assert ("bad_fp16_bf16.json", "ZP002") in errors and all(rule != "ZP002" for name, rule in errors
                                                               if name == "good_zero2.json")


def test_errors_are_the_commands_errors():
    with pytest.raises(zeroplan.InputError, match="did you mean params"):
        zeroplan.estimate(param=13e9, gpus=8)
    with pytest.raises(zeroplan.InputError, match="^tp: "):  # the keyword the caller wrote, not --tp
        zeroplan.estimate(model="gpt2", gpus=5, tp=5, gpus_per_node=5)
    with pytest.raises(zeroplan.InputError, match="^global_batch: "):
        zeroplan.plan(model="llama-2-7b", gpus=8)
    with pytest.raises(zeroplan.InputError):
        zeroplan.check()


def test_importing_zeroplan_loads_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys, zeroplan; assert zeroplan.__version__; "
            "print(sorted(m for m in sys.modules if m.startswith(('zeroplan.', 'typer', 'rich', 'pydantic'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_package_names_stay_callable_after_their_import():
    import zeroplan.check.runner  # noqa: F401
    import zeroplan.planning.estimate_plan  # noqa: F401

    assert zeroplan.estimate(params="7B", gpus=8).params == 7 * 10**9
    assert zeroplan.check(str(DEEPSPEED / "good_zero2.json")).failed is False

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


LAB_PRESETS = """gpus:
  lab-l40:
    description: L40 48GB
    memory: 46068MiB
    hbm_bandwidth: 864GB/s
    bf16_tflops: 181
    intra_node_link: {bandwidth: 31.5GB/s, latency_us: 10}
    sources: [test]
"""


@pytest.mark.parametrize("keyword", ["presets", "presets_file"])
def test_a_presets_file_is_used_for_the_call_and_a_missing_one_named(tmp_path, keyword):
    lab = tmp_path / "lab.yaml"
    lab.write_text(LAB_PRESETS)
    result = zeroplan.estimate(params=7e9, gpus=4, gpu="lab-l40", **{keyword: str(lab)})
    assert result.gpu == "lab-l40" and result.to_dict()["cluster"]["gpu_memory_bytes"] == 46068 * 2**20
    assert zeroplan.plan(model="llama-2-7b", gpus=4, gpu="lab-l40", global_batch=8, **{keyword: lab}).gpus == 4
    with pytest.raises(zeroplan.InputError, match="lab-l40"):  # only for that call
        zeroplan.estimate(params=7e9, gpus=4, gpu="lab-l40")
    with pytest.raises(zeroplan.InputError) as info:
        zeroplan.estimate(params=7e9, gpus=4, **{keyword: str(tmp_path / "missing.yaml")})
    assert info.value.input_name == keyword and "no such file" in info.value.problem
    config = tmp_path / "ds_config.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    assert not zeroplan.check(config, params=7e9, gpus=4, gpu="lab-l40", **{keyword: lab}).failed


@pytest.mark.parametrize("keyword,value", [
    ("model", 123), ("stage", True), ("stage", 3.0), ("gpus", "8"), ("flash_attention", "no"),
    ("flash_attention", 0), ("zeropp", {"qwz": True}), ("precision", 16), ("cpu_memory", [512]),
    ("buffer_factor", "1.5"), ("presets", 1),
])
def test_a_value_of_another_type_is_an_input_error_naming_the_keyword(keyword, value):
    with pytest.raises(zeroplan.InputError) as info:
        zeroplan.estimate(**{"model": "llama-2-7b", "gpus": 8, keyword: value})
    assert info.value.input_name == keyword


def _every_keyword(fields) -> list[str]:
    from zeroplan.inputs.keywords import keyword_of
    from zeroplan.inputs.sections import flag_of

    return sorted({keyword_of(flag_of(section, name)) for section, names in fields.items() for name in names})


def test_every_keyword_of_every_function_refuses_an_object_by_name():
    """No keyword reaches the command's code with a type it does not read (an AttributeError or a silent
    conversion): each refuses a value of no known type with an InputError naming it."""
    from zeroplan.check.api import _fields
    from zeroplan.inputs.estimate_inputs import FIELDS as ESTIMATE
    from zeroplan.search.inputs import FIELDS as PLAN

    for function, fields in ((zeroplan.estimate, ESTIMATE), (zeroplan.plan, PLAN)):
        for keyword in _every_keyword(fields):
            with pytest.raises(zeroplan.InputError) as info:
                function(**{"model": "llama-2-7b", "gpus": 8, keyword: object()})
            assert info.value.input_name == keyword, (function.__name__, keyword)
    for keyword in _every_keyword(_fields()):
        with pytest.raises(zeroplan.InputError) as info:
            zeroplan.check(DEEPSPEED / "good_zero2.json", **{keyword: object()})
        assert info.value.input_name == keyword
    with pytest.raises(zeroplan.InputError) as info:
        zeroplan.check(123)
    assert info.value.input_name == "files"
    with pytest.raises(zeroplan.InputError) as info:
        zeroplan.check(DEEPSPEED / "good_zero2.json", strict="yes")
    assert info.value.input_name == "strict"


def test_the_types_the_docs_name_are_taken():
    base = zeroplan.estimate(model="llama-2-7b", gpus=8, zeropp="qwz,hpz", stage=3)
    as_list = zeroplan.estimate(model="llama-2-7b", gpus=8, zeropp=["qwz", "hpz"], stage=3)
    assert as_list.options == base.options
    assert zeroplan.estimate(model="llama-2-7b", gpus=8, precision=None).options == \
        zeroplan.estimate(model="llama-2-7b", gpus=8).options  # None: not given, the default applies
    config = Path(__file__).parent / "configs" / "llama-2-7b-hf.json"
    assert zeroplan.estimate(model=config, gpus=8).params == zeroplan.estimate(model=str(config), gpus=8).params
    off = zeroplan.estimate(model="llama-2-7b", gpus=8, flash_attention=False).option("ZeRO-3")
    on = zeroplan.estimate(model="llama-2-7b", gpus=8, flash_attention=True).option("ZeRO-3")
    assert off.gpu_bytes["activations"] > on.gpu_bytes["activations"]
    assert zeroplan.plan(model="llama-2-7b", gpus=8, global_batch=64, tp=[1, 2], stages=(1, 3)).top


def test_results_are_built_from_the_evaluation_not_a_json_round_trip(monkeypatch):
    """A call renders no JSON document (a loop of estimates costs the evaluations); to_dict() builds it when
    asked, and it is the command's (test_estimate_is_the_command)."""
    from zeroplan.estimate import report as estimate_report
    from zeroplan.search import report as plan_report

    def refuse(*args, **kwargs):
        raise AssertionError("the API rendered the JSON document")

    with monkeypatch.context() as patched:
        patched.setattr(estimate_report, "to_json", refuse)
        patched.setattr(plan_report, "to_json", refuse)
        result = zeroplan.estimate(model="llama-2-7b", gpus=8)
        planned = zeroplan.plan(model="llama-2-7b", gpus=8, global_batch=16)
    document = result.to_dict()
    assert [o.gpu_bytes for o in result.options] == [o["gpu_bytes"] for o in document["options"]]
    assert [o.cpu_bytes_per_node for o in result.options] == [o["cpu_bytes_per_node"] for o in document["options"]]
    assert [p.row for p in planned.top] == planned.to_dict()["top"]

"""`zeroplan check` reads DeepSpeed configs as DeepSpeed 0.19.8 does.

tests/data/deepspeed_cases.json holds 85 config files with DeepSpeed's own verdicts, recorded by running
DeepSpeedConfig(path) (hjson 3.1.0, pydantic 2.14) on each. Every case goes through the parser and
through `zeroplan check --gpus 1` (DeepSpeed's verdict assumes world size 1).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from zeroplan.deepspeed import startup_model
from zeroplan.inputs import hjson as hjson_reader

DATA = json.loads((Path(__file__).parent / "data" / "deepspeed_cases.json").read_text(encoding="utf-8"))
CASES = DATA["cases"]

# The key DeepSpeed's refusal is about, where its message does not carry a location (zero_error_loc does).
REFUSED_KEY = {
    "quoteless_value_with_trailing_comma": "zero_optimization.offload_param.device",
    "quoteless_value_then_comment": "zero_optimization.offload_optimizer.device",
    "capitalised_True_with_comma": "zero_optimization.overlap_comm",
    "empty_file": "train_micro_batch_size_per_gpu",
    "comment_only_file": "train_micro_batch_size_per_gpu",
    "zero_null": "zero_optimization",
    "zero_string": "zero_optimization",
    "partial_offload_ratio_stage2": "zero_optimization.offload_optimizer.ratio",
    "compute_grad_norm_false_stage3": "zero_optimization.compute_grad_norm",
    "removed_zero_key_mics": "zero_optimization.mics_shard_size",
    "removed_top_level_amp": "amp",
    "fp16_and_bf16_both": "bf16.enabled",
    "fp16_unknown_key": "fp16.loss_scale_windows",
    "batch_mismatch": "train_batch_size",
    "batch_missing": "train_micro_batch_size_per_gpu",
    "batch_string": "train_batch_size",
    "batch_zero": "train_batch_size",
}
ROOT_NOT_OBJECT = {"top_level_array", "root_scalar"}  # no key to name: check stops with exit 2
# DeepSpeed refuses the file at load; check reads on and reports each duplicate (ZP017) on its line.
DUPLICATE_KEY = {"duplicate_top_level_key": "train_batch_size", "duplicate_key_in_zero": "zero_optimization.stage"}
# Predictions for the assumed hardware, not DeepSpeed's start-up verdict.
PREDICTION_RULES = {"ZP009", "ZP010", "ZP011", "ZP012", "ZP013", "ZP014"}


def _unjson(value):
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: _unjson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unjson(v) for v in value]
    return value


def _same(a, b) -> bool:
    """Equality that also tells int from float (hjson reads 5e8 as an int, 2e10 as a float)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def test_the_cases_are_deepspeeds():
    assert DATA["meta"]["deepspeed"] == "0.19.8" and len(CASES) == 85
    assert sum(case.get("deepspeed_accepts", False) for case in CASES) == 35


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_parser_matches_hjson(case):
    if not case["parse_ok"]:
        with pytest.raises(hjson_reader.ConfigParseError) as raised:
            hjson_reader.read_deepspeed_config(case["text"])
        if case["parse_error_line"] is not None:
            assert (raised.value.line, raised.value.col) == (case["parse_error_line"], case["parse_error_col"])
            assert case["parse_error_substring"].split(": line ")[0] in raised.value.msg
        return
    assert _same(hjson_reader.read_deepspeed_config(case["text"]), _unjson(case["parsed"]))


@pytest.mark.parametrize("case", [c for c in CASES if c["parse_ok"]], ids=[c["name"] for c in CASES if c["parse_ok"]])
def test_full_model_matches_deepspeed(case):
    values, refusals = startup_model.deepspeed_refusals(_unjson(case["parsed"]), world_size=1)
    assert (not refusals) == case["deepspeed_accepts"], refusals
    if not case["deepspeed_accepts"]:
        assert any(case["deepspeed_error_substring"] in refusal for refusal in refusals), refusals


def _check_json(cli, tmp_path, case) -> tuple[int, dict | None, str]:
    path = tmp_path / "ds_config.json"
    path.write_bytes(case["text"].encode("utf-8"))  # CRLF kept: DeepSpeed opens the file in text mode
    code, out, err = cli("check", str(path), "--gpus", "1", "--format", "json")
    return code, (json.loads(out) if out else None), err


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_check_agrees_with_deepspeed(cli, tmp_path, case):
    code, document, err = _check_json(cli, tmp_path, case)
    if case["name"] in DUPLICATE_KEY:
        assert code == 1 and any(f["rule"] == "ZP017" and f["key"] == DUPLICATE_KEY[case["name"]]
                                 for report in document["files"] for f in report["findings"])
        return
    if not case["parse_ok"] or case["name"] in ROOT_NOT_OBJECT:
        assert not case.get("deepspeed_accepts")
        assert code == 2 and document is None and err.count("\n") == 1
        if case["parse_ok"] is False and case["parse_error_line"] is not None:
            assert f"line {case['parse_error_line']}, column {case['parse_error_col']}" in err
        return
    findings = [f for report in document["files"] for f in report["findings"]]
    errors = [f for f in findings if f["severity"] == "error" and f["rule"] not in PREDICTION_RULES]
    if case["deepspeed_accepts"]:
        assert errors == [], errors
        return
    loc = case.get("zero_error_loc")
    key = f"zero_optimization.{loc}" if loc else REFUSED_KEY[case["name"]]
    assert code == 1
    assert any(f["key"] == key for f in errors), (key, errors)


def test_coercions_are_noted_and_used(cli, tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{\n  // DeepSpeed coerces both values\n  "train_batch_size": 8,\n'
                    '  "zero_optimization": {"stage": "3", "overlap_comm": "off",},\n}\n')
    code, out, _ = cli("check", str(path), "--gpus", "8", "--format", "json")
    findings = {f["key"]: f for report in json.loads(out)["files"] for f in report["findings"]}
    assert code == 0
    assert findings["zero_optimization.stage"]["rule"] == "ZP019"
    assert 'reads it as 3' in findings["zero_optimization.stage"]["message"]
    assert findings["zero_optimization.stage"]["line"] == 4
    assert 'reads it as false' in findings["zero_optimization.overlap_comm"]["message"]


def test_duplicates_everywhere_are_reported_with_both_lines():
    parsed = hjson_reader.read_with_marks('{"a": {"b": 1,\n"b": 2}, a2: [{"c": 1, "c": 3}]}')
    assert [path for path, _ in parsed.duplicates] == [("a", "b"), ("a2", "0", "c")]
    assert parsed.marks[("a", "b")] == (1, 8) and parsed.duplicates[0][1] == (2, 1)
    with pytest.raises(hjson_reader.ConfigParseError, match="Duplicate keys in DeepSpeed config: \\['b'\\]"):
        hjson_reader.read_deepspeed_config('{"a": {"b": 1,\n"b": 2}}')


# ------------------------------------------------------------- against DeepSpeed itself, where installed
def _deepspeed():
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    deepspeed = pytest.importorskip("deepspeed")
    if deepspeed.__version__ != DATA["meta"]["deepspeed"]:
        pytest.skip(f"the cases were recorded with deepspeed {DATA['meta']['deepspeed']}")
    return deepspeed


@pytest.mark.slow  # imports DeepSpeed (and torch): seconds
def test_field_tables_match_deepspeeds_models():
    _deepspeed()
    from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from deepspeed.runtime.zero.offload_config import (DeepSpeedZeroOffloadOptimizerConfig,
                                                       DeepSpeedZeroOffloadParamConfig)
    for model, table in ((DeepSpeedZeroConfig, startup_model.ZERO_FIELDS),
                         (DeepSpeedZeroOffloadParamConfig, startup_model.OFFLOAD_PARAM_FIELDS),
                         (DeepSpeedZeroOffloadOptimizerConfig, startup_model.OFFLOAD_OPTIMIZER_FIELDS),
                         (DeepSpeedFP16Config, startup_model.FP16_FIELDS),
                         (DeepSpeedBF16Config, startup_model.BF16_FIELDS)):
        assert list(model.model_fields) == list(table), model.__name__
        for name, info in model.model_fields.items():
            assert info.alias == table[name][3], (model.__name__, name)


@pytest.mark.slow  # imports DeepSpeed (and torch): seconds
@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_deepspeed_config_class_agrees(case, tmp_path):
    """DeepSpeedConfig(path), run now, gives the recorded verdict, and so does zeroplan's model."""
    _deepspeed()
    import logging

    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.utils import logger

    logger.setLevel(logging.ERROR)
    path = tmp_path / "ds.json"
    path.write_bytes(case["text"].encode("utf-8"))
    try:
        DeepSpeedConfig(str(path))
        accepted = True
    except Exception:  # noqa: BLE001 - DeepSpeed refuses with many exception types
        accepted = False
    try:
        ours = not startup_model.deepspeed_refusals(hjson_reader.read_deepspeed_config(case["text"]))[1]
    except ValueError:
        ours = False
    assert ours == accepted == case["deepspeed_accepts"]

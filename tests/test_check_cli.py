"""`zeroplan check` through its command: exit codes, formats, --strict, --plan, unreadable files.

`run` (tests/conftest.py) goes through zeroplan.cli.app.main, the real entry point.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


CONFIGS = Path(__file__).parent / "configs"
DS = CONFIGS / "deepspeed"

def test_clean_config_exits_0(run):
    code, out, err = run("check", str(DS / "good_zero2.json"), "--gpus", "8")
    assert code == 0 and "no findings" in out and err == ""


def test_errors_exit_1_with_one_stderr_line(run):
    code, out, err = run("check", str(DS / "bad_fp16_bf16.json"))
    assert code == 1 and "ZP002" in out
    assert err.count("\n") == 1 and err.startswith("zeroplan: error: check failed (1 error")


def test_warnings_pass_unless_strict(run):
    assert run("check", str(DS / "bad_nvme_stage2.json"))[0] == 0
    code, _, err = run("check", str(DS / "bad_nvme_stage2.json"), "--strict")
    assert code == 1 and "strict" in err


def test_notes_never_fail_even_strict(run):
    code, out, _ = run("check", str(DS / "hf_ds_config_zero2.json"), "--strict")
    assert code == 0 and "ZP015" in out


@pytest.mark.parametrize("path,where", [
    (DS / "malformed_unterminated.json", "line 4, column 1"),
    (CONFIGS / "plans/malformed.yaml", "line 4, column 8"),
    (CONFIGS / "plans/bad_schema.yaml", "bad_schema.yaml:8:3"),
    (CONFIGS / "plans/bad_zero_combination.yaml", "zero: parameter offload needs ZeRO stage 3"),
    (CONFIGS / "accelerate/missing_config_file.yaml", "deepspeed_config_file"),
    (CONFIGS / "accelerate/fsdp.yaml", "not DEEPSPEED"),
    (DS / "no_such_file.json", "no such file"),
])
def test_unreadable_input_exits_2_naming_file_and_place(run, path, where):
    code, out, err = run("check", str(path))
    assert code == 2 and out == ""
    assert err.startswith("zeroplan: error: ") and err.count("\n") == 1
    assert path.name in err and where in err


def test_bad_flags_exit_2(run):
    assert run("check", str(DS / "good_zero2.json"), "--format", "xml")[0] == 2
    assert run("check", str(DS / "good_zero2.json"), "--precision", "fp8")[0] == 2


def test_json_format(run):
    code, out, _ = run("check", str(DS / "bad_unknown_keys.json"), str(DS / "good_zero2.json"), "-f", "json")
    data = json.loads(out)
    assert code == 1 and data["failed"] is True and len(data["files"]) == 2
    first = data["files"][0]
    assert first["summary"] == {"errors": 2, "warnings": 1, "notes": 0}
    finding = first["findings"][0]
    assert {"rule", "name", "severity", "message", "fix", "key", "file", "line", "column"} <= finding.keys()
    assert data["files"][1]["findings"] == [] and "ZP001" in data["rules"]


def test_github_annotations_point_at_the_line(run):
    code, out, _ = run("check", str(DS / "bad_unknown_keys.json"), "-f", "github")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 3
    assert lines[0].startswith(f"::error file={DS / 'bad_unknown_keys.json'},line=7,col=5,title=ZP008::")
    assert lines[2].startswith("::warning ") and "line=3" in lines[2]
    notes = run("check", str(DS / "hf_ds_config_zero2.json"), "-f", "github")[1]
    assert notes.startswith("::notice ")


def test_plan_option_supplies_the_context(run):
    code, out, _ = run("check", str(DS / "bad_batch_identity.json"), "--plan", str(CONFIGS / "plans/good_llama7b.yaml"))
    assert code == 1 and "ZP001" in out  # 8 GPUs from the plan
    code, out, _ = run("check", str(DS / "good_zero2.json"), "--plan", str(CONFIGS / "plans/good_llama7b.yaml"))
    assert code == 0, out


def test_flags_override_the_plan(run):
    # The plan says 8 GPUs; --gpus 16 makes 256 = 4 × 8 × 8 wrong.
    code, out, _ = run("check", str(DS / "good_zero2.json"), "--plan", str(CONFIGS / "plans/good_llama7b.yaml"),
                       "--gpus", "16")
    assert code == 1 and "ZP001" in out


def test_output_file(run, tmp_path):
    target = tmp_path / "report.json"
    code, out, _ = run("check", str(DS / "good_zero2.json"), "-f", "json", "-o", str(target))
    assert code == 0 and out == "" and json.loads(target.read_text())["failed"] is False


def test_assumptions_listed_on_request(run):
    code, out, _ = run("check", str(DS / "good_zero3_offload.json"), "--model", "llama-2-7b", "--gpus", "8",
                       "--cluster", "dgx-a100", "--assumptions")
    assert code == 0 and "assumptions (memory rules)" in out


@pytest.mark.skipif(sys.platform == "win32", reason="paths")
def test_accelerate_relative_config_file(run, monkeypatch):
    monkeypatch.chdir(CONFIGS / "accelerate")
    code, out, _ = run("check", "zero2_config_file.yaml", "--micro-batch", "4", "--grad-accum", "2")
    assert code == 0 and "hf_ds_config_zero2.json" in out

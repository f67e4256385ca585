"""Hostile and impossible inputs (issue #11, classes 4-7): each class refused with one line naming the
input and the fix, exit 2, within a second, through the real entry point of every command it affects."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zeroplan.cli.app import main
from zeroplan.core.errors import InputError
from zeroplan.core.units import format_count, parse_bytes, parse_count

CONFIGS = Path(__file__).parent / "configs"


def _refused(argv: list[str], capsys) -> str:
    start = time.process_time()
    with pytest.raises(SystemExit) as info:
        main(argv)
    captured = capsys.readouterr()
    assert info.value.code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zeroplan: error:"), captured.err
    assert "internal error" not in lines[0] and "Traceback" not in captured.err
    assert time.process_time() - start < 5  # CPU time, not wall time: "within a second" with room for load
    return lines[0]


IMPOSSIBLE = [
    # tp must divide the attention heads: the same rule as plan's
    (["estimate", "--model", "gpt2", "--gpus", "5", "--tp", "5", "--gpus-per-node", "5"], ["--tp", "12 attention heads"]),
    # and the key/value heads (llama-2-70b has 8)
    (["estimate", "--model", "llama-2-70b", "--gpus", "16", "--tp", "16"], ["--tp", "8 key/value heads"]),
    (["export", "deepspeed", "--model", "llama-2-70b", "--gpus", "16", "--tp", "16"], ["8 key/value heads"]),
    # bf16 on a GPU without it, for every command
    (["estimate", "--params", "13e9", "--gpus", "8", "--gpu", "v100-32g", "--precision", "bf16"], ["--precision", "v100-32g"]),
    (["export", "deepspeed", "--params", "13e9", "--gpus", "8", "--gpu", "v100-32g", "--precision", "bf16"], ["--precision"]),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--gpu", "v100-32g", "--precision", "bf16",
      "--global-batch", "8"], ["--precision"]),
    # a count no shape can hold
    (["plan", "--params", "1", "--layers", "44", "--hidden", "6144", "--heads", "48", "--vocab", "50000",
      "--gpus", "8", "--global-batch", "8"], ["--params", "44 layers"]),
    # partial nodes
    (["estimate", "--params", "13e9", "--gpus", "8", "--gpus-per-node", "3"], ["--gpus", "whole nodes of 3"]),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--gpus-per-node", "3", "--global-batch", "8"], ["whole nodes"]),
    # sequence parallelism needs the sequence divisible by tp
    (["estimate", "--model", "llama-2-7b", "--gpus", "8", "--tp", "8", "--sequence-parallel", "--seq-len", "4097"],
     ["--seq-len", "tp(8)"]),
    # sequence lengths: the same bound as plan's
    (["estimate", "--model", "llama-2-7b", "--gpus", "8", "--seq-len", str(10**20)], ["--seq-len", "beyond"]),
]


@pytest.mark.parametrize("argv,named", IMPOSSIBLE)
def test_impossible_setups_are_refused(argv, named, capsys):
    line = _refused(argv, capsys)
    for text in named:
        assert text in line, line


def test_tp_across_nodes_is_a_warning_in_estimate(capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--params", "13e9", "--gpus", "16", "--tp", "16"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "warning: tp(16) spans more than one node" in " ".join(out.split())


def test_moe_top_k_beyond_the_experts(tmp_path, capsys):
    config = json.loads((CONFIGS / "mixtral-8x7b-v0.1.json").read_text())
    config["num_experts_per_tok"] = 16
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    line = _refused(["estimate", "--model", str(path), "--gpus", "8"], capsys)
    assert "num_experts_per_tok" in line and "8 experts" in line


@pytest.mark.parametrize("field", ["hidden_size", "vocab_size", "num_hidden_layers", "intermediate_size"])
def test_config_fields_beyond_any_model_are_named(field, tmp_path, capsys):
    config = json.loads((CONFIGS / "llama-2-7b-hf.json").read_text())
    config[field] = 10**30
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    line = _refused(["estimate", "--model", str(path), "--gpus", "8"], capsys)
    assert f"'{field}'" in line and "beyond any real model" in line


def test_config_json_nested_deeply_or_not_a_file(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    assert "nested too deeply" in _refused(["estimate", "--model", str(deep), "--gpus", "8"], capsys)
    huge_int = tmp_path / "int.json"
    huge_int.write_text('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}")
    assert str(huge_int) in _refused(["estimate", "--model", str(huge_int), "--gpus", "8"], capsys)
    for device in ("/dev/zero", "/dev/urandom"):
        if Path(device).exists():
            assert "not a regular file" in _refused(["estimate", "--model", device, "--gpus", "8"], capsys)


@pytest.mark.parametrize("flag", ["--params", "--gpu-memory", "--cpu-memory"])
@pytest.mark.parametrize("value", ["1e999999999", "1e999999", "9" * 5000, "1,3,0,0"])
def test_absurd_numbers_are_refused_at_once(flag, value, capsys):
    argv = ["estimate", "--gpus", "8"] + (["--params", value] if flag == "--params" else ["--params", "13e9", flag, value])
    assert flag in _refused(argv, capsys)


def test_thousands_separators_still_read():
    assert parse_count("13,000,000,000") == 13 * 10**9
    assert parse_bytes("1,024GiB", "--gpu-memory") == 1024 * 2**30
    with pytest.raises(InputError, match="thousands"):
        parse_count("1,3,0,0")


def test_huge_counts_print_in_scientific_notation():
    assert format_count(10**18) == "1.00e+18"
    assert format_count(999 * 10**12) == "999.0T"


def test_fewest_gpus_never_passes_the_world_limit(capsys):
    """Once reported '--gpus: 16777224 is beyond any cluster' for an input the user never gave."""
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--params", "1e12", "--gpus", "12", "--gpus-per-node", "12", "--convention", "deepspeed",
              "-f", "json"])
    captured = capsys.readouterr()
    assert info.value.code == 0, captured.err
    fewest = json.loads(captured.out)["recommendation"]["fewest_gpus"]
    assert fewest is None or (fewest % 12 == 0 and fewest <= 2**24)


def test_an_ascii_terminal_gets_ascii_stand_ins():
    done = subprocess.run([sys.executable, "-m", "zeroplan", "estimate", "--params", "13e9", "--gpus", "8"],
                          capture_output=True, env={**__import__("os").environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("ascii")  # fails if any non-ASCII byte was written
    assert "8 x a100-80g" in text and "dp(8) x tp(1)" in text


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_check_refuses_devices_at_once(device, capsys):
    if not Path(device).exists():
        pytest.skip(f"no {device} here")
    assert "not a regular file" in _refused(["check", device], capsys)


def test_check_names_the_section_and_file_that_are_wrong(tmp_path, capsys):
    plan = tmp_path / "run.plan.yaml"
    plan.write_text("zeroplan_plan: 1\nmodel:\n  config: missing/config.json\ncluster:\n  gpus: 8\n")
    line = _refused(["check", str(plan)], capsys)
    assert f"{plan}: model.config: missing/config.json: no such file" in line
    accelerate = tmp_path / "accelerate.yaml"
    accelerate.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
                          "  deepspeed_config_file: /dev/zero\nnum_processes: 8\n")
    line = _refused(["check", str(accelerate)], capsys)
    assert f"{accelerate}: deepspeed_config_file: /dev/zero: is not a regular file" in line


@pytest.mark.parametrize("argv_for", [
    lambda path: ["check", path],
    lambda path: ["presets", "validate", path],
    lambda path: ["estimate", "--params", "1e9", "--calibration", path],
])
def test_malformed_or_deep_yaml_is_one_line_with_its_position(argv_for, tmp_path, capsys):
    """Every YAML input goes through inputs/yaml_text.py: a syntax error names the file and line; nesting
    thousands deep is refused, not a crash."""
    bad = tmp_path / "run.plan.yaml"
    bad.write_text("a: [1, 2\n")
    line = _refused(argv_for(str(bad)), capsys)
    assert str(bad) in line and "malformed YAML" in line and ("line 2" in line or ":2:1" in line)
    bad.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    line = _refused(argv_for(str(bad)), capsys)
    assert str(bad) in line and "nest" in line

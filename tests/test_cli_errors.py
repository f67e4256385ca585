"""Bad input: one line on stderr naming the input, exit status 2, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zeroplan.cli.app import main

BAD_INPUTS = [
    (["--params", "0", "--gpus", "8"], "--params"),
    (["--params", "-5", "--gpus", "8"], "--params"),
    (["--params", "abc", "--gpus", "8"], "--params"),
    (["--params", "13e9", "--gpus", "0"], "--gpus"),
    (["--params", "13e9", "--gpus", "8", "--tp", "3"], "tp(3)"),
    (["--params", "13e9", "--gpus", "8", "--gpu", "a100-81g"], "did you mean a100-80g"),
    (["--params", "13e9", "--gpus", "8", "--cluster", "nope"], "--cluster"),
    (["--model", "llama-2-7"], "did you mean"),
    (["--params", "13e9", "--stage", "2", "--offload-params", "cpu"], "--offload-params"),
    (["--params", "13e9", "--stage", "1", "--offload-optimizer", "nvme"], "NVMe"),
    (["--params", "13e9", "--stage", "5"], "--stage"),
    (["--params", "13e9", "--format", "xml"], "--format"),
    (["--params", "13e9", "--units", "bits"], "--units"),
    (["--params", "13e9", "--gpus", "16", "--tp", "2", "--convention", "deepspeed"], "--convention"),
    (["--params", "13e9", "--zeropp", "qqq"], "--zeropp"),
    (["--params", "13e9", "--stage", "2", "--zeropp", "hpz"], "--zeropp"),
    (["--params", "13e9", "--precision", "fp8"], "--precision"),
    (["--params", "13e9", "--optimizer", "lion"], "--optimizer"),
    (["--params", "13e9", "--fragmentation", "120%"], "--fragmentation"),
    (["--params", "13e9", "--cpu-memory", "lots"], "--cpu-memory"),
    (["--params", "13e9", "--gpus", "abc"], "--gpus"),
    (["--params", "13e9", "--no-such-flag"], "no-such-flag"),
    (["--params", "13e9", "--model", "gpt2"], "not both"),
    (["--gpus", "8"], "--params"),
    (["--params", "13e9", "-f", "json", "-o", "/nonexistent/dir/plan.json"], "-o /nonexistent/dir/plan.json"),
    (["--params", "13e9", "--largest-layer-params", "20e9"], "--largest-layer-params"),
    (["--params", "13e9", "--gpus", "16", "--pp", "2", "--stage", "3"], "stages 0-1"),
    (["--params", "13e9", "--seq-len", "2048"], "--seq-len"),
    (["--params", "13e9", "--max-micro-batch"], "--max-micro-batch"),
    (["--model", "llama-2-7b", "--gpus", "8", "--recompute", "some"], "--recompute"),
    (["--model", "llama-2-7b", "--gpus", "8", "--global-batch", "100"], "--global-batch"),
    (["--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--grad-accum", "3"], "--grad-accum"),
    (["--model", "llama-2-7b", "--gpus", "8", "--sequence-parallel"], "--sequence-parallel"),
    (["--model", "llama-2-7b", "--gpus", "8", "--pp", "64"], "--pp"),
    (["--model", "missing/config.json"], "config.json"),
    # Found in review: each of these once crashed, or was silently ignored.
    (["--params", "13e9", "--gpus", "8", "--pp", "2", "--offload-params", "cpu"], "--pp"),
    (["--params", "13e9", "--gpus", "8", "--pp", "2", "--zeropp", "qwz"], "--zeropp"),
    (["--params", "1e400"], "--params"),
    (["--params", "13e9", "--gpu-memory", "1e400"], "--gpu-memory"),
    (["--params", "13e9", "--gpu-memory", "1GB"], "--gpu-memory"),
    (["--params", "13e9", "--convention", "deepspeed", "--buffer-factor", "nan"], "--buffer-factor"),
    (["--params", "13e9", "--buffer-factor", "inf"], "--buffer-factor"),
    (["--params", "13e9", "--grad-accum", "0"], "--grad-accum"),
    (["--params", "13e9", "--global-batch", "0"], "--global-batch"),
    (["--params", "13e9", "--gpu", ""], "--gpu"),
    (["--params", "13e9", "--framework", "torch"], "--framework"),
    (["--params", "13e9", "--convention", "deepspeed", "--optimizer", "sgd"], "--convention"),
    (["--params", "13e9", "--nvme-bandwidth", "7gb/s"], "ambiguous"),
    (["--params", "13e9", "--gpus", "16", "--zeropp", "hpz", "--hpz-partition-size", "3"], "--hpz-partition-size"),
    (["--params", "13e9", "--explain", "--format", "csv"], "--explain"),
    (["--params", "13e9", "--offload-optimizer", "foo"], "none, cpu or nvme"),
    (["--model", "llama-2-7b", "--seq-len", "0"], "--seq-len: must"),
]


@pytest.mark.parametrize("args,named", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2(args, named, capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimate", *args])
    captured = capsys.readouterr()
    assert info.value.code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zeroplan: error:"), captured.err
    assert named in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_debug_shows_the_traceback():
    result = subprocess.run([sys.executable, "-m", "zeroplan", "estimate", "--params", "0", "--debug"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_presets_unknown_name(capsys):
    with pytest.raises(SystemExit) as info:
        main(["presets", "show", "h100-80"])
    assert info.value.code == 2 and "did you mean h100-80g" in capsys.readouterr().err


def test_presets_list_and_show(capsys):
    with pytest.raises(SystemExit):
        main(["presets", "list"])
    out = capsys.readouterr().out
    assert "a100-80g" in out and "workstation-4x3090" in out and "llama-2-70b" in out
    with pytest.raises(SystemExit):
        main(["presets", "show", "llama-2-7b", "--format", "json"])
    assert '"params": 6738415616' in capsys.readouterr().out


@pytest.mark.slow  # tries transformers' meta-device count (imports torch)
def test_unsupported_config_json(tmp_path, capsys):
    """A model_type neither the architecture description nor the installed transformers knows (transformers
    counts mamba, once refused, on the meta device now: tests/test_meta_count.py)."""
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "no_such_model", "hidden_size": 768}')
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--model", str(config)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert "no_such_model" in err and "--params" in err
    config.write_text('{"model_type": "llama", "hidden_size": 4096,')
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--model", str(config)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "line 1" in err and "column" in err


def test_binary_calibration_file(tmp_path, capsys):
    binary = tmp_path / "calibration.yaml"
    binary.write_bytes(b"\x00\x01\xff")
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--params", "13e9", "--calibration", str(binary)])
    assert info.value.code == 2 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("args", [[], ["export"], ["presets"]])
def test_bare_commands_show_help_and_exit_0(args, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    captured = capsys.readouterr()
    assert info.value.code == 0 and "Usage" in captured.out and captured.err == ""


def test_unknown_command_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimat"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "estimat" in err

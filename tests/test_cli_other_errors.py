"""Bad input to plan, sweep, check, export, bench and validate: one line, exit 2 (found in review)."""

from __future__ import annotations

import pytest

from zeroplan.cli.app import main

GOOD_CONFIG = "tests/configs/deepspeed/good_zero2.json"
BAD = [
    (["check", GOOD_CONFIG, "--gpus", "0"], "--gpus"),
    (["check", GOOD_CONFIG, "--tp", "0"], "--tp"),
    (["check", GOOD_CONFIG, "--micro-batch", "0"], "--micro-batch"),
    (["check", GOOD_CONFIG, "--params", "abc"], "--params"),
    (["check", GOOD_CONFIG, "--units", "x"], "--units"),
    (["check", GOOD_CONFIG, "--recompute", "x"], "--recompute"),
    (["export", "deepspeed", "--model", "llama-2-7b", "--gpus", "0"], "--gpus"),
    (["export", "deepspeed", "--model", "llama-2-7b", "--gpus", "8", "--hidden", "-5"], "--hidden"),
    (["export", "deepspeed", "--model", "llama-2-7b", "--gpus", "8", "--stage", "3", "--offload-optimizer", "nvme",
      "--nvme-path", ""], "--nvme-path"),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--tp", "3"], "--tp"),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "1000000000000000"], "--global-batch"),
    (["plan", "--model", "llama-2-7b", "--gpus", "99999999999999999999", "--global-batch", "64"], "--gpus"),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--fragmentation", "1e400"],
     "--fragmentation"),
    (["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--efficiency", "1e-320"],
     "--efficiency"),
    (["plan", "--params", "7B", "--layers", "32", "--hidden", "4096", "--heads", "3", "--vocab", "32000",
      "--gpus", "8", "--global-batch", "64"], "--heads"),
    (["validate", "--nproc", "2", "--stage", "0", "--vocab", "99999999999999999999"], "--vocab"),
    (["validate", "--nproc", "99999999999999999999", "--stage", "0"], "--nproc"),
    (["bench", "--save-calibration", "/proc/zeroplan-test.yaml"], "--save-calibration"),
]


@pytest.mark.parametrize("args,named", BAD, ids=[" ".join(a[:3]) + "…" + n for a, n in BAD])
def test_bad_input_is_one_line_exit_2(args, named, capsys):
    with pytest.raises(SystemExit) as info:
        main(args)
    captured = capsys.readouterr()
    assert info.value.code == 2, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "internal error" not in lines[0], captured.err


def test_deeply_nested_config(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    with pytest.raises(SystemExit) as info:
        main(["check", str(deep)])
    assert info.value.code == 2 and "nested" in capsys.readouterr().err


def test_plan_output_collision(tmp_path, capsys):
    target = str(tmp_path / "x.json")
    with pytest.raises(SystemExit) as info:
        main(["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "-o", target,
              "--write-deepspeed", target])
    assert info.value.code == 2 and "--write-deepspeed" in capsys.readouterr().err


def test_check_says_when_a_flag_is_not_used(capsys):
    """The config's own value wins over a flag (flags fill "auto"): never silently."""
    with pytest.raises(SystemExit) as info:
        main(["check", GOOD_CONFIG, "--model", "llama-2-7b", "--gpus", "8", "--micro-batch", "1", "--format", "json"])
    out = capsys.readouterr().out
    assert info.value.code in (0, 1) and "--micro-batch 1 not used" in out
    with pytest.raises(SystemExit):
        main(["check", GOOD_CONFIG, "--model", "llama-2-7b", "--gpus", "8", "--micro-batch", "4", "--format", "json"])
    assert "not used" not in capsys.readouterr().out

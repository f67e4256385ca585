"""`zeroplan estimate` parsed without typer (cli/fast_path.py) gives what typer's parsing gives: the same
stdout, stderr and exit status for every command line, plain or odd; the odd ones go to typer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zeroplan.cli import fast_path
from zeroplan.cli.app import main

CONFIGS = Path(__file__).parent / "configs"

LINES = [
    ["--params", "13e9", "--gpus", "8"],
    ["--params=13e9", "--gpus=8", "-f", "json"],
    ["--model", "llama-2-7b", "--gpus", "16", "--tp", "2", "--recompute", "FULL", "--no-flash-attention",
     "--sequence-parallel", "--seq-len", "2048", "--micro-batch", "2", "-f", "csv"],
    ["--model", str(CONFIGS / "qwen2-7b.json"), "--gpus", "8", "--max-micro-batch", "--global-batch", "256",
     "--activations", "megatron", "-f", "markdown"],
    ["--params", "70B", "--gpus", "4", "--cluster", "workstation-4x3090", "--stage", "3",
     "--offload-optimizer", "nvme", "--offload-params", "nvme", "--units", "si", "--explain"],
    ["--params", "13e9", "--gpus", "16", "--zeropp", "qwz,hpz", "--convention", "deepspeed",
     "--buffer-factor", "2.0", "--no-zero-init"],
    ["--params", "13e9", "--gpus", "8", "--cpu-memory", "512GB", "--nvme", "2TB", "--gpu-memory", "40GiB",
     "--fragmentation", "5%", "--runtime-reserve", "2GiB", "--overlap-comm", "--reduce-bucket-size", "2e8"],
    ["--gpus", "8", "--gpus", "16", "--params", "7B"],  # a repeated flag: the last one counts, as in click
    # Odd or wrong lines: typer's path either way, with typer's own message
    ["--params", "13e9", "--gpus", "x"],
    ["--parms", "13e9"],
    ["--params"],
    ["--params", "13e9", "extra"],
    ["--params", "13e9", "--no-flash-attention=1"],
    ["--params", "13e9", "--tp", "3", "--gpus", "8"],
    ["--model", "llama-2-70b", "--gpus", "16", "--tp", "16"],
]


def _run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["estimate", *argv])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize("argv", LINES, ids=lambda a: " ".join(a)[:60])
def test_both_paths_agree(argv, monkeypatch, capsys):
    fast = _run(argv, capsys)
    monkeypatch.setattr(fast_path, "parse", lambda generated, args: None)  # typer parses every line
    slow = _run(argv, capsys)
    assert fast == slow


def test_plain_lines_take_the_fast_path_and_odd_ones_do_not():
    from zeroplan.cli.estimate_cmd import estimate

    assert fast_path.parse(estimate, ["--params", "13e9", "--gpus", "8", "--no-flash-attention"]) is not None
    for odd in (["--parms", "1"], ["--gpus", "x"], ["--params"], ["positional"], ["--explain=yes"], ["-h"]):
        assert fast_path.parse(estimate, odd) is None, odd


def test_a_plain_estimate_imports_neither_typer_nor_click():
    code = ("import sys; sys.argv = ['zeroplan', 'estimate', '--params', '13e9', '--gpus', '8'];"
            "from zeroplan.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "[]"
    help_done = subprocess.run([sys.executable, "-m", "zeroplan", "estimate", "--help"], capture_output=True,
                               text=True, timeout=60)
    assert help_done.returncode == 0 and "--params" in help_done.stdout

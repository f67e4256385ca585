"""80 columns: every table and help screen fits (JSON/CSV unchanged), help wraps whole words and never
cuts an option name; --version; shell completion for bash, zsh and fish."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import zeroplan
from zeroplan.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
DEEPSPEED = Path(__file__).parent / "configs" / "deepspeed"

TABLES = [
    ["estimate", "--params", "13e9", "--gpus", "8"],
    ["estimate", "--model", "llama-2-70b", "--gpus", "64", "--max-micro-batch", "--global-batch", "512"],
    ["estimate", "--params", "70e9", "--gpus", "4", "--cluster", "workstation-4x3090"],
    ["estimate", "--params", "13e9", "--gpus", "8", "--explain"],
    ["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "8"],
    ["check", str(DEEPSPEED / "bad_fp16_bf16.json"), str(DEEPSPEED / "bad_unknown_keys.json")],
    ["presets", "list"],
    ["trace", "--help"],
]
HELP = [["--help"], ["estimate", "--help"], ["plan", "--help"], ["sweep", "--help"], ["check", "--help"],
        ["export", "deepspeed", "--help"], ["export", "plan", "--help"], ["validate", "--help"],
        ["presets", "--help"]]


def _run(argv: list[str], columns: int, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit):
        main(argv)
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", TABLES, ids=lambda a: " ".join(a[:3]))
def test_tables_fit_80_columns(argv, monkeypatch, capsys):
    out = _run(argv, 80, monkeypatch, capsys)
    too_wide = [line for line in out.splitlines() if len(line) > 80]
    assert out.strip() and not too_wide, "\n".join(too_wide)


def test_a_wide_terminal_keeps_the_wide_estimate_table(monkeypatch, capsys):
    out = _run(TABLES[0], 160, monkeypatch, capsys)
    header = next(line for line in out.splitlines() if "option" in line and "params" in line)
    assert "of GPU" in header and "comm" in header and "ZeRO-3 opt:nvme par:nvme" in out


def test_narrow_estimate_keeps_every_figure(monkeypatch, capsys):
    """The narrow layout moves columns, it drops none of the numbers (the bar aside)."""
    wide = _run(TABLES[0], 160, monkeypatch, capsys)
    narrow = _run(TABLES[0], 80, monkeypatch, capsys)
    for figure in ("24.2", "145", "38.7", "243", "194", "45.5", "152.8 ms", "239.0 ms", "12.3"):
        assert figure in wide and figure in narrow, figure


@pytest.mark.parametrize("argv", HELP, ids=lambda a: " ".join(a))
def test_help_fits_80_columns_and_cuts_no_name(argv, monkeypatch, capsys):
    out = _run(argv, 80, monkeypatch, capsys)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out or argv == ["bench", "--help"]


def test_help_paragraphs_wrap_whole_sentences(monkeypatch, capsys):
    out = _run(["--help"], 80, monkeypatch, capsys)
    # Once printed "with step" / "time, tokens/s" on lines broken where the docstring broke.
    assert "with step time, tokens/s" in " ".join(line.strip("│ ") for line in out.splitlines())


def test_every_long_option_name_is_printed_whole(monkeypatch, capsys):
    out = _run(["estimate", "--help"], 80, monkeypatch, capsys)
    for name in ("--allgather-bucket-size", "--prefetch-bucket-size", "--max-live-parameters",
                 "--flash-attention", "--no-flash-attention", "--largest-layer-params"):
        assert name in out, name


def test_version_matches_the_package_metadata(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert capsys.readouterr().out == f"zeroplan {version}\n" and zeroplan.__version__ == version


@pytest.mark.parametrize("shell,env,expected", [
    ("bash", {"COMP_WORDS": "zeroplan est", "COMP_CWORD": "1"}, "estimate"),
    ("bash", {"COMP_WORDS": "zeroplan estimate --conv", "COMP_CWORD": "2"}, "--convention"),
    ("zsh", {"_TYPER_COMPLETE_ARGS": "zeroplan pl"}, "plan"),
    ("fish", {"_TYPER_COMPLETE_ARGS": "zeroplan pre", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}, "presets"),
])
def test_shell_completion(shell, env, expected):
    done = subprocess.run([sys.executable, "-m", "zeroplan"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "_ZEROPLAN_COMPLETE": f"complete_{shell}", **env})
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout

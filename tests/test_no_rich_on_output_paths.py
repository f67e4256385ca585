"""Every command's table view goes through zeroplan.render.terminal: rich (about 80-100 ms to import) is never
loaded on a normal run. Each case runs in a fresh interpreter and reports which rich modules it loaded;
help screens may still use rich (typer draws them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEEPSPEED = Path(__file__).parent / "configs" / "deepspeed"

REPORT = """
loaded = sorted(name for name in sys.modules if name == "rich" or name.startswith("rich."))
sys.__stdout__.write("\\nRICH-MODULES " + json.dumps(loaded) + "\\n")
"""

COMMAND = """
import json, sys
from zeroplan.cli.app import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit as exc:
    assert exc.code in (0, 1, None), exc.code
""" + REPORT

BENCH = """
import json, sys
from zeroplan.bench.report import emit
from zeroplan.bench.result import BenchRun, fits_on_mean
from zeroplan.inputs.calibration import Calibration, Measurement
measurements = [Measurement(collective="all_reduce", span="intra_node", ranks=2, size_bytes=size,
                            time_s_median=t, time_s_min=t / 2, time_s_max=t * 3)
                for size, t in ((65536, 1e-4), (1048576, 1e-3))]
means = [2e-4, 1.5e-3]
run = BenchRun(Calibration(created="2025-01-01T00:00:00+00:00", backend="gloo", dtype="float32", world_size=2,
                           nodes=1, gpus_per_node=2, hostnames=["h"], device="CPU", torch_version="2",
                           fits=fits_on_mean(measurements, means, "gloo"), measurements=measurements), tuple(means))
emit(run, "table")
""" + REPORT

VALIDATE = """
import json, sys
from zeroplan.validate.report import StageReport, _row, render
from zeroplan.render.sink import canvas_for, write_text
rows = [_row("parameters", 4096, 4096, exact=True), _row("CUDA peak", 1 << 20, 1 << 20)]
report = StageReport(3, "fsdp2-zero3", 0, 0, rows, [], {}, {})
console = canvas_for(None)
render({"world_size": 2, "backend": "gloo", "device": "cpu", "precision": "fp32", "optimizer": "adam",
        "model": "tiny"}, [report], console)
write_text(console.text(), None)
""" + REPORT


def _loaded_rich(code: str, *args: str, tmp_path: Path) -> tuple[list[str], str]:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT / "src")}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path, env=env)
    assert "RICH-MODULES" in done.stdout, done.stderr
    output, _, reported = done.stdout.rpartition("RICH-MODULES ")
    return json.loads(reported), output


CASES = {
    "estimate": ["estimate", "--params", "13e9", "--gpus", "8"],
    "plan": ["plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "8"],
    "sweep table": ["sweep", "--params", "7e9,13e9", "--gpus", "8", "--format", "table"],
    "check": ["check", str(DEEPSPEED / "bad_fp16_bf16.json"), str(DEEPSPEED / "good_zero2.json")],
    "presets list": ["presets", "list"],
    "presets show": ["presets", "show", "a100-80g"],
    "export deepspeed": ["export", "deepspeed", "--params", "7e9", "--gpus", "8"],
}


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_no_command_imports_rich_for_its_output(argv, tmp_path):
    loaded, output = _loaded_rich(COMMAND, json.dumps(argv), tmp_path=tmp_path)
    assert output.strip(), "the command printed nothing"
    assert loaded == [], f"{' '.join(argv)} imported {loaded}"


def test_table_written_to_a_file_needs_no_rich_either(tmp_path):
    target = tmp_path / "plan.txt"
    argv = [*CASES["plan"], "-o", str(target)]
    loaded, _ = _loaded_rich(COMMAND, json.dumps(argv), tmp_path=tmp_path)
    assert loaded == [] and "dp×tp×pp" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize("name,code", [("bench", BENCH), ("validate", VALIDATE)])
def test_bench_and_validate_tables_need_no_rich(name, code, tmp_path):
    loaded, output = _loaded_rich(code, tmp_path=tmp_path)
    assert ("algbw" in output) if name == "bench" else ("CUDA peak" in output)
    assert loaded == [], f"{name} imported {loaded}"


def test_help_may_still_use_rich(tmp_path):
    """The probe sees rich when it is there: typer draws help screens with it."""
    loaded, output = _loaded_rich(COMMAND, json.dumps(["plan", "--help"]), tmp_path=tmp_path)
    assert "rich" in loaded and "--gpus" in output

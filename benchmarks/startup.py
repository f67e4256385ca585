"""Cold wall time of `zeroplan estimate --params 13e9 --gpus 8`, and the ratio against DeepSpeed's estimator.

Each run is a fresh process, as a user at a prompt sees it, with empty user caches: every run gets its own
new, empty HOME, XDG_CACHE_HOME and XDG_CONFIG_HOME (so no zeroplan presets file, no torch/triton cache).
The two commands alternate (zeroplan, DeepSpeed, zeroplan, ...), so a change in machine load hits both.
DeepSpeed runs its own estimators for the same 13B model on 8 GPUs of one node, from --deepspeed-python
(default: this Python, if it has deepspeed).
Usage: python benchmarks/startup.py [--runs 15] [--deepspeed-python /path/to/venv/bin/python]
Reports medians, the ratio measured in this run and the machine load; asserts nothing
(the target is ≤ 0.25 s and ≥ 20×).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEEPSPEED_SNIPPET = (
    "from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold as z3;"
    "from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold as z2;"
    "z2(total_params=13e9, num_gpus_per_node=8, num_nodes=1);"
    "z3(total_params=13e9, largest_layer_params=165.6e6, num_gpus_per_node=8, num_nodes=1)"
)


def installed_env() -> dict[str, str]:
    """This environment as after a pip install: bytecode is written (pip compiles .pyc at install)."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def child_cpu_seconds() -> float:
    """User + system CPU seconds of all finished children (0 where the platform has no getrusage)."""
    try:
        import resource
    except ImportError:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(command: list[str], cpu: list[float] | None = None) -> float:
    """Wall seconds for one fresh process whose user caches and config are new and empty; its CPU seconds
    go to cpu (less sensitive than wall time to other load on a shared machine)."""
    with tempfile.TemporaryDirectory(prefix="zeroplan-startup-") as home:
        env = {**installed_env(), "HOME": home, "XDG_CACHE_HOME": os.path.join(home, ".cache"),
               "XDG_CONFIG_HOME": os.path.join(home, ".config")}
        cpu_start, start = child_cpu_seconds(), time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wall = time.perf_counter() - start
        if cpu is not None:
            cpu.append(child_cpu_seconds() - cpu_start)
        return wall


def has_deepspeed(python: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('deepspeed') is None)"
    return subprocess.run([python, "-c", probe], check=False).returncode == 0


def load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unavailable"
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (alternating)")
    parser.add_argument("--deepspeed-python", default=sys.executable,
                        help="a Python with deepspeed installed (e.g. a separate venv's bin/python)")
    args = parser.parse_args()
    script = shutil.which("zeroplan") or str(Path(sys.executable).with_name("zeroplan"))
    zeroplan_cmd = [script, "estimate", "--params", "13e9", "--gpus", "8"]
    deepspeed_cmd = [args.deepspeed_python, "-c", DEEPSPEED_SNIPPET]
    with_deepspeed = has_deepspeed(args.deepspeed_python)
    # Compile .pyc once, as an install does; every timed run after this is a first run for its caches.
    subprocess.run(zeroplan_cmd, check=True, stdout=subprocess.DEVNULL, env=installed_env())
    if with_deepspeed:
        subprocess.run(deepspeed_cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=installed_env())
    print(f"before: {load()}")
    ours, ours_json, theirs, ours_cpu, theirs_cpu = [], [], [], [], []
    for _ in range(args.runs):
        ours.append(run_once(zeroplan_cmd, ours_cpu))
        if with_deepspeed:
            theirs.append(run_once(deepspeed_cmd, theirs_cpu))
        ours_json.append(run_once(zeroplan_cmd + ["--format", "json"]))
    print(f"after:  {load()}")
    median = statistics.median(ours)
    print(f"zeroplan estimate (table): median {median:.3f} s over {args.runs} cold runs (target ≤ 0.25 s)")
    print(f"zeroplan estimate (json):  median {statistics.median(ours_json):.3f} s")
    print(f"zeroplan estimate (table): median {statistics.median(ours_cpu):.3f} s of CPU (user + system)")
    if not with_deepspeed:
        print(f"DeepSpeed is not installed in {args.deepspeed_python}: no ratio measured "
              "(pass --deepspeed-python of a venv with deepspeed to compare)")
        return
    print(f"DeepSpeed estimators:      median {statistics.median(theirs):.3f} s over {args.runs} cold runs")
    print(f"DeepSpeed estimators:      median {statistics.median(theirs_cpu):.3f} s of CPU (user + system)")
    print(f"ratio: zeroplan is {statistics.median(theirs) / median:.1f}× faster (target ≥ 20×); "
          f"CPU time {statistics.median(theirs_cpu) / statistics.median(ours_cpu):.1f}×")


if __name__ == "__main__":
    main()

"""Cold wall time of `zeroplan estimate --params 13e9 --gpus 8`, and the ratio against DeepSpeed's estimator.

Each run is a fresh process, as a user at a prompt sees it. DeepSpeed (if importable by the same Python)
runs its own cold estimator for the same 13B model on 8 GPUs of one node in a fresh process too.
Usage: python benchmarks/startup.py [--runs 15]
Reports medians and the ratio measured in this run; asserts nothing (the target is ≤ 0.25 s and ≥ 10×).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEEPSPEED_SNIPPET = (
    "from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold as z3;"
    "from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold as z2;"
    "z2(total_params=13e9, num_gpus_per_node=8, num_nodes=1);"
    "z3(total_params=13e9, largest_layer_params=165.6e6, num_gpus_per_node=8, num_nodes=1)"
)


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    script = shutil.which("zeroplan") or str(Path(sys.executable).with_name("zeroplan"))
    zeroplan_cmd = [script, "estimate", "--params", "13e9", "--gpus", "8"]
    subprocess.run(zeroplan_cmd, check=True, stdout=subprocess.DEVNULL)  # compile .pyc once, as after install
    ours = median_seconds(zeroplan_cmd, args.runs)
    ours_json = median_seconds(zeroplan_cmd + ["--format", "json"], args.runs)
    print(f"zeroplan estimate (table): median {ours:.3f} s over {args.runs} cold runs (target ≤ 0.25 s)")
    print(f"zeroplan estimate (json):  median {ours_json:.3f} s")
    if importlib.util.find_spec("deepspeed") is None:
        print("DeepSpeed is not installed in this Python: no ratio measured (pip install deepspeed to compare)")
        return
    theirs = median_seconds([sys.executable, "-c", DEEPSPEED_SNIPPET], max(3, args.runs // 3))
    print(f"DeepSpeed estimators:      median {theirs:.3f} s")
    print(f"ratio: zeroplan is {theirs / ours:.1f}× faster (target ≥ 10×)")


if __name__ == "__main__":
    main()

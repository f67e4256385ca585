"""Issue 23 (item 12): cost that grows with the cluster.

`zeroplan estimate` at 16,384 GPUs against 8 GPUs, in every convention (paper, deepspeed, framework with
DeepSpeed's and torch's partitioning): the answer needs the most loaded rank, which is computed without
visiting every rank, so the ratio should stay near 1 (the budget: within 1.5×). `--trace` adds `zeroplan
trace` of Llama-2-70B at 16,384 ranks (the budget: 60 s on an idle core; needs torch and transformers).

    PYTHONPATH=src python benchmarks/cluster_scaling.py [--model llama-3-8b] [--small 8] [--large 16384] [--trace]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

CONVENTIONS = (("paper", {}), ("deepspeed", {}), ("framework", {"framework": "deepspeed"}),
               ("framework", {"framework": "torch"}))
BUDGET_RATIO = 1.5
TRACE_BUDGET_SECONDS = 60.0


def estimate_seconds(model: str, gpus: int, convention: str, extra: dict, rounds: int = 5) -> float:
    """Median CPU seconds of build_plan (what `zeroplan estimate` evaluates), after one warm-up call."""
    from zeroplan.inputs.estimate_inputs import EstimateInputs
    from zeroplan.planning.estimate_plan import build_plan

    def once() -> None:
        build_plan(EstimateInputs.of(model=model, gpus=gpus, convention=convention, **extra))

    once()
    times = []
    for _ in range(rounds):
        started = time.process_time()
        once()
        times.append(time.process_time() - started)
    return sorted(times)[len(times) // 2]


def trace_seconds(model: str, gpus: int, stage: int, seq_len: int) -> tuple[float, float, str]:
    """(wall s, CPU s, the total line) of `zeroplan trace` in a fresh process."""
    command = [sys.executable, "-m", "zeroplan", "trace", "--model", model, "--gpus", str(gpus), "--stage",
               str(stage), "--seq-len", str(seq_len)]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "COLUMNS": "130"})
    output = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"zeroplan trace failed: {output.strip()[-500:]}")
    total = next((line.strip() for line in output.splitlines() if line.strip().startswith("total")), "")
    return wall, usage.ru_utime + usage.ru_stime, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3-8b")
    parser.add_argument("--small", type=int, default=8)
    parser.add_argument("--large", type=int, default=16384)
    parser.add_argument("--trace", action="store_true", help="also time zeroplan trace of --trace-model")
    parser.add_argument("--trace-model", default="llama-2-70b")
    parser.add_argument("--trace-stages", default="3")
    parser.add_argument("--seq-len", type=int, default=4096)
    args = parser.parse_args()
    worst = 0.0
    print(f"zeroplan estimate --model {args.model}: CPU seconds of the evaluation (median of 5)")
    print(f"  {'convention':28} {args.small:>8} GPUs {args.large:>8} GPUs   ratio")
    for convention, extra in CONVENTIONS:
        small = estimate_seconds(args.model, args.small, convention, extra)
        large = estimate_seconds(args.model, args.large, convention, extra)
        label = convention + (f" --framework {extra['framework']}" if extra else "")
        worst = max(worst, large / small)
        print(f"  {label:28} {small:11.4f} s {large:11.4f} s  {large / small:5.2f}×")
    print(f"worst ratio {worst:.2f}× (budget {BUDGET_RATIO}×): {'within' if worst <= BUDGET_RATIO else 'OVER'}")
    if args.trace:
        for stage in (int(s) for s in args.trace_stages.split(",")):
            wall, cpu, total = trace_seconds(args.trace_model, args.large, stage, args.seq_len)
            # The budget is for an idle core: CPU time is that measure on a shared machine (wall is shown too).
            verdict = "within" if cpu <= TRACE_BUDGET_SECONDS else "OVER"
            print(f"zeroplan trace --model {args.trace_model} --gpus {args.large} --stage {stage} --seq-len "
                  f"{args.seq_len}: {cpu:.1f} s CPU ({verdict} the {TRACE_BUDGET_SECONDS:.0f} s budget on an idle "
                  f"core), {wall:.1f} s wall here (load {os.getloadavg()[0]:.1f}); {' '.join(total.split())}")


if __name__ == "__main__":
    main()

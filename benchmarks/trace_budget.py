"""Issue #12's budget for `zeroplan trace`: Llama-2-70B on 1024 ranks at sequence 4096 in at most 60 s and 2 GiB RSS.

Each case runs `zeroplan trace` in a fresh process (so its peak RSS is the trace's alone, torch and transformers
included) and prints its wall time, CPU time, peak RSS and the machine's load; the verdict is against the budget.

    PYTHONPATH=src python benchmarks/trace_budget.py [--stages 0,1,2,3] [--model llama-2-70b] [--gpus 1024]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

BUDGET_SECONDS = 60.0
BUDGET_RSS_BYTES = 2 * 2**30


def trace_once(model: str, gpus: int, stage: int, seq_len: int) -> tuple[float, float, int, str]:
    """(wall s, CPU s, peak RSS bytes, the trace's total line) of one `zeroplan trace` in a child process."""
    command = [sys.executable, "-m", "zeroplan", "trace", "--model", model, "--gpus", str(gpus), "--stage", str(stage),
               "--seq-len", str(seq_len)]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "COLUMNS": "130"})
    output = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage (RUSAGE_CHILDREN would keep the largest)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"zeroplan trace failed (exit {child.returncode}): {output.strip()}")
    total = next((line.strip() for line in output.splitlines() if line.strip().startswith("total")), "")
    cpu = usage.ru_utime + usage.ru_stime
    # ru_maxrss: KiB on Linux, bytes on macOS
    rss = usage.ru_maxrss * (1 if platform.system() == "Darwin" else 1024)
    return wall, cpu, rss, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-2-70b")
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--stages", default="3")
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()} {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    worst = True
    for stage in (int(s) for s in args.stages.split(",")):
        wall, cpu, rss, total = trace_once(args.model, args.gpus, stage, args.seq_len)
        meets = wall <= BUDGET_SECONDS and rss <= BUDGET_RSS_BYTES
        worst = worst and meets
        print(f"{args.model}, {args.gpus} ranks, seq {args.seq_len}, stage {stage}: {wall:.1f} s wall, {cpu:.1f} s CPU, "
              f"peak RSS {rss / 2**30:.2f} GiB (budget {BUDGET_SECONDS:.0f} s, {BUDGET_RSS_BYTES / 2**30:.0f} GiB): "
              f"{'meets' if meets else 'MISSES'}\n  {total}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0 if worst else 1


if __name__ == "__main__":
    sys.exit(main())

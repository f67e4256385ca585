"""Issue 23 (item 13): the Python API's cost per call against the evaluation it runs.

`zeroplan.estimate(params=13e9, gpus=8)` in a loop, beside the same evaluation with no result object
(`build_plan(EstimateInputs.of(...))`), and `result.to_dict()` (the JSON document, built on demand). The
API's overhead is the difference; a loop of a thousand estimates should cost what a thousand evaluations cost.

    PYTHONPATH=src python benchmarks/api_per_call.py [--calls 300] [--model llama-2-7b]
"""

from __future__ import annotations

import argparse
import time


def per_call(function, calls: int) -> float:
    """Median of five rounds, CPU seconds per call (after one warm-up call: imports and caches)."""
    function()
    rounds = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(calls):
            function()
        rounds.append((time.process_time() - started) / calls)
    return sorted(rounds)[2]


def measure(calls: int, **options) -> dict[str, float]:
    import zeroplan
    from zeroplan.inputs.estimate_inputs import EstimateInputs
    from zeroplan.planning.estimate_plan import build_plan

    result = zeroplan.estimate(**options)
    return {"api": per_call(lambda: zeroplan.estimate(**options), calls),
            "evaluation": per_call(lambda: build_plan(EstimateInputs.of(**options)), calls),
            "to_dict": per_call(result.to_dict, calls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--model", default=None, help="a model preset instead of --params 13e9")
    args = parser.parse_args()
    options = {"model": args.model, "gpus": 8} if args.model else {"params": 13e9, "gpus": 8}
    found = measure(args.calls, **options)
    print(f"zeroplan.estimate({', '.join(f'{k}={v!r}' for k, v in options.items())}), {args.calls} calls × 5 rounds "
          "(median round, CPU time):")
    print(f"  API call          {found['api'] * 1e3:8.3f} ms")
    print(f"  evaluation alone  {found['evaluation'] * 1e3:8.3f} ms")
    print(f"  API overhead      {(found['api'] - found['evaluation']) * 1e3:8.3f} ms "
          f"({found['api'] / found['evaluation']:.2f}× the evaluation)")
    print(f"  to_dict() (JSON document, on demand) {found['to_dict'] * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()

"""What a bench run hands back: the calibration profile plus, per measurement, the mean time.

Times per iteration are the slowest rank's. The mean over iterations is what a training loop sees
(and what nccl-tests prints); the median drops the slow iterations, which at small sizes on a busy
host can make bandwidth look nearly twice as good. Bandwidth columns and the α-β fits use the mean;
the profile's measurement records keep median, min and max (its schema has no mean field yet)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from zeroplan.core.collectives import ALLREDUCE_THEN_CHUNK, REDUCE_SCATTER, RING, Implementation, fit_alpha_beta
from zeroplan.inputs.calibration import Calibration, CollectiveName, Fits, FitRecord, Measurement, SpanName


@dataclass(frozen=True)
class BenchRun:
    calibration: Calibration
    mean_s: tuple[float, ...]  # one per calibration.measurements entry, same order

    def to_json(self) -> str:
        return json.dumps({"calibration": json.loads(self.calibration.model_dump_json()),
                           "mean_s": list(self.mean_s)})

    @classmethod
    def from_json(cls, text: str) -> "BenchRun":
        data = json.loads(text)
        return cls(Calibration.model_validate(data["calibration"]), tuple(data["mean_s"]))


def fits_on_mean(measurements: list[Measurement], mean_s: list[float],
                 backend: str) -> Fits:
    """One α-β fit per (collective, span) with at least two sizes, on the mean times. Nominal ring
    factors, so a Link reproduces what the backend really took (gloo's ReduceScatter shows slower)."""
    groups: dict[tuple[CollectiveName, SpanName], list[tuple[Measurement, float]]] = {}
    for measurement, mean in zip(measurements, mean_s, strict=True):
        groups.setdefault((measurement.collective, measurement.span), []).append((measurement, mean))
    fits: Fits = {}
    for (collective, span), points in groups.items():
        if len({m.size_bytes for m, _ in points}) < 2:
            continue
        fit = fit_alpha_beta(collective, points[0][0].ranks, [m.size_bytes for m, _ in points],
                             [mean for _, mean in points])
        implementation: Implementation = (ALLREDUCE_THEN_CHUNK if (backend == "gloo" and collective == REDUCE_SCATTER)
                                          else RING)
        fits.setdefault(collective, {})[span] = FitRecord(
            ranks=fit.ranks, latency_s=fit.latency_s,
            bandwidth_bytes_per_s=round(fit.bandwidth_bytes_per_s) if fit.bandwidth_bytes_per_s else None,
            r_squared=fit.r_squared, max_relative_residual=fit.max_relative_residual, points=fit.points,
            implementation=implementation,
        )
    return fits

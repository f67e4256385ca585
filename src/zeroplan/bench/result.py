"""What a bench run hands back: the calibration profile plus, per measurement, the mean time.

Times per iteration are the slowest rank's. The mean over iterations is what a training loop sees
(and what nccl-tests prints); the median drops the slow iterations, which at small sizes on a busy
host can make bandwidth look nearly twice as good. Bandwidth columns and the α-β fits use the mean;
the profile's measurement records keep median, min and max (its schema has no mean field yet)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from zeroplan.inputs.calibration import Calibration, Fits, Measurement, build_fits


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


def fits_on_mean(measurements: list[Measurement], mean_s: list[float], backend: str) -> Fits:
    """The α-β fits on the mean times (what a loop of collectives sees), by the profile's one fitter."""
    return build_fits(measurements, backend, times=mean_s)

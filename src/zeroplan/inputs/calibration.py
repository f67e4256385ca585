"""Calibration profiles: what `zeroplan bench --save-calibration` writes and the estimator reads back.

A profile records where it was measured (backend, ranks, nodes, hosts, device, torch version, date), the
raw median timings, and one α-β fit per collective and span (see zeroplan.core.timing.collectives for the
model). `Calibration.link()` turns a fit into the Link the estimator uses instead of preset bandwidths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from zeroplan.core.timing.collectives import (
    ALLREDUCE_THEN_CHUNK, RING, CollectiveName, Implementation, canonical_collective, fit_alpha_beta,
)
from zeroplan.core.errors import InputError
from zeroplan.inputs.text_files import read_user_text
from zeroplan.inputs.yaml_text import YamlSyntaxError, YamlTooLarge, load_with_nodes
from zeroplan.core.hardware import Link
from zeroplan.render.sink import write_text

FORMAT_VERSION: Final = 1
INTRA_NODE: Final = "intra_node"
INTER_NODE: Final = "inter_node"
SpanName = Literal["intra_node", "inter_node"]
MODEL_TEXT = ("t = steps*latency_s + factor*S/bandwidth_bytes_per_s; steps = n-1 (all_gather, reduce_scatter) "
              "or 2(n-1) (all_reduce); factor = (n-1)/n or 2(n-1)/n; S = full buffer bytes (nccl-tests)")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FitRecord(_Strict):
    ranks: int = Field(ge=2, description="ranks in the measured group")
    latency_s: float = Field(ge=0, allow_inf_nan=False, description="per ring step")
    bandwidth_bytes_per_s: int | None = Field(gt=0, description="None: latency-bound sweep, no bandwidth")
    r_squared: float
    max_relative_residual: float = Field(ge=0)
    points: int = Field(ge=2)
    implementation: Implementation = RING


class Measurement(_Strict):
    collective: CollectiveName
    span: SpanName
    ranks: int = Field(ge=2)
    size_bytes: int = Field(gt=0)
    time_s_median: float = Field(gt=0)
    time_s_min: float = Field(gt=0)
    time_s_max: float = Field(gt=0)


class Calibration(_Strict):
    zeroplan_calibration: Literal[1] = FORMAT_VERSION
    created: str = Field(description="ISO 8601 date and time, UTC")
    backend: Literal["gloo", "nccl"]
    dtype: str
    world_size: int = Field(ge=2)
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1, description="ranks per node (CPU ranks on gloo)")
    hostnames: list[str] = Field(min_length=1)
    device: str = Field(description="GPU name, or CPU")
    torch_version: str
    model: str = MODEL_TEXT
    fits: dict[CollectiveName, dict[SpanName, FitRecord]] = Field(default_factory=dict)
    measurements: list[Measurement] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="caveats of this run, e.g. sizes skipped")
    _path: str | None = PrivateAttr(default=None)

    def link(self, collective: str, intra_node: bool) -> Link | None:
        """The measured link for this collective and span, or None where nothing usable was measured."""
        by_span = self.fits.get(canonical_collective(collective, "collective"), {})
        record = by_span.get(INTRA_NODE if intra_node else INTER_NODE)
        if record is None or record.bandwidth_bytes_per_s is None:
            return None
        source = f"calibration {self._path}" if self._path else "calibration (unsaved)"
        return Link(bandwidth_bytes_per_s=record.bandwidth_bytes_per_s, latency_s=record.latency_s, source=source)


Fits = dict[CollectiveName, dict[SpanName, FitRecord]]


def build_fits(measurements: Sequence[Measurement], backend: str, times: Sequence[float] | None = None) -> Fits:
    """One α-β fit per (collective, span) with at least two sizes, on `times` (one per measurement; by
    default each measurement's median; bench passes the means, what a loop of collectives sees). Nominal
    ring factors are used, so a Link reproduces what the backend really took (gloo's ReduceScatter shows as
    a slower link)."""
    seconds = [m.time_s_median for m in measurements] if times is None else list(times)
    if len(seconds) != len(measurements):
        raise ValueError("build_fits: one time per measurement")
    groups: dict[tuple[CollectiveName, SpanName], list[tuple[Measurement, float]]] = {}
    for m, time_s in zip(measurements, seconds):
        groups.setdefault((m.collective, m.span), []).append((m, time_s))
    fits: Fits = {}
    for (collective, span), points in groups.items():
        if len({m.size_bytes for m, _ in points}) < 2:
            continue
        fit = fit_alpha_beta(collective, points[0][0].ranks, [m.size_bytes for m, _ in points],
                             [time_s for _, time_s in points])
        implementation: Implementation = (ALLREDUCE_THEN_CHUNK if (backend == "gloo" and collective == "reduce_scatter")
                                          else RING)
        fits.setdefault(collective, {})[span] = FitRecord(
            ranks=fit.ranks, latency_s=fit.latency_s,
            bandwidth_bytes_per_s=round(fit.bandwidth_bytes_per_s) if fit.bandwidth_bytes_per_s else None,
            r_squared=fit.r_squared, max_relative_residual=fit.max_relative_residual, points=fit.points,
            implementation=implementation,
        )
    return fits


def save_calibration(calibration: Calibration, path: str | Path) -> None:
    target = Path(path)
    header = ("# zeroplan calibration profile, written by `zeroplan bench --save-calibration`.\n"
              "# Read with zeroplan.inputs.calibration.load_calibration(); fits follow the `model` line.\n")
    body = yaml.safe_dump(calibration.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=200)

    write_text(header + body, str(target), option="--save-calibration")  # atomic: an old profile survives
    calibration._path = str(target)


def _mark_of(node: yaml.Node | None, loc: Sequence[Any]) -> yaml.Mark | None:
    """The source position of the deepest YAML node on a pydantic error path."""
    mark = node.start_mark if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(part)), None)
            if match is None:
                break
            mark = match[0].start_mark
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            mark = node.start_mark
        else:
            break
    return mark


def _where(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate a profile; every problem is an InputError naming the file (and line, column)."""
    source = Path(path)
    name = str(source)
    text = read_user_text(source, "write one with `zeroplan bench --save-calibration FILE`")
    try:
        raw, root = load_with_nodes(text)
    except YamlTooLarge as exc:
        raise InputError(name, exc.problem, "check that this is the calibration profile") from None
    except YamlSyntaxError as exc:
        where = f"line {exc.line}, column {exc.column}: " if exc.line else ""
        raise InputError(name, f"{where}malformed YAML ({exc.problem})", "fix the calibration file") from None
    if not isinstance(raw, dict):
        raise InputError(name, "is not a calibration profile (expected a mapping)",
                         "write one with `zeroplan bench --save-calibration FILE`")
    try:
        calibration = Calibration.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        path_text = ".".join(str(part) for part in loc)
        if first["type"] == "extra_forbidden":
            problem = f"unknown key '{path_text}'"
        else:
            problem = f"{path_text}: {first['msg']}"
        raise InputError(name, f"{_where(_mark_of(root, loc))}{problem}", "fix the calibration file") from None
    calibration._path = name
    return calibration

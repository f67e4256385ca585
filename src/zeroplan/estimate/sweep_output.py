"""`zeroplan sweep` output: CSV (the main format, exact integer bytes), JSON, and a table for people."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from zeroplan import __version__
from zeroplan.core.units import format_bytes
from zeroplan.render.spreadsheet import spreadsheet_safe
from zeroplan.render.terminal import Table

SCHEMA_VERSION = 1


def to_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: spreadsheet_safe(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()


def to_json(rows: list[dict[str, Any]], assumptions: list[str], inputs: dict[str, Any]) -> str:
    document = {"zeroplan_version": __version__, "schema_version": SCHEMA_VERSION, "command": "sweep",
                "inputs": inputs, "rows": [{k: (None if v == "" else v) for k, v in row.items()} for row in rows],
                "assumptions": assumptions}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _short_label(label: str) -> str:
    """'ZeRO-3 + optimizer→cpu' -> '3 +cpu'; '' -> 'nothing fits'."""
    if not label:
        return "nothing fits"
    stage, *offloads = label.removeprefix("ZeRO-").split(" + ")
    tiers = [offload.split("→", 1)[1] for offload in offloads]
    return stage + (f" +{'/'.join(tiers)}" if tiers else "")


def render(rows: list[dict[str, Any]], assumptions: list[str], console, units: str) -> None:
    names = ["model", "GPU", "GPUs", "ZeRO", "per GPU", "fits", "fewest", "recommended"]
    table = Table(names, "".join("r" if name in ("GPUs", "per GPU", "fewest") else "l" for name in names))
    for row in rows:
        total = row["gpu_bytes_total"]
        table.add_row(row["model"], row["gpu"], str(row["gpus"]), str(row["stage"]),
                      "–" if total == "" else format_bytes(total, units),
                      "–" if row["fits"] == "" else ("yes" if row["fits"] else "no"),
                      str(row["min_gpus_stage"] or "never"), _short_label(row["recommended_option"]))
    console.print(table)
    console.print("per GPU: the stage without offload; fewest: GPUs at which that stage fits; recommended: what "
                  "`zeroplan estimate` picks on that many GPUs (stage [+optimizer offload[/parameter offload]])")
    console.print("Assumptions:")
    for note in assumptions:
        console.print(f"  - {note}")

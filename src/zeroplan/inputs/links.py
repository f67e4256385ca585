"""Links measured by `zeroplan bench`, read from a calibration file once for every command.

`zeroplan estimate` prices ZeRO's AllGather/ReduceScatter with them, `zeroplan plan` also TP's AllReduce;
both take them from measured_links and look them up through core.timing.step_time.LinkTable.
"""

from __future__ import annotations

from zeroplan.core.hardware import Link
from zeroplan.core.timing.collectives import LinkTable

CALIBRATED_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
SPANS = (("intra_node", True), ("inter_node", False))


def measured_links(path: str, collectives: tuple[str, ...] = CALIBRATED_COLLECTIVES):
    """(the calibration, {(collective, span): Link}) for every fit the file holds, in a fixed order."""
    from zeroplan.inputs.calibration import (
        load_calibration,  # pydantic + yaml: only when asked
    )

    calibration = load_calibration(path)
    links: dict[tuple[str, str], Link] = {}
    for collective in collectives:
        for span, intra in SPANS:
            link = calibration.link(collective, intra)
            if link is not None:
                links[(collective, span)] = link
    return calibration, links


def link_table(intra_node: Link, inter_node: Link, measured: dict[tuple[str, str], Link]) -> LinkTable:
    """Preset links by span, measured ones by collective and span."""
    return LinkTable(intra_node, inter_node, {f"{kind}/{span}": link for (kind, span), link in measured.items()})

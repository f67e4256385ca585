"""Pictures (`--plot FILE`): matplotlib on demand (the `plot` extra), files only, PNG or SVG, written
through render.sink's atomic writer, so a failed write never leaves half a picture."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from zeroplan.core.errors import InputError
from zeroplan.render.sink import InputPaths, write_file

FORMATS = (".png", ".svg")
# One colour per memory category and per step-time part, the same in every picture.
CATEGORY_COLORS = {
    "params": "#4c72b0", "gradients": "#dd8452", "optimizer_states": "#55a868", "activations": "#c44e52",
    "buffers": "#8172b3",
}
TIME_COLORS = {
    "compute": "#4c72b0", "bubble": "#bbbbbb", "tp_comm": "#dd8452", "pp_comm": "#937860",
    "dp_exposed": "#c44e52", "offload": "#8172b3", "optimizer": "#55a868",
}


def check_plot_path(path: str) -> Path:
    target = Path(path)
    if target.suffix.lower() not in FORMATS:
        raise InputError("--plot", f"'{path}' is neither .png nor .svg", "name the file e.g. memory.png")
    if not target.parent.is_dir():
        raise InputError("--plot", f"{target.parent} is not a directory", "choose a path in an existing folder")
    return target


def pyplot() -> Any:
    # zeroplan draws files with Agg whatever MPLBACKEND says (matplotlib.use below), and matplotlib refuses to
    # import at all under an MPLBACKEND it does not know: the variable is set aside while it loads.
    backend = os.environ.pop("MPLBACKEND", None)
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot", "needs matplotlib, which is not installed",
                         "pip install 'zeroplan[plot]' (or pip install matplotlib)") from None
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend
    matplotlib.use("Agg")  # files only, never a window
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, selectable, smaller
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, target: Path, inputs: InputPaths = ()) -> None:
    """savefig through the one atomic writer (never over one of the command's inputs)."""
    plt = pyplot()
    try:  # the format from the target's suffix, not the temporary's; "tight" keeps an outside legend
        write_file(target, lambda temporary: figure.savefig(temporary, format=target.suffix.lower()[1:],
                                                            bbox_inches="tight", dpi=120), inputs, option="--plot")
    finally:
        plt.close(figure)

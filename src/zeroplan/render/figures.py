"""Pictures (`--plot FILE`): matplotlib on demand (the `plot` extra), files only, PNG or SVG, written to
a temporary file beside the target and renamed, so a failed write never leaves half a picture."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from zeroplan.core.errors import InputError

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
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot", "needs matplotlib, which is not installed",
                         "pip install 'zeroplan[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")  # files only, never a window
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, selectable, smaller
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure: Any, target: Path) -> None:
    """savefig to a temporary file in the target's folder, then rename over the target."""
    plt = pyplot()
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent)
    os.close(handle)
    try:
        figure.savefig(temporary, bbox_inches="tight", dpi=120)  # "tight" keeps an outside legend in the file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as a plain open() would create it, not mkstemp's 0600
        os.replace(temporary, target)
    except OSError as exc:
        raise InputError("--plot", f"cannot write {target}: {exc.strerror or exc}", "choose a writable path") from None
    finally:
        plt.close(figure)
        if os.path.exists(temporary):
            os.unlink(temporary)

"""torch, imported quietly. Only rank code paths call this: the launcher never imports torch."""

from __future__ import annotations

import warnings


def import_torch():
    """torch, imported without its 'Failed to initialize NumPy' warning (numpy is no dependency:
    the ranks exchange results as tensors and files, never through pickled objects)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
    return torch

"""`zeroplan bench`: measure real AllGather / ReduceScatter / AllReduce bandwidth with torch.distributed
and fit the α-β link model the estimator uses (see docs/bench.md).

Layout: config (validated options, no torch), rendezvous (who am I, free ports), launcher (spawns and
watches local ranks), child (the rank's side of that protocol), worker (one rank's sweep), timing (one
collective at one size), topology (spans), report (table/json/csv), runner (ties them together).
Importing this package does not import torch; only the bench code paths do.
"""

from __future__ import annotations

import warnings


def import_torch():
    """torch, imported without its 'Failed to initialize NumPy' warning (numpy is no dependency)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
    return torch

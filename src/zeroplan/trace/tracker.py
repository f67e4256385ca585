"""torch's FSDP memory tracker, told where its peak happens and kept off DTensor's bookkeeping (imports torch)."""

from __future__ import annotations

import copy
import functools
from typing import Any

CATEGORIES = ("parameters", "gradients", "optimizer_states", "activations", "temporaries",
              "all_gather", "reduce_scatter", "inputs", "buffers")
# The tracker's own categories (its _RefType values) -> ours.
_CATEGORY_OF = {
    "Sharded Param": "parameters", "Unsharded Param": "parameters", "Parameter": "parameters",
    "Buffer": "buffers", "Sharded Grad": "gradients", "Unsharded Grad": "gradients", "Gradient": "gradients",
    "Activation": "activations", "Temp": "temporaries", "All Gather": "all_gather",
    "Reduce Scatter": "reduce_scatter", "OptState": "optimizer_states", "Optstate": "optimizer_states",
    "Inputs": "inputs", "Other": "temporaries",
}

_propagating = [0]
_saved_propagation: list = []


def _patch_sharding_propagation(on: bool) -> None:
    """DTensor's uncached sharding propagation builds global-shape fake tensors under the same
    FakeTensorMode the tracker watches (metadata only: ~50x the optimizer states in the first step of a
    small llama); ops dispatched inside it are not counted."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    if on:
        original = ShardingPropagator._propagate_tensor_meta_non_cached

        @functools.wraps(original)
        def wrapped(self, *args, **kwargs):
            _propagating[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                _propagating[0] -= 1

        _saved_propagation.append(original)
        # Patching a torch internal (DTensor's sharding propagation) on purpose: method-assign is the point.
        ShardingPropagator._propagate_tensor_meta_non_cached = wrapped  # type: ignore[method-assign]
    elif _saved_propagation:
        ShardingPropagator._propagate_tensor_meta_non_cached = _saved_propagation.pop()  # type: ignore[method-assign]


def snapshot_categories(snapshot: dict) -> tuple[dict[str, int], dict[str, int]]:
    """(our categories, the tracker's raw categories) of a tracker snapshot, summed over devices."""
    raw: dict[str, int] = {}
    for device_snapshot in snapshot.values():
        for key, value in device_snapshot.items():
            name = key.value if hasattr(key, "value") else str(key)
            raw[name] = raw.get(name, 0) + int(value)
    categories = dict.fromkeys(CATEGORIES, 0)
    for name, value in raw.items():
        if name != "Total":
            categories[_CATEGORY_OF.get(name, "temporaries")] += value
    return categories, raw


def tracker_class():
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    class WhereTracker(FSDPMemTracker):
        """FSDPMemTracker that also records the module, phase, step and op of the peak, and each phase's peak."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.step_index = 0
            self.peak_where: dict[str, Any] = {}
            self.last_op = None
            self.record_phases = False
            self.phase_peaks: dict[str, tuple] = {}

        def where(self) -> dict:
            parents = [p for p in self._mod_tracker.parents if p != "Global"]
            module = max(parents, key=lambda p: (p.count("."), len(p))) if parents else "Global"
            phase = "optimizer" if self._in_opt else "backward" if self._mod_tracker.is_bw else "forward"
            return {"module": "optimizer.step" if self._in_opt else module, "phase": phase,
                    "step": self.step_index, "op": str(self.last_op)}

        def _update_peak_stats(self, peak_state):
            before = dict(self._peak_mem)
            super()._update_peak_stats(peak_state)
            if any(self._peak_mem.get(d, 0) != before.get(d, 0) for d in self._peak_mem):
                self.peak_where = self.where()
            if self.record_phases:  # the phase holding the peak can change with the layer count
                total = sum(d.get("Total", 0) for d in self._curr_mem_snap.values())
                where = self.where()
                current = self.phase_peaks.get(where["phase"])
                if current is None or total > current[0]:
                    self.phase_peaks[where["phase"]] = (total, copy.deepcopy(self._curr_mem_snap), where)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if _propagating[0]:
                return func(*args, **(kwargs or {}))
            self.last_op = func
            return super().__torch_dispatch__(func, types, args, kwargs)

        def __enter__(self):
            if self._depth == 0:
                _patch_sharding_propagation(True)
            return super().__enter__()

        def __exit__(self, *args):
            super().__exit__(*args)
            if self._depth == 0:
                _patch_sharding_propagation(False)

    return WhereTracker

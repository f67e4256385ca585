"""Bytes autograd saves in one forward of a model on fake tensors, parameters left out: the activation trace the
fine-tuning tests compare the per-layer formulas with (shared so both count a storage the same way)."""

from __future__ import annotations

import contextlib
from typing import Any


def saved_activation_bytes(model: Any, vocab_size: int, seq: int, *contexts: Any) -> int:
    """Materialise `model` on fake CPU tensors, run one forward with labels of length `seq` and return the bytes of
    every distinct storage autograd saved that is not a parameter's. `contexts` are entered around it (e.g. the
    trace's masking and grouped-GEMM bridges)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    found: dict[int, int] = {}
    with contextlib.ExitStack() as stack:
        for context in contexts:
            stack.enter_context(context)
        stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        model.to_empty(device="cpu")
        params = {p.untyped_storage()._cdata for p in model.parameters()}

        def pack(tensor: Any) -> Any:
            storage = tensor.untyped_storage()
            if storage._cdata not in params:
                found[storage._cdata] = storage.nbytes()
            return tensor

        ids = torch.randint(0, vocab_size, (1, seq))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(input_ids=ids, labels=ids)
    return sum(found.values())

"""Small JSON documents between ranks as uint8 tensors. torch's *_object collectives pickle through
numpy (`tensor.numpy()`), which is no dependency of ours: a rank without numpy died with "Numpy is
not available". Imports torch: rank code paths only."""

from __future__ import annotations

import json
from typing import Any

from zeroplan.distributed.torch_import import import_torch

torch = import_torch()
import torch.distributed as dist  # noqa: E402


def all_gather_json(value: Any, device, group=None) -> list[Any]:
    """Every rank's value (JSON-serialisable), in rank order, on every rank."""
    data = json.dumps(value, separators=(",", ":")).encode("utf-8")
    world = dist.get_world_size(group)
    length = torch.tensor([len(data)], dtype=torch.int64, device=device)
    lengths = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(lengths, length, group=group)
    sizes = [int(item.item()) for item in lengths]
    longest = max(sizes)
    mine = torch.zeros(longest, dtype=torch.uint8, device=device)
    if data:
        mine[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    gathered = [torch.zeros(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(gathered, mine, group=group)
    return [json.loads(bytes(item[:size].cpu().tolist()).decode("utf-8")) for item, size in zip(gathered, sizes, strict=True)]

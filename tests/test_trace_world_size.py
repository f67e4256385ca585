"""`zeroplan trace` costs the same at 16,384 ranks as at 16 (issue 23, item 12): FSDP2 made every rank's chunk
of every parameter (world-size tensors per parameter); trace.engine.RankChunks makes the ones FSDP2 reads, each
the view torch.chunk makes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.fsdp._fully_shard._fsdp_common")

from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty  # noqa: E402

from zeroplan.trace.engine import RankChunks, chunks_on_demand  # noqa: E402

pytestmark = pytest.mark.slow  # torch's FSDP2 chunking at 16,384 ranks


def _same(a, b) -> bool:
    return (a.shape == b.shape and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
            and a.dtype == b.dtype and a.device == b.device)


@pytest.mark.parametrize("shape", [(50257, 768), (768,), (3, 5), (1,), (4096, 11008), (7, 2, 3)])
@pytest.mark.parametrize("world", [1, 2, 3, 7, 64, 1000, 16384])
def test_each_chunk_is_the_one_fsdp2_would_make(shape, world):
    tensor = torch.empty(shape, device="meta")
    reference = _chunk_with_empty(tensor, world, 0)
    lazy = RankChunks(tensor, world, 0)
    assert len(lazy) == len(reference) == world
    for index in sorted({0, 1 % world, world // 2, world - 1, min(shape[0], world - 1), -1}):
        assert _same(lazy[index], reference[index]), index
    if world <= 64:
        assert all(_same(a, b) for a, b in zip(lazy, reference))
    with pytest.raises(IndexError):
        lazy[world]


def test_the_patch_is_in_place_only_while_tracing():
    from torch.distributed.fsdp._fully_shard import _fsdp_param

    before = _fsdp_param._chunk_with_empty
    with chunks_on_demand():
        assert isinstance(_fsdp_param._chunk_with_empty(torch.empty(4, device="meta"), 8, 0), RankChunks)
        empty = torch.empty(0, 3, device="meta")
        assert isinstance(_fsdp_param._chunk_with_empty(empty, 8, 0), list)  # torch's own answer there
    assert _fsdp_param._chunk_with_empty is before

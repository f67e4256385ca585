"""The key blocks a flash-attention kernel runs for sliding-window and chunked layers (docs/formulas.md §14.2).

A flash-attention kernel walks the score matrix in tiles of kBlockM queries × kBlockN keys and skips a tile only
when the mask hides it whole. For query tile m (rows m·M .. m·M + M − 1) it runs the key tiles n_min .. n_max − 1:
- causal: n_min = 0, n_max = ⌈(m + 1)·M / N⌉ (capped at ⌈s / N⌉);
- a sliding window whose queries see themselves and window − 1 earlier keys (window_size_left = window − 1, as
  transformers' flash path passes a config's sliding_window: modeling_flash_attention_utils.py, window_size =
  (sliding_window − 1, sliding_window − 1); Megatron's (window, 0) sees one key more, within the same tiles but at
  tile edges): n_min = max(0, ⌊(m·M − (window − 1)) / N⌋);
- chunked attention of chunk c (Llama 4): n_min = ⌊round_down(m·M, c) / N⌋.
FlashAttention-2: csrc/flash_attn/src/flash_fwd_kernel.h (compute_attn_1rowblock: n_block_min, n_block_max);
FlashAttention-3: hopper/block.h (BlockMN::get_n_block_min_max, attention_chunk). So a window narrower than a tile
still costs whole tiles: gpt-oss's 128-token window runs 2-4 key tiles per query tile, not one.

Tile sizes (bf16, forward, no dropout), by kernel family and head dim:
- "fa2" (and "fa1", llm-foundry's Triton kernel, which has no sliding window: a windowed model runs FlashAttention-2)
  from csrc/flash_attn/src/flash_fwd_launch_template.h run_mha_fwd_hdim*: 128 × 128 up to head dim 64, 128 × 64
  above (sm80/sm90);
- "fa3" from hopper/tile_size.h tile_size_fwd_sm90 (local and causal tiles differ in kBlockN): head dim ≤ 64:
  192 × 128; ≤ 96: 192 × 144 causal, 192 × 128 local; ≤ 128: 128 × 128; ≤ 192: 128 × 128 causal, 128 × 96 local;
  above: 128 × 80 causal, 128 × 64 local. Transformer Engine's cuDNN fused attention (the megatron rule's "fa3"
  class) is taken to tile as FlashAttention-3 does (its tiles are not published).
The step time keeps its full-causal price (the masked half of the score matrix skipped, at the fitted flash
efficiency) and scales each layer's attention core by the score pairs its tiles cover relative to a full causal
layer's tiles (span_share): 1 for global layers and wherever the window or chunk reaches the whole sequence, so
full-attention models price exactly as before. Backward is taken to skip the same share (its kernels walk the same
mask; the step time's backward stays 2.5 × the forward).
"""

from __future__ import annotations

from functools import lru_cache

Span = tuple[str, int] | None

# kernel family -> ((largest head dim, (kBlockM, kBlockN causal), (kBlockM, kBlockN local)), ...), ascending
FLASH_TILES: dict[str, tuple[tuple[int, tuple[int, int], tuple[int, int]], ...]] = {
    "fa2": ((64, (128, 128), (128, 128)), (1 << 30, (128, 64), (128, 64))),
    "fa3": ((64, (192, 128), (192, 128)), (96, (192, 144), (192, 128)), (128, (128, 128), (128, 128)),
            (192, (128, 128), (128, 96)), (1 << 30, (128, 80), (128, 64))),
}


def flash_tiles(kernel: str, head_dim: int, local: bool) -> tuple[int, int]:
    """(kBlockM, kBlockN) of the kernel family at this head dim (FLASH_TILES; "fa1" and unknown kernels: fa2's)."""
    for top, causal, windowed in FLASH_TILES.get(kernel, FLASH_TILES["fa2"]):
        if head_dim <= top:
            return windowed if local else causal
    raise AssertionError("the last tile row covers every head dim")


@lru_cache(maxsize=4096)
def tile_pairs(seq_len: int, block_m: int, block_n: int, span: Span) -> int:
    """Score pairs (query, key) in the tiles the kernel runs over one causal sequence: Σ over query tiles of
    (n_max − n_min)·M·N (see the module docstring)."""
    key_tiles = -(-seq_len // block_n)
    total = 0
    for m in range(-(-seq_len // block_m)):
        first, last = m * block_m, -(-(m + 1) * block_m // block_n)
        n_max = min(key_tiles, last)
        if span is None:
            n_min = 0
        elif span[0] == "chunked":
            n_min = first // span[1] * span[1] // block_n
        else:
            n_min = max(0, (first - (span[1] - 1)) // block_n)
        total += max(0, n_max - n_min)
    return total * block_m * block_n


def span_share(spans: tuple[Span, ...], seq_len: int, kernel: str, head_dim: int) -> float:
    """The attention core's work averaged over the layers, relative to every layer attending causally to the whole
    sequence: each layer's tile pairs (tile_pairs, its own tiles: local ones for a window or chunk) over a causal
    layer's. 1.0 where no layer is windowed or chunked short of the sequence. Averaged over all the layers as the
    step time prices one average layer (a stage holding more of the global layers is not told apart)."""
    if not spans:
        return 1.0
    causal = tile_pairs(seq_len, *flash_tiles(kernel, head_dim, False), None)
    total = 0.0
    for span in spans:
        if span is None or span[1] >= seq_len:
            total += 1.0
        else:
            total += tile_pairs(seq_len, *flash_tiles(kernel, head_dim, True), span) / causal
    return total / len(spans)


def span_keys(spans: tuple[Span, ...], seq_len: int) -> int:
    """Keys per query summed over the layers under the hardware-FLOPs convention (every query counted against its
    whole span, the causal mask not subtracted: s for a global layer, min(window or chunk, s) otherwise)."""
    return sum(seq_len if span is None else min(span[1], seq_len) for span in spans)

"""Sliding-window and chunked attention in the step time (core.timing.flash_blocks, docs/formulas.md §14.2): the
key tiles a flash kernel runs, the keys a query sees (against transformers' own masks), the readers' per-layer
spans (against transformers' config classes), and the step time's attention core."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from zeroplan.core.model.architecture import causal_keys_seen
from zeroplan.core.model.families import model_spec_from_hf_config
from zeroplan.core.timing.flash_blocks import flash_tiles, span_keys, span_share, tile_pairs
from zeroplan.core.timing.machine import Machine
from zeroplan.core.timing.step_time import FlopModel, Layout, LinkTable, layer_seconds
from zeroplan.core.hardware import Link

MODELS = Path(__file__).parent / "configs" / "models"


def released(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())


def visible(q: int, k: int, span: tuple[str, int] | None) -> bool:
    """The mask itself: causal, and inside the window (itself and window - 1 earlier keys) or the query's chunk."""
    if k > q:
        return False
    if span is None:
        return True
    kind, size = span
    return k > q - size if kind == "sliding" else k >= q // size * size


def brute_tile_pairs(seq: int, block_m: int, block_n: int, span) -> int:
    """Tiles holding at least one visible pair, each counted whole (M·N): a kernel that skips only fully masked tiles."""
    tiles = 0
    for m in range(-(-seq // block_m)):
        rows = range(m * block_m, min(seq, (m + 1) * block_m))
        for n in range(-(-seq // block_n)):
            keys = range(n * block_n, min(seq, (n + 1) * block_n))
            tiles += any(visible(q, k, span) for q in (rows[0], rows[-1]) for k in keys) or \
                any(visible(q, k, span) for q in rows for k in (keys[0], keys[-1]))
    return tiles * block_m * block_n


@pytest.mark.parametrize("seq, block_m, block_n, span", [
    (1000, 128, 128, ("sliding", 128)), (1024, 192, 128, ("sliding", 128)), (777, 128, 64, ("sliding", 200)),
    (1500, 128, 96, ("chunked", 256)), (1024, 192, 128, ("chunked", 300)), (640, 128, 128, None),
    (900, 192, 144, None), (513, 64, 64, ("sliding", 1))])
def test_tile_pairs_are_the_tiles_the_mask_does_not_hide_whole(seq, block_m, block_n, span) -> None:
    """FlashAttention-2/3's n_block_min/n_block_max (flash_fwd_kernel.h, hopper/block.h) run exactly the key tiles
    holding at least one visible pair: the formula against a walk over every tile of the mask."""
    assert tile_pairs(seq, block_m, block_n, span) == brute_tile_pairs(seq, block_m, block_n, span)


def test_a_narrow_window_still_costs_whole_tiles() -> None:
    """gpt-oss's 128-token window on FlashAttention-3's 192 × 128 tiles (head dim 64): at 4096 tokens each query tile
    runs 3 key tiles on average (2 or 3 partial and the diagonal), 384 keys per query, where the mask leaves (128·129/2 + 3968·128)/4096 = 126.02."""
    seq = 4096
    assert flash_tiles("fa3", 64, True) == (192, 128)
    assert tile_pairs(seq, 192, 128, ("sliding", 128)) / seq == 384.0
    assert causal_keys_seen(seq, ("sliding", 128)) / seq == pytest.approx(126.02, abs=0.01)
    # FlashAttention-2's 128 × 128 tiles: the partial tile before and the diagonal one
    assert tile_pairs(seq, 128, 128, ("sliding", 128)) == (2 * 32 - 1) * 128 * 128


@pytest.mark.slow
@pytest.mark.parametrize("seq, span", [(300, ("sliding", 64)), (300, ("chunked", 64)), (50, ("sliding", 128)),
                                       (257, None)])
def test_keys_seen_match_transformers_masks(seq, span) -> None:
    """causal_keys_seen counts what transformers' masking_utils lets through (sliding_window_causal_mask_function,
    chunked_causal_mask_function, causal_mask_function), summed over the sequence."""
    torch = pytest.importorskip("torch")
    masking = pytest.importorskip("transformers.masking_utils")
    if span is None:
        function = masking.causal_mask_function
    elif span[0] == "sliding":
        function = masking.sliding_window_causal_mask_function(span[1])
    else:
        function = masking.chunked_causal_mask_function(span[1], torch.zeros(1, dtype=torch.long))
    mask = masking.sdpa_mask(batch_size=1, q_length=seq, kv_length=seq, mask_function=function,
                             allow_is_causal_skip=False)
    assert int(mask.sum()) == causal_keys_seen(seq, span)
    assert int(mask.sum()) == sum(visible(q, k, span) for q in range(seq) for k in range(seq))


@pytest.mark.slow
def test_llama4_chunked_layers_follow_transformers_config() -> None:
    """Llama 4 chunks attention (8192) on its rotary layers, every fourth layer global: as Llama4TextConfig fills
    layer_types in."""
    transformers = pytest.importorskip("transformers")
    config = released("llama-4-maverick-17b-128e-text")
    spec = model_spec_from_hf_config(config, "llama4")
    raw = {key: value for key, value in config.items() if not key.startswith("_zeroplan")}
    types = transformers.AutoConfig.for_model(**raw).layer_types
    assert spec.shape is not None and spec.shape.attention_spans is not None
    chunk = transformers.AutoConfig.for_model(**raw).attention_chunk_size
    assert spec.shape.attention_spans == tuple(("chunked", chunk) if kind == "chunked_attention" else None
                                               for kind in types)


def test_full_attention_models_carry_no_spans() -> None:
    """Llama 3.1 has no window: the shape carries none and the step time's FlopModel prices every layer causally."""
    spec = model_spec_from_hf_config(released("llama-3.1-8b"), "llama")
    assert spec.shape is not None and spec.shape.attention_spans is None
    assert FlopModel.from_model(spec).attention_spans == ()


MACHINE = Machine(peak_flops=989e12, hbm_bytes_per_s=3.35e12, pcie_bytes_per_s=55e9, nvme_bytes_per_s=25e9,
                  links=LinkTable(Link(450e9, 3e-6), Link(50e9, 5e-6)), efficiency=0.6, attention_kernel="fa3")


def _layout(seq: int) -> Layout:
    return Layout(dp=1, tp=1, pp=1, virtual_stages=1, seq_len=seq, micro_batch=1, grad_accum=1, recompute="none",
                  sequence_parallel=False, tp_intra_node=True, dp_intra_node=True, pp_intra_node=True)


@pytest.mark.parametrize("seq", [128, 4096, pytest.param(8192, marks=pytest.mark.slow)])
def test_gpt_oss_attention_core_is_priced_by_its_tiles(seq) -> None:
    """gpt-oss-120b: 18 sliding (128) and 18 global layers, head dim 64 on FlashAttention-3 tiles. The attention core
    of the average layer costs (1 + sliding tiles / causal tiles) / 2 of the full-causal price (the tiles counted by
    walking the mask), and exactly the full price where the window covers the sequence."""
    spec = model_spec_from_hf_config(released("gpt-oss-120b"), "gpt-oss")
    windowed = FlopModel.from_model(spec)
    assert windowed.attention_spans.count(("sliding", 128)) == 18 and windowed.attention_spans.count(None) == 18
    full = dataclasses.replace(windowed, attention_spans=())
    core = layer_seconds(_layout(seq), windowed, MACHINE)[2]
    causal_core = layer_seconds(_layout(seq), full, MACHINE)[2]
    ratio = (brute_tile_pairs(seq, 192, 128, ("sliding", 128)) / brute_tile_pairs(seq, 192, 128, None)
             if seq > 128 else 1.0)
    assert core == pytest.approx(causal_core * (1 + ratio) / 2, rel=1e-12)
    assert span_share(windowed.attention_spans, seq, "fa3", 64) == pytest.approx((1 + ratio) / 2, rel=1e-12)


def test_hardware_flops_count_each_query_against_its_span() -> None:
    """Hardware FLOPs per token (docs/formulas.md §14.1): 6Ψ + 3 × 4·w·keys per layer, keys s on a global layer and
    min(window, s) on a sliding one: gpt-oss-120b (w = 64 heads × 64) at 4096 tokens."""
    spec = model_spec_from_hf_config(released("gpt-oss-120b"), "gpt-oss")
    flops = FlopModel.from_model(spec)
    seq, width = 4096, 64 * 64
    attention = 4 * width * (18 * seq + 18 * 128)
    assert span_keys(flops.attention_spans, seq) == 18 * seq + 18 * 128
    assert flops.hardware_flops_per_token(seq, "none") == 6 * flops.params + 3 * attention
    assert flops.hardware_flops_per_token(seq, "selective") == 6 * flops.params + 4 * attention
    assert flops.model_flops_per_token() == 6 * flops.params  # MFU's numerator counts no attention either way


def test_phi3_and_mistral_windows_reach_the_step_time() -> None:
    """Phi-3-mini-4k's config sets sliding_window 2047 (Phi3Model then masks every layer with it) and Mistral 7B
    v0.1's 4096 (MistralConfig's default): every layer carries it; at 4096 tokens Phi-3's core is cut, Mistral's not
    (its window covers the sequence)."""
    config = json.loads((Path(__file__).parent / "configs" / "phi-3-mini-4k-instruct.json").read_text())
    phi3 = FlopModel.from_model(model_spec_from_hf_config(config, "phi3"))
    assert phi3.attention_spans == (("sliding", 2047),) * 32
    assert span_share(phi3.attention_spans, 4096, "fa2", 96) < 1.0
    mistral = model_spec_from_hf_config({"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
                                         "num_attention_heads": 32, "num_key_value_heads": 8,
                                         "intermediate_size": 14336, "vocab_size": 32000}, "mistral")
    spans = FlopModel.from_model(mistral).attention_spans
    assert spans == (("sliding", 4096),) * 32 and span_share(spans, 4096, "fa2", 128) == 1.0
    # 8192 tokens on FlashAttention-2's 128 × 64 tiles: query tile m runs key tiles up to 2(m + 1), from
    # ⌊(128m − 4095)/64⌋ = 2m − 64 once m ≥ 32: 2·(1 + … + 32) + 32·66 = 3168 tiles against 2·(1 + … + 64) = 4160
    assert span_share(spans, 8192, "fa2", 128) == pytest.approx(3168 / 4160, rel=1e-12)


def test_plan_states_the_windowed_layers_among_its_assumptions(cli) -> None:
    """plan says which layers attend to less than the sequence and how they are priced; at a sequence the window
    covers (gpt-oss's 128 at 128 tokens) it says nothing."""
    model = str(MODELS / "gpt-oss-120b.json")
    args = ("plan", "--model", model, "--gpus", "64", "--gpu", "h100-80g", "--global-batch", "512", "--ep", "8",
            "--tp", "1", "--pp", "1", "--format", "json")
    code, out, err = cli(*args, "--seq-len", "4096")
    assert code == 0, err
    assumptions = json.loads(out)["assumptions"]
    assert any("18 of 36 layers attend to less than the sequence (sliding 128)" in line for line in assumptions)
    code, out, err = cli(*args, "--seq-len", "128")
    assert code == 0, err
    assert not any("attend to less than the sequence" in line for line in json.loads(out)["assumptions"])

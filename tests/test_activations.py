"""Activation memory against Korthikanti et al. 2022 Table 2 and Megatron-LM's theoretical formula.

The expected values are written here from the sources' own formulas, independently of the code:
Table 2 of arXiv 2205.05198 per layer, and megatron/training/theoretical_memory_usage.py
(compute_activation_memory, the sequence-parallel + selective-recompute path) for whole stages.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from math import ceil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroplan.core.memory.activations import (
    BREAKDOWN_KEYS,
    ActivationConfig,
    activation_memory,
    activation_terms,
    largest_micro_batch_that_fits,
    layer_bytes,
    layers_on_first_stage,
    micro_batches_in_flight,
)
from zeroplan.core.errors import InputError
from zeroplan.core.model.spec import ModelShape, ModelSpec

# GPT-3 175B as in Korthikanti et al. Table 3 / Megatron: s=2048, h=12288, a=96, L=96, V=51200.
S, H, A, L, V = 2048, 12288, 96, 96, 51200
GPT3 = ModelSpec(params=175_000_000_000, name="gpt3-175b", shape=ModelShape.of(layers=L, hidden=H, heads=A, vocab=V,
                                                                            ffn=4 * H))


def table2(row: str, s: int, b: int, h: int, a: int, t: int) -> Fraction:
    """Korthikanti et al. 2022, Table 2: activation bytes per transformer layer, 16-bit activations."""
    sbh = Fraction(s * b * h)
    scores = Fraction(5 * a * s, h)
    return {
        "no parallelism": sbh * (34 + scores),
        "tensor parallel": sbh * (10 + Fraction(24, t) + scores / t),
        "tensor + sequence parallel": sbh * (Fraction(34, t) + scores / t),
        "tensor parallel + selective recompute": sbh * (10 + Fraction(24, t)),
        "tensor + sequence parallel + selective recompute": sbh * Fraction(34, t),
        "full recompute": sbh * 2,
    }[row]


TABLE2_ROWS = {
    "no parallelism": dict(tp=1),
    "tensor parallel": dict(),
    "tensor + sequence parallel": dict(sequence_parallel=True),
    "tensor parallel + selective recompute": dict(recompute="selective"),
    "tensor + sequence parallel + selective recompute": dict(recompute="selective", sequence_parallel=True),
    "full recompute": dict(tp=1, recompute="full"),
}


@pytest.mark.parametrize("row", TABLE2_ROWS)
@pytest.mark.parametrize("micro_batch, tp", [(1, 8), (3, 4), (2, 3)])
def test_table2_rows(row: str, micro_batch: int, tp: int) -> None:
    config = ActivationConfig(**{"seq_len": S, "micro_batch": micro_batch, "tp": tp, **TABLE2_ROWS[row]})
    assert layer_bytes(GPT3, config) == table2(row, S, micro_batch, H, A, config.tp)


def test_full_recompute_checkpoint_is_split_under_sequence_parallel() -> None:
    config = ActivationConfig(seq_len=S, tp=8, recompute="full", sequence_parallel=True)
    assert layer_bytes(GPT3, config) == Fraction(2 * S * H, 8)
    assert layer_bytes(GPT3, replace(config, sequence_parallel=False)) == 2 * S * H  # Table 2 as printed


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_flash_attention_drops_the_score_term(sequence_parallel: bool) -> None:
    config = ActivationConfig(seq_len=S, tp=8, sequence_parallel=sequence_parallel, flash_attention=True)
    no_flash = replace(config, flash_attention=False)
    assert layer_bytes(GPT3, no_flash) - layer_bytes(GPT3, config) == Fraction(5 * A * S * S, 8)
    assert layer_bytes(GPT3, config) == layer_bytes(GPT3, replace(no_flash, recompute="selective"))


def test_activation_dtype_scales_tensors_but_not_dropout_masks() -> None:
    """At 4 bytes the 16-bit tensors double; the 1-byte masks (2sbh + as²b per layer) do not."""
    config = ActivationConfig(seq_len=S, tp=1)
    masks = 2 * S * H + A * S * S
    assert layer_bytes(GPT3, replace(config, dtype_bytes=4)) == 2 * layer_bytes(GPT3, config) - masks


# --- generalised shapes (documented assumptions) --------------------------------------------------

def _shape(**changes: object) -> ModelSpec:
    assert GPT3.shape is not None
    return replace(GPT3, shape=replace(GPT3.shape, **changes))


def test_megatron_ffn_generalisation() -> None:
    """Megatron writes the SP + selective layer as s·b·h·(18 + 4·ffn/h)/t; it is 34 at ffn = 4h."""
    model = _shape(ffn=3 * H)
    config = ActivationConfig(seq_len=S, tp=8, recompute="selective", sequence_parallel=True)
    assert layer_bytes(model, config) == Fraction(S * H, 8) * (18 + Fraction(4 * 3 * H, H))


def test_grouped_query_attention_shrinks_key_and_value() -> None:
    config = ActivationConfig(seq_len=S, tp=8)
    gqa = _shape(kv_heads=8)
    head_dim = H // A
    assert layer_bytes(GPT3, config) - layer_bytes(gqa, config) == Fraction(2 * 2 * S * (A - 8) * head_dim, 8)


def test_gated_mlp_stores_one_more_ffn_wide_tensor() -> None:
    config = ActivationConfig(seq_len=S, tp=8)
    gated = _shape(gated_mlp=True)
    assert layer_bytes(gated, config) - layer_bytes(GPT3, config) == Fraction(2 * S * 4 * H, 8)


def test_moe_layer_scales_expert_part_by_experts_per_token() -> None:
    """k dispatched input copies (not split by t), k × the MLP internals (split), fp32 router probabilities."""
    config = ActivationConfig(seq_len=S, tp=8)
    experts, k = 8, 2
    moe = _shape(experts=experts, experts_per_token=k)
    expected = 2 * S * H * k + 4 * S * experts + Fraction(2 * S * 2 * 4 * H * (k - 1), 8)
    assert layer_bytes(moe, config) - layer_bytes(GPT3, config) == expected


# --- whole stage: Megatron-LM's theoretical formula ------------------------------------------------

def megatron_sp_selective(s: int, b: int, h: int, ffn: int, layers: int, vocab: int, t: int, p: int,
                          v: int | None = None, m: int | None = None) -> Fraction:
    """compute_activation_memory in megatron/training/theoretical_memory_usage.py, as exact fractions."""
    memory = Fraction(s * b * h) * (18 + Fraction(4 * ffn, h)) * layers
    memory += 8 * s * b * p  # input to embedding, p micro-batches in flight
    memory += s * b * h * p  # dropout in embedding layer
    if v is not None:
        memory *= 1 + Fraction(p - 1, p * v)
    if v is None and p > 1 and m is not None:
        memory *= min(1, Fraction(m, p))
    if p == 1:
        memory += s * b * h * 4 * (1 + Fraction(vocab, h))  # inputs to output layer and CE loss
    return memory / t


@pytest.mark.parametrize("b, t, p, v, m", [(1, 8, 8, None, None),  # GPT-3 175B layout
                                           (1, 8, 8, 2, None),  # interleaved, 2 chunks per GPU
                                           (2, 8, 8, None, 4),  # fewer micro-batches than stages
                                           (1, 8, 1, None, None),  # no pipeline: output layer and loss
                                           (4, 2, 4, 3, 12)])
def test_matches_megatron_theoretical_formula(b: int, t: int, p: int, v: int | None, m: int | None) -> None:
    config = ActivationConfig(seq_len=S, micro_batch=b, tp=t, pp=p, virtual_stages=v or 1, num_micro_batches=m,
                              recompute="selective", sequence_parallel=True)
    expected = megatron_sp_selective(S, b, H, 4 * H, L, V, t, p, v, m)
    assert sum(activation_terms(GPT3, config).values()) == expected
    assert ceil(expected) <= activation_memory(GPT3, config).total <= ceil(expected) + len(BREAKDOWN_KEYS) - 1


def test_terms_do_not_depend_on_what_was_asked_before() -> None:
    """activation_terms keeps one micro-batch's terms, each pipeline's load and the last model's shape (a plan search
    asks for thousands of pipelines): asked for two models in turn, pipelines in any order, every answer is still
    Megatron's formula for that model and step."""
    half_h, half_l = H // 2, L // 2
    half = ModelSpec(params=87_000_000_000, name="half", shape=ModelShape.of(layers=half_l, hidden=half_h, heads=A // 2,
                                                                            vocab=V, ffn=4 * half_h))
    steps = [(b, t, p, v, m) for b in (1, 2) for t in (2, 8) for p in (1, 4, 8)
             for v, m in ((None, None), (None, 2), (2, None), (3, 6)) if p > 1 or (v, m) == (None, None)]
    for order in (steps, steps[::-1]):
        for b, t, p, v, m in order:
            config = ActivationConfig(seq_len=S, micro_batch=b, tp=t, pp=p, virtual_stages=v or 1,
                                      num_micro_batches=m, recompute="selective", sequence_parallel=True)
            for model, h, layers in ((GPT3, H, L), (half, half_h, half_l)):
                expected = megatron_sp_selective(S, b, h, 4 * h, layers, V, t, p, v, m)
                assert sum(activation_terms(model, config).values()) == expected, (model.name, b, t, p, v, m)


def test_gpt3_175b_first_stage_bytes() -> None:
    """t = p = 8, SP + selective: 96 layers' worth of 34·s·h/8 plus 8 micro-batches of embedding input."""
    estimate = activation_memory(GPT3, ActivationConfig(seq_len=S, tp=8, pp=8, recompute="selective",
                                                        sequence_parallel=True))
    assert estimate.breakdown == {"activations/layers": 10_267_656_192, "activations/embedding": 25_182_208,
                                  "activations/output_and_loss": 0, "activations/recompute_working_set": 0}
    assert estimate.total == 10_292_838_400  # 9.59 GiB


def test_output_and_loss_only_without_pipeline() -> None:
    config = ActivationConfig(seq_len=S, micro_batch=2, tp=8)
    tokens = S * 2
    unsplit = activation_terms(GPT3, config)["activations/output_and_loss"]
    assert unsplit == 4 * tokens * H + Fraction(4 * tokens * V, 8)
    split = activation_terms(GPT3, replace(config, sequence_parallel=True))["activations/output_and_loss"]
    assert split == Fraction(4 * tokens * H + 4 * tokens * V, 8)
    assert activation_terms(GPT3, replace(config, pp=2))["activations/output_and_loss"] == 0


def test_embedding_not_split_without_sequence_parallel() -> None:
    config = ActivationConfig(seq_len=S, tp=8, pp=4)
    assert activation_terms(GPT3, config)["activations/embedding"] == (8 * S + S * H) * 4


def test_pipeline_first_stage_layers_and_micro_batches() -> None:
    assert layers_on_first_stage(30, ActivationConfig(seq_len=1, pp=4)) == 8  # ceil(30 / 4)
    assert micro_batches_in_flight(ActivationConfig(seq_len=1, pp=4)) == 4
    assert micro_batches_in_flight(ActivationConfig(seq_len=1, pp=4, num_micro_batches=2)) == 2
    interleaved = ActivationConfig(seq_len=1, pp=4, virtual_stages=2)
    assert micro_batches_in_flight(interleaved) == 4 * (1 + Fraction(3, 8))
    assert layers_on_first_stage(32, interleaved) == 8
    assert activation_memory(GPT3, interleaved).layer_micro_batches == 24 * Fraction(11, 8) * 4


def test_full_recompute_adds_one_layer_working_set() -> None:
    config = ActivationConfig(seq_len=S, tp=8, pp=8, recompute="full", sequence_parallel=True,
                              flash_attention=True)
    terms = activation_terms(GPT3, config)
    assert terms["activations/layers"] == L * Fraction(2 * S * H, 8)
    assert terms["activations/recompute_working_set"] == table2(
        "tensor + sequence parallel + selective recompute", S, 1, H, A, 8)  # flash: no score term
    no_flash = activation_terms(GPT3, replace(config, flash_attention=False, sequence_parallel=False))
    assert no_flash["activations/layers"] == L * 2 * S * H
    assert no_flash["activations/recompute_working_set"] == table2("tensor parallel", S, 1, H, A, 8)


def test_full_recompute_can_exceed_selective_for_one_layer() -> None:
    """Why the ordering property below needs layers: with one layer, the working set costs more."""
    one_layer = _shape(layers=1)
    full = activation_memory(one_layer, ActivationConfig(seq_len=S, tp=8, recompute="full"))
    selective = activation_memory(one_layer, ActivationConfig(seq_len=S, tp=8, recompute="selective"))
    assert full.total > selective.total


# --- validation --------------------------------------------------------------------------------------

def test_config_names_every_bad_input() -> None:
    with pytest.raises(InputError) as caught:
        ActivationConfig(seq_len=0, micro_batch=-1, recompute="partial",
                         flash_attention="yes",  # type: ignore[arg-type]
                         tp=0, dtype_bytes=3, num_micro_batches=0)
    for name in ("seq_len", "micro_batch", "recompute", "flash_attention", "tp", "activation_bytes",
                 "num_micro_batches"):
        assert name in caught.value.input_name and name in caught.value.problem


def test_interleaving_needs_a_pipeline() -> None:
    with pytest.raises(InputError, match="^virtual_stages: .* pp must be above 1"):
        ActivationConfig(seq_len=1024, virtual_stages=2)


def test_needs_model_shape() -> None:
    with pytest.raises(InputError, match="shape"):
        activation_memory(ModelSpec(params=7_000_000_000), ActivationConfig(seq_len=1024))


# --- largest micro-batch ------------------------------------------------------------------------------

def test_largest_micro_batch_exact_boundary() -> None:
    config = ActivationConfig(seq_len=S, tp=8, pp=8, recompute="selective", sequence_parallel=True)
    fixed = 30 * 2**30
    five = activation_memory(GPT3, replace(config, micro_batch=5)).total
    assert largest_micro_batch_that_fits(fixed + five, fixed, GPT3, config) == 5
    assert largest_micro_batch_that_fits(fixed + five - 1, fixed, GPT3, config) == 4
    assert largest_micro_batch_that_fits(fixed, fixed, GPT3, config) == 0
    assert largest_micro_batch_that_fits(fixed - 1, fixed, GPT3, config) == 0


# --- properties -----------------------------------------------------------------------------------------

@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.integers(1, 64))
    head_dim = draw(st.sampled_from([8, 16, 64, 128, 256]))
    hidden = heads * head_dim * draw(st.sampled_from([1, 1, 2]))  # sometimes head_dim != hidden / heads
    experts = draw(st.one_of(st.none(), st.integers(2, 64)))
    return ModelSpec(params=1, shape=ModelShape.of(
        layers=draw(st.integers(1, 128)), hidden=hidden, heads=heads,
        kv_heads=draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0])),
        ffn=draw(st.integers(1, 8 * hidden)), vocab=draw(st.integers(1, 256_000)), experts=experts,
        experts_per_token=draw(st.integers(1, experts)) if experts else None,
        head_dim=head_dim, gated_mlp=draw(st.booleans())))


@st.composite
def configs(draw: st.DrawFn) -> ActivationConfig:
    pp = draw(st.integers(1, 16))
    return ActivationConfig(
        seq_len=draw(st.integers(1, 8192)), micro_batch=draw(st.integers(1, 8)),
        recompute=draw(st.sampled_from(["none", "selective", "full"])), flash_attention=draw(st.booleans()),
        sequence_parallel=draw(st.booleans()), tp=draw(st.integers(1, 16)), pp=pp,
        virtual_stages=1 if pp == 1 else draw(st.integers(1, 4)),
        num_micro_batches=draw(st.one_of(st.none(), st.integers(1, 64))),
        dtype_bytes=draw(st.sampled_from([1, 2, 4])))


@settings(max_examples=150, deadline=None)
@given(models(), configs())
def test_linear_in_micro_batch(model: ModelSpec, config: ActivationConfig) -> None:
    once = activation_memory(model, config).breakdown
    twice = activation_memory(model, replace(config, micro_batch=2 * config.micro_batch)).breakdown
    for key in BREAKDOWN_KEYS:
        assert 0 <= 2 * once[key] - twice[key] <= 1  # each entry rounds up once


@settings(max_examples=150, deadline=None)
@given(models(), configs(), st.integers(1, 16))
def test_non_increasing_in_tp_with_sequence_parallel(model: ModelSpec, config: ActivationConfig,
                                                      more: int) -> None:
    config = replace(config, sequence_parallel=True)
    smaller = activation_memory(model, config).breakdown
    larger = activation_memory(model, replace(config, tp=config.tp + more)).breakdown
    assert all(larger[key] <= smaller[key] for key in BREAKDOWN_KEYS)


@settings(max_examples=150, deadline=None)
@given(models(), configs())
def test_recompute_ordering(model: ModelSpec, config: ActivationConfig) -> None:
    none, selective, full = (activation_memory(model, replace(config, recompute=mode))
                             for mode in ("none", "selective", "full"))
    assert selective.total <= none.total
    assert full.breakdown["activations/layers"] <= selective.breakdown["activations/layers"]
    if config.flash_attention and full.layer_micro_batches >= 2:
        assert full.total <= selective.total  # the working set is one selective layer: repaid by 2 layers


@settings(max_examples=150, deadline=None)
@given(models(), configs())
def test_flash_attention_never_costs_more(model: ModelSpec, config: ActivationConfig) -> None:
    with_flash = activation_memory(model, replace(config, flash_attention=True))
    assert with_flash.total <= activation_memory(model, replace(config, flash_attention=False)).total


@settings(max_examples=100, deadline=None)
@given(models(), configs(), st.integers(0, 2**40), st.integers(0, 2**37))
def test_largest_micro_batch_is_largest(model: ModelSpec, config: ActivationConfig, budget: int,
                                        fixed: int) -> None:
    best = largest_micro_batch_that_fits(budget, fixed, model, config)
    room = budget - fixed
    if best:
        assert activation_memory(model, replace(config, micro_batch=best)).total <= room
    assert activation_memory(model, replace(config, micro_batch=best + 1)).total > room

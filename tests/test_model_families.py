"""Every family the architecture description reads, checked against transformers' own model built on the meta
device: the exact count (tied weights once) and DeepSpeed's largest layer (parameters one module owns directly),
on configs with the sizes of released checkpoints (tests/configs/models/*.json; each file's _zeroplan_source names
the checkpoint whose config.json it follows). Composite vision-language configs are checked on their text model."""

from __future__ import annotations

import dataclasses

import json
from pathlib import Path

import pytest

from zeroplan.core.model.experts import active_params, expert_params
from zeroplan.core.model.families import DESCRIBED_FAMILIES, architecture_from_hf_config, model_spec_from_hf_config

MODELS = Path(__file__).parent / "configs" / "models"
NAMES = sorted(path.stem for path in MODELS.glob("*.json"))


def released(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())


def _hf_kwargs(config: dict) -> dict:
    return {key: value for key, value in config.items() if not key.startswith("_zeroplan")}


def meta_counts(config: dict) -> tuple[int, int]:
    """(unique parameters, the most one module owns directly) of transformers' causal LM for `config`, built on
    the meta device; a composite config's text model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = _hf_kwargs(config)
    if isinstance(raw.get("text_config"), dict):  # the text model of a vision-language config
        text = dict(raw["text_config"])
        raw = dict(text, model_type=text["model_type"])
    hf_config = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    unique = {id(parameter): parameter.numel() for parameter in model.parameters()}
    largest = max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())
    return sum(unique.values()), largest


def test_every_released_config_is_a_described_family() -> None:
    assert {released(name)["model_type"] for name in NAMES} <= set(DESCRIBED_FAMILIES)


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("name", NAMES)
def test_released_config_matches_transformers_on_meta_device(name: str) -> None:
    spec = model_spec_from_hf_config(released(name), name)
    assert (spec.params, spec.largest_layer_params) == meta_counts(released(name))


def _variants() -> dict[str, dict]:
    """Small configs reaching the branches the released ones do not (biases on, norms toggled, layer patterns)."""
    tiny = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                vocab_size=128, intermediate_size=96, max_position_embeddings=64,
                pad_token_id=0, bos_token_id=0, eos_token_id=0, rope_theta=10000.0)
    moe = dict(num_experts=4, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    return {
        "qwen3-bias-tied": dict(tiny, model_type="qwen3", attention_bias=True, tie_word_embeddings=True),
        "qwen3-moe-sparse-step": dict(tiny, **moe, model_type="qwen3_moe", decoder_sparse_step=2, mlp_only_layers=[3]),
        "qwen2-moe-no-bias": dict(tiny, **moe, model_type="qwen2_moe", qkv_bias=False,
                                  shared_expert_intermediate_size=48),
        "gemma2-bias": dict(tiny, model_type="gemma2", attention_bias=True),
        "olmo2-gqa": dict(tiny, model_type="olmo2"),
        "olmo-no-params-norm": dict(tiny, model_type="olmo", attention_bias=True),
        "olmoe-gqa": dict(tiny, **moe, model_type="olmoe"),
        "cohere-qk-norm-gqa": dict(tiny, model_type="cohere", use_qk_norm=True),
        "starcoder2-no-bias": dict(tiny, model_type="starcoder2", use_bias=False),
        "granite-biases": dict(tiny, model_type="granite", attention_bias=True, mlp_bias=True),
        "glm4-no-bias": dict(tiny, model_type="glm4", attention_bias=False),
        "glm4-moe-qk-norm": dict(tiny, model_type="glm4_moe", n_routed_experts=4, n_shared_experts=2,
                                 num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=2,
                                 use_qk_norm=True, attention_bias=True),
        "deepseek-v3-bias-no-q-lora": dict(tiny, model_type="deepseek_v3", n_routed_experts=4, n_shared_experts=1,
                                           num_experts_per_tok=2, moe_intermediate_size=32, first_k_dense_replace=1,
                                           q_lora_rank=None, kv_lora_rank=32, qk_rope_head_dim=8,
                                           qk_nope_head_dim=16, v_head_dim=24, attention_bias=True, n_group=1,
                                           topk_group=1),
        "deepseek-v2-q-lora": dict(tiny, model_type="deepseek_v2", n_routed_experts=4, n_shared_experts=1,
                                   num_experts_per_tok=2, moe_intermediate_size=32, q_lora_rank=24,
                                   kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16),
        "ernie-moe-interval": dict(tiny, model_type="ernie4_5_moe", moe_num_experts=4, moe_k=2,
                                   moe_intermediate_size=32, moe_num_shared_experts=0, moe_layer_start_index=0,
                                   moe_layer_end_index=3, moe_layer_interval=2, use_bias=True),
        "ernie-bias": dict(tiny, model_type="ernie4_5", use_bias=True),
        "exaone4-tied": dict(tiny, model_type="exaone4", tie_word_embeddings=True),
        "hunyuan-dense-no-qk-norm": dict(tiny, model_type="hunyuan_v1_dense", use_qk_norm=False, attention_bias=True),
        "hunyuan-moe": dict(tiny, model_type="hunyuan_v1_moe", num_experts=4, moe_topk=2, use_qk_norm=True),
        "phimoe-no-bias": dict(tiny, **moe, model_type="phimoe", attention_bias=False, lm_head_bias=False),
        "phi-qk-layernorm": dict(tiny, model_type="phi", qk_layernorm=True, num_key_value_heads=4),
        "gpt-oss-tied": dict(tiny, **moe, model_type="gpt_oss", tie_word_embeddings=True),
        "llama4-text-interleave": dict(tiny, **moe, model_type="llama4_text", intermediate_size_mlp=80,
                                       interleave_moe_layer_step=2, use_qk_norm=True, attention_bias=True),
        "smollm3-untied": dict(tiny, model_type="smollm3", tie_word_embeddings=False, mlp_bias=True),
        "ministral-tied": dict(tiny, model_type="ministral", tie_word_embeddings=True),
        "gemma3-text-untied": dict(tiny, model_type="gemma3_text", tie_word_embeddings=False),
        "bigcode-multi-head": dict(model_type="gpt_bigcode", n_embd=64, n_layer=2, n_head=4, n_positions=32,
                                   vocab_size=128, multi_query=False, tie_word_embeddings=False),
        "bloom-untied": dict(model_type="bloom", hidden_size=64, n_layer=2, n_head=4, vocab_size=128,
                             tie_word_embeddings=False),
        "dbrx-tiny": dict(model_type="dbrx", d_model=64, n_layers=2, n_heads=4, vocab_size=128, max_seq_len=64,
                          attn_config={"kv_n_heads": 2, "rope_theta": 10000.0},
                          ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}),
        "qwen3-5-moe-text-tiny": dict(tiny, **moe, model_type="qwen3_5_moe_text", shared_expert_intermediate_size=40,
                                      linear_conv_kernel_dim=4, linear_key_head_dim=8, linear_value_head_dim=8,
                                      linear_num_key_heads=2, linear_num_value_heads=4),
    }


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("label", sorted(_variants()))
def test_variant_matches_transformers_on_meta_device(label: str) -> None:
    raw = _variants()[label]
    spec = model_spec_from_hf_config(raw, label)
    assert (spec.params, spec.largest_layer_params) == meta_counts(raw)


# Published (total, active) parameters in billions, at the precision each source states them.
# Sources: the model cards on the Hugging Face Hub (ids in each config's _zeroplan_source) and the papers they cite;
# gpt-oss's figures are OpenAI's model card table (active excludes the embedding, "active-emb" below).
PUBLISHED_MOE = {
    "deepseek-v3": (671, 37, False),  # DeepSeek-V3 technical report: 671B total, 37B activated (MTP excluded)
    "qwen3-30b-a3b": (30.5, 3.3, False),  # Qwen3 model card: 30.5B total, 3.3B activated
    "qwen3-235b-a22b": (235, 22, False),  # Qwen3 model card: 235B total, 22B activated
    "gpt-oss-20b": (20.91, 3.61, True),  # gpt-oss model card: 20.91B total, 3.61B active
    "gpt-oss-120b": (116.83, 5.13, True),  # gpt-oss model card: 116.83B total, 5.13B active
    "llama-4-maverick-17b-128e-text": (400, 17, False),  # Meta: 17B active, 400B total
    "olmoe-1b-7b": (6.9, 1.3, False),  # OLMoE paper: 6.9B total, 1.3B active
    "mixtral-8x22b": (141, 39, False),  # Mistral AI: 141B total, 39B active
    "dbrx": (132, 36, False),  # Databricks: 132B total, 36B active
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_MOE))
def test_total_and_active_parameters_match_published(name: str) -> None:
    total, active, without_embedding = PUBLISHED_MOE[name]
    spec = model_spec_from_hf_config(released(name), name)
    shape = spec.shape
    assert shape is not None and shape.moe is not None
    digits = max(len(str(total).partition(".")[2]), len(str(active).partition(".")[2]))
    embedding = shape.vocab * shape.hidden if without_embedding else 0
    assert total in _published_forms(spec.params, digits)
    assert active in _published_forms(active_params(spec) - embedding, digits)
    assert active_params(spec) < spec.params - shape.moe.expert_params // 2  # top-k of the experts at most half


def _published_forms(count: int, digits: int) -> tuple[float, float]:
    """A count in billions as a card states it at `digits` decimals: rounded, or cut ("37B" for 37.55B)."""
    scale = 10**digits
    return round(count / 1e9, digits), (count * scale // 10**9) / scale


def test_dense_then_moe_layers_split_the_layout() -> None:
    """DeepSeek-V3: 3 dense layers then 58 MoE layers; pipeline stages sum their own layers."""
    from zeroplan.core.model.pipeline_stages import stage_params

    spec = model_spec_from_hf_config(released("deepseek-v3"), "deepseek-v3")
    shape = spec.shape
    assert shape is not None and shape.layout is not None and shape.layout.per_layer is not None
    assert (shape.moe_layers, shape.dense_layers) == (58, 3)
    per_layer = shape.layout.per_layer
    assert per_layer[0] == per_layer[2] < per_layer[3] == per_layer[-1] == shape.layout.layer_params
    assert sum(per_layer) + shape.layout.input_params + shape.layout.output_params == spec.params
    stages = stage_params(spec, 4)
    assert sum(stages) == spec.params and stages[0] < stages[1]  # the first stage holds the dense layers


def test_mtp_and_vision_tower_are_said_not_counted() -> None:
    deepseek = model_spec_from_hf_config(released("deepseek-v3"), "deepseek-v3")
    assert any("multi-token-prediction" in note for note in deepseek.extra["notes"])
    gemma = model_spec_from_hf_config(released("gemma-3-27b"), "gemma-3-27b")
    assert gemma.shape is not None and gemma.shape.family == "gemma3_text"
    assert any("vision tower" in note for note in gemma.extra["notes"])


def _gemma4_variants() -> dict[str, dict]:
    """Gemma 4's branches: class defaults (per-layer inputs, 512-wide global heads), shared keys and values with a
    double-wide MLP, keys serving as values on global layers, the MoE block beside the dense MLP."""
    tiny = dict(model_type="gemma4_text", hidden_size=64, num_hidden_layers=8, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, global_head_dim=32, vocab_size=128, vocab_size_per_layer_input=96,
                hidden_size_per_layer_input=8, intermediate_size=96, max_position_embeddings=64)
    return {
        "gemma4-text-defaults": dict(model_type="gemma4_text", hidden_size=2304, num_hidden_layers=30,
                                     num_attention_heads=8, num_key_value_heads=4, head_dim=256, vocab_size=262144,
                                     intermediate_size=9216),  # Gemma4TextConfig's defaults
        "gemma4-kv-shared-double-wide": dict(tiny, num_kv_shared_layers=2, use_double_wide_mlp=True),
        "gemma4-k-eq-v": dict(tiny, attention_k_eq_v=True, num_global_key_value_heads=1, attention_bias=True,
                              tie_word_embeddings=False),
        "gemma4-moe-no-per-layer": dict(tiny, enable_moe_block=True, num_experts=4, top_k_experts=2,
                                        moe_intermediate_size=24, hidden_size_per_layer_input=0),
    }


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("label", sorted(_gemma4_variants()))
def test_gemma4_matches_transformers_on_meta_device(label: str) -> None:
    raw = _gemma4_variants()[label]
    spec = model_spec_from_hf_config(raw, label)
    assert (spec.params, spec.largest_layer_params) == meta_counts(raw)


def test_flops_per_token_counts_every_gemm_weight_twice_plus_causal_attention() -> None:
    """Llama-2-7B (untied, no biases): the GEMM weights are every parameter but the embedding and the norms; a
    token attends on average to (s+1)/2 keys, 2·2·heads·head_dim FLOPs each (QKᵀ and AV), per layer."""
    config = json.loads((MODELS.parent / "llama-2-7b-hf.json").read_text())
    decoder = architecture_from_hf_config(config).decoder
    assert decoder is not None
    h, layers, vocab, seq = 4096, 32, 32000, 4096
    norms = (2 * layers + 1) * h
    gemm_weights = decoder.params - vocab * h - norms
    attention = layers * (2 * 2 * 32 * 128 * (seq + 1) // 2)
    assert decoder.flops_per_token(seq) == decoder.flops_per_token(seq, active=False) == 2 * gemm_weights + attention


def test_moe_flops_meet_only_the_routed_experts_a_token_is_sent_to() -> None:
    """Qwen3-30B-A3B: active FLOPs price 8 of 128 experts; the total prices all 128 (what a dense model of the
    same parameters would do). The GEMMs list the experts at top_k rows per token."""
    decoder = architecture_from_hf_config(released("qwen3-30b-a3b")).decoder
    assert decoder is not None
    per_expert = 3 * 2048 * 768
    idle = 48 * (128 - 8) * per_expert
    assert decoder.flops_per_token(2048, active=False) - decoder.flops_per_token(2048) == 2 * idle
    gemms = {name: (m, n, k) for name, m, n, k, _count in decoder.gemms(decoder.layers[0], 1000)}
    assert gemms["experts.gate_up"] == (8000, 2 * 768, 2048) and gemms["experts.down"] == (8000, 2048, 768)
    assert gemms["q_proj"] == (1000, 32 * 128, 2048) and gemms["router"] == (1000, 128, 2048)


def test_the_step_time_prices_the_gemms_the_description_lists() -> None:
    """Decoder.gemms is the one list of a layer's GEMMs: FLOPs and the step time's shapes (Decoder.tp_gemms, carried
    as ModelShape.gemms) come from it. Megatron-style tensor parallelism: q, k, v (and gate, up) read the same input and
    run as one column-parallel GEMM, o_proj and down_proj are row-parallel; GPT-2's Conv1D weights, stored
    (in, out), are turned, in its MLP as in its attention."""
    from zeroplan.core.timing.step_time import FlopModel, Layout, linear_shapes

    llama = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 32,
             "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}
    decoder = architecture_from_hf_config(llama).decoder
    assert decoder.tp_gemms(decoder.layers[0]) == ((4096, 4096 + 2 * 1024, 1, False), (4096, 4096, 1, True),
                                                   (4096, 2 * 14336, 1, False), (14336, 4096, 1, True))
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
    decoder = architecture_from_hf_config(gpt2).decoder
    gemms = {name: (n, k) for name, _m, n, k, _c in decoder.gemms(decoder.layers[0], 1)}
    assert gemms["mlp.c_fc"] == (3072, 768) and gemms["mlp.c_proj"] == (768, 3072)  # (outputs, inputs)
    assert gemms["attn.c_attn"] == (2304, 768)
    # the description's shapes are the ones the widths give a plain dense layer, at every tp split
    model = model_spec_from_hf_config(llama, "llama")
    described = FlopModel.from_model(model)
    widths = dataclasses.replace(described, gemms=())
    for tp in (1, 2, 8):
        layout = Layout(dp=1, tp=tp, pp=1, virtual_stages=1, seq_len=4096, micro_batch=2, grad_accum=1,
                        recompute="none", sequence_parallel=True, tp_intra_node=True, dp_intra_node=True,
                        pp_intra_node=True)
        assert linear_shapes(layout, described) == linear_shapes(layout, widths)


def test_a_sliding_window_caps_the_keys_a_token_sees() -> None:
    """gpt-oss-20b alternates 128-token sliding layers with global ones: at 4096 tokens a sliding layer's
    QKᵀ and AV see 128·129/2 + (4096 - 128)·128 keys over the sequence, a global one 4096·4097/2."""
    decoder = architecture_from_hf_config(released("gpt-oss-20b")).decoder
    assert decoder is not None
    seq, width = 4096, 2 * 64 * (64 + 64)  # 2 FLOPs × heads × (query/key + value width)
    sliding, full = decoder.layers[0], decoder.layers[1]
    assert (sliding.attention.window, full.attention.window) == (128, None)
    gemm_flops = [2 * sum(m * n * k for _name, m, n, k, _c in decoder.gemms(layer, 1)) for layer in (sliding, full)]
    sliding_keys, full_keys = 128 * 129 // 2 + (seq - 128) * 128, seq * (seq + 1) // 2
    attention = 12 * (width * sliding_keys // seq) + 12 * (width * full_keys // seq)
    assert decoder.flops_per_token(seq) == 12 * sum(gemm_flops) + attention + 2 * decoder.vocab * decoder.hidden


def test_deepseek_v3_mtp_module_is_the_published_difference() -> None:
    """DeepSeek-V3's report: 671B main model plus 14B of multi-token-prediction module (685B on the Hub); the
    description sizes the module, leaves it out of the count and says so."""
    spec = model_spec_from_hf_config(released("deepseek-v3"), "deepseek-v3")
    assert spec.extra["mtp_layers"] == 1
    assert round(spec.extra["mtp_params"] / 1e9) in (13, 14)  # 13.46B: "14B" in the report
    assert round((spec.params + spec.extra["mtp_params"]) / 1e9) in (684, 685)


def test_formulas_doc_worked_moe_numbers_are_the_code_s() -> None:
    """docs/formulas.md §2.1.1's worked Qwen3-30B-A3B figures, recomputed."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "formulas.md").read_text(encoding="utf-8")
    spec = model_spec_from_hf_config(released("qwen3-30b-a3b"), "qwen3-30b-a3b")
    assert spec.shape is not None and spec.shape.moe is not None
    for value in (spec.largest_layer_params, spec.shape.moe.expert_params, spec.params, active_params(spec)):
        assert f"**{value:,}**" in doc


def test_a_moe_shape_given_by_fields_has_the_same_active_count_as_its_description() -> None:
    """Mixtral-8x22B as fields (--experts 8, top 2, no config.json) and as its config.json: core.model.experts
    splits both alike."""
    from zeroplan.core.model.spec import ModelShape, ModelSpec

    described = model_spec_from_hf_config(released("mixtral-8x22b"), "mixtral-8x22b")
    shape = described.shape
    assert shape is not None and shape.moe is not None
    fields = ModelShape.of(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, vocab=shape.vocab,
                           kv_heads=shape.kv_heads, ffn=shape.ffn, gated_mlp=True, experts=8, experts_per_token=2)
    given = ModelSpec(params=described.params, shape=fields)
    split = expert_params(fields)
    assert split is not None and split.routed_total == shape.moe.expert_params
    assert active_params(given) == active_params(described) == shape.moe.active_params


def test_interleaved_moe_layers_keep_their_pattern() -> None:
    """Llama 4 Maverick alternates dense and MoE layers (interleave_moe_layer_step 2); Qwen3 with
    decoder_sparse_step 2 and an mlp_only layer likewise: expert parallelism sees each layer as it is."""
    maverick = model_spec_from_hf_config(released("llama-4-maverick-17b-128e-text"), "maverick").shape
    split = expert_params(maverick)
    assert split is not None and split.moe_layers == (False, True) * 24
    assert split.routed_total == maverick.moe.expert_params  # type: ignore[union-attr]
    sparse = model_spec_from_hf_config(_variants()["qwen3-moe-sparse-step"], "sparse").shape
    split = expert_params(sparse)
    assert split is not None and split.moe_layers == (False, True, False, False)


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite"])
def test_a_deepseek_config_without_q_lora_rank_counts_what_transformers_builds(name: str) -> None:
    """An absent q_lora_rank is transformers' default rank (1536), not direct query projections: the count follows
    the model transformers builds from that config.json (an explicit null stays direct: DeepSeek-V2-Lite)."""
    config = json.loads((MODELS / f"{name}.json").read_text(encoding="utf-8"))
    config.pop("q_lora_rank", None)
    config.update(num_hidden_layers=4, first_k_dense_replace=1)  # the layers' shapes matter, not their number
    assert model_spec_from_hf_config(config, name).params == meta_counts(config)[0]


@pytest.mark.slow  # imports transformers' config classes
@pytest.mark.parametrize("config", [
    {"model_type": "gemma2"}, {"model_type": "gemma2", "sliding_window_pattern": 3},  # Gemma2Config ignores the key
    {"model_type": "gemma3_text"}, {"model_type": "gemma3_text", "sliding_window_pattern": 3},
    {"model_type": "gpt_oss", "num_local_experts": 4, "num_experts_per_tok": 2},
    {"model_type": "gpt_oss", "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 64},
    {"model_type": "cohere2"}, {"model_type": "cohere2", "sliding_window_pattern": 2}, {"model_type": "olmo3"},
], ids=lambda config: "-".join(str(value) for value in config.values()))
def test_layers_without_layer_types_get_transformers_default_pattern(config: dict) -> None:
    """A config.json without layer_types: transformers' config class fills them in (Gemma 2 and gpt-oss alternate,
    Gemma 3 has five sliding layers per global one unless sliding_window_pattern says otherwise, Cohere 2 three,
    OLMo 3 every fourth global); the windows the description gives each layer (FLOPs, activations) follow them."""
    transformers = pytest.importorskip("transformers")
    full = {"hidden_size": 64, "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "vocab_size": 128, "intermediate_size": 96, "max_position_embeddings": 8192, **config}
    hf = transformers.AutoConfig.for_model(**full)
    decoder = architecture_from_hf_config(full).description
    expected = [hf.sliding_window if kind == "sliding_attention" else None for kind in hf.layer_types]
    assert [layer.attention.window for layer in decoder.layers] == expected
    assert None in expected and hf.sliding_window in expected

"""Built-in presets: every entry loads, the issue's figures hold, and model sizes are exact.

The parameter counts in presets/models.yaml are recomputed here from the architecture fields
with a small per-family formula, independent of the number written in the YAML.
"""

from __future__ import annotations


import pytest

from zeroplan.inputs import presets
from zeroplan.core.units import GB, MIB, TB
from zeroplan.inputs.presets import PresetError

REQUIRED = {
    "gpus": {"v100-32g", "a100-40g", "a100-80g", "h100-80g", "h200-141g", "b200", "l40s",
             "mi300x", "rtx3090", "rtx4090", "h100-96g-500w"},
    "clusters": {"dgx-a100", "dgx-h100", "hgx-h200", "workstation-4x3090", "grand-teton-h100"},
    "models": {"gpt2", "gpt2-xl", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b",
               "llama-3-70b", "llama-3.1-405b", "gpt3-175b", "bloom-176b", "mixtral-8x7b"},
}

# Totals published elsewhere (model cards, safetensors metadata, papers, docs/formulas.md §19.2).
PUBLISHED = {
    "gpt2": 124_439_808, "gpt2-xl": 1_557_611_200, "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248, "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800, "bloom-176b": 176_247_271_424,
    "mixtral-8x7b": 46_702_792_704, "mistral-7b": 7_241_732_096, "qwen2-7b": 7_615_616_512,
}


# ---------------------------------------------------------------- loading and required names


@pytest.mark.parametrize("category", presets.CATEGORIES)
def test_required_presets_exist(category):
    missing = REQUIRED[category] - set(presets.names(category))
    assert not missing, f"{category}: missing {sorted(missing)}"


@pytest.mark.parametrize("name", presets.names("gpus"))
def test_every_gpu_loads(name):
    spec = presets.gpu(name)
    assert spec.memory_bytes > 0 and spec.hbm_bandwidth_bytes_per_s > 0 and spec.bf16_flops > 0
    assert spec.intra_node_link.bandwidth_bytes_per_s > 0 and spec.intra_node_link.latency_s > 0
    assert presets.show("gpus", name)["sources"]


@pytest.mark.parametrize("name", presets.names("clusters"))
def test_every_cluster_loads_and_names_a_known_gpu(name):
    assert presets.entry("clusters", name).gpu in presets.names("gpus")
    spec = presets.cluster(name)
    assert spec.gpus_per_node >= 1 and spec.cpu_memory_bytes > 0 and spec.nvme_bytes > 0
    assert spec.nvme_bandwidth_bytes_per_s > 0 and spec.inter_node_link.bandwidth_bytes_per_s > 0


@pytest.mark.parametrize("name", presets.names("models"))
def test_every_model_loads(name):
    spec = presets.model(name)
    shape = spec.shape
    assert shape is not None and 0 < spec.largest_layer_params <= spec.params
    assert shape.heads % shape.kv_heads == 0
    assert (shape.experts is None) == (shape.experts_per_token is None)
    if shape.experts:
        assert shape.experts_per_token <= shape.experts


def test_a100_80g_reports_81920_mib():
    assert presets.gpu("a100-80g").memory_bytes == 81920 * MIB


def test_driver_reported_memory_is_close_to_the_nominal_size():
    # nvidia-smi totals in MiB: the "80 GB" A100 reports exactly 80 GiB, the rest slightly less.
    for name, nominal_gib in {"h100-80g": 80, "h200-141g": 141, "rtx3090": 24, "rtx4090": 24}.items():
        memory = presets.gpu(name).memory_bytes
        assert 0.97 * nominal_gib * 2**30 < memory <= nominal_gib * 2**30 + 3 * 2**30, name


def test_workstation_4x3090_matches_the_issue():
    spec = presets.cluster("workstation-4x3090")
    assert spec.gpu.name == "rtx3090" and spec.gpus_per_node == 4
    assert spec.cpu_memory_bytes == 256 * GB == 256_000_000_000
    assert spec.nvme_bytes == 2 * TB
    assert spec.nvme_bandwidth_bytes_per_s == 7 * GB
    assert spec.pcie_generation == 4 and spec.pcie_bandwidth_bytes_per_s == 31_500_000_000


def test_dgx_nodes_have_one_nic_per_gpu():
    assert presets.cluster("dgx-a100").inter_node_link.bandwidth_bytes_per_s == 25 * GB  # 200 Gb/s
    assert presets.cluster("dgx-h100").inter_node_link.bandwidth_bytes_per_s == 50 * GB  # 400 Gb/s


def test_grand_teton_h100_holds_torchtitans_published_figures():
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md (Hardware): 8 H100 per host on NVLink, 96GB HBM2e at
    # 2.4 TB/s, 400 Gb/s per GPU between hosts, a 500 W limit; torchtitan PR #800 (its performance page): "95 GiB memory".
    gpu = presets.gpu("h100-96g-500w")
    assert gpu.memory_bytes == 95 * 2**30
    assert gpu.hbm_bandwidth_bytes_per_s == 2400 * GB
    node = presets.cluster(presets.default_cluster("h100-96g-500w"))
    assert node.name == "grand-teton-h100" and node.gpu.name == "h100-96g-500w" and node.gpus_per_node == 8
    assert node.inter_node_link.bandwidth_bytes_per_s == 50 * GB  # 400 Gb/s
    assert gpu.intra_node_link == presets.gpu("h100-80g").intra_node_link  # NVLink 4 through NVSwitch


def test_grand_teton_h100_tensor_peak_is_the_midpoint_of_the_bracket_torchtitan_gives():
    # "the actual peak TFLOPs number is between SXM and NVL, and we don't know its exact value" (the same file,
    # footnote 2): the preset takes the geometric midpoint of NVIDIA's two published dense rates, BF16 and FP8.
    import math

    gpu, nvl, sxm = presets.gpu("h100-96g-500w"), presets.gpu("h100-nvl"), presets.gpu("h100-80g")
    for rate in ("bf16_flops", "fp8_flops"):
        low, high = getattr(nvl, rate), getattr(sxm, rate)
        assert low < getattr(gpu, rate) < high
        assert getattr(gpu, rate) == pytest.approx(math.sqrt(low * high), rel=1e-4), rate
    assert not gpu.supports_mxfp8  # Hopper


def test_a_plan_on_the_grand_teton_h100_is_slower_than_on_the_700w_h100_by_at_most_its_figures(cli):
    # The same pinned layout (torchtitan's Table 1 FSDP row: Llama 3.1 8B, 8 GPUs, local batch 2, seq 8192): every
    # part of the step is priced on a rate the 500 W part has less of (tensor peak, HBM bandwidth) or the same of.
    # Both with 95 GiB, so that the same plan fits on both.
    import json

    def step(gpu: str) -> float:
        code, out, err = cli("plan", "--model", "llama-3-8b", "--gpus", "8", "--gpu", gpu, "--global-batch", "16",
                             "--seq-len", "8192", "--tp", "1", "--pp", "1", "--stages", "3", "--micro-batches", "2",
                             "--recompute", "selective-op", "--gpu-memory", "95GiB", "--format", "json")
        assert code == 0, err
        return json.loads(out)["top"][0]["step_seconds"]

    slow, fast = presets.gpu("h100-96g-500w"), presets.gpu("h100-80g")
    most = max(fast.bf16_flops / slow.bf16_flops, fast.hbm_bandwidth_bytes_per_s / slow.hbm_bandwidth_bytes_per_s)
    assert 1.0 < step("h100-96g-500w") / step("h100-80g") <= most


# ---------------------------------------------------------------- error messages


def test_unknown_name_suggests_close_matches():
    with pytest.raises(PresetError) as info:
        presets.gpu("a100-80")
    assert "did you mean" in str(info.value) and "a100-80g" in str(info.value)
    with pytest.raises(PresetError, match="did you mean.*llama-3-8b"):
        presets.model("llama3-8b")
    with pytest.raises(PresetError, match="^cluster: "):
        presets.cluster("no-such-cluster-anywhere")


# ---------------------------------------------------------------- exact parameter counts

LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2"}


def _linears(m) -> dict[str, int]:
    """Parameters owned by each distinct Linear-like module of ONE layer (weights + biases)."""
    h, f, c = m.hidden, m.ffn, m.config
    if m.family in LLAMA_LIKE:
        d = c.get("head_dim") or h // m.heads
        q, kv = m.heads * d, m.kv_heads * d
        qkv_bias = m.family == "qwen2" or c.get("attention_bias", False)  # Qwen2: q, k, v only
        o_bias = m.family != "qwen2" and c.get("attention_bias", False)
        mb = c.get("mlp_bias", False)
        mods = {"q": h * q + q * qkv_bias, "k": h * kv + kv * qkv_bias,
                "v": h * kv + kv * qkv_bias, "o": q * h + h * o_bias,
                "gate": h * f + f * mb, "up": h * f + f * mb, "down": f * h + h * mb}
        if m.experts:
            mods["router"] = h * m.experts
        return mods
    if m.family in ("gpt2", "bloom"):  # fused QKV, plain 4h MLP, biases everywhere
        return {"qkv": h * 3 * h + 3 * h, "proj": h * h + h, "fc_in": h * f + f, "fc_out": f * h + h}
    if m.family == "opt":
        b = c.get("enable_bias", True)
        mods = {p: h * h + h * b for p in ("q", "k", "v", "o")}
        return mods | {"fc1": h * f + f * b, "fc2": f * h + h * b}
    raise AssertionError(f"no formula for family {m.family}")


def expected_params(m) -> int:
    h, V, L, c = m.hidden, m.vocab, m.layers, m.config
    mods = _linears(m)
    if m.family in LLAMA_LIKE:  # RMSNorm: h weights, two per layer plus a final one
        mlp = mods["gate"] + mods["up"] + mods["down"]
        experts = m.experts or 1
        attn = mods["q"] + mods["k"] + mods["v"] + mods["o"]
        layer = attn + experts * mlp + mods.get("router", 0) + 2 * h
        return V * h + (0 if m.tied_embeddings else V * h) + L * layer + h
    layer_norm = 2 * h if c.get("layer_norm_elementwise_affine", True) else 0
    layer = sum(mods.values()) + 2 * layer_norm
    total = V * h + (0 if m.tied_embeddings else V * h) + L * layer
    if m.family == "gpt2":
        return total + c["n_positions"] * h + layer_norm  # learned positions, final ln_f
    if m.family == "bloom":
        return total + 2 * layer_norm  # LayerNorm after the embeddings, final ln_f
    # OPT: positions offset by 2, final LayerNorm only when pre-LN, optional in/out projections
    proj = c.get("word_embed_proj_dim", h)
    total = total - V * h + V * proj + (c["max_position_embeddings"] + 2) * h
    total += layer_norm if c.get("do_layer_norm_before", True) else 0
    return total + (2 * proj * h if proj != h else 0)


def expected_largest_layer(m) -> int:
    """DeepSpeed's Lp: max over modules of parameters owned directly by one module."""
    embedding = m.vocab * m.config.get("word_embed_proj_dim", m.hidden)
    candidates = [embedding, *_linears(m).values()]
    if m.family == "gpt2":
        candidates.append(m.config["n_positions"] * m.hidden)
    if m.family == "opt":
        candidates.append((m.config["max_position_embeddings"] + 2) * m.hidden)
    if m.experts:  # transformers >= 5: one fused module holds every expert's gate, up and down matrices
        candidates.append(m.experts * 3 * m.hidden * m.ffn)
    return max(candidates)


# Presets of families this file's hand formula covers; the others (MoE, MLA, qk-norm families) are checked
# against transformers on the meta device below.
FORMULA_FAMILIES = LLAMA_LIKE | {"gpt2", "bloom", "opt"}
FORMULA_PRESETS = [name for name in presets.names("models") if presets.entry("models", name).family in FORMULA_FAMILIES]
OTHER_PRESETS = [name for name in presets.names("models") if name not in FORMULA_PRESETS]


@pytest.mark.slow  # builds the model in transformers on the meta device
@pytest.mark.parametrize("name", OTHER_PRESETS)
def test_params_match_transformers_on_meta_device(name):
    """The preset's total and largest layer are those of transformers' model built from its config on the meta
    device (tied weights once; DeepSpeed's largest layer: the most one module owns directly)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    m = presets.entry("models", name)
    hf_config = transformers.AutoConfig.for_model(**presets._hf_config(m))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    largest = max(sum(p.numel() for p in module.parameters(recurse=False)) for module in model.modules())
    assert (m.params, m.largest_layer_params) == (sum(p.numel() for p in model.parameters()), largest)


@pytest.mark.parametrize("name", FORMULA_PRESETS)
def test_params_match_an_independent_count(name):
    m = presets.entry("models", name)
    assert m.params == expected_params(m), f"{name}: preset {m.params:,} != formula {expected_params(m):,}"


@pytest.mark.parametrize("name", FORMULA_PRESETS)
def test_largest_layer_matches_the_largest_module(name):
    m = presets.entry("models", name)
    assert m.largest_layer_params == expected_largest_layer(m)


@pytest.mark.parametrize("name, total", sorted(PUBLISHED.items()))
def test_params_match_published_totals(name, total):
    assert presets.model(name).params == total


def test_formula_reproduces_known_layouts():
    # Guards the test's own formula against a shared mistake with the YAML (docs/formulas.md §2.1).
    g = presets.entry("models", "gpt2")
    h, L = g.hidden, g.layers
    assert expected_params(g) == 50257 * h + 1024 * h + L * (12 * h * h + 13 * h) + 2 * h
    n = presets.entry("models", "llama-2-7b")
    assert expected_params(n) == 2 * 32000 * 4096 + 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    x = presets.entry("models", "mixtral-8x7b")
    dense_equivalent = expected_params(x) - 32 * (7 * 3 * 4096 * 14336 + 8 * 4096)
    assert dense_equivalent == presets.model("mistral-7b").params


@pytest.mark.parametrize("name", presets.names("models"))
def test_model_spec_carries_a_consistent_layout(name):
    """The pipeline layout (per layer, input side, output side) adds up to the exact count; where layers differ
    (dense then MoE) each layer's own count is listed and the largest is layer_params."""
    spec = presets.model(name)
    layout = spec.layout
    assert spec.shape is not None and layout is not None
    per_layer = layout.per_layer or (layout.layer_params,) * spec.shape.layers
    assert len(per_layer) == spec.shape.layers and max(per_layer) == layout.layer_params
    assert sum(per_layer) + layout.input_params + layout.output_params == spec.params

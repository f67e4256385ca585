"""QLoRA against bitsandbytes' own modules and ops on fake tensors: the trace's model (transformers'
replace_with_bnb_linear, bitsandbytes' quantize_4bit, PEFT's lora.bnb.Linear4bit), the dequantised temporary of
gemm_4bit's CUDA path, and estimate beside `zeroplan trace --finetune qlora`."""

from __future__ import annotations

import json

import pytest

from zeroplan.core.memory.finetune import dequantised_weight_bytes, quantised_param_specs
from zeroplan.core.model.adapters import Finetune, finetune_counts, quantised_storage
from zeroplan.inputs.hf_config import model_spec_from_hf_config

from saved_tensors import saved_activation_bytes

pytestmark = pytest.mark.slow  # every test here runs bitsandbytes, PEFT or a trace

SMALL_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
               "intermediate_size": 688, "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 4,
               "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False}


@pytest.mark.slow  # transformers + PEFT + bitsandbytes on the meta device
@pytest.mark.parametrize("double_quant", [True, False])
def test_traced_qlora_model_stores_what_the_estimate_counts(double_quant):
    """Every decoder linear of the traced model is bitsandbytes' Linear4bit under PEFT's LoRA, its packed storage
    the shape quantised_param_specs gives, its QuantStates the bytes quantised_storage counts."""
    torch = pytest.importorskip("torch")
    bnb = pytest.importorskip("bitsandbytes")
    pytest.importorskip("peft")
    from zeroplan.core.memory.framework_partition import params_from_architecture
    from zeroplan.core.model.families import architecture_from_hf_config
    from zeroplan.trace.engine import TraceSettings, traced_model
    from zeroplan.trace.qlora import quant_state_tensors

    settings = TraceSettings(world_size=2, stage=3, finetune="qlora", lora_rank=8, double_quant=double_quant)
    model = traced_model(SMALL_LLAMA, settings, None)
    quantised = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    spec = model_spec_from_hf_config(SMALL_LLAMA, "small", source="test")
    assert len(quantised) == finetune_counts(spec, Finetune(mode="qlora")).quantised_tensors
    assert type(model.base_model.model.model.layers[0].mlp.down_proj).__module__ == "peft.tuners.lora.bnb"
    assert not isinstance(model.base_model.model.lm_head, bnb.nn.Linear4bit)  # the head stays in 16 bits
    stored = {tuple(m.weight.shape) for m in quantised}
    predicted = {s.shape for s in quantised_param_specs(tuple(params_from_architecture(
        architecture_from_hf_config(SMALL_LLAMA, "small"))), spec) if len(s.shape) == 2 and s.shape[1] == 1}
    assert stored == predicted
    assert all(m.weight.dtype == torch.bfloat16 for m in quantised)  # bnb_4bit_quant_storage=bfloat16
    packed = sum(m.weight.numel() * m.weight.element_size() for m in quantised)
    constants = sum(t.numel() * t.element_size() for t in quant_state_tensors(quantised))
    assert (packed, constants) == quantised_storage(spec.shape, "nf4", double_quant)


def _total(snapshot: dict) -> int:
    return sum(value for device in snapshot.values() for key, value in device.items()
               if str(getattr(key, "value", key)) == "Total")


@pytest.mark.slow  # bitsandbytes' ops under FakeTensorMode and torch's MemTracker
@pytest.mark.parametrize("double_quant", [True, False])
def test_gemm_4bit_cuda_path_makes_the_dequantised_temporary_the_estimate_counts(double_quant):
    torch = pytest.importorskip("torch")
    bitsandbytes = pytest.importorskip("bitsandbytes")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from zeroplan.trace.qlora import (
        GEMM_4BIT_CUSTOM_MAX_M, bitsandbytes_on_fake_tensors, quant_states_to_empty, quantise_linears,
    )

    out_features, in_features = 688, 256
    spec = model_spec_from_hf_config({**SMALL_LLAMA, "num_hidden_layers": 1}, "one", source="test")
    finetune = Finetune(mode="qlora", double_quant=double_quant)
    counts = finetune_counts(spec, finetune)
    assert counts.largest_quantised == out_features * in_features
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(in_features, out_features, bias=False, dtype=torch.bfloat16))
    (linear,) = quantise_linears(model, double_quant)  # bitsandbytes' quantize_4bit on the meta device
    with FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        quant_states_to_empty([linear], "cpu")
        for rows, temporary in ((GEMM_4BIT_CUSTOM_MAX_M + 1, dequantised_weight_bytes(spec, finetune, counts)),
                                (GEMM_4BIT_CUSTOM_MAX_M, 0)):
            x = torch.empty(rows, in_features, dtype=torch.bfloat16, requires_grad=True)  # MatMul4Bit, as in training
            tracker = MemTracker()
            tracker.track_external(linear.weight, x)
            with bitsandbytes_on_fake_tensors(), tracker:
                before = _total(tracker.get_tracker_snapshot())
                out = bitsandbytes.matmul_4bit(x, linear.weight, quant_state=linear.quant_state)  # Linear4bit's call
                peak = _total(tracker.get_tracker_snapshot("peak"))
            output = out.numel() * out.element_size()
            assert peak - before - output == temporary, rows


@pytest.mark.slow  # a trace per case, bitsandbytes and PEFT on fake tensors
@pytest.mark.parametrize("stage,recompute", [(0, "none"), (3, "none"), (3, "full")])
def test_estimate_within_3_percent_of_the_qlora_trace(stage, recompute, tmp_path):
    """`zeroplan trace --finetune qlora` (FSDP2 / replicate() on a fake world of 4) at 2,048 tokens, where
    gemm_4bit dequantises: estimate (framework convention, torch) within 3% of the traced peak."""
    pytest.importorskip("peft")
    pytest.importorskip("bitsandbytes")
    from zeroplan.trace import compare

    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMALL_LLAMA))
    result = compare.run(compare.TraceRequest(model=str(config), gpus=4, stage=stage, seq_len=2048,
                                              finetune="qlora", lora_rank=8, layers_to_trace=0, recompute=recompute))
    assert result.trace["categories"]["parameters"] > 0
    assert abs(result.error) < 0.03, (stage, recompute, result.error, result.trace["categories"], result.estimate)


MOE_CONFIGS = {
    "mixtral": {"model_type": "mixtral", "hidden_size": 256, "intermediate_size": 512, "num_local_experts": 4,
                "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                "vocab_size": 1000, "max_position_embeddings": 4096},
    "qwen3_moe": {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512,
                  "moe_intermediate_size": 128, "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
                  "max_position_embeddings": 4096, "decoder_sparse_step": 1, "mlp_only_layers": []},
    "deepseek_v3": {"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 512,
                    "moe_intermediate_size": 128, "n_routed_experts": 8, "n_shared_experts": 1,
                    "num_experts_per_tok": 2, "first_k_dense_replace": 1, "num_hidden_layers": 3,
                    "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32,
                    "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "n_group": 1,
                    "topk_group": 1, "vocab_size": 1000, "max_position_embeddings": 4096},
}


@pytest.mark.parametrize("family", sorted(MOE_CONFIGS))
def test_qlora_on_a_mixture_of_experts_quantises_what_bitsandbytes_quantises(family):
    """transformers' replace_with_bnb_linear converts nn.Linear modules only: the attention projections, dense
    layers' and shared experts' MLPs; the fused 3-D routed experts stay 16-bit. quantised_storage counts the same."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("bitsandbytes")
    from zeroplan.trace.hf_model import build_model
    from zeroplan.trace.qlora import quant_state_tensors, quantise_linears

    config = MOE_CONFIGS[family]
    model = build_model(config, None, "sdpa", torch.bfloat16, "none")
    quantised = quantise_linears(model, True)
    spec = model_spec_from_hf_config(config, family, source="test")
    packed = sum(m.weight.numel() * m.weight.element_size() for m in quantised)
    constants = sum(t.numel() * t.element_size() for t in quant_state_tensors(quantised))
    # bf16 quant storage: ((n + 1) // 4) elements of 2 bytes; quantised_storage counts ⌈n/2⌉ bytes (n even here)
    assert (packed, constants) == quantised_storage(spec.shape, "nf4", True)
    counts = finetune_counts(spec, Finetune(mode="qlora", targets=("q_proj", "k_proj", "v_proj", "o_proj")))
    assert counts.quantised_tensors == len(quantised)
    assert counts.largest_quantised == max(m.weight.numel() * 4 for m in quantised)


def _expert_lora(config: dict, layers: int, targets: tuple[str, ...], rank: int):
    """PEFT's LoRA on q_proj and, by target_parameters, the fused expert tensors the MLP targets name."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from zeroplan.trace.hf_model import build_model

    model = build_model({**config, "num_hidden_layers": layers}, None, "sdpa", torch.bfloat16, "none")
    names = {"gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "down_proj": "down_proj"}
    parameters = sorted({f"mlp.experts.{names[t]}" for t in targets if t in names})
    lora = peft.LoraConfig(r=rank, target_modules=["q_proj"], target_parameters=parameters or None, lora_dropout=0.0)
    return peft.get_peft_model(model, lora)


@pytest.mark.parametrize("family,targets", [("qwen3_moe", ("q_proj", "gate_proj", "up_proj", "down_proj")),
                                            ("mixtral", ("q_proj", "down_proj"))])
def test_expert_lora_counts_and_activations_match_peft(family, targets):
    """LoRA on the fused expert tensors (PEFT 0.21's target_parameters): the trainable count PEFT makes, and what
    one more layer saves for backward beyond LoRA on q_proj alone, on fake tensors, to the byte."""
    pytest.importorskip("torch")

    from zeroplan.core.memory.finetune import expert_adapter_bytes
    from zeroplan.core.memory.activations import ActivationConfig
    from zeroplan.trace.hf_model import grouped_mm_any_dtype, real_masking

    config, rank, seq = MOE_CONFIGS[family], 8, 256
    spec = model_spec_from_hf_config(config, family, source="test")
    finetune = Finetune(mode="lora", rank=rank, targets=targets)
    model = _expert_lora(config, config["num_hidden_layers"], targets, rank)
    assert finetune_counts(spec, finetune).trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)

    def saved(layers: int, with_experts: bool) -> int:
        model = _expert_lora(config, layers, targets if with_experts else ("q_proj",), rank)
        return saved_activation_bytes(model, config["vocab_size"], seq, real_masking(), grouped_mm_any_dtype())

    per_layer = (saved(3, True) - saved(2, True)) - (saved(3, False) - saved(2, False))
    activation = ActivationConfig(seq_len=seq, flash_attention=True, implementation="transformers")
    assert per_layer == expert_adapter_bytes(spec.shape, activation, finetune)


def test_expert_lora_refuses_what_is_not_modelled():
    from zeroplan.core.errors import InputError
    from zeroplan.core.model.adapters import adapted_experts

    deepseek = model_spec_from_hf_config(MOE_CONFIGS["deepseek_v3"], "deepseek", source="test")
    with pytest.raises(InputError):  # shared experts and a dense first layer
        adapted_experts(deepseek.shape, Finetune(mode="lora"))
    qwen = model_spec_from_hf_config(MOE_CONFIGS["qwen3_moe"], "qwen", source="test")
    with pytest.raises(InputError):  # gate and up are one fused tensor
        adapted_experts(qwen.shape, Finetune(mode="lora", targets=("gate_proj",)))


def test_estimate_within_3_percent_of_the_expert_lora_trace(tmp_path):
    """`zeroplan trace --finetune lora` on a mixture of experts with every linear targeted: PEFT's LoRA on the
    attention projections and, by target_parameters, on the fused expert tensors, under FSDP2 on 4 fake ranks."""
    pytest.importorskip("peft")
    from zeroplan.trace import compare

    config = tmp_path / "config.json"
    config.write_text(json.dumps({**MOE_CONFIGS["qwen3_moe"], "architectures": ["Qwen3MoeForCausalLM"],
                                  "num_hidden_layers": 4, "vocab_size": 32000, "tie_word_embeddings": False}))
    result = compare.run(compare.TraceRequest(model=str(config), gpus=4, stage=3, seq_len=1024, finetune="lora",
                                              lora_rank=8, layers_to_trace=0))
    assert result.trace["categories"]["optimizer_states"] == result.estimate["optimizer_states"]  # the adapters
    assert abs(result.error) < 0.03, (result.error, result.trace["categories"], result.estimate)


def _expert_gemm_flops(config: dict, targets: tuple[str, ...], rank: int, seq: int) -> tuple[int, int]:
    """(forward, backward) FLOPs of the batched and grouped matmuls PEFT's model runs (the expert GEMMs, the
    ParamWrapper folds and their gradients), counted from each kernel's operand shapes under FakeTensorMode."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from zeroplan.trace.hf_model import grouped_mm_any_dtype, real_masking

    counted = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
            name = func.__name__
            if name.startswith(("bmm", "baddbmm")):
                (b, m, k), (_, _, n) = shapes[-2:]
                counted[0] += 2 * b * m * k * n
            elif name.startswith("_grouped_mm"):
                a, w = shapes[0], shapes[1]  # (rows, k) by (groups, k, n), or (m, rows) by (rows, n): weight gradient
                counted[0] += 2 * a[0] * a[1] * w[-1]
            return func(*args, **(kwargs or {}))

    model = _expert_lora(config, 1, targets, rank)
    with real_masking(), grouped_mm_any_dtype(), FakeTensorMode(allow_non_fake_inputs=True):
        model.to_empty(device="cpu")
        ids = torch.randint(0, config["vocab_size"], (1, seq))
        with Count():
            loss = model(input_ids=ids, labels=ids).loss
            forward = counted[0]
            loss.backward()
    return forward, counted[0] - forward


@pytest.mark.parametrize("targets", [("q_proj", "gate_proj", "up_proj", "down_proj"), ("q_proj", "down_proj")])
def test_expert_lora_step_flops_match_peft_kernels(targets):
    """What LoRA on the fused expert tensors adds to a layer's matmuls, beyond LoRA on q_proj alone, is what the step
    time prices (FinetuneFlops.expert_adapter_flops): PEFT 0.21's folds forward, the merged weights' gradients over
    the routed rows and the factors' gradients backward, counted from the kernels PEFT runs."""
    from zeroplan.core.timing.step_time import FinetuneFlops

    config, rank, seq = MOE_CONFIGS["qwen3_moe"], 8, 256
    spec = model_spec_from_hf_config({**config, "num_hidden_layers": 1}, "qwen", source="test")
    forward, backward = (a - b for a, b in zip(_expert_gemm_flops(config, targets, rank, seq),
                                               _expert_gemm_flops(config, ("q_proj",), rank, seq)))
    tuned = FinetuneFlops.of(spec, Finetune(mode="lora", rank=rank, targets=targets))
    assert tuned.expert_adapter_flops(seq * config["num_experts_per_tok"]) == (forward, backward)
    assert forward > 0 and backward > forward

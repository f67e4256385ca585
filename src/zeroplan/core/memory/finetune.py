"""Memory of a fine-tuning run (LoRA, QLoRA, frozen layers) per GPU, in integer bytes: docs/formulas.md §21.

Model states (paper convention, per option):
- trainable parameters (adapters, or the unfrozen base): parameters, gradients and optimizer states as full
  training keeps them (core.memory.model_states.paper_model_states over the trainable count). PEFT keeps
  adapters in fp32 (autocast_adapter_dtype=True) with fp32 gradients and Adam states: 4 + 4 + 8 = 16 bytes,
  the same 16 as the paper's 2 + 2 + 12 for mixed precision.
- frozen parameters: no gradient, no optimizer state, only their storage: the precision's weight dtype, or the
  quantised decoder linears of QLoRA (core.model.adapters.quantised_storage). ZeRO-3 and FSDP shard frozen
  weights like any other (DeepSpeed's stage3.py partitions every parameter; fully_shard chunks every tensor);
  ZeRO-1/2 and DDP keep them whole on every rank. QLoRA under FSDP (bnb_4bit_quant_storage=bfloat16, Answer.AI
  fsdp_qlora) shards the packed 4-bit weights; the quantisation constants (the QuantState, not a parameter)
  stay whole on every rank. Parameter offload (ZeRO-3) moves the frozen shard to the host too.
Buffers: gradient buckets and the optimizer's fp32 gradient copy over the trainable parameters only; at stage 3
the gathered layer in its storage bytes; QLoRA's dequantised weight (the largest linear in 16 bits) while a
quantised linear runs (bitsandbytes dequantize_4bit before the matmul, forward and backward).
Activations (transformers code, measured on fake tensors with PEFT 0.21, tests/test_finetune.py): a frozen
layer's norms no longer keep their normalised x and x·weight (no weight gradient needs them) and frozen linears
no longer keep their inputs: the down_proj input goes (the q/k/v and gate/up inputs are the norms' x·weight; the
o_proj input is kept by attention anyway). Each adapter keeps its lora_A input and the rank-r intermediate in
the adapter dtype: with fp32 adapters on a 16-bit base PEFT casts x to fp32 in every adapted linear (one copy
each, 4·in bytes a token), in the same dtype the input tensor itself, once per distinct input. Layers before
anything trainable (frozen embeddings, then frozen layers) keep nothing.
"""

from __future__ import annotations

from zeroplan.core.errors import InputError, ref
from zeroplan.core.memory.activations import ActivationConfig, decoder_layer_bytes, loss_overlap_bytes
from zeroplan.core.memory.deepspeed_buffers import (
    BufferConfig, gpu_buffer_bytes, stage3_gathered_params,
)
from zeroplan.core.memory.framework_partition import ParamSpec, framework_partition
from zeroplan.core.memory.framework_states import FRAMEWORK_BY_STAGE, TORCH_STEP_TENSOR_BYTES
from zeroplan.core.memory.model_states import paper_model_states, sharded
from zeroplan.core.model.adapters import (
    FP32, NF4_BLOCK, Finetune, FinetuneCounts, Linear, adapted_experts, adapted_linears, finetune_counts, layer_linears,
    lora_params, quantised_storage,
)
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.options import Option
from zeroplan.core.precision import BytesPerParam, bytes_per_param
from zeroplan.core.units import ceil_div

COMPUTE_BYTES = 2  # QLoRA dequantises to the 16-bit compute dtype (bnb_4bit_compute_dtype=bfloat16)
TORCHTUNE_OUTPUT_CHUNKS = 8  # CEWithChunkedOutputLoss(num_output_chunks=8), torchtune/modules/loss
ADAM_STATES = 2  # exp_avg and exp_avg_sq, made with zeros_like(param): in the adapters' own dtype


def trainable_bytes(per_param: BytesPerParam, finetune: Finetune) -> BytesPerParam:
    """Bytes per trainable parameter: PEFT's fp32 adapters (4 + 4 + Adam's 8, the paper's 16 of mixed precision:
    per_param as given), or torchtune's recipe, whose adapters, gradients and torch AdamW states are bf16 like the
    model it builds (dtype: bf16): 2 + 2 + 2·2. Other optimizers keep their own state bytes."""
    if finetune.recipe != "torchtune" or not finetune.adapters:
        return per_param
    states = ADAM_STATES * finetune.adapter_bytes if per_param.optimizer in ("adam", "adamw") else per_param.optimizer_states
    return BytesPerParam(per_param.precision, per_param.optimizer, finetune.adapter_bytes, finetune.adapter_bytes, states)


def loss_bytes(model: ModelSpec, config: ActivationConfig, finetune: Finetune) -> int:
    """The loss's bytes at the start of backward, which a layer's backward no longer holds. transformers' loss
    (loss_overlap_bytes: the fp32 log-softmax and its gradient's two fp32 temporaries, 12 bytes a token per
    vocabulary entry); torchtune's CEWithChunkedOutputLoss computes the output projection in 8 chunks and
    cross-entropy one chunk at a time (compiled with the upcast, torchtune/modules/loss/ce_chunked_output_loss.py):
    the bf16 logits of every chunk stay saved (2 bytes), one chunk's fp32 gradient and its bf16 cast are alive (6
    bytes over an eighth of the tokens)."""
    overlap = loss_overlap_bytes(model, config)
    if finetune.recipe != "torchtune" or not overlap:
        return overlap
    tokens, vocab = config.seq_len * config.micro_batch, model.require_shape("finetune", "", "").vocab
    return vocab * (COMPUTE_BYTES * tokens + (FP32 + COMPUTE_BYTES) * ceil_div(tokens, TORCHTUNE_OUTPUT_CHUNKS))


def frozen_storage(model: ModelSpec, finetune: Finetune, counts: FinetuneCounts,
                   weight_bytes: int) -> tuple[int, int, int]:
    """(plain frozen bytes, packed quantised bytes, quantisation-constant bytes) of the whole model."""
    plain = counts.frozen_plain * weight_bytes
    if finetune.storage is None or model.shape is None:
        return plain, 0, 0
    packed, constants = quantised_storage(model.shape, finetune.storage, finetune.double_quant)
    return plain, packed, constants


def finetune_model_states(option: Option, model: ModelSpec, finetune: Finetune, counts: FinetuneCounts,
                          shard: int, dp: int, per_param: BytesPerParam, gpus_in_node: int) -> dict[str, int]:
    """Per GPU (gpu/*) and per node (cpu/*, nvme/*): trainable states as paper_model_states gives them for the
    trainable count, plus gpu/params/frozen and gpu/params/quant_constants. `shard` is the parameters of the most
    loaded model-parallel shard; trainable and frozen parts scale with it (exact for tp = pp = 1)."""
    def part(count: int) -> int:
        return count if shard == model.params else ceil_div(count * shard, model.params)

    breakdown = paper_model_states(option, part(counts.trainable), dp, trainable_bytes(per_param, finetune), gpus_in_node)
    plain, packed, constants = frozen_storage(model, finetune, counts, per_param.params)
    plain_count = part(counts.frozen_plain)
    if option.stage == 3:
        frozen = sharded(per_param.params, plain_count, dp) + ceil_div(part(packed), dp)
    else:
        frozen = plain_count * per_param.params + part(packed)
    breakdown["gpu/params/frozen"] = frozen
    breakdown["gpu/params/quant_constants"] = part(constants)
    if option.offload_params != "none":
        breakdown["gpu/params/frozen"] = 0
        breakdown[f"{option.offload_params}/params/frozen"] = gpus_in_node * frozen
    return breakdown


def storage_bytes_per_param(model: ModelSpec, finetune: Finetune, counts: FinetuneCounts,
                            weight_bytes: int) -> tuple[int, int]:
    """(bytes, params) of the model as stored, trainable and frozen together: their ratio is what a gathered
    parameter costs on average (QLoRA's packed 4-bit weights under ZeRO-3/FSDP)."""
    plain, packed, _ = frozen_storage(model, finetune, counts, weight_bytes)
    return plain + packed + counts.trainable * weight_bytes, model.params


def finetune_gpu_buffers(option: Option, model: ModelSpec, finetune: Finetune, counts: FinetuneCounts,
                         shard: int, dp: int, largest_layer_params: int, per_param: BytesPerParam,
                         fp32_step_copy: bool, buffers: BufferConfig) -> dict[str, int]:
    """gpu_buffer_bytes over the trainable parameters (gradient buckets, the fp32 gradient partition), the
    stage-3 gathered layer in storage bytes, and QLoRA's dequantised weight."""
    trainable = counts.trainable if shard == model.params else ceil_div(counts.trainable * shard, model.params)
    largest_trainable = largest_layer_params
    if finetune.adapters and model.shape is not None:
        largest_trainable = max(lora_params(l, finetune.rank) for l in adapted_linears(model.shape, finetune))
    states = trainable_bytes(per_param, finetune)
    fp32_step_copy = fp32_step_copy and states is per_param  # torchtune steps its bf16 adapters as they are
    found = gpu_buffer_bytes(option.stage, trainable, dp, min(largest_trainable, trainable), states.params,
                             states.gradients, fp32_step_copy, option.offload_optimizer == "none", buffers)
    if option.stage == 3:
        stored, params = storage_bytes_per_param(model, finetune, counts, per_param.params)
        gathered = stage3_gathered_params(shard, largest_layer_params, buffers)
        found["gathered_parameters"] = ceil_div(gathered * stored, params)
    if finetune.storage is not None:
        found["dequantised_weight"] = dequantised_weight_bytes(model, finetune, counts)
    return found


def _input_copies(linears: tuple[Linear, ...], element: int, adapter: int, tokens: int, rank: int) -> int:
    """What the adapters of one layer keep for one micro-batch: lora_A's input and the rank-r intermediate."""
    intermediates = tokens * adapter * rank * len(linears)
    if adapter != element:  # PEFT casts x to the adapter dtype in each adapted linear: one copy each
        return tokens * adapter * sum(linear.in_features for linear in linears) + intermediates
    # the input tensor itself, once per distinct input; the o_proj input is kept by attention already
    inputs = {"q_proj": "attention", "k_proj": "attention", "v_proj": "attention", "gate_proj": "mlp",
              "up_proj": "mlp", "down_proj": "down"}
    widths = {inputs[linear.name]: linear.in_features for linear in linears if linear.name in inputs}
    return tokens * element * sum(widths.values()) + intermediates


def frozen_layer_savings(model: ModelSpec, config: ActivationConfig) -> int:
    """Bytes a frozen decoder layer no longer keeps for one micro-batch (without recompute): both norms'
    normalised x and x·weight (2·e·h each) and the down_proj input (e·f)."""
    shape = model.require_shape("finetune", "", "")
    tokens, e = config.seq_len * config.micro_batch, config.dtype_bytes
    return tokens * (4 * e * shape.hidden + e * shape.ffn)


def adapter_layer_bytes(model: ModelSpec, config: ActivationConfig, finetune: Finetune) -> int:
    """What one adapted layer's LoRA modules keep for one micro-batch (without recompute)."""
    shape = model.require_shape("finetune", "", "")
    tokens = config.seq_len * config.micro_batch
    return (_input_copies(adapted_linears(shape, finetune), config.dtype_bytes, finetune.adapter_bytes, tokens,
                          finetune.rank) + expert_adapter_bytes(shape, config, finetune))


def expert_adapter_bytes(shape, config: ActivationConfig, finetune: Finetune) -> int:
    """What LoRA on one MoE layer's fused expert tensors keeps for one micro-batch (PEFT 0.21's ParamWrapper,
    measured on fake tensors, tests/test_finetune_qlora_trace.py): the forward folds W + s·B·A into one baddbmm
    per tensor (_LoraFactorsProxy), a new E × out × in weight in the compute dtype that the experts' grouped GEMM
    saves for backward, with the routed tokens' input (T·k rows, which a frozen weight's GEMM does not save) and the
    two factors cast to the compute dtype (E·r·(in + out)): e·(E·in·out + T·k·in + E·r·(in + out)) per tensor."""
    e, routed = config.dtype_bytes, config.seq_len * config.micro_batch * (shape.experts_per_token or 1)
    return sum(e * (adapter.params + routed * adapter.in_features
                    + finetune.rank * adapter.experts * (adapter.in_features + adapter.out_features))
               for adapter in adapted_experts(shape, finetune))


def finetune_activations(model: ModelSpec, config: ActivationConfig, finetune: Finetune, counts: FinetuneCounts,
                         breakdown: dict[str, int]) -> dict[str, int]:
    """The activation breakdown of full training (activation_memory's, with gpu/ keys) adjusted for frozen and
    adapted layers: gpu/activations/layers and, with full recompute, the recomputed layer's working set."""
    layer, layer_none = decoder_layer_bytes(model, config)
    savings = frozen_layer_savings(model, config)
    adapters = adapter_layer_bytes(model, config, finetune) if finetune.adapters else 0
    shape = model.require_shape("finetune", "", "")
    live_frozen = counts.frozen_layers - counts.inert_layers  # frozen layers some gradient still flows through
    trained = shape.layers - counts.frozen_layers
    if finetune.adapters:  # every layer is frozen; the trained ones carry adapters
        per_trained = layer_none - savings + adapters
    else:
        per_trained = layer_none
    per_frozen = layer_none - savings
    adjusted = dict(breakdown)
    overlap = loss_bytes(model, config, finetune)
    if "gpu/activations/output_and_loss" in adjusted:  # the recipe's loss in place of transformers'
        adjusted["gpu/activations/output_and_loss"] += overlap - loss_overlap_bytes(model, config)
    if config.recompute == "full":  # each layer keeps its input; backward recomputes one layer at a time
        adjusted["gpu/activations/layers"] = (trained + live_frozen) * layer
        working = max(per_trained, per_frozen if live_frozen else 0)
        if "gpu/activations/recompute_working_set" in breakdown:
            adjusted["gpu/activations/recompute_working_set"] = max(0, working - overlap)
        return adjusted
    if config.recompute != "none":  # selective: the same layer-level changes on the selective row
        per_trained += layer - layer_none
        per_frozen += layer - layer_none
    adjusted["gpu/activations/layers"] = trained * per_trained + live_frozen * per_frozen
    if finetune.adapters and trained and config.dtype_bytes == 2:
        adjusted["gpu/activations/layers"] -= first_layer_input_savings(model, config)
    return adjusted


def _recomputed_layer(model: ModelSpec, config: ActivationConfig, finetune: Finetune, counts: FinetuneCounts) -> int:
    """What a layer recomputed in backward keeps (full recompute; 0 otherwise): finetune_activations' working set."""
    if config.recompute != "full":
        return 0
    layer, layer_none = decoder_layer_bytes(model, config)
    savings = frozen_layer_savings(model, config)
    per_trained = layer_none - savings + (adapter_layer_bytes(model, config, finetune) if finetune.adapters else 0)
    live_frozen = counts.frozen_layers - counts.inert_layers
    return max(per_trained, layer_none - savings if live_frozen else 0)


def adapter_peak_adjustment(model: ModelSpec, config: ActivationConfig, finetune: Finetune, counts: FinetuneCounts,
                            activations: dict[str, int], gradients: int, dequantised: int) -> int:
    """LoRA and QLoRA under torch's wrappers: bytes counted in the parts that are not alive together at the peak
    (0 or less). The peak is the larger of two moments (measured by `zeroplan trace --finetune lora|qlora`):
    the loss's backward (the activations' backward start, before any adapter gradient exists: each step clears
    them, set_to_none, and no linear is dequantised), and a decoder layer's backward (the loss temporaries freed,
    the layer recomputed under full recompute, the adapters' gradients and QLoRA's dequantised weight alive)."""
    counted = sum(activations.values())
    recomputed = _recomputed_layer(model, config, finetune, counts)
    overlap = loss_bytes(model, config, finetune)
    loss_moment = counted - max(0, recomputed - overlap) if recomputed else counted
    layer_moment = loss_moment - overlap + recomputed + gradients + dequantised
    return max(loss_moment, layer_moment) - (counted + gradients + dequantised)


def first_layer_input_savings(model: ModelSpec, config: ActivationConfig) -> int:
    """The first adapted layer of a frozen 16-bit base gets an input no gradient flows back to: its input norm
    keeps nothing of what an adapted layer's keeps, (8·h + 4) bytes a token less (measured by `zeroplan trace
    --finetune lora` on Llama shapes, hidden 256 and 512, ffn 688 and 1376: the norm's fp32 upcast and rsqrt,
    4·h + 4, and a second fp32 h-wide tensor)."""
    shape = model.require_shape("finetune", "", "")
    return config.seq_len * config.micro_batch * (8 * shape.hidden + 4)


def adapter_param_specs(model: ModelSpec, finetune: Finetune):
    """PEFT's LoRA tensors as ParamSpecs: lora_A (r × in) and lora_B (out × r) of each adapted linear."""
    shape = model.require_shape("finetune", "", "")
    specs = []
    for layer in range(finetune.freeze_layers, shape.layers):
        for linear in adapted_linears(shape, finetune):
            prefix = f"layers.{layer}.{linear.name}"
            specs += [ParamSpec(f"{prefix}.lora_A", (finetune.rank, linear.in_features)),
                      ParamSpec(f"{prefix}.lora_B", (linear.out_features, finetune.rank))]
        for adapter in adapted_experts(shape, finetune):  # PEFT's ParamWrapper: r·E rows / columns
            prefix, rows = f"layers.{layer}.experts.{adapter.name}", finetune.rank * adapter.experts
            specs += [ParamSpec(f"{prefix}.lora_A", (rows, adapter.in_features)),
                      ParamSpec(f"{prefix}.lora_B", (adapter.out_features, rows))]
    return specs


def dequantised_weight_bytes(model: ModelSpec, finetune: Finetune, counts: FinetuneCounts) -> int:
    """QLoRA's transient while a quantised linear runs, for the largest one: its 16-bit dequantised copy and, with
    double quantisation, the fp32 absmax dequantised beside it (forward, bitsandbytes/backends/cuda/ops.py
    _dequant_linear_fallback: the dequantised absmax and absmax + offset, 4 bytes a block each)."""
    if finetune.storage is None:
        return 0
    blocks = ceil_div(counts.largest_quantised, NF4_BLOCK) if finetune.storage == "nf4" else 0
    nested = 2 * FP32 * blocks if finetune.double_quant else 0
    return COMPUTE_BYTES * counts.largest_quantised + nested


def quantised_param_specs(parameters: tuple, model: ModelSpec) -> list:
    """The model's tensors as FSDP-QLoRA stores them (bnb_4bit_quant_storage=bfloat16, Answer.AI fsdp_qlora and
    HF's FSDP+QLoRA guide): each decoder linear's weight of n elements becomes bitsandbytes' packed storage,
    ((n + 1) // 4, 1) bf16 elements (bitsandbytes::quantize_4bit's fake kernel: (n + 1) // (itemsize · 2) rows),
    which FSDP chunks along dim 0 like any tensor; everything else keeps its shape."""
    shape = model.require_shape("finetune", "", "")
    linears = {linear.name for linear in layer_linears(shape)}
    specs = []
    for spec in parameters:
        if spec.name.split(".")[0] in linears and len(spec.shape) == 2:
            spec = ParamSpec(spec.name, ((spec.numel + 1) // (2 * COMPUTE_BYTES), 1), spec.tied_to)
        specs.append(spec)
    return specs


def torch_finetune_states(option: Option, parameters: tuple, model: ModelSpec, finetune: Finetune, dp: int,
                          per_param: BytesPerParam) -> dict[str, int]:
    """LoRA and QLoRA under torch's wrappers (framework convention, torch), per GPU: the frozen base in its own
    16-bit dtype (QLoRA: the decoder linears in bitsandbytes' packed 4-bit storage, quantised_param_specs, and
    their QuantStates whole on every rank) partitioned as DDP/ZeroRedundancyOptimizer (whole) or FSDP2 (dim-0
    chunks, padded) partition it; PEFT's fp32 adapters with fp32 gradients, AdamW states and a 4-byte step per
    tensor, partitioned the same way; and the compute copies torch's wrappers gather, in the tensors' own storage
    dtypes (no precision policy casts them): stage 3 the root (embeddings, final norm, head) kept after forward
    and one decoder layer, stages 0-2 every parameter (replicate() and FSDP2 without resharding keep each gathered
    copy from forward to backward, as core.memory.torch_buffers counts for full training); QLoRA's dequantised
    weight (dequantised_weight_bytes). Measured by `zeroplan trace --finetune lora|qlora`."""
    name = FRAMEWORK_BY_STAGE["torch"][option.stage]
    stage = None
    weight = per_param.params  # the frozen base: bf16 in mixed precision, fp32 otherwise
    frozen_bytes = BytesPerParam(per_param.precision, per_param.optimizer, weight, 0, 0)
    stored = quantised_param_specs(parameters, model) if finetune.storage else list(parameters)
    frozen = framework_partition(stored, dp, frozen_bytes, name, stage=stage)
    adapters = adapter_param_specs(model, finetune)
    adapter_bytes = trainable_bytes(bytes_per_param("fp32", per_param.optimizer), finetune)
    trainable = framework_partition(adapters, dp, adapter_bytes, name, stage=stage,
                                    per_tensor_state_bytes=TORCH_STEP_TENSOR_BYTES.get(per_param.optimizer, 0))
    rank = trainable.most_loaded_rank
    breakdown = {f"gpu/{component}": trainable.breakdown[f"rank{rank}/gpu/{component}"]
                 for component in ("params", "gradients", "optimizer_states")}
    breakdown["gpu/params/frozen"] = frozen.breakdown[f"rank{frozen.most_loaded_rank}/gpu/params"]
    shape, layout = model.require_shape("finetune", "", ""), model.layout
    adapter_total = sum(spec.numel for spec in adapters)
    counts = finetune_counts(model, finetune)
    quantised_saving = 0  # bytes a gathered copy saves where the linears are stored in 4 bits
    if finetune.storage is not None:
        packed, constants = quantised_storage(shape, finetune.storage, finetune.double_quant)
        breakdown["gpu/params/quant_constants"] = constants
        quantised_saving = counts.quantised * weight - packed
    if option.stage == 3 and layout is not None:
        per_layer_adapters = adapter_total // max(1, shape.layers - finetune.freeze_layers)
        copies = ((layout.input_params + layout.output_params + layout.layer_params) * weight
                  - quantised_saving // shape.layers + finetune.adapter_bytes * per_layer_adapters)
    else:
        copies = model.params * weight - quantised_saving + finetune.adapter_bytes * adapter_total
    breakdown["gpu/buffers/compute_copies"] = copies
    if finetune.storage is not None:
        breakdown["gpu/buffers/dequantised_weight"] = dequantised_weight_bytes(model, finetune, counts)
    return breakdown

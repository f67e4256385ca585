"""The bridge from a check context to zeroplan's planner: the environment a config runs in, and the
EstimateInputs for it (only the fields this version of the planner has)."""

from __future__ import annotations

from zeroplan.inputs import presets
from zeroplan.deepspeed.config_view import Environment, _as_count
from zeroplan.deepspeed.context import CheckContext
from zeroplan.core.memory.budget import MemoryBudget
from zeroplan.core.model.spec import ModelSpec
from zeroplan.inputs.sections import ModelInputs
from zeroplan.inputs.training import resolve_model
from zeroplan.inputs.hardware import DEFAULT_GPU
from zeroplan.inputs.estimate_inputs import EstimateInputs

# DeepSpeed optimizer types -> zeroplan's optimizer names (by the state each keeps per parameter).
OPTIMIZER_NAMES = {
    "adam": "adam", "adamw": "adamw", "fusedadam": "adam", "cpuadam": "adam", "deepspeedcpuadam": "adam",
    "onebitadam": "adam", "zerooneadam": "adam", "lamb": "adam", "onebitlamb": "adam",
    "muadam": "adam", "muadamw": "adamw", "sgd": "sgd", "musgd": "sgd-momentum",
    "lion": "sgd-momentum", "adagrad": "sgd-momentum",  # one fp32 state each, like momentum
}


def gpus_per_node(context: CheckContext) -> int | None:
    if context.gpus_per_node is not None:
        return context.gpus_per_node
    if context.cluster is not None:
        return presets.cluster(context.cluster).gpus_per_node
    if context.gpu is not None:
        node = presets.default_cluster(context.gpu)
        if node is not None:
            return presets.entry("clusters", node).gpus_per_node
    return None


def model_spec(context: CheckContext) -> ModelSpec:
    """The ModelSpec the planner would use (a preset, a config.json path, or a bare count)."""
    return resolve_model(ModelInputs(params=context.params, model=context.model))


def hidden_size(context: CheckContext) -> int | None:
    if context.hidden is not None:
        return context.hidden
    if context.model is None:
        return None
    shape = model_spec(context).shape
    return shape.hidden if shape is not None else None


def environment(context: CheckContext, config: dict) -> Environment:
    tp_from_config = _as_count((config.get("tensor_parallel") or {}).get("autotp_size")) \
        if isinstance(config.get("tensor_parallel"), dict) else None
    sp = _as_count(config.get("sequence_parallel_size"))
    ep, etp = expert_sizes(context, config)
    return Environment(
        world=context.gpus, tp=context.tp or (tp_from_config if tp_from_config and tp_from_config > 0 else 1),
        pp=context.pp or 1, sp=sp if sp and sp > 0 else 1, gpus_per_node=gpus_per_node(context),
        hidden=hidden_size(context), micro_batch=context.micro_batch, grad_accum=context.grad_accum,
        global_batch=context.global_batch, precision=context.precision, ep=ep, etp=etp)


def expert_sizes(context: CheckContext, config: dict) -> tuple[int, int]:
    """(ep, etp): --ep/--etp or a plan file's, else DeepSpeed AutoEP's expert_parallel block when enabled
    (autoep_size, expert_tensor_parallel_size: module_inject/auto_ep_config.py parse_autoep_config), else 1."""
    block = config.get("expert_parallel") if isinstance(config, dict) else None
    ep = etp = None
    if isinstance(block, dict) and block.get("enabled") is True:
        ep = _as_count(block.get("autoep_size", 1))
        etp = _as_count(block.get("expert_tensor_parallel_size", 1))
    return (context.ep or (ep if ep and ep > 0 else 1), context.etp or (etp if etp and etp > 0 else 1))


def gpu_spec(context: CheckContext):
    """The GPU named (flag, plan or cluster), else the planner's default GPU."""
    if context.cluster is not None:
        return presets.cluster(context.cluster).gpu
    return presets.gpu(context.gpu or DEFAULT_GPU)


def gpu_capacity(context: CheckContext) -> int:
    """The GPU's memory in bytes: the one named (flag, plan or cluster), else the planner's default GPU,
    so the bucket rule and the memory rules judge the same GPU."""
    if context.gpu_memory_bytes is not None:
        return context.gpu_memory_bytes
    if context.cluster is not None:
        return presets.cluster(context.cluster).gpu.memory_bytes
    return presets.gpu(context.gpu or DEFAULT_GPU).memory_bytes


def usable_gpu_bytes(context: CheckContext) -> int:
    return MemoryBudget(gpu_capacity(context)).usable_gpu_bytes


def estimate_inputs(context: CheckContext, *, world: int, tp: int, pp: int, precision: str, optimizer: str,
                    stage: int | None = None, offload_optimizer: str | None = None,
                    offload_params: str | None = None, micro_batch: int | None = None,
                    grad_accum: int | None = None, buffers: dict | None = None, ep: int | None = None,
                    etp: int | None = None):
    """EstimateInputs for this context, passing only the fields this version of the planner has.

    The step's shape (sequence length, micro batch, recompute) goes only with --model: the planner sizes
    activations from the model's shape and refuses them for a bare --params count. The global batch is
    never passed: the batch identity is ZP001's to report, not an input error.
    """
    values = dict(gpus=world, params=context.params, model=context.model, gpu=context.gpu, cluster=context.cluster,
                  gpus_per_node=context.gpus_per_node, tp=tp, pp=pp, precision=precision, optimizer=optimizer,
                  stage=stage, offload_optimizer=offload_optimizer, offload_params=offload_params,
                  largest_layer_params=context.largest_layer_params, cpu_memory=context.cpu_memory,
                  nvme=context.nvme, gpu_memory=context.gpu_memory)
    extra: dict = {"grad_accum": grad_accum, **(buffers or {})}
    ep, etp = ep or context.ep or 1, etp or context.etp
    if ep > 1 or etp is not None:  # experts folded over the ranks (--ep/--etp, a plan file, AutoEP's block)
        extra.update(ep=ep, etp=etp)
    if context.capacity_factor is not None and context.model is not None:
        extra["capacity_factor"] = context.capacity_factor
    if context.model is not None:
        extra.update(seq_len=context.seq_len, micro_batch=micro_batch, recompute=context.recompute,
                     flash_attention=context.flash_attention, finetune=context.finetune,
                     lora_rank=context.lora_rank, lora_targets=context.lora_targets, quant=context.quant,
                     double_quant=context.double_quant, freeze=context.freeze,
                     finetune_recipe=context.finetune_recipe)
    values.update({k: v for k, v in extra.items() if v is not None})
    return EstimateInputs.of(units=context.units, **values)


def planner_buffers(reduce: int, allgather: int, prefetch: int, max_live: int, overlap_comm: bool | None,
                    sub_group_size: int | None = None) -> dict:
    """Bucket settings as the planner's inputs (element counts, at least 1: DeepSpeed allows 0, the planner not)."""
    values = {"reduce_bucket_size": max(1, reduce), "allgather_bucket_size": max(1, allgather),
              "prefetch_bucket_size": max(1, prefetch), "max_live_parameters": max(1, max_live),
              "overlap_comm": overlap_comm}
    if sub_group_size is not None:
        values["sub_group_size"] = max(1, sub_group_size)
    return values


def optimizer_name(config: dict, context: CheckContext) -> str:
    block = config.get("optimizer")
    kind = block.get("type") if isinstance(block, dict) else None
    if isinstance(kind, str):
        return OPTIMIZER_NAMES.get(kind.strip().lower().replace("_", ""), "adam")
    return (context.optimizer or "adam").strip().lower()


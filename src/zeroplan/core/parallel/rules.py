"""What a model and a parallel layout must satisfy, for every command (estimate, plan, sweep, check,
export): one set of rules, each with the reason it is checked (docs/formulas.md §17.1).

- tp divides the attention heads and the key/value heads (Megatron-LM splits whole heads; it refuses
  num_query_groups not divisible by tp);
- pp is at most the layer count (a pipeline stage holds at least one layer);
- sequence parallelism needs the sequence length divisible by tp (Megatron scatters the sequence);
- context parallelism needs the sequence length divisible by 2·cp (ring attention splits it into 2·cp chunks
  so every rank gets a balanced share of the causal mask, as Megatron-Core and torchtitan do);
- expert parallelism (Megatron-Core's folding, core.parallel.grid): ep and etp need a mixture-of-experts model;
  ep divides the routed experts (each EP rank holds E/ep whole experts); etp divides one expert's MLP width
  (Megatron splits its fc1/fc2 like a dense MLP's); ep × etp divides a pipeline stage's ranks (checked by
  ParallelDims, naming both factors);
- hybrid sharding with experts (FSDP2 HSDP as torchtitan lays it out): a shard group of dp_shard·tp ranks must hold
  whole expert-parallel groups, ep × etp dividing dp_shard × tp, so the experts shard over dp_shard·tp/(ep·etp)
  ranks ("efsdp") and replicate over the same dp/dp_shard replicas as the dense parameters
  (check_hybrid_experts, naming every factor);
- an EP group across nodes runs (DeepSeek-V3 spreads EP 64 over 8 nodes), its all-to-all on the NICs: a
  warning in estimate, priced by plan;
- more than one node means whole nodes (launchers start the same number of ranks on each);
- a tensor-parallel group inside one node is the norm: across nodes it runs, slowly (a warning in
  estimate; plan leaves such layouts out unless asked).
"""

from __future__ import annotations

from zeroplan.core.errors import InputError, ref
from zeroplan.core.model.experts import expert_params
from zeroplan.core.model.spec import ModelSpec
from zeroplan.core.parallel.grid import ParallelDims

# Reasons a layout is ruled out (plan counts them by these texts).
TP_HEADS = "tp does not divide the attention heads"
TP_KV_HEADS = "tp does not divide the key/value heads"
TP_CROSSES_NODES = "tp spans more than one node"
PP_LAYERS = "pp exceeds the layers"
SP_SEQUENCE = "sequence parallelism needs the sequence length divisible by tp"
CP_SEQUENCE = "context parallelism needs the sequence length divisible by 2 × cp"
EP_DENSE = "ep or etp needs a mixture-of-experts model"
EP_EXPERTS = "ep does not divide the experts"
ETP_FFN = "etp does not divide the expert MLP width"
HYBRID_EXPERTS = "hybrid shard group does not hold whole expert-parallel groups (ep × etp must divide dp_shard × tp)"
# Longest sequence any command accepts: far past real runs, and it keeps s² attention terms exact.
MAX_SEQ_LEN = 10**8


def model_layout_problem(model: ModelSpec, parallel: ParallelDims, *, seq_len: int | None = None,
                         sequence_parallel: bool = False) -> str | None:
    """The first rule this model, layout and step break (one of the reasons above), or None."""
    tp, pp, shape = parallel.tp, parallel.pp, model.shape
    if shape is not None and shape.heads % tp:
        return TP_HEADS
    if shape is not None and shape.kv_heads % tp:
        return TP_KV_HEADS
    if shape is not None and pp > shape.layers:
        return PP_LAYERS
    if sequence_parallel and seq_len is not None and seq_len % tp:
        return SP_SEQUENCE
    return expert_layout_problem(model, parallel)


def expert_layout_problem(model: ModelSpec, parallel: ParallelDims) -> str | None:
    """EP_DENSE, EP_EXPERTS or ETP_FFN for the experts' cut of the grid, else None."""
    if not parallel.has_experts_grid:
        return None
    split = expert_params(model.shape)
    if split is None:
        return EP_DENSE
    if split.experts % parallel.ep:
        return EP_EXPERTS
    if split.expert_ffn % parallel.etp:
        return ETP_FFN
    return None


def context_parallel_problem(seq_len: int, cp: int) -> str | None:
    """CP_SEQUENCE when a sequence cannot be cut into 2·cp equal chunks, else None."""
    if cp > 1 and seq_len % (2 * cp):
        return CP_SEQUENCE
    return None


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def check_model_layout(model: ModelSpec, parallel: ParallelDims, *, seq_len: int | None = None,
                       sequence_parallel: bool = False) -> None:
    """Raise the InputError for the first broken rule, naming the values and a fix."""
    problem = model_layout_problem(model, parallel, seq_len=seq_len, sequence_parallel=sequence_parallel)
    tp, name = parallel.tp, model.name
    if problem is None:
        return
    if problem == SP_SEQUENCE and seq_len is not None:
        raise InputError("seq_len", f"{seq_len} is not divisible by tp({tp}), as sequence parallelism needs",
                         f"use a multiple of {tp}, e.g. {seq_len - seq_len % tp or tp}")
    # Every other rule is one of the model's shape.
    shape = model.require_shape("model", f"{name} has no shape", "use a preset or config.json")
    if problem == TP_HEADS:
        raise InputError("tp", f"tp({tp}) does not divide the {shape.heads} attention heads of {name}",
                         f"use a tp that divides {shape.heads}: {_divisors(shape.heads)}")
    if problem == TP_KV_HEADS:
        kv = shape.kv_heads
        raise InputError("tp", f"tp({tp}) does not divide the {kv} key/value heads of {name}",
                         f"use a tp that divides {kv}: {_divisors(kv)}")
    if problem == EP_DENSE:
        flag = "ep" if parallel.ep > 1 else "etp"
        raise InputError(flag, f"ep({parallel.ep}) / etp({parallel.etp}) cut experts, and {name} has none "
                         "(a dense model)", f"drop {ref('ep')}/{ref('etp')}, or use a mixture-of-experts model")
    split = expert_params(shape)
    if problem == EP_EXPERTS and split is not None:
        raise InputError("ep", f"ep({parallel.ep}) does not divide the {split.experts} experts of {name}",
                         f"use an ep that divides {split.experts}: {_divisors(split.experts)}")
    if problem == ETP_FFN and split is not None:
        raise InputError("etp", f"etp({parallel.etp}) does not divide the expert MLP width {split.expert_ffn} of "
                         f"{name}", f"use an etp that divides {split.expert_ffn}")
    if problem == PP_LAYERS:
        raise InputError("pp", f"pp({parallel.pp}) is more than the {shape.layers} layers of {name}",
                         f"use at most {ref('pp', shape.layers)}")
    raise AssertionError(problem)  # pragma: no cover - every reason above has its message


def check_whole_nodes(parallel: ParallelDims) -> None:
    """A run fills whole nodes once it needs more than one: torchrun, the deepspeed launcher and SLURM's
    usual layouts start the same number of ranks on every node."""
    world, per_node = parallel.world, parallel.gpus_per_node
    if world > per_node and world % per_node:
        below = world // per_node * per_node
        raise InputError("gpus", f"{world} GPUs do not fill whole nodes of {per_node} ({ref('gpus_per_node')})",
                         f"use {ref('gpus', below)} or {below + per_node}, or set {ref('gpus_per_node')} to what each "
                         "node has")


def cross_node_ep_warning(parallel: ParallelDims) -> str | None:
    if parallel.ep == 1 or parallel.ep_intra_node:
        return None
    return (f"warning: the ep({parallel.ep}) group spans {parallel.ep_nodes_spanned} nodes of "
            f"{parallel.gpus_per_node} GPUs: every MoE layer's all-to-all dispatch and combine crosses the network "
            "(priced on the NICs)")


def cross_node_tp_warning(parallel: ParallelDims) -> str | None:
    if parallel.tp_intra_node:
        return None
    return (f"warning: tp({parallel.tp}) spans more than one node of {parallel.gpus_per_node} GPUs: every layer's "
            "tensor-parallel collectives cross the network (Megatron keeps tp within a node)")


def hybrid_expert_problem(parallel: ParallelDims, dp_shard: int) -> str | None:
    """HYBRID_EXPERTS when a hybrid shard group of dp_shard (of the dp·cp ranks) × tp ranks cannot hold whole
    expert-parallel groups: torchtitan builds its sparse mesh ["pp", "dp_replicate", "efsdp", "ep"] with
    efsdp = dp_shard·cp·tp // ep (torchtitan/distributed/parallel_dims.py), so ep (× etp) must divide
    dp_shard × tp for the replicate dimension to be the dense parameters' too. None: it does, or no experts grid."""
    if dp_shard and parallel.has_experts_grid and (dp_shard * parallel.tp) % (parallel.ep * parallel.etp):
        return HYBRID_EXPERTS
    return None


def check_hybrid_experts(parallel: ParallelDims, dp_shard: int | None) -> None:
    """hybrid_expert_problem as an InputError naming every factor."""
    if dp_shard and hybrid_expert_problem(parallel, dp_shard):
        group, block = parallel.ep * parallel.etp, dp_shard * parallel.tp
        raise InputError("dp_shard", f"ep({parallel.ep}) × etp({parallel.etp}) = {group} does not divide "
                         f"dp_shard({dp_shard}) × tp({parallel.tp}) = {block}: each hybrid shard group must hold whole "
                         f"expert-parallel groups, its experts sharded over dp_shard·tp/(ep·etp) ranks and replicated "
                         f"over the dp({parallel.dp}) / dp_shard({dp_shard}) replicas like the dense parameters",
                         f"use a {ref('dp_shard')} whose product with tp is a multiple of {group}, or change "
                         f"{ref('ep')}/{ref('etp')}")

"""Each figure's formula with the user's numbers in it, for `zeroplan estimate --explain`."""

from __future__ import annotations

from zeroplan.core.evaluate.estimate import EstimateRequest, OptionEstimate, collectives_for
from zeroplan.core.units import format_bytes, format_count, format_rate
from zeroplan.core.memory.model_states import sharded

_STAGE_FORMULAS = {
    0: ("(P+G+K)Ψ", lambda p, g, k: ((p + g + k, 1),)),
    1: ("(P+G)Ψ + KΨ/N_d", lambda p, g, k: ((p + g, 1), (k, "N"))),
    2: ("PΨ + (G+K)Ψ/N_d", lambda p, g, k: ((p, 1), (g + k, "N"))),
    3: ("(P+G+K)Ψ/N_d", lambda p, g, k: ((p + g + k, "N"),)),
}


def _paper_lines(estimate: OptionEstimate, request: EstimateRequest, units: str) -> list[str]:
    split = request.expert_split
    if split is None:
        return [_group_line(estimate, request, units, request.shard_params, request.parallel.dp, "N_d", "")]
    dense = _group_line(estimate, request, units, split[0], request.zero_ranks, "N_d", "dense Ψ_d: ")
    experts = _group_line(estimate, request, units, split[1], request.expert_zero_ranks, "N_e", "routed experts Ψ_e: ")
    return [dense, "    " + experts.split(": ", 1)[1]]


def _group_line(estimate: OptionEstimate, request: EstimateRequest, units: str, shard: int, dp: int,
                ranks: str, group: str) -> str:
    """One parameter group's model states in the ZeRO paper's formula (N_e: the expert-data-parallel ranks)."""
    per_param = request.per_param
    symbolic, terms_of = _STAGE_FORMULAS[estimate.option.stage]
    symbolic = symbolic.replace("N_d", ranks)
    terms = terms_of(per_param.params, per_param.gradients, per_param.optimizer_states)
    numeric = " + ".join(f"{factor}×{format_count(shard)}" + (f"/{dp}" if divisor == "N" else "")
                         for factor, divisor in terms)
    values = [factor * shard if divisor == 1 else sharded(factor, shard, dp) for factor, divisor in terms]
    total = sum(values)
    line = (f"{estimate.option.label}: {group}model states = {symbolic} = {numeric} = "
            + " + ".join(format_bytes(v, units, 2) for v in values)
            + (f" = {format_bytes(total, units, 2)}" if len(values) > 1 else ""))
    if estimate.option.offloads and not group:
        moved = total - estimate.model_state_bytes
        line += f"; offload moves {format_bytes(moved, units, 2)} of it off the GPU"
    return line


def _comm_lines(estimate: OptionEstimate, request: EstimateRequest) -> list[str]:
    """One line per collective: its full buffer, the ring share each GPU sends, repeats, link and time."""
    if request.parallel.dp == 1:
        return [f"{estimate.option.label}: no data-parallel traffic (dp = 1)"]
    lines = []
    for collective in collectives_for(request, estimate.option):
        link = request.link_for(collective)
        repeats = f" × {collective.repeats} micro-batches" if collective.repeats > 1 else ""
        lines.append(f"{collective.name}: ({collective.ranks}−1)/{collective.ranks} × "
                     f"{format_bytes(collective.buffer_bytes, 'si', 2)}{repeats} = "
                     f"{format_bytes(collective.bytes_per_gpu, 'si', 2)} on the {collective.span.replace('_', '-')} "
                     f"link ({format_rate(link.bandwidth_bytes_per_s)}, {link.latency_s * 1e6:g} µs × "
                     f"{collective.ranks - 1} steps × {collective.calls * collective.repeats} launches) = "
                     f"{collective.seconds(link):.3f} s")
    elements = estimate.breakdown["comm/paper_elements"]
    lines.append(f"total {format_bytes(estimate.comm_bytes_per_gpu_per_step, 'si', 2)} per GPU per step, "
                 f"{estimate.comm_seconds_per_step:.3f} s; the ZeRO paper's large-N figure for one micro-batch: "
                 f"{3 if estimate.option.stage == 3 else 2}Ψ = {format_count(elements)} elements = "
                 f"{format_bytes(elements * request.per_param.params, 'si', 2)}")
    return lines


def explain_lines(request: EstimateRequest, estimates: list[OptionEstimate], units: str = "iec") -> list[str]:
    per_param, budget = request.per_param, request.budget
    lines = [
        f"Ψ = {request.shard_params:,} parameters per GPU shard (model {request.model.params:,}; "
        f"tp {request.parallel.tp}, pp {request.parallel.pp}), N_d = {request.parallel.dp}",
        *([] if request.expert_split is None else [
            f"with experts: Ψ_d = {request.expert_split[0]:,} dense parameters (split over tp), Ψ_e = "
            f"{request.expert_split[1]:,} routed-expert parameters (over ep {request.parallel.ep} × etp "
            f"{request.parallel.etp}), N_e = edp {request.parallel.edp}" + (
                f", of which {request.expert_zero_ranks} shard them in each hybrid shard group "
                f"(dp_shard {request.dp_shard} × tp {request.parallel.tp} / (ep × etp))" if request.dp_shard else "")]),
        f"P = {per_param.params}, G = {per_param.gradients}, K = {per_param.optimizer_states} bytes per parameter "
        f"({per_param.precision} + {per_param.optimizer}; ZeRO paper §3.1)",
        f"usable = capacity {format_bytes(budget.gpu_capacity, units, 2)} − runtime reserve "
        f"{format_bytes(budget.runtime_reserve, units, 2)} − fragmentation {format_bytes(budget.fragmentation_bytes, units, 2)}"
        f" = {format_bytes(budget.usable_gpu_bytes, units, 2)}",
    ]
    for estimate in estimates:
        if request.convention == "paper":
            lines.extend(_paper_lines(estimate, request, units))
        elif request.convention == "framework":
            gpu = estimate.gpu_bytes
            lines.append(f"{estimate.option.label}: {request.framework} partitions the model's tensors; its most loaded "
                         f"rank ({estimate.breakdown['framework/most_loaded_rank']}) holds params "
                         f"{format_bytes(gpu['params'], units, 2)}, gradients {format_bytes(gpu['gradients'], units, 2)}, "
                         f"optimizer states {format_bytes(gpu['optimizer_states'], units, 2)}")
        else:
            lines.append(f"{estimate.option.label}: DeepSpeed estimator gives "
                         f"{format_bytes(estimate.gpu_bytes['total'] - estimate.gpu_bytes['activations'], units, 2)} "
                         f"per GPU and {format_bytes(estimate.cpu_bytes_per_node, units, 2)} CPU per node")
        buffers = {k.split('/', 2)[2]: v for k, v in estimate.breakdown.items() if k.startswith("gpu/buffers/")}
        if buffers:
            lines.append("    buffers: " + ", ".join(f"{name} {format_bytes(size, units, 2)}" for name, size in buffers.items()))
        lines.extend("    " + line for line in _comm_lines(estimate, request))
        pcie = estimate.breakdown.get("traffic/pcie/bytes_per_gpu", 0)
        if pcie:
            lines.append(f"    offload: {format_bytes(pcie, 'si', 2)} over PCIe per GPU per step at "
                         f"{format_rate(request.cluster.pcie_bandwidth_bytes_per_s)} = "
                         f"{pcie / request.cluster.pcie_bandwidth_bytes_per_s:.3f} s")
    return lines

"""Each figure's formula with the user's numbers in it, for `zeroplan estimate --explain`."""

from __future__ import annotations

from zeroplan.core.estimate import EstimateRequest, OptionEstimate
from zeroplan.core.units import format_bytes, format_count, format_rate

_STAGE_FORMULAS = {
    0: ("(P+G+K)Ψ", lambda p, g, k: ((p + g + k, 1),)),
    1: ("(P+G)Ψ + KΨ/N_d", lambda p, g, k: ((p + g, 1), (k, "N"))),
    2: ("PΨ + (G+K)Ψ/N_d", lambda p, g, k: ((p, 1), (g + k, "N"))),
    3: ("(P+G+K)Ψ/N_d", lambda p, g, k: ((p + g + k, "N"),)),
}


def _paper_line(estimate: OptionEstimate, request: EstimateRequest, units: str) -> str:
    per_param, dp, shard = request.per_param, request.parallel.dp, request.shard_params
    symbolic, terms_of = _STAGE_FORMULAS[estimate.option.stage]
    terms = terms_of(per_param.params, per_param.gradients, per_param.optimizer_states)
    numeric = " + ".join(f"{factor}×{format_count(shard)}" + (f"/{dp}" if divisor == "N" else "")
                         for factor, divisor in terms)
    values = [factor * shard if divisor == 1 else -(-factor * shard // dp) for factor, divisor in terms]
    total = sum(values)
    line = (f"{estimate.option.label}: model states = {symbolic} = {numeric} = "
            + " + ".join(format_bytes(v, units, 2) for v in values)
            + (f" = {format_bytes(total, units, 2)}" if len(values) > 1 else ""))
    if estimate.option.offloads:
        moved = total - estimate.model_state_bytes
        line += f"; offload moves {format_bytes(moved, units, 2)} of it off the GPU"
    return line


def _comm_line(estimate: OptionEstimate, request: EstimateRequest) -> str:
    dp = request.parallel.dp
    if dp == 1:
        return f"{estimate.option.label}: no data-parallel traffic (dp = 1)"
    per_param = request.per_param
    factor = 3 if estimate.option.stage == 3 else 2
    elements = estimate.breakdown["comm/paper_elements"]
    exact = estimate.comm_bytes_per_gpu_per_step
    return (f"{estimate.option.label}: traffic per GPU per step = {factor} collectives × (N_d−1)/N_d × "
            f"{per_param.params} B × Ψ = {format_bytes(exact, 'si', 2)} exact ring "
            f"({dp - 1}/{dp}); paper's large-N figure {factor}Ψ = {format_count(elements)} elements "
            f"= {format_bytes(elements * per_param.params, 'si', 2)}; {estimate.comm_seconds_per_step:.3f} s")


def explain_lines(request: EstimateRequest, estimates: list[OptionEstimate], units: str = "iec") -> list[str]:
    per_param, budget = request.per_param, request.budget
    lines = [
        f"Ψ = {request.shard_params:,} parameters per GPU shard (model {request.model.params:,}; "
        f"tp {request.parallel.tp}, pp {request.parallel.pp}), N_d = {request.parallel.dp}",
        f"P = {per_param.params}, G = {per_param.gradients}, K = {per_param.optimizer_states} bytes per parameter "
        f"({per_param.precision} + {per_param.optimizer}; ZeRO paper §3.1)",
        f"usable = capacity {format_bytes(budget.gpu_capacity, units, 2)} − runtime reserve "
        f"{format_bytes(budget.runtime_reserve, units, 2)} − fragmentation {format_bytes(budget.fragmentation_bytes, units, 2)}"
        f" = {format_bytes(budget.usable_gpu_bytes, units, 2)}",
    ]
    for estimate in estimates:
        if request.convention == "paper":
            lines.append(_paper_line(estimate, request, units))
        else:
            lines.append(f"{estimate.option.label}: DeepSpeed estimator gives "
                         f"{format_bytes(estimate.gpu_bytes['total'] - estimate.gpu_bytes['activations'], units, 2)} "
                         f"per GPU and {format_bytes(estimate.cpu_bytes_per_node, units, 2)} CPU per node")
        buffers = {k.split('/', 2)[2]: v for k, v in estimate.breakdown.items() if k.startswith("gpu/buffers/")}
        if buffers:
            lines.append("    buffers: " + ", ".join(f"{name} {format_bytes(size, units, 2)}" for name, size in buffers.items()))
        lines.append("    " + _comm_line(estimate, request))
        pcie = estimate.breakdown.get("traffic/pcie/bytes_per_gpu", 0)
        if pcie:
            lines.append(f"    offload: {format_bytes(pcie, 'si', 2)} over PCIe per GPU per step at "
                         f"{format_rate(request.cluster.pcie_bandwidth_bytes_per_s)} = "
                         f"{pcie / request.cluster.pcie_bandwidth_bytes_per_s:.3f} s")
    return lines

"""The throughput side of the hardware a step runs on (Machine), and the calibrated constants it carries:
the share of peak a GEMM reaches, attention and element-wise memory traffic, the DP overlap share (fitted on the
calibration set only: benchmarks/fit_step_time.py) and the CPU Adam rate. core.timing.step_time prices a step
on it; core.timing.dp_offload prices data-parallel, offload and optimizer time on it. Formulas
and fitted values: docs/formulas.md §14."""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError
from zeroplan.core.timing.collectives import LinkTable

# Fitted on the calibration set only (benchmarks/fit_step_time.py, benchmarks/data/calibration_runs.json:
# 29 A100 runs from Narayanan 2021 Tables 1-2, MT-NLG, Korthikanti 2022 Table 5, BLOOM, OPT), least squares on
# ln(predicted/published); leave-one-out cross-validated figures in docs/plan.md. Its ceiling is checked against
# measured maxima: large bf16 GEMMs reach 0.87 of peak on A100 and 0.80 on H100 (stas00/ml-engineering
# "Maximum Achievable Matmul FLOPS"); the fit lands below that since end-to-end kernels are not all ideal shapes.
GEMM_SHARE_OF_MAX = 0.747  # share of the measured GEMM maximum (below) a large training GEMM reaches
# Measured maximum achievable bf16 matmul throughput / dense peak (stas00/ml-engineering, compute/accelerator
# "Maximum Achievable Matmul FLOPS"): A100 SXM 271.2/312, H100 SXM 794.5/989, GH200 828.6/989. Other GPUs: the
# A100/H100 mean. Only A100 runs are in the calibration set: other GPUs carry this ratio, not a fit.
MAX_MATMUL_SHARE = {"a100": 0.869, "a800": 0.869, "h100": 0.803, "h800": 0.803, "h200": 0.838}
DEFAULT_MAX_MATMUL_SHARE = 0.836
# A fixed time per GEMM kernel (launch, partial last wave) was fitted too: the calibration runs drive it to 0
# (their GEMMs are large), so it stays 0 and out of the fit until runs with small GEMMs support a value.
GEMM_OVERHEAD_S = 0.0
ATTENTION_SCORE_BYTES = 8.1  # memory traffic per attention score element, forward, without flash attention
# Not fittable on the calibration set (none of its runs used flash attention): FlashAttention-2 reports 50-73%
# of A100 peak forward+backward (Dao 2023, arXiv 2307.08691), FlashAttention-3 up to 75% of H100 forward.
FLASH_ATTENTION_EFFICIENCY = 0.55
# Element-wise traffic: Korthikanti et al.'s stored activation bytes per layer (34·s·b·h, 10 of them not split
# by tp without sequence parallelism), each written once and read once.
ELEMENTWISE_BYTES_PER_TOKEN_HIDDEN = 68
LOGIT_BYTES = 12  # cross entropy over the vocabulary: fp32 logits written, read, gradient written
DP_OVERLAP = 0.29  # share of a pass's compute that DP collectives can hide behind (fitted, see above)


# DeepSpeed CPU Adam, per node: the step is memory bound (~30 bytes per parameter read or written), so a
# two-socket server streaming 50-100 GB/s manages a few 1e9 parameters/s; the ZeRO-Offload paper's CPU-Adam
# latencies sit near 1 s per 1e9 parameters. 1e9 per node is the conservative default (--cpu-adam-rate).
DEFAULT_CPU_ADAM_PARAMS_PER_S = 1_000_000_000
ACTIVATION_ELEMENT_BYTES = 2  # TP/PP messages carry 16-bit activations
def gemm_efficiency(gpu_name: str) -> float:
    """Share of dense peak a large GEMM reaches on this GPU: the fitted share of its measured maximum."""
    key = gpu_name.lower().split("-")[0]
    return GEMM_SHARE_OF_MAX * MAX_MATMUL_SHARE.get(key, DEFAULT_MAX_MATMUL_SHARE)


DEFAULT_EFFICIENCY = gemm_efficiency("a100")


def check_efficiency(value: float) -> float:
    if not 0.001 <= value <= 1:  # below 0.1% of peak no step-time figure means anything (and may underflow)
        raise InputError("efficiency", f"must be a fraction in [0.001, 1], got {value:g}", "write e.g. 0.5")
    return value


@dataclass(frozen=True)
class Machine:
    """The throughput side of the hardware."""

    peak_flops: float  # dense bf16 per GPU
    hbm_bytes_per_s: float
    pcie_bytes_per_s: float
    nvme_bytes_per_s: float | None  # per node
    links: LinkTable
    efficiency: float = DEFAULT_EFFICIENCY  # share of peak a large GEMM reaches
    cpu_adam_params_per_s: float = DEFAULT_CPU_ADAM_PARAMS_PER_S  # per node
    gemm_overhead_s: float = GEMM_OVERHEAD_S
    attention_score_bytes: float = ATTENTION_SCORE_BYTES
    flash_efficiency: float = FLASH_ATTENTION_EFFICIENCY
    gpus_per_node: int = 8
    dp_overlap: float = DP_OVERLAP
    tp_hidden: bool = False  # CommOverlap.tp_hidden
    pp_hidden: bool = False  # CommOverlap.pp_hidden

    @property
    def flops_per_s(self) -> float:
        return self.peak_flops * self.efficiency

"""The input sections only one command takes: `plan`'s search space, `sweep`'s grid, `bench`, `validate`, `trace`.
Declared like those in zeroplan.inputs.sections (a list option reuses its single-value flag's name)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import ClassVar

from zeroplan.core.memory.budget import parse_fraction
from zeroplan.inputs.lists import parse_text_list, recompute_modes, whole_numbers, zero_stages
from zeroplan.inputs.sections import (GRID, MODEL, OUTPUT, RUN, SEARCH, STEP, TIMING, HardwareInputs, ModelInputs,
                                      ParallelInputs, Section, StepInputs, as_count, flag,
                                      flag_of, one_of, option)


class SequenceParallelSearch(str, Enum):
    SEARCH = "search"
    ON = "on"
    OFF = "off"


class Attention(str, Enum):
    SDPA = "sdpa"
    EAGER = "eager"


TRACE = "Trace"


class CommOverlapChoice(str, Enum):  # core.timing.step_time.COMM_OVERLAPS' names
    BASELINE = "baseline"
    FSDP = "fsdp"
    TORCHTITAN = "torchtitan"
    MEGATRON = "megatron"


class MoEDispatcherChoice(str, Enum):  # core.timing.machine MOE_DROPLESS_SYNC_S: which dispatchers sync the host
    ALLTOALL = "alltoall"
    DEEPEP = "deepep"
    HYBRIDEP = "hybridep"


class AttentionKernelChoice(str, Enum):  # core.timing.machine.FLASH_MAX_SHARE's kernel families
    FA1 = "fa1"
    FA2 = "fa2"
    FA3 = "fa3"


class Style(str, Enum):
    GPT2 = "gpt2"
    LLAMA = "llama"


@dataclass(init=False, repr=False, eq=False)
class SearchInputs(Section):
    """`zeroplan plan`'s search space and step-time model: lists of what to try."""

    key: ClassVar[str] = "search"

    stages: tuple[int, ...] | None = flag("--stages", help="ZeRO stages to try (default 0,1,2,3).", panel=SEARCH,
                                          parse=zero_stages)
    offload: bool = flag("--offload/--no-offload", help="Also try CPU/NVMe offload tiers.", panel=SEARCH, kind=bool,
                         default=True)
    recompute: tuple[str, ...] | None = option(flag_of(StepInputs, "recompute").variant(
        help="Recompute modes to try (default none,selective,full,selective-op).", panel=SEARCH,
        parse=recompute_modes))
    sequence_parallel: str = option(flag_of(StepInputs, "sequence_parallel").variant(
        help="search (both), on or off (with tp > 1).", panel=SEARCH, kind=str,
        parse=one_of(SequenceParallelSearch)), "search")
    virtual_stages: tuple[int, ...] | None = flag("--virtual-stages", help="Interleaved-schedule chunks to try, e.g. "
                                                  "1,2 (default 1).", panel=SEARCH, parse=whole_numbers())
    micro_batches: tuple[int, ...] | None = flag("--micro-batches", help="Micro-batch sizes to try (default: every "
                                                 "divisor of the per-rank batch).", panel=SEARCH,
                                                 parse=whole_numbers())
    tp: tuple[int, ...] | None = option(flag_of(ParallelInputs, "tp").variant(
        help="Only these tensor-parallel degrees, e.g. 1,2,4,8.", panel=SEARCH, kind=str, parse=whole_numbers()))
    pp: tuple[int, ...] | None = option(flag_of(ParallelInputs, "pp").variant(
        help="Only these pipeline degrees.", panel=SEARCH, kind=str, parse=whole_numbers()))
    ep: tuple[int, ...] | None = option(flag_of(ParallelInputs, "ep").variant(
        help="Expert-parallel degrees to try for a mixture-of-experts model, e.g. 1,8,64 (default 1).", panel=SEARCH,
        kind=str, parse=whole_numbers()))
    etp: tuple[int, ...] | None = option(flag_of(ParallelInputs, "etp").variant(
        help="Expert tensor-parallel degrees to try (default: etp = tp).", panel=SEARCH, kind=str,
        parse=whole_numbers()))
    allow_cross_node_tp: bool = flag("--allow-cross-node-tp", help="Let tensor parallelism span nodes.",
                                     panel=SEARCH, kind=bool, default=False)
    efficiency: float | None = flag("--efficiency", help="Share of the GPU's dense bf16 peak a large GEMM reaches "
                                    "(default: fitted per GPU, 0.69 on A100, 0.64 on H100).", panel=TIMING,
                                    kind=float)
    comm_overlap: str | None = flag("--comm-overlap", help="Which communication the training framework hides behind "
                                    "compute: baseline (DeepSpeed, Megatron-LM without overlap options; the "
                                    "default), fsdp (PyTorch FSDP/FSDP2 prefetch, Hugging Face transformers' eager "
                                    "Llama block), torchtitan (fsdp with PyTorch's experimental context-parallel "
                                    "ring and torchtitan's unfused eager Llama block) or megatron (Megatron-Core "
                                    "with its DP, TP and pipeline overlap options on, as NeMo runs it).", panel=TIMING,
                                    parse=one_of(CommOverlapChoice))
    attention_kernel: str | None = flag("--attention-kernel", help="The flash-attention kernel family the framework "
                                        "calls: fa1 (flash-attn 1, Triton flash attention), fa2 (flash-attn 2, torch "
                                        "SDPA's flash backend) or fa3 (flash-attn 3, cuDNN fused attention via "
                                        "Transformer Engine; Hopper). Default: the --comm-overlap framework's (fa3 for "
                                        "megatron, else fa2).", panel=TIMING, parse=one_of(AttentionKernelChoice))
    async_tp: bool = flag("--async-tp", help="The framework overlaps tensor-parallel collectives with the GEMMs "
                          "(torchtitan's async TP, PyTorch symmetric-memory micro-pipelining; Megatron-Core's "
                          "tp_comm_overlap is already in --comm-overlap megatron): inside a node each TP collective "
                          "fused with a GEMM hides behind it (all of the forward's; in backward the all-gathers, not "
                          "the reduce-scatters).", panel=TIMING, kind=bool, default=False)
    torch_compile: bool = flag("--torch-compile", help="The framework compiles each transformer block with "
                               "torch.compile (torchtitan's compile.enable): the element-wise and norm ops between two "
                               "GEMMs run as one fused kernel, each region's inputs read and outputs written once "
                               "(fewer HBM passes than eager's per-op kernels).", panel=TIMING, kind=bool, default=False)
    moe_dispatcher: str | None = flag("--moe-dispatcher", help="How a mixture-of-experts model's tokens reach their "
                                      "experts: alltoall (Megatron-Core's alltoall dispatcher, torchtitan's "
                                      "all_to_all_single; the default: a copy per routed expert, and dropless "
                                      "routing syncs the host once per MoE layer), deepep (DeepEP's normal "
                                      "kernels: a token crosses the network once per node it reaches, NVLink "
                                      "forwards it; dropless still syncs) or hybridep (Megatron-Core's flex "
                                      "dispatcher with HybridEP: once per node, no host sync).", panel=TIMING,
                                      parse=one_of(MoEDispatcherChoice))
    moe_a2a_overlap: bool = flag("--moe-a2a-overlap", help="The framework hides the expert-parallel all-to-all behind "
                                 "another micro-batch's compute (Megatron-Core's "
                                 "overlap_moe_expert_parallel_comm, DeepSeek-V3's DualPipe).", panel=TIMING,
                                 kind=bool, default=False)
    cpu_adam_rate: int | None = flag("--cpu-adam-rate", help="CPU optimizer parameters per second per node "
                                     "(default 1e9).", panel=TIMING, parse=as_count)
    cp: tuple[int, ...] | None = option(flag_of(ParallelInputs, "cp").variant(
        help="Context-parallel degrees to try, e.g. 1,2,4 (default 1; needs the sequence divisible by 2·cp).",
        panel=SEARCH, kind=str, parse=whole_numbers()))
    dp_shard: tuple[int, ...] | None = option(flag_of(ParallelInputs, "dp_shard").variant(
        help="Also try hybrid sharding: ZeRO-1/2/3 partitioned over groups of this many data-parallel ranks, "
        "replicated across the groups (FSDP2 HSDP, ZeRO++ hpZ/MiCS), e.g. 8 or 8,16.", panel=SEARCH, kind=str,
        parse=whole_numbers()))
    fsdp_pipeline: bool = flag("--fsdp-with-pp", help="Also try ZeRO-2/3 (FSDP) with pipeline parallelism "
                               "(torchtitan, Llama 3).", panel=SEARCH, kind=bool, default=False)
    top: int = flag("--top", help="How many plans to show (distinct dp×tp×pp and stage).", panel=OUTPUT, kind=int,
                    default=5)
    tie_tolerance: Fraction | None = flag("--tie-tolerance", help="Step times this close to the fastest rank as "
                                          "ties, won by the simpler plan (default 2%).", panel=OUTPUT,
                                          parse=parse_fraction)


@dataclass(init=False, repr=False, eq=False)
class GridInputs(Section):
    """`zeroplan sweep`'s grid: comma lists of the model, hardware and stage flags."""

    key: ClassVar[str] = "grid"

    models: tuple[str, ...] | None = option(flag_of(ModelInputs, "model").variant(
        help="Comma list of model presets or config.json paths.", panel=GRID, parse=parse_text_list))
    params: tuple[str, ...] | None = option(flag_of(ModelInputs, "params").variant(
        help="Comma list of parameter counts, e.g. 7e9,13e9,70e9.", panel=GRID, parse=parse_text_list))
    gpus: tuple[int, ...] = option(flag_of(HardwareInputs, "gpus").variant(
        help="Comma list of GPU counts.", panel=GRID, kind=str, parse=whole_numbers()), "8,16,32,64,128,256")
    gpu_types: tuple[str, ...] | None = option(flag_of(HardwareInputs, "gpu").variant(
        help="Comma list of GPU presets (default a100-80g).", panel=GRID, parse=parse_text_list))
    stages: tuple[int, ...] | None = option(flag_of(SearchInputs, "stages").variant(
        help="ZeRO stages, one row each (default 0,1,2,3).", panel=GRID))


@dataclass(init=False, repr=False, eq=False)
class RunInputs(Section):
    """How `zeroplan bench` and `zeroplan validate` start their ranks."""

    key: ClassVar[str] = "run"

    backend: str = flag("--backend", help="auto (nccl with CUDA, else gloo), gloo or nccl.", panel=RUN,
                        default="auto")
    nproc: int | None = flag("--nproc", help="Local ranks to spawn (default: GPUs for nccl, 2 for gloo); leave it "
                             "out under torchrun/SLURM.", panel=RUN, kind=int)
    timeout: float = flag("--timeout", help="Seconds without progress before a rank counts as hung and the run is "
                          "stopped.", panel=RUN, kind=float, default=300.0)


@dataclass(init=False, repr=False, eq=False)
class BenchInputs(Section):
    key: ClassVar[str] = "bench"

    collectives: str = flag("--collectives", help="Comma list of all_gather_into_tensor, reduce_scatter_tensor, "
                            "all_reduce.", panel=None,
                            default="all_gather_into_tensor,reduce_scatter_tensor,all_reduce")
    min_bytes: str = flag("--min-bytes", help="Smallest message S (the full gathered/reduced buffer), e.g. 64KiB.",
                          panel=None, default="64KiB")
    max_bytes: str = flag("--max-bytes", help="Largest message S, e.g. 256MiB; capped by free memory.", panel=None,
                          default="256MiB")
    factor: int = flag("--factor", help="Multiply the size by this between steps (nccl-tests -f).", panel=None,
                       kind=int, default=2)
    dtype: str = flag("--dtype", help="float32, bfloat16 or float16.", panel=None, default="float32")
    warmup: int = flag("--warmup", help="Untimed iterations per size.", panel=None, kind=int, default=5)
    iters: int = flag("--iters", help="Timed iterations per size.", panel=None, kind=int, default=20)
    save_calibration: str | None = flag("--save-calibration", help="Write the α-β fits and raw medians to this YAML "
                                        "profile.", panel=None)


@dataclass(init=False, repr=False, eq=False)
class TinyModelInputs(Section):
    """`zeroplan validate`'s tiny GPT: the model flags, with the tiny model's defaults."""

    key: ClassVar[str] = "tiny"

    model: str | None = option(flag_of(ModelInputs, "model").variant(
        help="A model preset, scaled down to --hidden (its style, ratios and tied head)."))
    style: str | None = flag("--style", help="gpt2 (LayerNorm, biases, learned positions) or llama (RMSNorm, "
                             "SwiGLU, GQA).", panel=MODEL, parse=one_of(Style))
    layers: int | None = option(flag_of(ModelInputs, "layers").variant(help="Transformer layers (default 2)."))
    hidden: int | None = option(flag_of(ModelInputs, "hidden").variant(help="Hidden size (default 128)."))
    heads: int | None = option(flag_of(ModelInputs, "heads").variant(help="Attention heads (default 4)."))
    kv_heads: int | None = option(flag_of(ModelInputs, "kv_heads").variant(
        help="Key/value heads, llama style (default: --heads)."))
    ffn: int | None = option(flag_of(ModelInputs, "ffn").variant(help="MLP width (default 500)."))
    vocab: int | None = option(flag_of(ModelInputs, "vocab").variant(help="Vocabulary (default 2047)."))
    seq_len: int | None = option(flag_of(StepInputs, "seq_len").variant(
        help="Sequence length, also the learned positions (default 127).", panel=MODEL))
    untied: bool = flag("--untied", help="A separate LM head instead of the tied embedding.", panel=MODEL, kind=bool,
                        default=False)


@dataclass(init=False, repr=False, eq=False)
class ValidateRunInputs(Section):
    """What `zeroplan validate` trains and measures."""

    key: ClassVar[str] = "training"

    stage: str = option(flag_of(ParallelInputs, "stage").variant(
        help="all, or a comma list of 0-3 / ddp, torch-zero1, fsdp2-zero2, fsdp2-zero3.", panel=RUN, kind=str),
        "all")
    precision: str = option(flag_of(StepInputs, "precision").variant(
        help="fp32, or mixed (bf16; torch keeps fp32 states, see docs/accuracy.md).", panel=RUN, parse=None),
        "fp32")
    optimizer: str = option(flag_of(StepInputs, "optimizer").variant(
        help="adam, adamw, sgd-momentum or sgd.", panel=RUN, parse=None), "adam")
    cpu_offload: bool = flag("--cpu-offload", help="FSDP2's CPUOffloadPolicy (stages 2-3, CUDA only).", panel=RUN,
                             kind=bool, default=False)
    steps: int = flag("--steps", help="Training steps; states are measured after the last.", panel=RUN, kind=int,
                      default=2)
    micro_batch: int = option(flag_of(StepInputs, "micro_batch").variant(
        help="Sequences per rank per step.", panel=RUN), 2)
    timeout: float = option(flag_of(RunInputs, "timeout").variant(
        help="Seconds before a run that has not finished is stopped."), 600.0)
    perturb_prediction: int = flag("--perturb-prediction", help="Tests only: add BYTES to the prediction.",
                                   panel=None, kind=int, default=0, hidden=True)


@dataclass(init=False, repr=False, eq=False)
class TraceInputs(Section):
    """What `zeroplan trace` runs: the world, the stage and the tracer's own settings."""

    key: ClassVar[str] = "trace"

    gpus: int = option(flag_of(HardwareInputs, "gpus").variant(
        help="World size: the ranks the model is sharded over."), 8)
    stage: int = option(flag_of(ParallelInputs, "stage").variant(
        help="ZeRO stage 0-3 (0 DDP, 1 ZeroRedundancyOptimizer, 2-3 FSDP2)."), 3)
    attention: str = flag("--attention", help="transformers' attention: sdpa (default) or eager.", panel=STEP,
                          default="sdpa", parse=one_of(Attention, validate=False))
    layers_to_trace: int = flag("--layers-to-trace", help="Trace k, k+1, k+2 layers and extrapolate, checked on the "
                                "third (default 3); 0 traces the whole model.", panel=TRACE, kind=int, default=3)
    steps: int = option(flag_of(ValidateRunInputs, "steps").variant(
        help="Training steps to run (at least 2; the peak is the last one's).", panel=TRACE), 2)
    tolerance: float | None = flag("--tolerance", help="Exit 1 when estimate and trace differ by more than this many "
                                   "percent.", panel=TRACE, kind=float)
    real: bool = flag("--real", help="Also run the step with real tensors on this machine's CUDA GPU and report "
                      "torch.cuda.max_memory_allocated.", panel=TRACE, kind=bool, default=False)

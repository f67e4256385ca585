"""Reusable option declarations (typer Annotated aliases), shared by every command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

MODEL = "Model"
HARDWARE = "Hardware"
PARALLEL = "Parallelism"
TRAINING = "Training"
MEMORY = "Memory budget"
OUTPUT = "Output"
DEEPSPEED = "DeepSpeed convention"

Params = Annotated[Optional[str], typer.Option(
    "--params", help="Parameter count: 13e9, 13B, 6.7b, 350M, 1.5T.", rich_help_panel=MODEL)]
LargestLayer = Annotated[Optional[str], typer.Option(
    "--largest-layer-params", help="Parameters of the largest single module (DeepSpeed's definition).",
    rich_help_panel=MODEL)]

Gpus = Annotated[int, typer.Option("--gpus", help="Total GPUs (the world size).", rich_help_panel=HARDWARE)]
GpusPerNode = Annotated[Optional[int], typer.Option(
    "--gpus-per-node", help="GPUs per node (default: from the cluster preset).", rich_help_panel=HARDWARE)]
Gpu = Annotated[Optional[str], typer.Option(
    "--gpu", help="GPU preset (default a100-80g).", rich_help_panel=HARDWARE)]
Cluster = Annotated[Optional[str], typer.Option(
    "--cluster", help="Cluster preset: node type, links, CPU RAM, NVMe.", rich_help_panel=HARDWARE)]
CpuMemory = Annotated[Optional[str], typer.Option(
    "--cpu-memory", help="CPU RAM per node, e.g. 512GB.", rich_help_panel=HARDWARE)]
Nvme = Annotated[Optional[str], typer.Option(
    "--nvme", help="NVMe capacity per node, e.g. 2TB.", rich_help_panel=HARDWARE)]
NvmeBandwidth = Annotated[Optional[str], typer.Option(
    "--nvme-bandwidth", help="NVMe bandwidth per node, e.g. 7GB/s.", rich_help_panel=HARDWARE)]
IntraNodeBandwidth = Annotated[Optional[str], typer.Option(
    "--intra-node-bandwidth", help="GPU-to-GPU link inside a node, per direction, e.g. 300GB/s.",
    rich_help_panel=HARDWARE)]
InterNodeBandwidth = Annotated[Optional[str], typer.Option(
    "--inter-node-bandwidth", help="Network bandwidth per GPU across nodes, e.g. 400Gb/s or 25GB/s.",
    rich_help_panel=HARDWARE)]
GpuMemory = Annotated[Optional[str], typer.Option(
    "--gpu-memory", help="Override the GPU's memory, e.g. 80GiB.", rich_help_panel=HARDWARE)]

Tp = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree.", rich_help_panel=PARALLEL)]
Pp = Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.", rich_help_panel=PARALLEL)]
Stage = Annotated[Optional[int], typer.Option(
    "--stage", help="Only this ZeRO stage (0-3).", rich_help_panel=PARALLEL)]
OffloadOptimizer = Annotated[Optional[str], typer.Option(
    "--offload-optimizer", help="Only this optimizer tier: none, cpu, nvme.", rich_help_panel=PARALLEL)]
OffloadParams = Annotated[Optional[str], typer.Option(
    "--offload-params", help="Only this parameter tier: none, cpu, nvme (stage 3).", rich_help_panel=PARALLEL)]
ZeroPP = Annotated[Optional[str], typer.Option(
    "--zeropp", help="ZeRO++ features for stage 3, any of qwz,hpz,qgz.", rich_help_panel=PARALLEL)]
HpzPartitionSize = Annotated[Optional[int], typer.Option(
    "--hpz-partition-size", help="hpZ secondary partition size (default: GPUs per node).", rich_help_panel=PARALLEL)]

Precision = Annotated[str, typer.Option(
    "--precision", help="mixed (also bf16, fp16) or fp32.", rich_help_panel=TRAINING)]
Optimizer = Annotated[str, typer.Option(
    "--optimizer", help="adam, adamw, sgd-momentum, sgd, adam-8bit.", rich_help_panel=TRAINING)]

RuntimeReserve = Annotated[Optional[str], typer.Option(
    "--runtime-reserve", help="GPU memory for CUDA context + NCCL (default 1GiB).", rich_help_panel=MEMORY)]
Fragmentation = Annotated[Optional[str], typer.Option(
    "--fragmentation", help="Allocator headroom as a share of capacity (default 10%).", rich_help_panel=MEMORY)]
ActivationReserve = Annotated[Optional[str], typer.Option(
    "--activation-reserve", help="Share of usable memory kept for activations when they are not counted "
    "(default 15%).", rich_help_panel=MEMORY)]
HostReserve = Annotated[Optional[str], typer.Option(
    "--host-reserve", help="Share of CPU RAM kept for the OS and dataloaders (default 10%).", rich_help_panel=MEMORY)]

Convention = Annotated[str, typer.Option(
    "--convention", help="paper (ZeRO paper), deepspeed (DeepSpeed's estimators, to the byte) or framework "
    "(real tensor partitioning, see --framework).", rich_help_panel=DEEPSPEED)]
Framework = Annotated[Optional[str], typer.Option(
    "--framework", help="For --convention framework: deepspeed (default), or torch (DDP, ZeroRedundancyOptimizer, "
    "FSDP2).",
    rich_help_panel=DEEPSPEED)]
ZeroInit = Annotated[bool, typer.Option(
    "--zero-init/--no-zero-init", help="DeepSpeed's zero_init for the ZeRO-3 CPU estimate.", rich_help_panel=DEEPSPEED)]
BufferFactor = Annotated[float, typer.Option(
    "--buffer-factor", help="DeepSpeed's additional_buffer_factor for CPU memory.", rich_help_panel=DEEPSPEED)]

Format = Annotated[str, typer.Option(
    "--format", "-f", help="Output format: table, json, csv or markdown (the command's error names the ones it has).",
    rich_help_panel=OUTPUT)]
FormatTableJsonCsv = Annotated[str, typer.Option(
    "--format", "-f", help="table, json or csv.", rich_help_panel=OUTPUT)]
FormatTableJson = Annotated[str, typer.Option(
    "--format", "-f", help="table or json.", rich_help_panel=OUTPUT)]
Output = Annotated[Optional[str], typer.Option(
    "--output", "-o", help="Write to this file instead of stdout.", rich_help_panel=OUTPUT)]
Plot = Annotated[Optional[str], typer.Option(
    "--plot", help="Also draw the result to FILE.png or FILE.svg (needs matplotlib, the plot extra): estimate, "
    "memory per GPU of each option; plan, where each top plan's step time goes; sweep, memory against GPUs.",
    rich_help_panel=OUTPUT)]
Units = Annotated[str, typer.Option(
    "--units", help="iec (GiB, default) or si (GB) for memory.", rich_help_panel=OUTPUT)]
Explain = Annotated[bool, typer.Option(
    "--explain", help="Print each formula with your numbers in it.", rich_help_panel=OUTPUT)]

STEP = "Training step (needs --model)"
BUFFERS = "DeepSpeed buffers"

SeqLen = Annotated[Optional[int], typer.Option(
    "--seq-len", help="Sequence length (default: the model's context, capped at 4096).", rich_help_panel=STEP)]
MicroBatch = Annotated[Optional[int], typer.Option(
    "--micro-batch", help="Sequences per GPU per micro-batch (default 1).", rich_help_panel=STEP)]
Recompute = Annotated[Optional[str], typer.Option(
    "--recompute", help="Activation recompute: none, selective or full (default none).", rich_help_panel=STEP)]
Activations = Annotated[Optional[str], typer.Option(
    "--activations", help="Whose code keeps the activations: transformers (Hugging Face, default) or megatron "
    "(Megatron-LM's theoretical memory).", rich_help_panel=STEP)]
FlashAttention = Annotated[bool, typer.Option(
    "--flash-attention/--no-flash-attention", help="Flash attention stores no s×s scores.", rich_help_panel=STEP)]
SequenceParallel = Annotated[bool, typer.Option(
    "--sequence-parallel", help="Megatron sequence parallelism (with --tp).", rich_help_panel=STEP)]
GradAccum = Annotated[Optional[int], typer.Option(
    "--grad-accum", help="Gradient accumulation steps (micro-batches per optimizer step).", rich_help_panel=STEP)]
GlobalBatch = Annotated[Optional[int], typer.Option(
    "--global-batch", help="Sequences per optimizer step = micro-batch × accumulation × dp.", rich_help_panel=STEP)]
MaxMicroBatch = Annotated[bool, typer.Option(
    "--max-micro-batch", help="Find the largest micro-batch each option fits.", rich_help_panel=STEP)]
ModelOrConfig = Annotated[Optional[str], typer.Option(
    "--model", help="A model preset (`zeroplan presets list`), a Hugging Face Hub id (meta-llama/Llama-3.1-8B) "
    "or the path of a config.json.",
    rich_help_panel=MODEL)]

ReduceBucket = Annotated[Optional[str], typer.Option(
    "--reduce-bucket-size", help="reduce_bucket_size in elements (default 5e8).", rich_help_panel=BUFFERS)]
AllgatherBucket = Annotated[Optional[str], typer.Option(
    "--allgather-bucket-size", help="allgather_bucket_size in elements (default 5e8).", rich_help_panel=BUFFERS)]
PrefetchBucket = Annotated[Optional[str], typer.Option(
    "--prefetch-bucket-size", help="stage3_prefetch_bucket_size in elements (default 5e7).", rich_help_panel=BUFFERS)]
MaxLiveParameters = Annotated[Optional[str], typer.Option(
    "--max-live-parameters", help="stage3_max_live_parameters (default 1e9).", rich_help_panel=BUFFERS)]
SubGroupSize = Annotated[Optional[str], typer.Option(
    "--sub-group-size", help="sub_group_size for the stage-3 optimizer step (default 1e9).", rich_help_panel=BUFFERS)]
OverlapComm = Annotated[Optional[bool], typer.Option(
    "--overlap-comm/--no-overlap-comm", help="DeepSpeed overlap_comm (default: on at stage 3 only).",
    rich_help_panel=BUFFERS)]
CalibrationFile = Annotated[Optional[str], typer.Option(
    "--calibration", help="Price communication with a profile from `zeroplan bench --save-calibration`.",
    rich_help_panel=HARDWARE)]


def _use_presets_file(value: Optional[str]) -> Optional[str]:
    """Layers the file over the built-in presets as the option is parsed, so a command needs only the
    parameter in its signature."""
    from zeroplan.inputs.presets import use_presets_file

    use_presets_file(value)
    return value


PresetsFile = Annotated[Optional[str], typer.Option(
    "--presets", help="A presets YAML file that adds or overrides GPUs, clusters and models (same schema as "
    "the built-in ones; check it with `zeroplan presets validate FILE`).", rich_help_panel=HARDWARE,
    callback=_use_presets_file)]


TRACE = "Trace"

TraceGpus = Annotated[int, typer.Option("--gpus", help="World size: the ranks the model is sharded over.",
                                        rich_help_panel=HARDWARE)]
TraceStage = Annotated[int, typer.Option(
    "--stage", help="ZeRO stage 0-3 (0 DDP, 1 ZeroRedundancyOptimizer, 2-3 FSDP2).", rich_help_panel=PARALLEL)]
TraceModel = Annotated[str, typer.Option(
    "--model", help="A model preset, a Hugging Face Hub id or the path of a config.json.", rich_help_panel=MODEL)]
Attention = Annotated[str, typer.Option(
    "--attention", help="transformers' attention: sdpa (default) or eager.", rich_help_panel=STEP)]
LayersToTrace = Annotated[int, typer.Option(
    "--layers-to-trace", help="Trace k, k+1, k+2 layers and extrapolate, checked on the third (default 3); "
    "0 traces the whole model.", rich_help_panel=TRACE)]
TraceSteps = Annotated[int, typer.Option(
    "--steps", help="Training steps to run (at least 2; the peak is the last one's).", rich_help_panel=TRACE)]
Tolerance = Annotated[Optional[float], typer.Option(
    "--tolerance", help="Exit 1 when estimate and trace differ by more than this many percent.",
    rich_help_panel=TRACE)]
Real = Annotated[bool, typer.Option(
    "--real", help="Also run the step with real tensors on this machine's CUDA GPU and report "
    "torch.cuda.max_memory_allocated.", rich_help_panel=TRACE)]

"""`zeroplan plan`: search every dp × tp × pp layout, ZeRO stage, offload tier, micro-batch and recompute
mode for the fastest plans that fit, and say why the rest do not."""

from __future__ import annotations

from pathlib import Path

from typing import Annotated, Optional

import typer

from zeroplan.cli import options as opt
from zeroplan.core.errors import InputError
from zeroplan.render.sink import check_format, console_for, write_text

SEARCH = "Search space"
TIMING = "Step time"

Layers = Annotated[Optional[int], typer.Option("--layers", help="Transformer layers (with --params).",
                                               rich_help_panel=opt.MODEL)]
Hidden = Annotated[Optional[int], typer.Option("--hidden", help="Hidden size (with --params).",
                                               rich_help_panel=opt.MODEL)]
Heads = Annotated[Optional[int], typer.Option("--heads", help="Attention heads (with --params).",
                                              rich_help_panel=opt.MODEL)]
KvHeads = Annotated[Optional[int], typer.Option("--kv-heads", help="Key/value heads (default: --heads).",
                                                rich_help_panel=opt.MODEL)]
Vocab = Annotated[Optional[int], typer.Option("--vocab", help="Vocabulary size (with --params).",
                                              rich_help_panel=opt.MODEL)]
Ffn = Annotated[Optional[int], typer.Option("--ffn", help="MLP width (default 4 × hidden).", rich_help_panel=opt.MODEL)]
PlanGpus = Annotated[int, typer.Option("--gpus", help="Total GPUs to plan for.", rich_help_panel=opt.HARDWARE)]
RequiredGlobalBatch = Annotated[Optional[int], typer.Option(
    "--global-batch", help="Sequences per optimizer step (= micro-batch × accumulation × dp, exactly).",
    rich_help_panel=opt.STEP)]
Tokens = Annotated[Optional[str], typer.Option(
    "--tokens", help="Training length in tokens (e.g. 300B): adds time to train and GPU-hours.",
    rich_help_panel=opt.STEP)]
Calibration = Annotated[Optional[str], typer.Option(
    "--calibration", help="A profile from `zeroplan bench --save-calibration`: measured links.",
    rich_help_panel=TIMING)]
Efficiency = Annotated[Optional[float], typer.Option(
    "--efficiency", help="Share of the GPU's dense bf16 peak a large GEMM reaches (default: fitted per GPU, "
    "0.75 on A100, 0.69 on H100).",
    rich_help_panel=TIMING)]
CpuAdamRate = Annotated[Optional[str], typer.Option(
    "--cpu-adam-rate", help="CPU optimizer parameters per second per node (default 1e9).", rich_help_panel=TIMING)]
Stages = Annotated[Optional[str], typer.Option("--stages", help="ZeRO stages to try (default 0,1,2,3).",
                                               rich_help_panel=SEARCH)]
Offload = Annotated[bool, typer.Option("--offload/--no-offload", help="Also try CPU/NVMe offload tiers.",
                                       rich_help_panel=SEARCH)]
RecomputeList = Annotated[Optional[str], typer.Option(
    "--recompute", help="Recompute modes to try (default none,selective,full).", rich_help_panel=SEARCH)]
SequenceParallelChoice = Annotated[str, typer.Option(
    "--sequence-parallel", help="search (both), on or off (with tp > 1).", rich_help_panel=SEARCH)]
VirtualStages = Annotated[Optional[str], typer.Option(
    "--virtual-stages", help="Interleaved-schedule chunks to try, e.g. 1,2 (default 1).", rich_help_panel=SEARCH)]
MicroBatches = Annotated[Optional[str], typer.Option(
    "--micro-batches", help="Micro-batch sizes to try (default: every divisor of the per-rank batch).",
    rich_help_panel=SEARCH)]
TpList = Annotated[Optional[str], typer.Option("--tp", help="Only these tensor-parallel degrees, e.g. 1,2,4,8.",
                                               rich_help_panel=SEARCH)]
PpList = Annotated[Optional[str], typer.Option("--pp", help="Only these pipeline degrees.", rich_help_panel=SEARCH)]
CpList = Annotated[Optional[str], typer.Option(
    "--cp", help="Context-parallel degrees to try, e.g. 1,2,4 (default 1; needs the sequence divisible by 2·cp).",
    rich_help_panel=SEARCH)]
FsdpWithPp = Annotated[bool, typer.Option(
    "--fsdp-with-pp", help="Also try ZeRO-2/3 (FSDP) with pipeline parallelism (torchtitan, Llama 3).",
    rich_help_panel=SEARCH)]
CrossNodeTp = Annotated[bool, typer.Option("--allow-cross-node-tp", help="Let tensor parallelism span nodes.",
                                           rich_help_panel=SEARCH)]
Top = Annotated[int, typer.Option("--top", help="How many plans to show (distinct dp×tp×pp and stage).",
                                  rich_help_panel=opt.OUTPUT)]
TieTolerance = Annotated[Optional[str], typer.Option(
    "--tie-tolerance", help="Step times this close to the fastest rank as ties, won by the simpler plan "
    "(default 2%).", rich_help_panel=opt.OUTPUT)]
Progress = Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr for long searches.",
                                        rich_help_panel=opt.OUTPUT)]
WriteDeepSpeed = Annotated[Optional[str], typer.Option(
    "--write-deepspeed", help="Write a DeepSpeed config (ds_config.json) for the top plan.",
    rich_help_panel=opt.OUTPUT)]


def plan(
    gpus: PlanGpus,
    global_batch: RequiredGlobalBatch = None,
    model: opt.ModelOrConfig = None,
    params: opt.Params = None,
    layers: Layers = None,
    hidden: Hidden = None,
    heads: Heads = None,
    kv_heads: KvHeads = None,
    vocab: Vocab = None,
    ffn: Ffn = None,
    seq_len: opt.SeqLen = None,
    tokens: Tokens = None,
    gpu: opt.Gpu = None,
    cluster: opt.Cluster = None,
    presets_file: opt.PresetsFile = None,
    gpus_per_node: opt.GpusPerNode = None,
    cpu_memory: opt.CpuMemory = None,
    nvme: opt.Nvme = None,
    nvme_bandwidth: opt.NvmeBandwidth = None,
    intra_node_bandwidth: opt.IntraNodeBandwidth = None,
    inter_node_bandwidth: opt.InterNodeBandwidth = None,
    gpu_memory: opt.GpuMemory = None,
    runtime_reserve: opt.RuntimeReserve = None,
    fragmentation: opt.Fragmentation = None,
    host_reserve: opt.HostReserve = None,
    precision: opt.Precision = "mixed",
    optimizer: opt.Optimizer = "adam",
    calibration: Calibration = None,
    efficiency: Efficiency = None,
    cpu_adam_rate: CpuAdamRate = None,
    stages: Stages = None,
    offload: Offload = True,
    recompute: RecomputeList = None,
    sequence_parallel: SequenceParallelChoice = "search",
    virtual_stages: VirtualStages = None,
    micro_batches: MicroBatches = None,
    tp: TpList = None,
    pp: PpList = None,
    cp: CpList = None,
    fsdp_with_pp: FsdpWithPp = False,
    allow_cross_node_tp: CrossNodeTp = False,
    flash_attention: opt.FlashAttention = True,
    top: Top = 5,
    tie_tolerance: TieTolerance = None,
    output_format: opt.FormatTableJsonCsv = "table",
    output: opt.Output = None,
    units: opt.Units = "iec",
    progress: Progress = True,
    write_deepspeed: WriteDeepSpeed = None,
    plot: opt.Plot = None,
) -> None:
    """The fastest training plans that fit: layout, ZeRO stage, offload, micro-batch and recompute, with step
    time, tokens/s, MFU and time to train; and why the rest of the search space does not fit."""
    from zeroplan.search.inputs import PlanInputs
    from zeroplan.search.run import run_plan

    output_format = check_format(output_format, ("table", "json", "csv"))
    if write_deepspeed is not None and output is not None and Path(write_deepspeed).resolve() == Path(output).resolve():
        raise InputError("--write-deepspeed", f"{write_deepspeed} is also the --output file",
                         "give the DeepSpeed config and the report different files")
    inputs = PlanInputs(
        gpus=gpus, global_batch=global_batch, seq_len=seq_len, model=model, params=params, layers=layers,
        hidden=hidden, heads=heads, kv_heads=kv_heads, vocab=vocab, ffn=ffn, gpu=gpu, cluster=cluster,
        gpus_per_node=gpus_per_node, cpu_memory=cpu_memory, nvme=nvme, nvme_bandwidth=nvme_bandwidth,
        intra_node_bandwidth=intra_node_bandwidth, inter_node_bandwidth=inter_node_bandwidth, gpu_memory=gpu_memory,
        runtime_reserve=runtime_reserve, fragmentation=fragmentation, host_reserve=host_reserve,
        precision=precision, optimizer=optimizer, tokens=tokens, calibration=calibration, efficiency=efficiency,
        cpu_adam_rate=cpu_adam_rate, stages=stages, offload=offload, recompute=recompute,
        sequence_parallel=sequence_parallel.strip().lower(), virtual_stages=virtual_stages,
        micro_batches=micro_batches, tp=tp, pp=pp, cp=cp, fsdp_pipeline=fsdp_with_pp,
        allow_cross_node_tp=allow_cross_node_tp,
        flash_attention=flash_attention, top=top, tie_tolerance=tie_tolerance, units=units.strip().lower())
    if plot is not None and output is not None and Path(plot).resolve() == Path(output).resolve():
        raise InputError("--plot", f"{plot} is also the --output file", "give the picture and the report different files")
    outcome = run_plan(inputs, show_progress=progress)
    if plot is not None:
        from zeroplan.search.plot import plot_plans

        plot_plans(outcome, plot, (model, calibration))
    if write_deepspeed is not None:
        from zeroplan.search.export_top import write_deepspeed_config

        write_deepspeed_config(outcome, write_deepspeed, (model, calibration))
    if output_format == "table":
        from zeroplan.search.table import render

        console = console_for(output)
        render(outcome, console)
        if output is not None:
            write_text(console.export_text(), output, (model, calibration))
        return
    from zeroplan.search import report

    write_text(report.to_json(outcome) if output_format == "json" else report.to_csv(outcome), output,
               (model, calibration))

"""`zeroplan estimate`: a thin layer from flags to zeroplan.estimate.run and back out through a formatter."""

from __future__ import annotations

from pathlib import Path

from zeroplan.cli import options as opt
from zeroplan.render.sink import check_format, write_text
from zeroplan.core.errors import InputError


def estimate(
    params: opt.Params = None,
    model: opt.ModelOrConfig = None,
    gpus: opt.Gpus = 1,
    gpus_per_node: opt.GpusPerNode = None,
    gpu: opt.Gpu = None,
    cluster: opt.Cluster = None,
    presets_file: opt.PresetsFile = None,
    tp: opt.Tp = 1,
    pp: opt.Pp = 1,
    stage: opt.Stage = None,
    offload_optimizer: opt.OffloadOptimizer = None,
    offload_params: opt.OffloadParams = None,
    zeropp: opt.ZeroPP = None,
    hpz_partition_size: opt.HpzPartitionSize = None,
    precision: opt.Precision = "mixed",
    optimizer: opt.Optimizer = "adam",
    largest_layer_params: opt.LargestLayer = None,
    cpu_memory: opt.CpuMemory = None,
    nvme: opt.Nvme = None,
    nvme_bandwidth: opt.NvmeBandwidth = None,
    intra_node_bandwidth: opt.IntraNodeBandwidth = None,
    inter_node_bandwidth: opt.InterNodeBandwidth = None,
    gpu_memory: opt.GpuMemory = None,
    runtime_reserve: opt.RuntimeReserve = None,
    fragmentation: opt.Fragmentation = None,
    activation_reserve: opt.ActivationReserve = None,
    host_reserve: opt.HostReserve = None,
    convention: opt.Convention = "paper",
    framework: opt.Framework = None,
    zero_init: opt.ZeroInit = True,
    buffer_factor: opt.BufferFactor = 1.5,
    seq_len: opt.SeqLen = None,
    micro_batch: opt.MicroBatch = None,
    recompute: opt.Recompute = None,
    activations: opt.Activations = None,
    flash_attention: opt.FlashAttention = True,
    sequence_parallel: opt.SequenceParallel = False,
    grad_accum: opt.GradAccum = None,
    global_batch: opt.GlobalBatch = None,
    max_micro_batch: opt.MaxMicroBatch = False,
    reduce_bucket_size: opt.ReduceBucket = None,
    allgather_bucket_size: opt.AllgatherBucket = None,
    prefetch_bucket_size: opt.PrefetchBucket = None,
    max_live_parameters: opt.MaxLiveParameters = None,
    sub_group_size: opt.SubGroupSize = None,
    overlap_comm: opt.OverlapComm = None,
    calibration: opt.CalibrationFile = None,
    output_format: opt.Format = "table",
    output: opt.Output = None,
    units: opt.Units = "iec",
    explain: opt.Explain = False,
    plot: opt.Plot = None,
) -> None:
    """What every GPU holds at each ZeRO stage and offload tier, what each step sends, and what to use."""
    from zeroplan.estimate.run import build_plan
    from zeroplan.inputs.estimate_inputs import EstimateInputs

    output_format = check_format(output_format)
    if explain and output_format == "csv":
        raise InputError("--explain", "a CSV row has no room for formulas",
                         "use --explain with --format table, markdown or json")
    inputs = EstimateInputs(
        gpus=gpus, params=params, model=model, gpu=gpu, cluster=cluster, gpus_per_node=gpus_per_node, tp=tp, pp=pp,
        precision=precision, optimizer=optimizer, convention=convention.strip().lower(),
        framework=framework.strip().lower() if framework is not None else None, stage=stage,
        offload_optimizer=offload_optimizer.strip().lower() if offload_optimizer else None,
        offload_params=offload_params.strip().lower() if offload_params else None,
        largest_layer_params=largest_layer_params, zero_init=zero_init, buffer_factor=buffer_factor,
        cpu_memory=cpu_memory, nvme=nvme, nvme_bandwidth=nvme_bandwidth,
        intra_node_bandwidth=intra_node_bandwidth, inter_node_bandwidth=inter_node_bandwidth, gpu_memory=gpu_memory,
        runtime_reserve=runtime_reserve, fragmentation=fragmentation, activation_reserve=activation_reserve,
        host_reserve=host_reserve, zeropp=zeropp, hpz_partition_size=hpz_partition_size, units=units.strip().lower(),
        seq_len=seq_len, micro_batch=micro_batch, recompute=recompute.strip().lower() if recompute else None,
        activations=activations, flash_attention=flash_attention, sequence_parallel=sequence_parallel, grad_accum=grad_accum,
        global_batch=global_batch, max_micro_batch=max_micro_batch, reduce_bucket_size=reduce_bucket_size,
        allgather_bucket_size=allgather_bucket_size, prefetch_bucket_size=prefetch_bucket_size,
        max_live_parameters=max_live_parameters, sub_group_size=sub_group_size, overlap_comm=overlap_comm,
        calibration=calibration,
    )
    if plot is not None and output is not None and Path(plot).resolve() == Path(output).resolve():
        raise InputError("--plot", f"{plot} is also the --output file", "give the picture and the table different files")
    plan = build_plan(inputs)
    if plot is not None:
        from zeroplan.estimate.plot import plot_estimate

        plot_estimate(plan, plot, (model, calibration))
    if output_format == "table":
        from zeroplan.core.explain import explain_lines
        from zeroplan.estimate.table import render, render_explain
        from zeroplan.render.terminal import Canvas

        canvas = Canvas.for_output(to_file=output is not None)
        render(plan, canvas)
        if explain:
            render_explain(explain_lines(plan.request, plan.estimates, inputs.units), canvas)
        write_text(canvas.text(), output, (model, calibration))
        return
    from zeroplan.core.explain import explain_lines
    from zeroplan.estimate import report

    lines = explain_lines(plan.request, plan.estimates, inputs.units) if explain else None
    if output_format == "json":
        text = report.to_json(plan, explain=lines)
    else:
        text = {"csv": report.to_csv, "markdown": report.to_markdown}[output_format](plan)
        if lines:
            text += "\nHow each figure is computed:\n\n" + "".join(f"- {line.strip()}\n" for line in lines)
    write_text(text, output, (model, calibration))

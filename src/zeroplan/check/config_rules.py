"""Rules that need only the config (and the world size): ZP001-ZP010, ZP016-ZP020. Facts: docs/formulas.md §18."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
import json

from zeroplan.deepspeed import keys as ds_keys
from zeroplan.deepspeed import startup_model
from zeroplan.deepspeed.batch import BatchProblem, deepspeed_fill, neither_batch_size
from zeroplan.deepspeed.config_view import ConfigView
from zeroplan.deepspeed.context import CheckContext
from zeroplan.deepspeed.findings import ERROR, WARNING, Finding, Skipped
from zeroplan.core.memory.activations import MOE_DROPLESS_ALLOWANCE
from zeroplan.core.model.experts import model_expert_params
from zeroplan.core.parallel.grid import ParallelDims
from zeroplan.core.units import shown

BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def batch_identity(view: ConfigView, skipped: list[Skipped]) -> Iterator[Finding]:
    """ZP001, emulating DeepSpeed's start-up: infer the missing batch values, then require the identity."""
    values = {key: view.count((key,), positive=True) for key in BATCH_KEYS}
    if any(view.raw(key) is not None and values[key] is None for key in BATCH_KEYS):
        return  # an unresolved "auto" or an invalid value, reported already
    train, micro, accum = (values[k] for k in BATCH_KEYS)
    dp = view.env.dp
    if train is None and micro is None:  # DeepSpeed needs one of them whatever the world size
        problem = neither_batch_size()
        yield Finding("ZP001", ERROR, problem.message, problem.fix, (problem.key,))
        return
    if dp is None:
        if train is not None and micro is not None and accum is not None and train % (micro * accum):
            yield Finding("ZP001", ERROR, f"train_batch_size {train} is not a multiple of micro batch {micro} × "
                          f"accumulation {accum} = {micro * accum}: no data-parallel world size satisfies the identity",
                          f"set train_batch_size to a multiple of {micro * accum}", ("train_batch_size",))
        elif view.env.world is None:
            skipped.append(Skipped(("ZP001",), "the data-parallel world size is unknown: give --gpus (and --tp/--pp)"))
        return
    result = deepspeed_fill(train, micro, accum, dp)
    if isinstance(result, BatchProblem):
        parallel = _parallel_text(view)
        yield Finding("ZP001", ERROR, result.message + parallel, result.fix, (result.key,))


def _parallel_text(view: ConfigView) -> str:
    env = view.env
    if env.model_parallel == 1:
        return f"; dp = world {env.world}"
    parts = [f"tp {env.tp}", f"pp {env.pp}"] + ([f"sequence_parallel_size {env.sp}"] if env.sp > 1 else [])
    return f"; dp = world {env.world} / ({' · '.join(parts)})"


def precision(view: ConfigView) -> Iterator[Finding]:
    """ZP002: DeepSpeed asserts that fp16 and bf16 are not both enabled."""
    bf16_section = "bf16" if "bf16" in view.data else "bfloat16"
    if view.enabled("fp16") and view.enabled(bf16_section):
        yield Finding("ZP002", ERROR, "fp16 and bf16 are both enabled: DeepSpeed stops at start-up",
                      "enable one: bf16 on A100/H100 and newer, fp16 on V100 and older", (bf16_section, "enabled"))


def offload(view: ConfigView) -> Iterator[Finding]:
    """ZP003-ZP006: offload settings DeepSpeed ignores, downgrades or rejects at this stage."""
    stage = view.stage
    if stage is None:
        return
    optimizer_tier, param_tier = view.device("offload_optimizer"), view.device("offload_param")
    if param_tier != "none" and stage < 3:
        yield Finding("ZP003", WARNING, f"offload_param (device {param_tier}) is ignored at stage {stage}: DeepSpeed "
                      "offloads parameters only at stage 3, so they stay on the GPU",
                      "set zero_optimization.stage to 3, or remove offload_param",
                      ("zero_optimization", "offload_param"))
    if optimizer_tier != "none" and stage == 0:
        yield Finding("ZP003", WARNING, f"offload_optimizer (device {optimizer_tier}) is ignored at stage 0 (ZeRO "
                      "disabled)", "set zero_optimization.stage to 1, 2 or 3, or remove offload_optimizer",
                      ("zero_optimization", "offload_optimizer"))
    if optimizer_tier == "nvme" and stage in (1, 2):
        yield Finding("ZP004", WARNING, f"offload_optimizer to NVMe at stage {stage}: DeepSpeed silently keeps the "
                      "optimizer states in CPU memory instead (NVMe offload is stage 3 only)",
                      "set zero_optimization.stage to 3, or offload_optimizer.device to cpu",
                      ("zero_optimization", "offload_optimizer", "device"))
    for block, tier in (("offload_optimizer", optimizer_tier), ("offload_param", param_tier)):
        if tier == "nvme" and not view.offload(block).get("nvme_path"):
            yield Finding("ZP005", ERROR, f"{block} goes to NVMe but has no nvme_path", f'add "nvme_path": '
                          f'"/local_nvme" (a directory on the NVMe drive) to {block}', ("zero_optimization", block))
    ratio_path = ("zero_optimization", "offload_optimizer", "ratio")
    ratio = view.coerced(ratio_path, view.offload("offload_optimizer").get("ratio", 1.0), startup_model.to_float)
    if ratio is not None and 0 <= ratio < 1 and stage != 3:  # outside [0, 1]: refused (ZP016)
        yield Finding("ZP006", ERROR, f"partial optimizer offload (ratio {ratio:g}) at stage {stage}: DeepSpeed "
                      "supports it only at stage 3 and stops at start-up",
                      "set zero_optimization.stage to 3, or remove ratio", ratio_path)


def deprecated(view: ConfigView) -> Iterator[Finding]:
    """ZP007: keys DeepSpeed still reads with a warning, and the key to use instead."""
    if isinstance(view.data.get("zero_optimization"), bool):
        yield Finding("ZP007", WARNING, "zero_optimization given as true/false is deprecated (it means stage "
                      f"{int(view.data['zero_optimization'])})", 'write "zero_optimization": {"stage": 1}',
                      ("zero_optimization",))
    for old, (new, advice) in ds_keys.DEPRECATED.items():
        if view.raw(*old) is None:
            continue
        both = new and (view.raw(*new) is not None
                        or (new[-1] in ds_keys.ALIASES and view.raw(*new[:-1], ds_keys.ALIASES[new[-1]]) is not None))
        if both:
            yield Finding("ZP007", ERROR, f"{'.'.join(old)} (deprecated) and its replacement {'.'.join(new)} are both "
                          "given: DeepSpeed refuses the pair", f"remove {'.'.join(old)}", old)
        else:
            yield Finding("ZP007", WARNING, f"{'.'.join(old)} is deprecated", advice, old)
    params = view.raw("optimizer", "params")
    if isinstance(params, dict) and isinstance(params.get("max_grad_norm"), (int, float)) and params["max_grad_norm"] > 0:
        yield Finding("ZP007", WARNING, "optimizer.params.max_grad_norm is not supported by DeepSpeed (it warns and "
                      "ignores it)", f'use top-level "gradient_clipping": {params["max_grad_norm"]}',
                      ("optimizer", "params", "max_grad_norm"))


# ZP008 lists this many unknown keys of one block, then one finding for the rest: a file of 10,000 stray keys
# is one mistake (the wrong file, a generated dump), and each listed key costs a closest-match search.
MAX_UNKNOWN_KEYS_LISTED = 50
# A key longer than this gets no closest-match search (its cost grows with the key's length) and is shown cut.
MAX_KEY_CHARS_MATCHED = 100


def _unknown_by_block(view: ConfigView) -> Iterator[tuple[tuple[str, ...], frozenset, bool, list[str]]]:
    """(block path, its known keys, whether DeepSpeed rejects unknown ones, the unknown keys in file order)."""
    for where, (known, rejected) in ds_keys.KEY_SETS.items():
        block = view.raw(*where) if where else view.data
        if isinstance(block, dict):
            yield where, known, rejected, [key for key in block
                                           if key not in known and (*where, key) not in ds_keys.DEPRECATED]


def unknown_keys(view: ConfigView) -> Iterator[Finding]:
    """ZP008: keys outside DeepSpeed's schema, with the closest known key."""
    for where, known, rejected, unknown in _unknown_by_block(view):
        place = ".".join(where) or "the top level"
        consequence = ("DeepSpeed rejects unknown keys here and stops at start-up" if rejected
                       else "DeepSpeed ignores it silently")
        for key in unknown[:MAX_UNKNOWN_KEYS_LISTED]:
            close = (difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
                     if len(key) <= MAX_KEY_CHARS_MATCHED else [])
            name = repr(key) if len(key) <= MAX_KEY_CHARS_MATCHED else f"{shown(key)!r} ({len(key):,} characters)"
            yield Finding("ZP008", ERROR if rejected else WARNING, f"unknown key {name} in {place}: {consequence}",
                          f"did you mean {close[0]!r}?" if close else "remove it (see DeepSpeed's config-json docs)",
                          (*where, key))
        rest = unknown[MAX_UNKNOWN_KEYS_LISTED:]
        if rest:
            yield Finding("ZP008", ERROR if rejected else WARNING,
                          f"{len(rest):,} more unknown keys in {place} (not listed): {consequence}",
                          "check that this is the DeepSpeed config; remove the unknown keys",
                          (*where, rest[0]))


def parallel(view: ConfigView, skipped: list[Skipped]) -> Iterator[Finding]:
    """ZP018 (pipeline with ZeRO-2/3), ZP009 (world not divisible by tp·pp), ZP010 (a TP group spanning nodes)."""
    env = view.env
    stage = view.stage
    if env.pp > 1 and stage is not None and stage >= 2:
        yield Finding("ZP018", ERROR, f"pipeline parallelism (pp {env.pp}) with ZeRO stage {stage}: DeepSpeed's "
                      "pipeline engine asserts that ZeRO-2 and ZeRO-3 are incompatible with it",
                      "set zero_optimization.stage to 0 or 1, or drop pipeline parallelism",
                      ("zero_optimization", "stage"))
    if env.world is None:
        skipped.append(Skipped(("ZP009", "ZP010"), "the world size is unknown: give --gpus"))
        return
    if env.world % env.model_parallel:
        sizes = f"tp {env.tp} × pp {env.pp}" + (f" × sequence_parallel_size {env.sp}" if env.sp > 1 else "")
        floor = max(1, env.world // env.model_parallel) * env.model_parallel
        yield Finding("ZP009", ERROR, f"world size {env.world} is not divisible by {sizes} = {env.model_parallel}",
                      f"use {floor} GPUs, or change the tensor/pipeline sizes", ("tensor_parallel",)
                      if view.raw("tensor_parallel") is not None else ())
        return
    if env.tp == 1:
        return
    if env.gpus_per_node is None:
        skipped.append(Skipped(("ZP010",), "GPUs per node unknown: give --gpu, --cluster or --gpus-per-node"))
        return
    dims = ParallelDims(world=env.world, tp=env.tp, pp=env.pp, gpus_per_node=env.gpus_per_node)
    if not dims.tp_intra_node:
        yield Finding("ZP010", WARNING, f"tensor-parallel groups of {env.tp} span nodes of {env.gpus_per_node} GPUs: "
                      "every layer's all-reduces cross the slower inter-node network",
                      f"keep tp ≤ {env.gpus_per_node} and a divisor of it; use pipeline or data parallelism across nodes",
                      ("tensor_parallel",) if view.raw("tensor_parallel") is not None else ())


EXPERT_RULES = ("ZP021", "ZP022", "ZP023", "ZP024")


def experts(view: ConfigView, context: CheckContext, skipped: list[Skipped]) -> Iterator[Finding]:
    """ZP021-ZP024: expert parallelism from --ep/--etp, a plan file's parallel.ep/etp, or DeepSpeed AutoEP's
    expert_parallel block (enabled, autoep_size, expert_tensor_parallel_size), checked as DeepSpeed's
    module_inject/auto_ep_config.py and auto_ep_folding.py do, and the capacity factor a plan file gives."""
    env = view.env
    block = view.raw("expert_parallel")
    autoep = isinstance(block, dict) and block.get("enabled") is True
    where = ("expert_parallel", "autoep_size") if autoep else ("expert_parallel",) if block is not None else ()
    if autoep and env.etp != 1 and context.etp is None:
        yield Finding("ZP022", ERROR, f"expert_parallel.expert_tensor_parallel_size {env.etp}: DeepSpeed's AutoEP "
                      "reserves it and stops at start-up (only 1 is supported)", "set expert_tensor_parallel_size to 1",
                      ("expert_parallel", "expert_tensor_parallel_size"))
    if env.ep == 1 and env.etp == 1:
        yield from _capacity(context)
        return
    if env.world is None or env.world % (env.tp * env.pp):
        skipped.append(Skipped(("ZP022", "ZP023"), "the world size is unknown or not divisible: give --gpus"))
    else:
        stage_ranks = env.world // env.pp
        if stage_ranks % (env.ep * env.etp):
            yield Finding("ZP022", ERROR, f"ep {env.ep} × etp {env.etp} = {env.ep * env.etp} does not divide the "
                          f"{stage_ranks} ranks of a pipeline stage (world {env.world} / pp {env.pp}): the expert-data-"
                          "parallel size would not be whole (DeepSpeed's build_folding_spec and Megatron-Core refuse it)",
                          f"use an ep × etp that divides {stage_ranks}", where)
        elif env.gpus_per_node is None:
            skipped.append(Skipped(("ZP023",), "GPUs per node unknown: give --gpu, --cluster or --gpus-per-node"))
        else:
            dims = ParallelDims(env.world, env.tp, env.pp, env.gpus_per_node, ep=env.ep, etp=env.etp)
            if not dims.ep_intra_node:
                yield Finding("ZP023", WARNING, f"expert-parallel groups of {env.ep} span {dims.ep_nodes_spanned} nodes "
                              f"of {env.gpus_per_node} GPUs: every MoE layer's all-to-all dispatch and combine crosses "
                              "the network, forward and backward", f"keep ep × etp ≤ {env.gpus_per_node} to stay on "
                              "NVLink, or check with `zeroplan plan --ep` that the exposed all-to-all pays for the "
                              "memory it saves", where)
    if context.model is None:
        skipped.append(Skipped(("ZP021",), "no model: give --model (a preset or config.json) to know its experts"))
    else:
        from zeroplan.deepspeed import planning

        model = planning.model_spec(context)
        split = model_expert_params(model)
        if split is None:
            yield Finding("ZP021", ERROR, f"expert parallelism ep {env.ep} with {model.name}, which has no experts "
                          "(a dense model)", "drop the expert parallelism, or check the model", where)
        elif split.experts % env.ep:
            divisors = ", ".join(str(d) for d in range(1, split.experts + 1) if split.experts % d == 0)
            yield Finding("ZP021", ERROR, f"ep {env.ep} does not divide the {split.experts} experts of {model.name}: "
                          "each EP rank holds experts/ep whole experts (DeepSpeed's AutoEP and Megatron-Core refuse it)",
                          f"use an ep that divides {split.experts}: {divisors}", where)
    yield from _capacity(context)


def _capacity(context: CheckContext) -> Iterator[Finding]:
    """ZP024: a capacity factor drops what routing sends an expert beyond it (DeepSpeed-MoE's drop_tokens,
    Megatron's --moe-expert-capacity-factor); below 1 + the planner's imbalance allowance that happens every step."""
    factor = context.capacity_factor
    if factor is None:
        return
    allowance = 1 + float(MOE_DROPLESS_ALLOWANCE)
    if factor < allowance:
        yield Finding("ZP024", WARNING, f"capacity factor {factor:g} drops every token routed to an expert beyond "
                      f"{factor:g} × its even share: below {allowance:g} (the {float(MOE_DROPLESS_ALLOWANCE):.0%} "
                      "imbalance the planner allows a dropless router) tokens are dropped every step",
                      f"raise the capacity factor to at least {allowance:g}, or train dropless", ("capacity_factor",))


def duplicates(duplicate_paths: list[tuple[str, ...]]) -> Iterator[Finding]:
    """ZP017: DeepSpeed loads JSON with a hook that rejects duplicate keys."""
    for path in duplicate_paths:
        yield Finding("ZP017", ERROR, f"key {path[-1]!r} is given twice in one object: DeepSpeed refuses the file",
                      "keep one of them", path)


def refusals(view: ConfigView, reported: list[Finding]) -> Iterator[Finding]:
    """ZP016 (a value DeepSpeed 0.19.8 refuses) and ZP020 (a removed key), from DeepSpeed's own config model.

    A key another rule already reports as an error (ZP002, ZP006, ZP007, ZP008) is not reported twice."""
    covered = {finding.path for finding in reported if finding.severity == ERROR}
    # ZP008 counts the unknown keys it does not list: DeepSpeed's "extra inputs" refusal of each is that one
    unlisted = {(*where, key) for where, _, rejected, unknown in _unknown_by_block(view) if rejected
                for key in unknown[MAX_UNKNOWN_KEYS_LISTED:]}
    for path, message in startup_model.refusals(view.data):
        if path in covered or (path in unlisted and "Extra inputs" in message):
            continue
        covered.add(path)
        where = ".".join(path) or "the config"
        if message.startswith("DeepSpeedConfigError"):
            yield Finding("ZP020", ERROR, f"{where}: DeepSpeed refuses the config at start-up: "
                          f"{message.removeprefix('DeepSpeedConfigError: ')}", f"remove {where}", path)
            continue
        value = view.raw(*path) if path else view.data
        shown = f" = {_shown(value)}" if path and not isinstance(value, (dict, list)) else ""
        yield Finding("ZP016", ERROR, f"{where}{shown}: DeepSpeed refuses it at start-up ({message})",
                      _refusal_fix(path, message), path)


def _shown(value) -> str:
    return json.dumps(value) if isinstance(value, (str, bool, int, float)) or value is None else repr(value)


def _refusal_fix(path: tuple[str, ...], message: str) -> str:
    if "Extra inputs" in message:
        return f"remove {path[-1]} (DeepSpeed 0.19.8 does not know it here)"
    if path == ("zero_optimization", "stage"):
        return "write a whole number 0-3"
    if path and path[-1] == "device":
        return 'write "none", "cpu" or "nvme" (lower case, quoted: a quoteless value runs to the end of the line)'
    if path and path[-1] in ("offload_optimizer", "offload_param"):
        return f'write "{path[-1]}": {{"device": "cpu"}}'
    if path == ("zero_optimization",):
        return 'write "zero_optimization": {"stage": 2, ...}'
    if path in (("fp16",), ("bf16",), ("bfloat16",)):
        return f'write "{path[0]}": {{"enabled": true}}'
    if not path:
        return "the file must hold one object of keys: { ... }"
    if "boolean" in message:
        return "write true or false"
    if "integer" in message or "greater than" in message:
        return "write a whole number (e.g. 500000000 or 5e8, unquoted)"
    return "see DeepSpeed's config-json docs"

"""What DeepSpeed 0.19.8's config classes do with a parsed config: the values they coerce, the ones they refuse.

DeepSpeed's config models are pydantic 2 models in lax mode (extra="forbid", "auto" dropped before
validation): "3" is read as stage 3, "true"/"on"/1 as true, 5e8 as 500000000, while "CPU", a string
where an offload block belongs, "zero_optimization": null or an unknown key stop it at start-up. This
module mirrors that, standard library only; the field tables are compared with DeepSpeed's own
model_fields by the tests wherever deepspeed is installed.

Refusals are (key path, message) pairs in DeepSpeed's or pydantic's words. Batch arithmetic is not here:
DeepSpeed does it on the raw values with the run's world size, which check's ZP001 knows.
"""

from __future__ import annotations

import math
import re

# ================================================================================
class _Refuse(ValueError):
    """A value DeepSpeed's model refuses; .msg is pydantic's text."""

    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg


_INT_STR_RE = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")
_BOOL_TRUE = {"1", "on", "t", "true", "y", "yes"}
_BOOL_FALSE = {"0", "off", "f", "false", "n", "no"}
_I64 = 2**63


def _to_int(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise _Refuse("Input should be a finite number")
        if v != int(v):
            raise _Refuse("Input should be a valid integer, got a number with a fractional part")
        if not -_I64 < v < _I64:
            raise _Refuse("Unable to parse input string as an integer, exceeded maximum size")
        return int(v)
    if isinstance(v, str):
        t = v.strip()
        if _INT_STR_RE.fullmatch(t):
            return int(t.split(".")[0].replace("_", ""))
        raise _Refuse("Input should be a valid integer, unable to parse string as an integer")
    raise _Refuse("Input should be a valid integer")


def _to_bool(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        if v in (0, 1):
            return bool(v)
        raise _Refuse("Input should be a valid boolean, unable to interpret input")
    if isinstance(v, float):
        if v in (0.0, 1.0):
            return bool(v)
        raise _Refuse("Input should be a valid boolean")
    if isinstance(v, str):
        t = v.lower()
        if t in _BOOL_TRUE:
            return True
        if t in _BOOL_FALSE:
            return False
        raise _Refuse("Input should be a valid boolean, unable to interpret input")
    raise _Refuse("Input should be a valid boolean")


def _to_float(v):
    if isinstance(v, (bool, int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise _Refuse("Input should be a valid number, unable to parse string as a number") from None
    raise _Refuse("Input should be a valid number")


def _to_stage(v):
    msg = "Input should be 0, 1, 2, 3 or 3"  # ZeroStageEnum: 0..3 plus max_stage=3
    try:
        if isinstance(v, (bool, int)):
            i = int(v)
        elif isinstance(v, float):
            if not (math.isfinite(v) and v == int(v)):
                raise _Refuse(msg)
            i = int(v)
        elif isinstance(v, str):
            i = _to_int(v)
        else:
            raise _Refuse(msg)
    except _Refuse:
        raise _Refuse(msg) from None
    if i not in (0, 1, 2, 3):
        raise _Refuse(msg)
    return i


def _to_device(v):
    if isinstance(v, str) and v in ("none", "cpu", "nvme"):
        return v
    raise _Refuse("Input should be 'none', 'cpu' or 'nvme'")


def _to_path(v):
    if v is None:
        return None
    if isinstance(v, str):
        return v
    raise _Refuse("Input should be an instance of Path")


def _opt(conv):
    return lambda v: None if v is None else conv(v)


def _any(v):
    return v


def _ge(n):
    return ("ge", n)


def _gt(n):
    return ("gt", n)


def _le(n):
    return ("le", n)


# name -> (converter, default, constraints, alias)
OFFLOAD_PARAM_FIELDS = {
    "device": (_to_device, "none", (), None),
    "nvme_path": (_to_path, None, (), None),
    "buffer_count": (_to_int, 5, (_ge(0), ), None),
    "buffer_size": (_to_int, 10**8, (_ge(0), ), None),
    "max_in_cpu": (_to_int, 10**9, (_ge(0), ), None),
    "pin_memory": (_to_bool, True, (), None),
}
OFFLOAD_OPTIMIZER_FIELDS = {
    "device": (_to_device, "none", (), None),
    "nvme_path": (_to_path, None, (), None),
    "buffer_count": (_to_int, 4, (_ge(0), ), None),
    "pin_memory": (_to_bool, True, (), None),
    "pipeline_read": (_to_bool, False, (), None),
    "pipeline_write": (_to_bool, False, (), None),
    "fast_init": (_to_bool, False, (), None),
    "ratio": (_to_float, 1.0, (_ge(0.0), _le(1.0)), None),
    "super_offload": (_to_bool, False, (), None),
    "cpuadam_cores_perc": (_to_float, 0.8, (_ge(0.0), _le(1.0)), None),
}


def _submodel(fields, title):

    def conv(v):
        if v is None:
            return None
        if not isinstance(v, dict):
            raise _Refuse(f"Input should be a valid dictionary or instance of {title}")
        return _validate(v, fields)  # raises _Nested

    return conv


def _mapping_or_none(title):

    def conv(v):
        if v is None or isinstance(v, dict):
            return v  # nested content not modelled (see NOTES.md)
        raise _Refuse(f"Input should be a valid dictionary or instance of {title}")

    return conv


ZERO_FIELDS = {
    "stage": (_to_stage, 0, (), None),
    "contiguous_gradients": (_to_bool, True, (), None),
    "reduce_scatter": (_to_bool, True, (), None),
    "reduce_bucket_size": (_to_int, 5 * 10**8, (_gt(0), ), None),
    "use_multi_rank_bucket_allreduce": (_to_bool, True, (), None),
    "allgather_partitions": (_to_bool, True, (), None),
    "allgather_bucket_size": (_to_int, 5 * 10**8, (_ge(0), ), None),
    "overlap_comm": (_opt(_to_bool), None, (), None),
    "compute_grad_norm": (_to_bool, True, (), None),
    "load_from_fp32_weights": (_to_bool, True, (), None),
    "elastic_checkpoint": (_to_bool, False, (), None),
    "offload_param": (_submodel(OFFLOAD_PARAM_FIELDS, "DeepSpeedZeroOffloadParamConfig"), None, (), None),
    "offload_optimizer": (_submodel(OFFLOAD_OPTIMIZER_FIELDS, "DeepSpeedZeroOffloadOptimizerConfig"), None, (), None),
    "zenflow": (_mapping_or_none("ZenFlowConfig"), None, (), None),
    "sub_group_size": (_to_int, 10**9, (_ge(0), ), None),
    "cpu_offload_param": (_opt(_to_bool), None, (), None),
    "cpu_offload_use_pin_memory": (_opt(_to_bool), None, (), None),
    "cpu_offload": (_opt(_to_bool), None, (), None),
    "prefetch_bucket_size": (_to_int, 5 * 10**7, (_ge(0), ), "stage3_prefetch_bucket_size"),
    "param_persistence_threshold": (_to_int, 10**5, (_ge(0), ), "stage3_param_persistence_threshold"),
    "model_persistence_threshold": (_to_int, 2**63 - 1, (_ge(0), ), "stage3_model_persistence_threshold"),
    "max_live_parameters": (_to_int, 10**9, (_ge(0), ), "stage3_max_live_parameters"),
    "max_reuse_distance": (_to_int, 10**9, (_ge(0), ), "stage3_max_reuse_distance"),
    "gather_16bit_weights_on_model_save": (_to_bool, False, (), "stage3_gather_16bit_weights_on_model_save"),
    "module_granularity_threshold": (_to_int, 0, (), "stage3_module_granularity_threshold"),
    "use_all_reduce_for_fetch_params": (_to_bool, False, (), "stage3_use_all_reduce_for_fetch_params"),
    "allgather_sequential": (_to_bool, False, (), "stage3_allgather_sequential"),
    "stage3_gather_fp16_weights_on_model_save": (_to_bool, False, (), None),
    "ignore_unused_parameters": (_to_bool, True, (), None),
    "legacy_stage1": (_to_bool, False, (), None),
    "round_robin_gradients": (_to_bool, False, (), None),
    "parameter_alignment": (_to_bool, False, (), None),
    "zero_hpz_partition_size": (_to_int, 1, (_ge(0), ), None),
    "zero_quantized_weights": (_to_bool, False, (), None),
    "zero_quantized_nontrainable_weights": (_to_bool, False, (), None),
    "zero_quantized_gradients": (_to_bool, False, (), None),
    "memory_efficient_linear": (_to_bool, True, (), None),
    "pipeline_loading_checkpoint": (_to_bool, False, (), None),
    "override_module_apply": (_to_bool, True, (), None),
    "log_trace_cache_warnings": (_to_bool, False, (), None),
    "enable_sanity_checks": (_to_bool, False, (), None),
    "save_muon_momentum_buffer_in_memory": (_to_bool, False, (), None),
    "leaf_module": (_mapping_or_none("DeepSpeedZeroLeafModuleConfig"), None, (), None),
}

FP16_FIELDS = {
    "enabled": (_to_bool, False, (), None),
    "auto_cast": (_to_bool, False, (), None),
    "loss_scale": (_any, 0, (), None),
    "initial_scale_power": (_any, 16, (), None),
    "loss_scale_window": (_any, 1000, (), None),
    "hysteresis": (_any, 2, (), None),
    "consecutive_hysteresis": (_any, False, (), None),
    "min_loss_scale": (_any, 1, (), None),
    "fp16_master_weights_and_grads": (_to_bool, False, (), None),
}
BF16_FIELDS = {
    "enabled": (_to_bool, False, (), None),
    "immediate_grad_update": (_any, False, (), None),
    "check_grad_overflow": (_any, True, (), None),
    "bf16_master_weights_and_grads": (_to_bool, False, (), None),
    "bf16_optimizer_states": (_to_bool, False, (), None),
}


class _Invalid(Exception):
    """Collected field errors: list of (loc, msg)."""

    def __init__(self, errors):
        self.errors = errors


def _check_constraints(v, constraints):
    for kind, n in constraints:
        if kind == "ge" and not v >= n:
            raise _Refuse(f"Input should be greater than or equal to {n:g}")
        if kind == "gt" and not v > n:
            raise _Refuse(f"Input should be greater than {n:g}")
        if kind == "le" and not v <= n:
            raise _Refuse(f"Input should be less than or equal to {n:g}")


def _validate(data, fields):
    """One DeepSpeedConfigModel(**data): drop "auto", aliases, extra=forbid, lax coercion."""
    data = {k: v for k, v in data.items() if not (isinstance(v, str) and v == "auto")}
    out, errors, used = {}, [], set()
    for name, (conv, default, constraints, alias) in fields.items():
        if alias is not None and alias in data:
            key = alias
        elif name in data:
            key = name
        else:
            out[name] = default
            continue
        used.add(key)
        loc = alias if key == alias else name
        try:
            v = conv(data[key])
            if v is not None:
                _check_constraints(v, constraints)
            out[name] = v
        except _Refuse as r:
            errors.append((loc, r.msg))
        except _Invalid as inner:
            errors.extend((f"{loc}.{l}", m) for l, m in inner.errors)
    for k in data:
        if k not in used:
            errors.append((k, "Extra inputs are not permitted"))
    if errors:
        raise _Invalid(errors)
    return out


def _zero_model(zdict):
    """DeepSpeedZeroConfig(**zdict): fields, deprecated fields, model validators."""
    z = _validate(zdict, ZERO_FIELDS)
    given = {k for k in zdict if not (isinstance(zdict[k], str) and zdict[k] == "auto")}
    # deprecated fields (DeepSpeedConfigModel._deprecated_fields_check)
    for dep, new, mk in (("cpu_offload_param", "offload_param", OFFLOAD_PARAM_FIELDS),
                         ("cpu_offload", "offload_optimizer", OFFLOAD_OPTIMIZER_FIELDS)):
        if dep in given:
            if new in given:
                raise _Invalid([("", f"Cannot provide deprecated parameter '{dep}' and replacing parameter "
                                 f"'{new}' together")])
            z[new] = _validate({"device": "cpu"}, mk) if z[dep] else None
    if "stage3_gather_fp16_weights_on_model_save" in given:
        if "stage3_gather_16bit_weights_on_model_save" in given or "gather_16bit_weights_on_model_save" in given:
            raise _Invalid([("", "Cannot provide deprecated parameter 'stage3_gather_fp16_weights_on_model_save' "
                             "and replacing parameter 'gather_16bit_weights_on_model_save' together")])
        z["gather_16bit_weights_on_model_save"] = z["stage3_gather_fp16_weights_on_model_save"]
    # model validators, in definition order
    if z["overlap_comm"] is None:
        z["overlap_comm"] = z["stage"] == 3
    if not z["compute_grad_norm"] and z["stage"] not in (1, 2):
        raise _Invalid([("", "Value error, compute_grad_norm=false is supported only with ZeRO Stage 1 or 2")])
    oo = z["offload_optimizer"]
    if oo and oo["ratio"] < 1.0 and z["stage"] != 3:
        raise _Invalid([("", "Assertion failed, Partial offloading only supported for ZeRO Stage 3.")])
    return z


def _fmt(section, errors):
    return [f"{section}.{loc}: {msg}" if loc else f"{section}: {msg}" for loc, msg in errors]


def coerce_zero_section(config):
    """Apply DeepSpeed's get_zero_config(config) -> DeepSpeedZeroConfig coercions.

    `config` is the whole parsed config (like DeepSpeed's param_dict).
    Returns (zero, refusals): zero is a dict of effective values keyed by the names used in
    config files (stage3_* aliases; offload_* as nested dicts or None), refusals is a list of
    messages in DeepSpeed/pydantic's words ("zero_optimization.stage: Input should be ...").
    On refusal zero is {}.
    """
    if not isinstance(config, dict):
        return {}, ["zero_optimization: config root is not an object"]
    if "zero_optimization" in config:
        zdict = config["zero_optimization"]
        if isinstance(zdict, bool):  # read_zero_config_deprecated
            zdict = {"stage": 1 if zdict else 0}
            if zdict["stage"] > 0:
                zdict["allgather_bucket_size"] = config.get("allgather_size", 5e8)
    else:
        zdict = {}
    if not isinstance(zdict, dict):
        return {}, [("zero_optimization: deepspeed.runtime.zero.config.DeepSpeedZeroConfig() argument after ** "
                     f"must be a mapping, not {type(zdict).__name__}")]
    try:
        z = _zero_model(zdict)
    except _Invalid as e:
        return {}, _fmt("zero_optimization", e.errors)
    out = {}
    for name, (_, _, _, alias) in ZERO_FIELDS.items():
        out[alias or name] = z[name]
    return out, []


def deepspeed_refusals(config, world_size=1):
    """What DeepSpeedConfig(config) (as built by deepspeed.initialize) would refuse.

    Modelled: root type, removed keys, zero_optimization, fp16/bf16 sections and the
    fp16+bf16 exclusion, batch-size arithmetic (with the given world_size; DeepSpeed without
    torch.distributed uses 1). Not modelled: the other sub-configs (see NOTES.md).
    Returns (values, refusals).
    """
    refusals = []
    values: dict = {}
    # DeepSpeedConfig: _reject_removed_config_keys(param_dict) is the first thing touching it
    try:
        for key, msg in _REMOVED_TOP_LEVEL.items():
            if key in config:
                return values, [f"{key}: DeepSpeedConfigError: {msg}"]
        zc = config.get("zero_optimization")
    except (TypeError, AttributeError) as e:
        return values, [f"config root is {type(config).__name__}, not an object: {type(e).__name__}: {e}"]
    if isinstance(zc, dict):
        for key, msg in _REMOVED_ZERO.items():
            if key in zc:
                return values, [f"zero_optimization.{key}: DeepSpeedConfigError: {msg}"]

    # _initialize_params (order matters only for which error is first; all are reported here)
    tb = config.get("train_batch_size")
    mb = config.get("train_micro_batch_size_per_gpu")
    ga = config.get("gradient_accumulation_steps")
    zero, zr = coerce_zero_section(config)
    refusals += zr
    values["zero"] = zero
    fp16 = config.get("fp16", {})
    bf16 = config.get("bf16", None)
    bf16_key = "bf16"
    if bf16 is None:
        bf16, bf16_key = config.get("bfloat16", {}), "bfloat16"
    prec = {}
    for key, sec, fields in (("fp16", fp16, FP16_FIELDS), (bf16_key, bf16, BF16_FIELDS)):
        if not isinstance(sec, dict):
            refusals.append(f"{key}: argument after ** must be a mapping, not {type(sec).__name__}")
            continue
        try:
            prec[key] = _validate(sec, fields)
        except _Invalid as e:
            refusals += _fmt(key, e.errors)
    fp16_on = prec.get("fp16", {}).get("enabled", False)
    bf16_on = prec.get(bf16_key, {}).get("enabled", False)
    values["fp16_enabled"], values["bf16_enabled"] = fp16_on, bf16_on
    if not refusals and fp16_on and bf16_on:
        refusals.append("fp16/bf16: AssertionError: bfloat16 and fp16 modes cannot be simultaneously enabled")
    if refusals:
        return values, refusals

    # _configure_train_batch_size: the same arithmetic on the raw (uncoerced) values
    try:
        if tb is not None and mb is not None and ga is not None:
            pass
        elif tb is not None and mb is not None:
            ga = tb // mb
            ga //= world_size
        elif tb is not None and ga is not None:
            mb = tb // world_size
            mb //= ga
        elif mb is not None and ga is not None:
            tb = mb * ga
            tb *= world_size
        elif tb is not None:
            ga = 1
            mb = tb // world_size
        elif mb is not None:
            tb = mb * world_size
            ga = 1
        else:
            raise AssertionError("Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided")
        if not tb > 0:
            raise AssertionError(f"Train batch size: {tb} has to be greater than 0")
        if not mb > 0:
            raise AssertionError(f"Micro batch size per gpu: {mb} has to be greater than 0")
        if not ga > 0:
            raise AssertionError(f"Gradient accumulation steps: {ga} has to be greater than 0")
        if tb != mb * ga * world_size:
            raise AssertionError("Check batch related parameters. train_batch_size is not equal "
                                 "to micro_batch_per_gpu * gradient_acc_step * world_size "
                                 f"{tb} != {mb} * {ga} * {world_size}")
    except (AssertionError, TypeError) as e:
        refusals.append(f"batch size: {type(e).__name__}: {e}")
    values.update(train_batch_size=tb, train_micro_batch_size_per_gpu=mb, gradient_accumulation_steps=ga)
    return values, refusals


_ISSUE = "https://github.com/deepspeedai/DeepSpeed/issues/8489"
_REMOVED_TOP_LEVEL = {
    "nebula": "Nebula checkpointing has been removed. A leftover 'nebula' block would be ignored and "
    f"checkpoints would silently fall back to local torch.save. See {_ISSUE}.",
    "compression_training": "The DeepSpeed compression library has been removed. A leftover 'compression_training' "
    f"block would be ignored and the model would train unquantized. See {_ISSUE}.",
    "amp": "NVIDIA Apex AMP integration has been removed. Use DeepSpeed 'fp16', 'bf16', or 'torch_autocast' "
    f"instead. See {_ISSUE}.",
    "quantize_training": f"Mixture-of-Quantization (MoQ) / 'quantize_training' has been removed. See {_ISSUE}.",
    "sparse_gradients": "Sparse compression of dense torch.nn.Embedding gradients has been removed. A leftover "
    "'sparse_gradients' flag would be ignored and those gradients would be reduced dense. "
    "Gradients from an embedding constructed with sparse=True are still reduced sparsely and "
    f"need no config flag. See {_ISSUE}.",
    "eigenvalue": "Eigenvalue-based Mixture-of-Quantization (MoQ) has been removed; the standalone "
    f"'eigenvalue' configuration block is no longer supported. See {_ISSUE}.",
    "sparse_attention": "DeepSpeed Sparse Attention has been removed; the 'sparse_attention' configuration block "
    f"is no longer supported. See {_ISSUE}.",
    "elasticity": "Elastic training has been removed; the 'elasticity' configuration block is no longer supported. "
    "Set train_batch_size / train_micro_batch_size_per_gpu / gradient_accumulation_steps directly. ",
    "graph_harvesting": "Graph harvesting has been removed; the 'graph_harvesting' configuration option is no "
    f"longer supported. See {_ISSUE}.",
    "curriculum_learning": "Legacy top-level 'curriculum_learning' has been removed. Use "
    f"'data_efficiency.data_sampling.curriculum_learning' instead. See {_ISSUE}.",
    "progressive_layer_drop": "Progressive Layer Dropping has been removed; the 'progressive_layer_drop' "
    f"configuration block is no longer supported. See {_ISSUE}.",
}
_REMOVED_ZERO = {
    "mics_shard_size": "MiCS ZeRO-3 sharding has been removed; 'zero_optimization.mics_shard_size' is no longer "
    f"supported. See {_ISSUE}.",
    "mics_hierarchical_params_gather": "MiCS ZeRO-3 sharding has been removed; "
    f"'zero_optimization.mics_hierarchical_params_gather' is no longer supported. See {_ISSUE}.",
    "zeropp_loco_param": "LoCo-Zero++ has been removed; 'zero_optimization.zeropp_loco_param' is no longer "
    "supported. Remove this key to use standard ZeRO++ quantized gradients without LoCo error feedback. "
    f"See {_ISSUE}.",
}


# Public names for the typed reads of check's ConfigView: each returns the value DeepSpeed uses,
# or raises Refused (a ValueError) with DeepSpeed's message.
Refused = _Refuse
to_stage = _to_stage
to_int = _to_int
to_bool = _to_bool
to_float = _to_float
to_device = _to_device
REMOVED_TOP_LEVEL = _REMOVED_TOP_LEVEL
REMOVED_ZERO = _REMOVED_ZERO


def _path(section: str, loc: str) -> tuple[str, ...]:
    return (section, *loc.split(".")) if loc else (section,)


def refusals(config) -> list[tuple[tuple[str, ...], str]]:
    """Everything DeepSpeedConfig refuses in `config` except batch arithmetic: (key path, message) pairs.

    Covers the root type, removed keys, zero_optimization (its type, every field, the offload blocks,
    deprecated pairs and the model validators), fp16/bf16 and their exclusion. Unlike DeepSpeed, which
    stops at the first, every field error is listed.
    """
    if not isinstance(config, dict):
        return [((), f"the config must be an object, got {type(config).__name__}: DeepSpeed fails with "
                 f"{'AttributeError' if isinstance(config, list) else 'TypeError'}")]
    found: list[tuple[tuple[str, ...], str]] = []
    for key, message in _REMOVED_TOP_LEVEL.items():
        if key in config:
            found.append(((key,), f"DeepSpeedConfigError: {message.strip()}"))
    zero = config.get("zero_optimization")
    if isinstance(zero, dict):
        for key, message in _REMOVED_ZERO.items():
            if key in zero:
                found.append((("zero_optimization", key), f"DeepSpeedConfigError: {message.strip()}"))
    if "zero_optimization" in config and not isinstance(zero, (dict, bool)):
        found.append((("zero_optimization",), "DeepSpeedZeroConfig() argument after ** must be a mapping, not "
                      f"{type(zero).__name__}"))
    elif not any(path[:1] == ("zero_optimization",) for path, _ in found):
        zdict = {"stage": int(zero)} if isinstance(zero, bool) else (zero or {})
        try:
            _zero_model(zdict)
        except _Invalid as invalid:
            found += [(_path("zero_optimization", loc or _validator_key(message)), message)
                      for loc, message in invalid.errors]
    bf16_key = "bf16" if config.get("bf16") is not None else "bfloat16"
    enabled = {}
    for key, fields in (("fp16", FP16_FIELDS), (bf16_key, BF16_FIELDS)):
        section = config.get(key, {})
        if not isinstance(section, dict):
            found.append(((key,), f"argument after ** must be a mapping, not {type(section).__name__}"))
            continue
        try:
            enabled[key] = _validate(section, fields)["enabled"]
        except _Invalid as invalid:
            found += [(_path(key, loc), message) for loc, message in invalid.errors]
    if not found and enabled.get("fp16") and enabled.get(bf16_key):
        found.append(((bf16_key, "enabled"), "AssertionError: bfloat16 and fp16 modes cannot be simultaneously "
                      "enabled"))
    return found


def _validator_key(message: str) -> str:
    """The key a model-level refusal (pydantic gives it no location) is about."""
    if "compute_grad_norm" in message:
        return "compute_grad_norm"
    if "Partial offloading" in message:
        return "offload_optimizer.ratio"
    deprecated = re.search(r"deprecated parameter '(\w+)'", message)
    return deprecated.group(1) if deprecated else ""

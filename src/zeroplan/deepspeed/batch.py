"""The batch-size identity: train_batch_size = micro batch per GPU × accumulation steps × dp world size.

`deepspeed_fill` does what DeepSpeed does at start-up (runtime/config.py, _set_batch_related_parameters and
_batch_assertion): infer the missing values by integer division, then insist on the identity. `consistent`
is the export side: the whole triple from whatever the user fixed, or an InputError saying why not.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroplan.core.errors import InputError, ref


@dataclass(frozen=True)
class Batch:
    train_batch_size: int
    micro_batch: int
    accumulation: int


@dataclass(frozen=True)
class BatchProblem:
    message: str
    fix: str
    key: str  # the key to point at


def neither_batch_size() -> BatchProblem:
    """DeepSpeed stops at start-up when neither batch size is set, whatever the world size."""
    return BatchProblem("neither train_batch_size nor train_micro_batch_size_per_gpu is set: DeepSpeed "
                        "stops at start-up", "set train_micro_batch_size_per_gpu (and gradient_accumulation_steps)",
                        "train_micro_batch_size_per_gpu")


def deepspeed_fill(train: int | None, micro: int | None, accum: int | None, dp: int) -> Batch | BatchProblem:
    if train is None and micro is None:
        return neither_batch_size()
    if train is not None and micro is not None and accum is None:
        accum = train // micro // dp
    elif train is not None and accum is not None and micro is None:
        micro = train // dp // accum
    elif micro is not None and accum is not None and train is None:
        train = micro * accum * dp
    elif train is not None and micro is None and accum is None:
        accum, micro = 1, train // dp
    elif micro is not None and train is None and accum is None:
        accum, train = 1, micro * dp
    if train is None or micro is None or accum is None:  # pragma: no cover - every case above fills all three
        raise AssertionError((train, micro, accum))
    for key, value in (("train_batch_size", train), ("train_micro_batch_size_per_gpu", micro),
                       ("gradient_accumulation_steps", accum)):
        if value <= 0:
            return BatchProblem(f"{key} works out to {value} with a data-parallel world of {dp}: DeepSpeed "
                                "requires it to be greater than 0", _fix(train, micro, dp), key)
    if train != micro * accum * dp:
        return BatchProblem(f"train_batch_size {train} ≠ {micro} × {accum} × {dp} = {micro * accum * dp} "
                            "(micro batch × accumulation steps × data-parallel world size)",
                            _fix(train, micro, dp), "train_batch_size")
    return Batch(train, micro, accum)


def _fix(train: int, micro: int, dp: int) -> str:
    options = []
    if micro > 0 and train > 0 and train % (micro * dp) == 0:
        options.append(f"set gradient_accumulation_steps to {train // (micro * dp)}")
    if micro > 0:
        options.append(f"set train_batch_size to a multiple of {micro * dp} (micro batch {micro} × dp {dp})")
    return "; or ".join(options) or "set train_micro_batch_size_per_gpu to a positive whole number"


def consistent(dp: int, micro: int | None = None, accum: int | None = None, global_batch: int | None = None) -> Batch:
    """The triple that satisfies the identity for what was fixed; defaults micro 1, accumulation 1."""
    for flag, value in (("micro_batch", micro), ("grad_accum", accum), ("global_batch", global_batch)):
        if value is not None and value < 1:
            raise InputError(flag, f"must be a positive whole number, got {value}")
    if global_batch is None:
        micro, accum = micro or 1, accum or 1
        return Batch(micro * accum * dp, micro, accum)
    if micro is None and accum is None:
        micro = 1
    if micro is not None and accum is not None:
        if micro * accum * dp != global_batch:
            raise InputError("global_batch", f"{global_batch} ≠ {micro} × {accum} × dp {dp} = {micro * accum * dp}",
                             f"drop one of {ref('micro_batch')}, {ref('grad_accum')}, {ref('global_batch')}")
        return Batch(global_batch, micro, accum)
    if micro is not None:
        return Batch(global_batch, micro, _other(global_batch, micro, "micro_batch", dp))
    if accum is not None:
        return Batch(global_batch, _other(global_batch, accum, "grad_accum", dp), accum)
    raise AssertionError("micro defaults to 1 above")  # pragma: no cover


def _other(global_batch: int, known: int, flag: str, dp: int) -> int:
    """The batch factor left to find when global_batch and `known` (flag) are fixed."""
    if global_batch % (known * dp):
        raise InputError("global_batch", f"{global_batch} is not a multiple of {ref(flag)} {known} × dp {dp} = "
                         f"{known * dp}",
                         f"use {ref('global_batch', max(1, global_batch // (known * dp)) * known * dp)}")
    return global_batch // (known * dp)

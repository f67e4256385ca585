"""Trace training steps of the real model on a fake process group of the real world size (imports torch).

The Hugging Face model code, torch's sharding wrappers and AdamW run in one CPU process that is rank 0 of
a `world_size` world (torch's "fake" backend), under FakeTensorMode (no tensor data is ever allocated),
while torch's FSDPMemTracker counts every storage by category. Bytes are exact storage sizes of rank 0.

Sharding by ZeRO stage, precision and recompute: zeroplan.distributed.sharding, the one place validate uses
too, as rank 0 of a fake world (world="rank0": replicate() for stages 0-1, stage 1's AdamW over the
parameters the most loaded rank owns under ZeroRedundancyOptimizer's partition) with the stage-3 root left
unsharded after forward (reshard_root=False, as torchtitan). AdamW(foreach=True), the CUDA default. The
peak is taken over the last step. prepare_step and training_step are the step `--real` runs too (trace/real.py).

Large models: `layers_to_trace=k` traces k, k+1 and k+2 decoder layers and extrapolates each phase's
peak and categories as a + b·L; the third point checks every value to the byte.
"""

from __future__ import annotations

import contextlib
import copy
import time
import warnings
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, cast

import torch
import torch.distributed as dist

from zeroplan.core.errors import InputError, RunFailed
from zeroplan.core.model.adapters import LORA_TARGETS
from zeroplan.core.model.families import architecture_from_hf_config
from zeroplan.distributed.sharding import (
    ADAM_STEP_BYTES, PRECISIONS, RECOMPUTES, STAGES, Sharding, make_optimizer, shard_model, zero1_most_loaded_owned,
)
from zeroplan.trace.hf_model import (
    build_model, decoder_layers, grouped_mm_any_dtype, hf_config, layer_count, real_masking,
)
from zeroplan.trace.tracker import CATEGORIES, snapshot_categories, tracker_class

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ATTENTION = ("sdpa", "eager")
TRACED_FINETUNES = ("full", "lora", "qlora")
ADAM_STATE_BYTES_PER_ELEMENT = 8  # exp_avg + exp_avg_sq, fp32 (and ADAM_STEP_BYTES per tensor)


class TraceFailed(RunFailed):
    """The model could not be traced (exit 1): never a number that might be wrong."""


@dataclass(frozen=True)
class TraceSettings:
    world_size: int
    stage: int
    precision: str = "mixed"
    recompute: str = "none"
    seq_len: int = 4096
    micro_batch: int = 1
    attention: str = "sdpa"
    steps: int = 2
    finetune: str = "full"  # "lora": PEFT's LoRA on a frozen base; "qlora": on bitsandbytes' NF4 Linear4bit
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ()  # PEFT target_modules; () with lora: all seven projections
    double_quant: bool = True  # qlora: bnb_4bit_use_double_quant

    def __post_init__(self) -> None:
        if self.finetune not in TRACED_FINETUNES:
            raise InputError("--finetune", f"a trace runs full, lora or qlora, got {self.finetune!r}",
                             "use --finetune full, lora or qlora")
        if self.finetune == "qlora" and self.precision != "mixed":
            raise InputError("--precision", "QLoRA computes in bf16 (bnb_4bit_compute_dtype) over a bf16 base",
                             "use --precision mixed with --finetune qlora")
        for flag, value, allowed in (("--stage", self.stage, STAGES), ("--precision", self.precision, PRECISIONS),
                                     ("--recompute", self.recompute, RECOMPUTES),
                                     ("--attention", self.attention, ATTENTION)):
            if value not in allowed:
                raise InputError(flag, f"must be one of {', '.join(map(str, allowed))} for a trace, got {value!r}")
        for flag, value, low in (("--gpus", self.world_size, 1), ("--seq-len", self.seq_len, 1),
                                 ("--micro-batch", self.micro_batch, 1), ("--steps", self.steps, 2)):
            if not isinstance(value, int) or value < low:
                raise InputError(flag, f"must be a whole number of at least {low} for a trace, got {value!r}")


@contextlib.contextmanager
def fake_world(world_size: int):
    """Rank 0 of a world_size world on torch's fake backend (collectives do nothing); torn down on exit."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


class RankChunks:
    """torch.chunk(tensor, num_chunks, dim) padded with empty tensors to num_chunks entries, as FSDP2's
    _chunk_with_empty returns, but each chunk made when it is read: FSDP2 reads two of them (its own rank's and
    chunk 0), and making all of them costs num_chunks tensors per parameter — the one part of a trace that grew
    with the world size (16,384 ranks: ~17 million fake tensors for Llama-2-70B). A chunk is the narrow() view
    torch.chunk makes (same size, stride and offset); one past torch.chunk's last is chunk 0's new_empty(0)."""

    def __init__(self, tensor: torch.Tensor, num_chunks: int, dim: int) -> None:
        self.tensor, self.num_chunks, self.dim = tensor, num_chunks, dim
        self.size = tensor.size(dim)
        self.step = -(-self.size // num_chunks)
        self.made = -(-self.size // self.step)  # how many chunks torch.chunk returns

    def __len__(self) -> int:
        return self.num_chunks

    def __getitem__(self, index: int) -> torch.Tensor:
        if not -self.num_chunks <= index < self.num_chunks:
            raise IndexError(index)
        index %= self.num_chunks
        if index < self.made:
            start = index * self.step
            return self.tensor.narrow(self.dim, start, min(self.step, self.size - start))
        return self[0].new_empty(0)

    def __iter__(self):
        return (self[index] for index in range(self.num_chunks))


@contextlib.contextmanager
def chunks_on_demand():
    """FSDP2's chunking of each parameter with RankChunks while the trace runs (torch's own function for a
    zero-size dimension, where torch.chunk's answer differs)."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param

    original = _fsdp_param._chunk_with_empty

    def chunk_with_empty(tensor: torch.Tensor, num_chunks: int, dim: int):
        if tensor.size(dim) == 0:
            return original(tensor, num_chunks, dim)
        return RankChunks(tensor, num_chunks, dim)

    _fsdp_param._chunk_with_empty = chunk_with_empty
    try:
        yield
    finally:
        _fsdp_param._chunk_with_empty = original


def sharding_for(settings: TraceSettings) -> Sharding:
    """The trace's sharding: rank 0 of a fake world, the stage-3 root kept unsharded after forward (torchtitan).
    LoRA: the tensors keep their own dtypes (a 16-bit base, PEFT's fp32 adapters): no precision policy casts them."""
    precision = "fp32" if settings.finetune != "full" else settings.precision
    return Sharding(stage=settings.stage, precision=precision, recompute=settings.recompute, world="rank0",
                    reshard_root=False)


def traced_model(config: dict, settings: TraceSettings, num_layers: int | None) -> PreTrainedModel:
    """The model on the meta device: full training's fp32 model, or LoRA's 16-bit base (fp32 with --precision fp32)
    wrapped by PEFT's get_peft_model (fp32 adapters, autocast_adapter_dtype=True, no dropout); QLoRA's base has
    its decoder linears in bitsandbytes' NF4 Linear4bit (trace/qlora.py)."""
    if settings.finetune == "full":
        return build_model(config, num_layers, settings.attention, torch.float32, settings.recompute)
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise InputError("--finetune", f"trace --finetune {settings.finetune} needs PEFT",
                         "pip install 'zeroplan[finetune]'") from None
    base_dtype = torch.bfloat16 if settings.precision == "mixed" else torch.float32
    base = build_model(config, num_layers, settings.attention, base_dtype, settings.recompute)
    if settings.finetune == "qlora":
        try:
            from zeroplan.trace.qlora import quantise_linears
        except ImportError:
            raise InputError("--finetune", "trace --finetune qlora needs bitsandbytes",
                             "pip install 'zeroplan[finetune]'") from None
        quantise_linears(base, settings.double_quant)
    targets = list(settings.lora_targets or LORA_TARGETS)
    # a mixture of experts' fused expert tensors: PEFT's target_parameters (core.model.adapters.adapted_experts)
    fused = {"gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "down_proj": "down_proj"}
    expert_names = {name.split(".")[-1] for name, _ in base.named_parameters() if ".mlp.experts." in name}
    parameters = sorted({f"mlp.experts.{fused[t]}" for t in targets if t in fused and fused[t] in expert_names})
    modules = [t for t in targets if not (expert_names and t in fused)]  # else PEFT adapts gate_up_proj twice
    lora = LoraConfig(r=settings.lora_rank, target_modules=modules, target_parameters=parameters or None,
                      lora_dropout=0.0)
    return cast("PreTrainedModel", get_peft_model(base, lora))  # a PeftModel: forwards as the model it wraps


def sharded_model(config: dict, settings: TraceSettings, num_layers: int | None, device_type: str) -> PreTrainedModel:
    """The model with num_layers decoder layers (None: all) on the meta device, sharded (inside fake_world)."""
    model = traced_model(config, settings, num_layers)
    shard_model(model, decoder_layers(model), sharding_for(settings), device_type)
    return model


def zero1_owned(params: list, world_size: int) -> tuple[int, int]:
    """(elements, tensors) the most loaded rank's ZeroRedundancyOptimizer partition steps."""
    mine = zero1_most_loaded_owned([tuple(p.shape) for p in params], world_size)
    return sum(params[i].numel() for i in mine), len(mine)


def prepare_step(model: PreTrainedModel, settings: TraceSettings, device: torch.device | str) -> tuple:
    """Materialise the sharded model on device (uninitialised values: memory does not depend on them) and make
    the optimizer and one micro-batch of token ids and labels: (optimizer, ids, labels). Under FakeTensorMode
    all of it is fake."""
    model.to_empty(device=device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, sharding_for(settings), torch.optim.AdamW, device, lr=1e-4, foreach=True)
    vocab = model.config.vocab_size
    size = (settings.micro_batch, settings.seq_len)
    return optimizer, torch.randint(0, vocab, size, device=device), torch.randint(0, vocab, size, device=device)


def training_step(model: PreTrainedModel, optimizer, ids, labels, after_forward=None) -> None:
    """One step, the same in the fake trace and --real: forward with the loss, backward, optimizer step, and
    every gradient cleared (stage 1: also those the rank's optimizer does not own). after_forward() runs
    while forward's outputs are alive."""
    out = model(input_ids=ids, labels=labels)
    loss = out.loss
    if after_forward is not None:
        after_forward()
    del out
    loss.backward()
    del loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)


class _Quantised:
    """QLoRA's bitsandbytes modules in a trace: their QuantStates made on the device and tracked (trace/qlora.py)."""

    @staticmethod
    def prepare(model, tracker, device) -> None:
        import bitsandbytes as bnb

        from zeroplan.trace.qlora import quant_states_to_empty, track_quant_states

        modules = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
        quant_states_to_empty(modules, device)
        track_quant_states(tracker, modules)


@contextlib.contextmanager
def _quantised(settings: TraceSettings):
    if settings.finetune != "qlora":
        yield None
        return
    from zeroplan.trace.qlora import bitsandbytes_on_fake_tensors

    with bitsandbytes_on_fake_tensors():
        yield _Quantised()


def _untraceable(exc: BaseException) -> bool:
    from torch._subclasses import fake_tensor

    kinds = tuple(getattr(fake_tensor, name) for name in
                  ("DataDependentOutputException", "DynamicOutputShapeException", "UnsupportedOperatorException")
                  if hasattr(fake_tensor, name))
    return isinstance(exc, kinds) or "data-dependent" in str(exc).lower()


def trace_once(config: dict, settings: TraceSettings, num_layers: int | None = None) -> dict:
    """settings.steps training steps of the model with num_layers decoder layers (None: all of them)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    started = time.perf_counter()
    layers = layer_count(config) if num_layers is None else num_layers
    owned = None
    warnings.filterwarnings("ignore")
    with fake_world(settings.world_size), real_masking(), grouped_mm_any_dtype(), chunks_on_demand(), \
            _quantised(settings) as quantised:
        model = sharded_model(config, settings, layers, "cpu")
        with FakeTensorMode(allow_non_fake_inputs=True):
            optimizer, ids, labels = prepare_step(model, settings, "cpu")
            if settings.stage == 1:
                owned = zero1_owned([p for p in model.parameters() if p.requires_grad], settings.world_size)
            tracker = tracker_class()(model, optimizer)
            tracker.track_inputs((ids, labels))
            if quantised is not None:
                quantised.prepare(model, tracker, "cpu")
            after_forward: dict = {}

            def snapshot_after_forward() -> None:
                after_forward.update(copy.deepcopy(tracker.get_tracker_snapshot("current")))

            try:
                with tracker:
                    for step in range(settings.steps):
                        tracker.step_index = step
                        last = step == settings.steps - 1
                        if last:  # steady state: optimizer states exist from the start of the step
                            tracker._peak_mem, tracker._peak_mem_snap, tracker.peak_where = {}, {}, {}
                            tracker.record_phases = True
                        training_step(model, optimizer, ids, labels, snapshot_after_forward if last else None)
                        if not last:
                            tracker.reset_mod_stats()
            except Exception as exc:
                if _untraceable(exc):
                    raise TraceFailed(f"the {config.get('model_type')} model cannot be traced: its code does "
                                      f"data-dependent work under fake tensors ({type(exc).__name__}); "
                                      "no number is reported") from None
                raise
            peak = tracker.get_tracker_snapshot("peak")
            where = dict(tracker.peak_where)
    categories, raw = snapshot_categories(peak)
    forward_end, _ = snapshot_categories(after_forward)
    phases = {}
    for phase, (total, snapshot, phase_where) in tracker.phase_peaks.items():
        phase_categories, _ = snapshot_categories(snapshot)
        _split_optimizer_temporaries(phase_categories, forward_end)
        phases[phase] = {"peak_bytes": total, "categories": phase_categories, "where": phase_where}
    _split_optimizer_temporaries(categories, forward_end)
    return {"peak_bytes": raw.get("Total", sum(categories[c] for c in CATEGORIES)), "categories": categories,
            "where": where, "forward_end": forward_end, "phases": phases, "zero1_owned": owned,
            "layers": layers, "layers_traced": [layers], "extrapolated": False, "linear_check": True,
            "settings": asdict(settings), "wall_s": round(time.perf_counter() - started, 3)}


def _split_optimizer_temporaries(categories: dict, forward_end: dict) -> None:
    """The tracker labels everything made inside optimizer.step() as optimizer state: the states are what is
    alive after the last forward, the rest are the step's temporaries (foreach: one fp32 tensor list)."""
    extra = max(0, categories["optimizer_states"] - forward_end.get("optimizer_states", 0))
    categories["optimizer_states"] -= extra
    categories["temporaries"] += extra
    categories["optimizer_step_temporaries"] = extra


def _stage1_remove(points: dict[int, dict]) -> tuple[bool, float]:
    """Stage 1: the most loaded rank's ZeRO-1 partition is not linear in the layer count. Take its bytes out
    of each point (states: 8 B/element + 4 B/tensor, checked; foreach temporaries: a constant per element,
    checked) so the rest can be extrapolated; they are added back for the real model's partition."""
    ok, per_element = True, set()
    for point in points.values():
        elements, tensors = point["zero1_owned"]
        if point["forward_end"]["optimizer_states"] != ADAM_STATE_BYTES_PER_ELEMENT * elements + ADAM_STEP_BYTES * tensors:
            ok = False
        for phase, peak in point["phases"].items():
            c = peak["categories"]
            if phase == "optimizer" and elements:
                per_element.add(c["optimizer_step_temporaries"] / elements)
            peak["peak_bytes"] -= c["optimizer_states"] + c["optimizer_step_temporaries"]
            c["temporaries"] -= c["optimizer_step_temporaries"]
            c["optimizer_states"] = c["optimizer_step_temporaries"] = 0
        point["forward_end"]["optimizer_states"] = 0
    return ok and len(per_element) <= 1, max(per_element, default=0.0)


def _stage1_add(phases: dict, forward_end: dict, owned: tuple[int, int], per_element: float) -> None:
    elements, tensors = owned
    states = ADAM_STATE_BYTES_PER_ELEMENT * elements + ADAM_STEP_BYTES * tensors
    step_temporaries = round(per_element * elements)
    for phase, peak in phases.items():
        c = peak["categories"]
        added = step_temporaries if phase == "optimizer" else 0
        c["optimizer_states"] += states
        c["temporaries"] += added
        c["optimizer_step_temporaries"] += added
        peak["peak_bytes"] += states + added
    forward_end["optimizer_states"] += states


def _extrapolate(points: dict[int, dict], target: int) -> tuple[dict, dict, dict[str, bool]]:
    """Each phase's peak and categories as a + b·L from the first two points, checked on the third."""
    ks = sorted(points)
    k1, k2 = ks[0], ks[1]

    def line(v1: int, v2: int, k: int) -> int | None:
        """v1 + (v2 - v1)·(k - k1)/(k2 - k1), exact: whole periods of the layer pattern (k2 - k1 layers each), or
        a whole slope per layer."""
        steps, rest = divmod(k - k1, k2 - k1)
        if not rest:
            return v1 + (v2 - v1) * steps
        slope, rest = divmod(v2 - v1, k2 - k1)
        return None if rest else v1 + slope * (k - k1)

    phases, checks = {}, {}
    for phase in points[k1]["phases"]:
        if any(phase not in points[k]["phases"] for k in ks):
            continue
        peaks = [points[k]["phases"][phase] for k in ks]
        keys = list(peaks[0]["categories"])
        values = [[p["peak_bytes"]] + [p["categories"][c] for c in keys] for p in peaks]
        checks[phase] = all(line(values[0][i], values[1][i], k) == values[j][i]
                            for j, k in enumerate(ks) if j >= 2 for i in range(len(keys) + 1))
        extrapolated = [line(values[0][i], values[1][i], target) for i in range(len(keys) + 1)]
        if any(v is None for v in extrapolated):
            checks[phase] = False
            continue
        phases[phase] = {"peak_bytes": extrapolated[0], "categories": dict(zip(keys, extrapolated[1:])),
                         "where": {**peaks[-1]["where"], "traced_layers": ks[-1]}}
    first, second = points[k1]["forward_end"], points[k2]["forward_end"]
    forward_end = {c: line(first[c], second[c], target) for c in first}
    return phases, forward_end, checks


# When the phase holding the peak fails the third point's check (the peak can move between layers at the smallest
# counts, e.g. OPT at stage 1 with full recompute over 3-5 layers), the window slides up one layer count at a time,
# this many times at most, before the trace gives up and asks for the whole model.
MAX_WINDOW_SLIDES = 2


def trace_peak(config: dict, settings: TraceSettings, layers_to_trace: int | None = 3) -> dict:
    """Per-GPU peak by category. layers_to_trace=k traces k, k+1, k+2 layers and extrapolates (exact when the
    phase holding the peak passed the check on the third point; if it did not, the three counts slide up by one,
    at most MAX_WINDOW_SLIDES times); None, or a model too small for the window, is traced whole."""
    total = layer_count(config)
    start, period = layer_period(config)
    first = max(layers_to_trace or 0, start)
    first += (total - first) % period  # whole periods from the first count to the model's
    if layers_to_trace is None or first + 2 * period >= total:
        return trace_once(config, settings)
    started = time.perf_counter()
    points = {k: trace_once(config, settings, num_layers=k) for k in range(first, first + 3 * period, period)}
    for slide in range(MAX_WINDOW_SLIDES + 1):
        ks = sorted(points)[-3:]
        result = _extrapolated({k: copy.deepcopy(points[k]) for k in ks}, config, settings, total)
        if isinstance(result, dict):
            result["wall_s"] = round(time.perf_counter() - started, 3)
            return result
        if slide == MAX_WINDOW_SLIDES or ks[-1] + period >= total:
            break
        points[ks[-1] + period] = trace_once(config, settings, num_layers=ks[-1] + period)
    raise TraceFailed(f"{result} over {ks} layers; trace the whole model (--layers-to-trace 0) or more layers")


def layer_period(config: dict) -> tuple[int, int]:
    """(the first layer from which the layer pattern repeats, its period) in the architecture description: (0, 1)
    where every layer is alike; DeepSeek-V3's dense first layers (k, 1); Llama 4's MoE every second layer (0, 2);
    Gemma 3's five sliding layers per global one (0, 6). A model the description does not read: (0, 1)."""
    try:
        described = architecture_from_hf_config(config).description.layers
    except (InputError, ValueError):
        return 0, 1
    # transformers' own per-layer attention kinds, where its config class fills them in (Gemma 3's default pattern
    # of five sliding layers per global one when config.json leaves layer_types out)
    kinds = getattr(hf_config(config, None, "sdpa"), "layer_types", None)
    kinds = kinds if isinstance(kinds, list) and len(kinds) == len(described) else [None] * len(described)
    layers = list(zip(described, kinds))
    count = len(layers)
    found = [(start, period) for start in range(count) for period in range(1, count - start)
             if all(layers[i] == layers[i + period] for i in range(start, count - period))]
    # the cheapest three traced counts: the shortest prefix and period together (no repeat: the whole model)
    return min(found, key=lambda pair: pair[0] + 3 * pair[1], default=(0, count))


def _extrapolated(points: dict[int, dict], config: dict, settings: TraceSettings, total: int) -> dict | str:
    """The whole model's peak from three traced layer counts, or why they do not extrapolate exactly."""
    ks = sorted(points)
    stage1_ok, per_element = (_stage1_remove(points) if settings.stage == 1 else (True, 0.0))
    phases, forward_end, checks = _extrapolate(points, total)
    if settings.stage == 1:
        _stage1_add(phases, forward_end, _owned_by_most_loaded_rank(config, total, settings), per_element)
    if not phases:
        return "the traced layer counts do not scale linearly"
    best = max(phases, key=lambda phase: phases[phase]["peak_bytes"])
    if not (checks.get(best) and stage1_ok):
        return f"the {best} peak did not scale linearly"
    return {"peak_bytes": phases[best]["peak_bytes"], "categories": phases[best]["categories"],
            "where": phases[best]["where"], "forward_end": forward_end, "phases": phases, "layers": total,
            "layers_traced": ks, "extrapolated": True, "linear_check": checks,
            "per_layer": {c: (points[ks[1]]["categories"][c] - points[ks[0]]["categories"][c]) // (ks[1] - ks[0])
                          for c in CATEGORIES}, "layers_per_step": ks[1] - ks[0],
            "settings": asdict(settings)}


def _owned_by_most_loaded_rank(config: dict, layers: int, settings: TraceSettings) -> tuple[int, int]:
    """(elements, tensors) the most loaded rank owns under ZeroRedundancyOptimizer, from the meta model."""
    model = traced_model(config, settings, layers)
    return zero1_owned([p for p in model.parameters() if p.requires_grad], settings.world_size)

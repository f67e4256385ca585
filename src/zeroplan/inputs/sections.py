"""Every command-line input, declared once: one dataclass per section, each field with its flag, help text,
default, parser and choices in one place (its `Flag`).

The commands in zeroplan.cli take these sections (zeroplan.cli.options generates their typer parameters from
the declarations here); the planners read them. Each value is parsed once, as the section is built, by its
field's declared parser: a size is bytes, a count an int, a comma list a tuple, a choice its enum's value; a
bad value is an InputError naming the field. The values as given (the text "512GB", "13e9") stay readable
through `given()`: the JSON reports echo them. None means "not given": the resolvers apply (and record) the
defaults.

Stays free of typer and rich: importing it costs a few dataclasses (no generated __init__/repr/eq:
start-up time). The
sections only one command takes (plan's search space, sweep's grid, bench and validate) are in
zeroplan.inputs.command_sections, which only those commands import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any, Callable, ClassVar

from zeroplan.core.errors import InputError
from zeroplan.core.units import parse_bytes, parse_count, parse_rate
from zeroplan.core.memory.budget import parse_fraction
from zeroplan.inputs.presets import use_presets_file as layer
from zeroplan.core.memory.deepspeed_estimator import DEFAULT_BUFFER_FACTOR

# Help panels.
MODEL = "Model"
HARDWARE = "Hardware"
PARALLEL = "Parallelism"
TRAINING = "Training"
STEP = "Training step (needs --model)"
BUFFERS = "DeepSpeed buffers"
DEEPSPEED = "DeepSpeed convention"
MEMORY = "Memory budget"
OUTPUT = "Output"
SEARCH = "Search space"
TIMING = "Step time"
GRID = "Grid"
CONTEXT = "Context (for memory, batch and parallel rules)"
RUN = "Run"
FINETUNE = "Fine-tuning (needs --model)"


# ---- choices: string enums and the one normalisation -------------------------------------------------------

class Precision(str, Enum):
    MIXED = "mixed"
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    FP8 = "fp8"


class Fp8Recipe(str, Enum):  # core.precision.FP8_RECIPES
    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    MXFP8 = "mxfp8"


class Optimizer(str, Enum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD_MOMENTUM = "sgd-momentum"
    SGD = "sgd"
    ADAM_8BIT = "adam-8bit"
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"


class OffloadTier(str, Enum):
    NONE = "none"
    CPU = "cpu"
    NVME = "nvme"


class Recompute(str, Enum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"
    SELECTIVE_OP = "selective-op"  # what `zeroplan plan` recommends; core.memory.activations.RECOMPUTE_MODES


class ActivationCode(str, Enum):
    TRANSFORMERS = "transformers"
    MEGATRON = "megatron"


class Convention(str, Enum):
    PAPER = "paper"
    DEEPSPEED = "deepspeed"
    FRAMEWORK = "framework"


class Framework(str, Enum):
    DEEPSPEED = "deepspeed"
    TORCH = "torch"


class FinetuneMode(str, Enum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"
    AUTO = "auto"


class FinetuneRecipe(str, Enum):
    PEFT = "peft"
    TORCHTUNE = "torchtune"


class Quant(str, Enum):
    NF4 = "nf4"
    INT8 = "int8"


class Units(str, Enum):
    IEC = "iec"
    SI = "si"


NOUNS = {"FinetuneMode": "fine-tuning mode", "Quant": "quantisation", "Precision": "precision", "Optimizer": "optimizer", "OffloadTier": "offload tier", "Recompute": "mode",
         "Convention": "convention", "Framework": "framework", "Units": "units", "Style": "model style",
         "SequenceParallelSearch": "choice"}


HINTS = {"Units": "use iec (GiB) or si (GB)"}


def normalise(choices: type[Enum], text: Any, flag: str, validate: bool = True) -> str:
    """The one normalisation of a choice: trimmed, lower case, and one of the enum's values (returned as text).
    validate=False leaves the check to the command (precision: check and export take a narrower set)."""
    key = str(text).strip().lower()
    values = [member.value for member in choices]
    if validate and key not in values:
        raise InputError(flag, f"unknown {NOUNS.get(choices.__name__, 'choice')} '{text}'",
                         HINTS.get(choices.__name__, "use " + ", ".join(values[:-1]) + " or " + values[-1]))
    return key


def one_of(choices: type[Enum], validate: bool = True) -> Callable[[Any, str], Any]:
    def parse(text: Any, flag: str) -> Any:
        return normalise(choices, text, flag, validate)

    parse.choices = tuple(member.value for member in choices)  # type: ignore[attr-defined]
    return parse


def as_count(text: Any, flag: str) -> int:
    """A count given as text (13e9, 6.7B) or already a whole number."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    return parse_count(text, flag)


def use_presets_file(value: str | None) -> str | None:
    """Layers a presets file over the built-in presets as the option is parsed (before any preset is read)."""
    layer(value)
    return value


# ---- the declaration ----------------------------------------------------------------------------------------

class Flag:
    """How one field appears on the command line. (A plain class, not a dataclass: one less class to generate
    code for at start-up.)"""

    __slots__ = ("names", "help", "panel", "kind", "parse", "echo", "hidden", "callback")

    def __init__(self, names: tuple[str, ...], help: str, panel: str | None, kind: type = str,
                 parse: Callable[[Any, str], Any] | None = None, echo: bool = True,
                 hidden: bool = False, callback: Callable[[Any], Any] | None = None) -> None:
        self.names = names  # "--gpus"; "--zero-init/--no-zero-init"; ("--format", "-f")
        self.help = help
        self.panel = panel
        self.kind = kind  # what the command line gives: str, int, float or bool
        self.parse = parse  # (value, field) -> the typed value, applied once as the section is built
        self.echo = echo  # recorded in the report's "inputs" (False: presentation, e.g. --output)
        self.hidden = hidden
        self.callback = callback  # run as the command line is parsed (value) -> value, e.g. --presets

    @property
    def name(self) -> str:
        return self.names[0].split("/")[0]

    def variant(self, **changes: Any) -> Flag:
        """The same flag for a different option of another section (a list of values, another default)."""
        values = {slot: getattr(self, slot) for slot in self.__slots__}
        return Flag(**{**values, **changes})


def flag(*names: str, help: str, panel: str | None, kind: type = str, default: Any = None,
         parse: Callable[[Any, str], Any] | None = None, echo: bool = True, hidden: bool = False,
         callback: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field declared as a command-line option."""
    return option(Flag(names, help, panel, kind, parse, echo, hidden, callback), default)


def option(declared: Flag, default: Any = None) -> Any:
    return field(default=default, metadata={"flag": declared})


def flag_of(section: type, name: str) -> Flag:
    return next(f.metadata["flag"] for f in dataclasses.fields(section) if f.name == name)


class Section:
    """Base of the input sections: construction parses every value through its field's parser, once."""

    key: ClassVar[str]
    _given: dict[str, Any]  # each field as it was given (not a dataclass field: Section is no dataclass)

    def __init__(self, **values: Any) -> None:
        """Keyword values by field name; the rest keep their defaults. One shared __init__ (the sections are
        dataclasses with init=False) instead of one generated per class: start-up time."""
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            setattr(self, item.name, values.pop(item.name, item.default))
        if values:
            raise TypeError(f"{type(self).__name__} has no field '{next(iter(values))}'")
        self.__post_init__()

    def __repr__(self) -> str:
        given = ", ".join(f"{name}={value!r}" for name, value in self.given().items())
        return f"{type(self).__name__}({given})"

    def __post_init__(self) -> None:
        given: dict[str, Any] = {}
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            declared = item.metadata.get("flag")
            parse = None if declared is None else declared.parse
            value = raw = getattr(self, item.name)
            if parse is not None and raw is not None:
                value = parse(raw, item.name)
                object.__setattr__(self, item.name, value)
            given[item.name] = value if hasattr(parse, "choices") else raw  # a choice as its enum's value
        self._given = given

    def values(self) -> dict[str, Any]:
        """Every field's (parsed) value, by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def given(self) -> dict[str, Any]:
        """The fields that were given (not None), by name, as they were given (the text "512GB")."""
        return {name: value for name, value in self._given.items() if value is not None}

    def as_given(self, name: str) -> Any:
        """One field as it was given (None: not given)."""
        return self._given[name]


def split(values: dict[str, Any], fields: dict[Any, tuple[str, ...]]) -> dict[str, Any]:
    """Keyword values by field name -> one instance per section class, keyed by the section's key; `fields`
    says which section owns each name. A name none takes is a programming error (TypeError), as for a dataclass."""
    owner = {name: section for section, names in fields.items() for name in names}
    by_section: dict[Any, dict[str, Any]] = {section: {} for section in fields}
    for name, value in values.items():
        if name not in owner:
            raise TypeError(f"no input section takes a field '{name}'")
        by_section[owner[name]][name] = value
    return {section.key: section(**given) for section, given in by_section.items()}


class CommandInputs:
    """A command's inputs, one section per field; FIELDS says which section takes each keyword (a mixin for
    the dataclasses EstimateInputs, PlanInputs and SweepInputs)."""

    FIELDS: ClassVar[dict[Any, tuple[str, ...]]]
    ECHO_ORDER: ClassVar[tuple[str, ...]] = ()
    units: str

    @classmethod
    def of(cls, units: str = "iec", **values: Any) -> Any:
        """From keyword values by field name (gpus=8, model="llama-2-7b", ...), each to its section."""
        return cls(units=units, **split(values, cls.FIELDS))  # type: ignore[call-arg]  # the dataclass's init

    def echo(self) -> dict[str, Any]:
        """The inputs as given, flat, in ECHO_ORDER, for the report."""
        owner = {name: section.key for section, names in self.FIELDS.items() for name in names}
        return {**{name: getattr(self, owner[name]).as_given(name) for name in self.ECHO_ORDER}, "units": self.units}


# ---- the sections -------------------------------------------------------------------------------------------

@dataclass(init=False, repr=False, eq=False)
class ModelInputs(Section):
    key: ClassVar[str] = "model"

    model: str | None = flag("--model", help="A model preset (`zeroplan presets list`), a Hugging Face Hub id "
                             "(meta-llama/Llama-3.1-8B) or the path of a config.json.", panel=MODEL)
    params: int | None = flag("--params", help="Parameter count: 13e9, 13B, 6.7b, 350M, 1.5T.", panel=MODEL,
                              parse=as_count)
    largest_layer_params: int | None = flag(
        "--largest-layer-params", help="Parameters of the largest single module (DeepSpeed's definition).",
        panel=MODEL, parse=as_count)
    layers: int | None = flag("--layers", help="Transformer layers (with --params).", panel=MODEL, kind=int)
    hidden: int | None = flag("--hidden", help='Hidden size (with --params; check and export: resolves "auto" '
                              "bucket sizes, default from --model).", panel=MODEL, kind=int)
    heads: int | None = flag("--heads", help="Attention heads (with --params).", panel=MODEL, kind=int)
    kv_heads: int | None = flag("--kv-heads", help="Key/value heads (default: --heads).", panel=MODEL, kind=int)
    vocab: int | None = flag("--vocab", help="Vocabulary size (with --params).", panel=MODEL, kind=int)
    ffn: int | None = flag("--ffn", help="MLP width (default 4 × hidden).", panel=MODEL, kind=int)


@dataclass(init=False, repr=False, eq=False)
class HardwareInputs(Section):
    key: ClassVar[str] = "hardware"

    gpus: int = flag("--gpus", help="Total GPUs (the world size; check: default from the plan or accelerate "
                     "config).", panel=HARDWARE, kind=int, default=1)
    gpus_per_node: int | None = flag("--gpus-per-node", help="GPUs per node (default: from the cluster preset).",
                                     panel=HARDWARE, kind=int)
    gpu: str | None = flag("--gpu", help="GPU preset (default a100-80g).", panel=HARDWARE)
    cluster: str | None = flag("--cluster", help="Cluster preset: node type, links, CPU RAM, NVMe.", panel=HARDWARE)
    cpu_memory: int | None = flag("--cpu-memory", help="CPU RAM per node, e.g. 512GB.", panel=HARDWARE,
                                  parse=parse_bytes)
    nvme: int | None = flag("--nvme", help="NVMe capacity per node, e.g. 2TB.", panel=HARDWARE, parse=parse_bytes)
    nvme_bandwidth: int | None = flag("--nvme-bandwidth", help="NVMe bandwidth per node, e.g. 7GB/s.",
                                      panel=HARDWARE, parse=parse_rate)
    intra_node_bandwidth: int | None = flag(
        "--intra-node-bandwidth", help="GPU-to-GPU link inside a node, per direction, e.g. 300GB/s.", panel=HARDWARE,
        parse=parse_rate)
    inter_node_bandwidth: int | None = flag(
        "--inter-node-bandwidth", help="Network bandwidth per GPU across nodes, e.g. 400Gb/s or 25GB/s.",
        panel=HARDWARE, parse=parse_rate)
    gpu_memory: int | None = flag("--gpu-memory", help="Override the GPU's memory, e.g. 80GiB.", panel=HARDWARE,
                                  parse=parse_bytes)
    presets_file: str | None = flag(
        "--presets", help="A presets YAML file that adds or overrides GPUs, clusters and models (same schema as the "
        "built-in ones; check it with `zeroplan presets validate FILE`).", panel=HARDWARE, echo=False,
        callback=use_presets_file)
    calibration: str | None = flag(
        "--calibration", help="Price communication with a profile from `zeroplan bench --save-calibration` "
        "(measured links).", panel=HARDWARE)


@dataclass(init=False, repr=False, eq=False)
class ParallelInputs(Section):
    key: ClassVar[str] = "parallel"

    tp: int = flag("--tp", help="Tensor-parallel degree (check: default tensor_parallel.autotp_size, else 1).",
                   panel=PARALLEL, kind=int, default=1)
    pp: int = flag("--pp", help="Pipeline-parallel degree.", panel=PARALLEL, kind=int, default=1)
    cp: int = flag("--cp", help="Context-parallel degree: each rank holds seq/cp tokens of every sequence (ring "
                   "attention; needs the sequence divisible by 2·cp); ZeRO shards over dp × cp ranks.",
                   panel=PARALLEL, kind=int, default=1)
    ep: int = flag("--ep", help="Expert-parallel degree (mixture-of-experts models): each rank holds experts/ep "
                   "experts; folded over the tp × dp ranks as Megatron-Core does.", panel=PARALLEL, kind=int,
                   default=1)
    etp: int | None = flag("--etp", help="Expert tensor-parallel degree (default: tp).", panel=PARALLEL, kind=int)
    stage: int | None = flag("--stage", help="Only this ZeRO stage (0-3).", panel=PARALLEL, kind=int)
    offload_optimizer: str | None = flag("--offload-optimizer", help="Only this optimizer tier: none, cpu, nvme.",
                                         panel=PARALLEL, parse=one_of(OffloadTier))
    offload_params: str | None = flag("--offload-params", help="Only this parameter tier: none, cpu, nvme "
                                      "(stage 3).", panel=PARALLEL, parse=one_of(OffloadTier))
    zeropp: str | None = flag("--zeropp", help="ZeRO++ features for stage 3, any of qwz,hpz,qgz.", panel=PARALLEL)
    hpz_partition_size: int | None = flag("--hpz-partition-size", help="hpZ secondary partition size (default: "
                                          "GPUs per node).", panel=PARALLEL, kind=int)
    dp_shard: int | None = flag("--dp-shard", help="Hybrid sharding: ZeRO-1/2/3 partitioned over groups of this many "
                                "data-parallel ranks and replicated across the groups (FSDP2 HSDP, ZeRO++ hpZ/MiCS); with "
                                "--ep the routed experts shard over dp_shard·tp/(ep·etp) ranks of each group "
                                "(torchtitan's efsdp).",
                                panel=PARALLEL, kind=int)
    nvme_path: str | None = flag("--nvme-path", help="nvme_path for NVMe offload blocks (default the placeholder "
                                 "/local_nvme).", panel=PARALLEL)


@dataclass(init=False, repr=False, eq=False)
class StepInputs(Section):
    """Precision, optimizer and the training step's shape."""

    key: ClassVar[str] = "step"

    precision: str = flag(
        "--precision", help="mixed (also bf16, fp16), fp32 or fp8 (bf16 with the linear layers' GEMMs in FP8; "
        "estimate and plan) (check: bf16, fp16 or fp32 resolves \"enabled\": "
        '"auto"; export: default bf16, fp16 on GPUs without bf16).', panel=TRAINING, default="mixed",
        parse=one_of(Precision, validate=False))
    fp8_recipe: str | None = flag("--fp8-recipe", help="With --precision fp8: tensorwise (default; FSDP gathers "
                                  "weights in FP8), rowwise or mxfp8 (Blackwell).", panel=TRAINING,
                                  parse=one_of(Fp8Recipe))
    optimizer: str = flag("--optimizer", help="adam, adamw, sgd-momentum, sgd, adam-8bit, "
                          "paged-adamw-8bit (bitsandbytes' PagedAdamW8bit, as QLoRA uses).", panel=TRAINING,
                          default="adam", parse=one_of(Optimizer))
    seq_len: int | None = flag("--seq-len", help="Sequence length (default: the model's context, capped at 4096).",
                               panel=STEP, kind=int)
    micro_batch: int | None = flag("--micro-batch", help="Sequences per GPU per micro-batch (default 1).",
                                   panel=STEP, kind=int)
    recompute: str | None = flag("--recompute", help="Activation recompute: none, selective, full or "
                                 "selective-op (default none).", panel=STEP, parse=one_of(Recompute))
    activations: str | None = flag(
        "--activations", help="Whose code keeps the activations: transformers (Hugging Face, default) or megatron "
        "(Megatron-LM's theoretical memory).", panel=STEP, parse=one_of(ActivationCode, validate=False))
    flash_attention: bool = flag("--flash-attention/--no-flash-attention", help="Flash attention stores no s×s "
                                 "scores.", panel=STEP, kind=bool, default=True)
    sequence_parallel: bool = flag("--sequence-parallel", help="Megatron sequence parallelism (with --tp).",
                                   panel=STEP, kind=bool, default=False)
    grad_accum: int | None = flag("--grad-accum", help="Gradient accumulation steps (micro-batches per optimizer "
                                  "step).", panel=STEP, kind=int)
    global_batch: int | None = flag("--global-batch", help="Sequences per optimizer step = micro-batch × "
                                    "accumulation × dp, exactly.", panel=STEP, kind=int)
    max_micro_batch: bool = flag("--max-micro-batch", help="Find the largest micro-batch each option fits.",
                                 panel=STEP, kind=bool, default=False)
    tokens: int | None = flag("--tokens", help="Training length in tokens (e.g. 300B): adds time to train and "
                              "GPU-hours.", panel=STEP, parse=as_count)
    capacity_factor: float | None = flag(
        "--capacity-factor", help="MoE expert capacity factor: tokens beyond c × an expert's even share are dropped "
        "(DeepSpeed-MoE, Megatron's --moe-expert-capacity-factor); default dropless, with a 10% token-imbalance "
        "allowance on the most loaded EP rank.", panel=STEP, kind=float)
    finetune: str = flag("--finetune", help="full (every parameter trains), lora, qlora (LoRA on a quantised base), or "
                         "auto (the cheapest that fits).", panel=FINETUNE, default="full", parse=one_of(FinetuneMode))
    lora_rank: int | None = flag("--lora-rank", help="LoRA rank r (default 16).", panel=FINETUNE, kind=int)
    lora_targets: str | None = flag("--lora-targets", help="Adapted linears as PEFT names them, comma-separated "
                                    "(q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj), or all-linear "
                                    "(default).",
                                    panel=FINETUNE)
    quant: str | None = flag("--quant", help="qlora's frozen base: nf4 (default) or int8.", panel=FINETUNE,
                             parse=one_of(Quant))
    double_quant: bool = flag("--double-quant/--no-double-quant", help="nf4 double quantisation of the absmax "
                              "constants (bitsandbytes' bnb_4bit_use_double_quant).", panel=FINETUNE, kind=bool,
                              default=True)
    freeze: str | None = flag("--freeze", help="Freeze embeddings (and LM head), the first K layers (layers:K), or "
                              "both: embeddings,layers:8.", panel=FINETUNE)
    finetune_recipe: str | None = flag("--finetune-recipe", help="Whose code trains the adapters: peft (default: "
                                       "transformers + PEFT, fp32 adapters and Adam states, transformers' loss) or "
                                       "torchtune (bf16 adapters and AdamW states, chunked cross-entropy).",
                                       panel=FINETUNE, parse=one_of(FinetuneRecipe))


@dataclass(init=False, repr=False, eq=False)
class BufferInputs(Section):
    """DeepSpeed's buffer settings (element counts); None = DeepSpeed's defaults."""

    key: ClassVar[str] = "buffers"

    reduce_bucket_size: int | None = flag(
        "--reduce-bucket-size", help="reduce_bucket_size in elements (default 5e8).", panel=BUFFERS, parse=as_count)
    allgather_bucket_size: int | None = flag(
        "--allgather-bucket-size", help="allgather_bucket_size in elements (default 5e8).", panel=BUFFERS,
        parse=as_count)
    prefetch_bucket_size: int | None = flag(
        "--prefetch-bucket-size", help="stage3_prefetch_bucket_size in elements (default 5e7).", panel=BUFFERS,
        parse=as_count)
    max_live_parameters: int | None = flag(
        "--max-live-parameters", help="stage3_max_live_parameters (default 1e9).", panel=BUFFERS, parse=as_count)
    sub_group_size: int | None = flag(
        "--sub-group-size", help="sub_group_size for the stage-3 optimizer step (default 1e9).", panel=BUFFERS,
        parse=as_count)
    overlap_comm: bool | None = flag("--overlap-comm/--no-overlap-comm", help="DeepSpeed overlap_comm (default: on "
                                     "at stage 3 only).", panel=BUFFERS, kind=bool)


def _default_buffer_factor() -> float:
    return DEFAULT_BUFFER_FACTOR


@dataclass(init=False, repr=False, eq=False)
class ConventionInputs(Section):
    """Which memory convention the estimate follows."""

    key: ClassVar[str] = "convention"

    convention: str = flag(
        "--convention", help="paper (ZeRO paper), deepspeed (DeepSpeed's estimators, to the byte) or framework "
        "(real tensor partitioning, see --framework).", panel=DEEPSPEED, default="paper", parse=one_of(Convention))
    framework: str | None = flag(
        "--framework", help="For --convention framework: deepspeed (default), or torch (DDP, "
        "ZeroRedundancyOptimizer, FSDP2).", panel=DEEPSPEED, parse=one_of(Framework))
    zero_init: bool = flag("--zero-init/--no-zero-init", help="DeepSpeed's zero_init for the ZeRO-3 CPU estimate.",
                           panel=DEEPSPEED, kind=bool, default=True)
    buffer_factor: float = flag("--buffer-factor", help="DeepSpeed's additional_buffer_factor for CPU memory.",
                                panel=DEEPSPEED, kind=float, default=1.5)


@dataclass(init=False, repr=False, eq=False)
class BudgetInputs(Section):
    key: ClassVar[str] = "budget"

    runtime_reserve: int | None = flag("--runtime-reserve", help="GPU memory for CUDA context + NCCL (default "
                                       "1GiB).", panel=MEMORY, parse=parse_bytes)
    fragmentation: Fraction | None = flag("--fragmentation", help="Allocator headroom as a share of capacity "
                                          "(default 10%).", panel=MEMORY, parse=parse_fraction)
    activation_reserve: Fraction | None = flag(
        "--activation-reserve", help="Share of usable memory kept for activations when they are not counted "
        "(default 15%).", panel=MEMORY, parse=parse_fraction)
    host_reserve: Fraction | None = flag("--host-reserve", help="Share of CPU RAM kept for the OS and dataloaders "
                                         "(default 10%).", panel=MEMORY, parse=parse_fraction)


@dataclass(init=False, repr=False, eq=False)
class OutputInputs(Section):
    """How the result is shown or written. `format`'s choices are the command's (see zeroplan.cli.options)."""

    key: ClassVar[str] = "output"

    output_format: str = flag("--format", "-f", help="Output format: {choices}.", panel=OUTPUT, default="table",
                              echo=False)
    output: str | None = flag("--output", "-o", help="Write to this file instead of stdout.", panel=OUTPUT,
                              echo=False)
    units: str = flag("--units", help="iec (GiB, default) or si (GB) for memory.", panel=OUTPUT, default="iec",
                      parse=one_of(Units))
    explain: bool = flag("--explain", help="Print each formula with your numbers in it.", panel=OUTPUT, kind=bool,
                         default=False, echo=False)
    progress: bool = flag("--progress/--no-progress", help="Progress bar on stderr for long searches.",
                          panel=OUTPUT, kind=bool, default=True, echo=False)
    write_deepspeed: str | None = flag("--write-deepspeed", help="Write a DeepSpeed config (ds_config.json) for the "
                                       "top plan.", panel=OUTPUT, echo=False)
    plot: str | None = flag(
        "--plot", help="Also draw the result to FILE.png or FILE.svg (needs matplotlib, the plot extra): estimate, "
        "memory per GPU of each option; plan, where each top plan's step time goes; sweep, memory against GPUs.",
        panel=OUTPUT, echo=False)
    force: bool = flag("--force", help="When nothing fits, write the closest option anyway (the least GPU "
                       "memory).", panel=OUTPUT, kind=bool, default=False, echo=False)
    strict: bool = flag("--strict", help="Warnings fail the check too.", panel=OUTPUT, kind=bool, default=False,
                        echo=False)
    assumptions: bool = flag("--assumptions", help="List what the memory rules assumed.", panel=OUTPUT, kind=bool,
                             default=False, echo=False)
    plan: str | None = flag("--plan", help="A zeroplan plan file giving the model, cluster and training "
                            "settings.", panel=CONTEXT, echo=False)

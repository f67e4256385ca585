"""Options given as Python keyword arguments (the API): one rule for names and types.

A keyword is the flag's name without the dashes, underscores for hyphens (`--gpus-per-node` is
`gpus_per_node`, `--presets` is `presets`; the section's field name, e.g. `presets_file`, is taken too).
Its value has the type the flag reads:
- a switch (`--flash-attention/--no-flash-attention`) takes True or False;
- a whole number (`--gpus`, `--stage`) takes an int (never a bool: `stage=True` is not stage 1);
- a decimal (`--efficiency`) takes an int or a float;
- a count, size, rate or share (`--params 13e9`, `--cpu-memory 512GB`, `--fragmentation 10%`) takes text or
  a number;
- a comma list (plan's `--tp 1,2,4`, `--zeropp qwz,hpz`) takes text, a whole number, or a list or tuple of them;
- a file (`--model config.json`, `--presets`, `--calibration`) takes text or a path (os.PathLike);
- any other option takes text.
None is "not given" (the default applies, as when the keyword is left out). Anything else is an InputError
naming the keyword: never a silent conversion, never an AttributeError from deep inside.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import math
import os
from typing import Any

from zeroplan.core.errors import InputError
from zeroplan.inputs import presets
from zeroplan.inputs.sections import flag_of

# Fields whose text is read as a number (a count, bytes, a rate, a share): a number is taken as well.
NUMERIC_TEXT = frozenset({
    "params", "largest_layer_params", "tokens", "cpu_adam_rate", "reduce_bucket_size", "allgather_bucket_size",
    "prefetch_bucket_size", "max_live_parameters", "sub_group_size", "cpu_memory", "nvme", "nvme_bandwidth",
    "intra_node_bandwidth", "inter_node_bandwidth", "gpu_memory", "runtime_reserve", "fragmentation",
    "activation_reserve", "host_reserve", "tie_tolerance"})
# Fields that name a file: a path object is taken as well.
PATHS = frozenset({"model", "presets_file", "calibration", "plan", "nvme_path"})
# Comma lists, by the section that holds them (plan's search space, sweep's grid, ZeRO++ features).
_LIST_SECTIONS = frozenset({"search", "grid"})
_LIST_FIELDS = frozenset({"zeropp"})
_SEARCH_SINGLE = frozenset({"efficiency", "cpu_adam_rate", "offload", "sequence_parallel", "allow_cross_node_tp",
                            "fsdp_pipeline", "top", "tie_tolerance", "comm_overlap"})


def refuse_unknown(given: dict[str, Any], known: set[str], command: str) -> None:
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise InputError(name, f"is not an option of {command}",
                             f"did you mean {close[0]}?" if close else f"see `zeroplan {command} --help`")


def keyword_of(declared: Any) -> str:
    """The keyword a flag is given as: its long name without dashes, hyphens as underscores."""
    return declared.name.lstrip("-").replace("-", "_")


def _declared(fields: dict[Any, tuple[str, ...]]) -> dict[str, tuple[str, Any, Any]]:
    """keyword -> (field name, its Flag, its section) for every field, by field name and by flag name."""
    return _declared_for(tuple(fields.items()))


@functools.lru_cache(maxsize=16)
def _declared_for(fields: tuple[tuple[Any, tuple[str, ...]], ...]) -> dict[str, tuple[str, Any, Any]]:
    found: dict[str, tuple[str, Any, Any]] = {}
    for section, names in fields:
        for name in names:
            declared = flag_of(section, name)
            found[name] = (name, declared, section)
            found.setdefault(keyword_of(declared), (name, declared, section))
    return found


def _kind_name(value: Any) -> str:
    return type(value).__name__


def _is_list_field(name: str, section: Any) -> bool:
    return name in _LIST_FIELDS or (getattr(section, "key", "") in _LIST_SECTIONS and name not in _SEARCH_SINGLE)


def typed_value(keyword: str, name: str, declared: Any, section: Any, value: Any) -> Any:
    """The value as the section takes it, or InputError naming the keyword."""
    kind = declared.kind
    if kind is bool:
        if not isinstance(value, bool):
            raise InputError(keyword, f"must be True or False, got {value!r}", f"give {keyword}=True or {keyword}=False")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(keyword, f"must be a whole number (int), got {_kind_name(value)} {value!r}",
                             f"give {keyword} as an int")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(keyword, f"must be a finite number, got {_kind_name(value)} {value!r}",
                             f"give {keyword} as an int or a float")
        return value
    if isinstance(value, str):
        return value
    if name in PATHS and isinstance(value, os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    if name in NUMERIC_TEXT and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if _is_list_field(name, section):
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if items and all(isinstance(i, str) or (isinstance(i, int) and not isinstance(i, bool)) for i in items):
            return ",".join(str(item) for item in items)
        raise InputError(keyword, f"must be text, a whole number or a list of them, got {_kind_name(value)} "
                         f"{value!r}", f"write e.g. {keyword}=\"1,2,4\" or {keyword}=[1, 2, 4]")
    what = "text or a path" if name in PATHS else "text or a number" if name in NUMERIC_TEXT else "text"
    raise InputError(keyword, f"must be {what}, got {_kind_name(value)} {value!r}",
                     f"give {keyword} as {what}, as the flag {declared.name} takes it")


def api_values(given: dict[str, Any], fields: dict[Any, tuple[str, ...]], command: str) -> dict[str, Any]:
    """Keyword arguments -> values by field name, each of the type its flag reads; None dropped (not given).
    An unknown keyword or a value of another type is an InputError naming the keyword."""
    declared = _declared(fields)
    refuse_unknown(given, set(declared), command)
    values: dict[str, Any] = {}
    for keyword, value in given.items():
        name, flag, section = declared[keyword]
        if name in values:
            raise InputError(keyword, f"is given twice (as {name} too)", f"give only {keyword_of(flag)}=")
        if value is None:
            continue
        values[name] = typed_value(keyword, name, flag, section, value)
    return values


def presets_layer(path: str | None, keyword: str = "presets") -> contextlib.AbstractContextManager[None]:
    """The presets file layered over the built-in presets for one API call (the CLI layers --presets as the
    flag is parsed); a missing file is an InputError naming the keyword."""
    try:
        return presets.layered(path)
    except InputError as exc:
        raise InputError(keyword, exc.problem, exc.fix) from None

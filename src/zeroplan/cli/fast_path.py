"""`zeroplan estimate ...` parsed straight from the declarations in zeroplan.inputs.sections, without building
the typer app (importing typer and click costs about a third of a cold `estimate` run).

Only plain command lines take this path: every token a declared flag (`--name VALUE`, `--name=VALUE`, a
boolean `--flag`/`--no-flag`, the short `-f`/`-o`), each value converted as click converts it (int(),
float(), the text as given). Anything else — a help request, an unknown or misspelt flag, a value click would
refuse, a positional argument — returns None and typer handles the command line as always, so every error
message and exit status is typer's own. The command body and its sections are the same either way
(tests/test_fast_path.py runs both paths on the same command lines and compares the output byte for byte).
"""

from __future__ import annotations

from typing import Any

_VALUE_KINDS = {int: int, float: float, str: str}


def _flag_table(generated: Any) -> dict[str, tuple[str, Any, Any]] | None:
    """Flag text -> (field name, kind, the value a bare boolean flag means)."""
    table: dict[str, tuple[str, Any, Any]] = {}
    for _, item in generated.fields():
        flag = item.metadata["flag"]
        if flag.callback is not None and flag.kind is bool:
            return None  # not expected; keep the rare shapes on typer's path
        for name in flag.names:
            if "/" in name:  # --flash-attention/--no-flash-attention
                positive, negative = name.split("/")
                table[positive] = (item.name, bool, True)
                table[negative] = (item.name, bool, False)
            elif flag.kind is bool:
                table[name] = (item.name, bool, True)
            else:
                table[name] = (item.name, flag.kind, None)
    return table


def parse(generated: Any, args: list[str]) -> dict[str, Any] | None:
    """The command's keyword arguments for a plain command line, or None to leave it to typer."""
    if generated.extra:
        return None
    table = _flag_table(generated)
    if table is None:
        return None
    given: dict[str, Any] = {}
    index = 0
    while index < len(args):
        token = args[index]
        inline: str | None = None
        name = token
        if token.startswith("--") and "=" in token:
            name, inline = token.split("=", 1)
        entry = table.get(name)
        if entry is None:
            return None
        field, kind, bare = entry
        if kind is bool:
            if inline is not None:
                return None
            given[field] = bare
            index += 1
            continue
        if inline is None:
            if index + 1 >= len(args):
                return None
            inline, index = args[index + 1], index + 2
        else:
            index += 1
        convert = _VALUE_KINDS.get(kind)
        if convert is None:
            return None
        try:
            given[field] = convert(inline)
        except (TypeError, ValueError, OverflowError):
            return None  # typer words the error
    for use, item in generated.fields():  # what typer passes for a flag that is not given
        given.setdefault(item.name, generated.default(use, item))
        callback = item.metadata["flag"].callback
        if callback is not None:  # click runs an option's callback given or not (e.g. --presets resets)
            given[item.name] = callback(given[item.name])
    return given

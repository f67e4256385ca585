"""Each input field's command-line flag, read from the option declarations (the Flag of every field in
zeroplan.inputs.sections and zeroplan.inputs.command_sections): how the CLI writes an input that an error
names by its field (`gpus` -> `--gpus`, `presets_file` -> `--presets`). A field no option declares is written
as it is. Imported only when an error is reported: start-up time."""

from __future__ import annotations

import dataclasses
import fnmatch
import functools

from zeroplan.core.errors import InputError
from zeroplan.inputs import command_sections, sections


@functools.cache
def flags() -> dict[str, str]:
    """field -> flag, over every declared section (one flag per field name: tests/test_input_fields.py)."""
    table: dict[str, str] = {}
    for module in (sections, command_sections):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, sections.Section) and dataclasses.is_dataclass(value):
                for item in dataclasses.fields(value):
                    declared = item.metadata.get("flag")
                    if declared is not None:
                        table.setdefault(item.name, declared.name)
    return table


def flag_of(name: str) -> str | None:
    """The flag of a field, or of a field pattern (`offload_*` -> `--offload-*`); None when no option has it."""
    if name.endswith("*"):
        matched = [flags()[field] for field in fnmatch.filter(flags(), name)]
        return "--" + name.replace("_", "-") if matched else None
    return flags().get(name)


def cli_message(error: InputError) -> str:
    """The error's line as the CLI prints it: every field named by its flag."""
    return error.message(flag_of, " ")

"""`zeroplan presets list|show|validate`."""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from zeroplan.cli.options import command, uses
from zeroplan.inputs.sections import HardwareInputs, OutputInputs
from zeroplan.render.sink import check_format, write_text

presets_app = typer.Typer(help="Built-in and user GPU, cluster and model presets.", no_args_is_help=True)


FORMAT = uses(OutputInputs, "output_format")
PRESETS_FILE = uses(HardwareInputs, "presets_file")


@presets_app.command("list")
@command(FORMAT, PRESETS_FILE, formats=("table", "json"))
def list_presets(output: OutputInputs, hardware: HardwareInputs) -> None:
    """Every preset name, by category (built-in, then the user's presets files)."""
    import json

    from zeroplan.inputs import presets

    output_format = check_format(output.output_format, ("table", "json"))
    listing = {category: {name: presets.entry(category, name).description for name in presets.names(category)}
               for category in presets.CATEGORIES}
    if output_format == "json":
        write_text(json.dumps(listing, indent=2) + "\n", None)
        return
    from zeroplan.render.terminal import Canvas

    canvas = Canvas.for_output(to_file=False)
    for category, entries in listing.items():
        canvas.line(f"{category}:")
        width = max(len(name) for name in entries)
        for name, description in entries.items():  # wrapped under the description column, whole words
            canvas.wrapped(description, first=f"  {name:<{width}}  ")
    write_text(canvas.text(), None)


@presets_app.command("show")
@command(FORMAT, PRESETS_FILE, formats=("table", "json"), extra=(inspect.Parameter(
    "name", inspect.Parameter.POSITIONAL_OR_KEYWORD,
    annotation=Annotated[str, typer.Argument(help="A preset name.")]),))
def show_preset(name: str, output: OutputInputs, hardware: HardwareInputs) -> None:
    """One preset's fields and sources."""
    import json

    import yaml

    from zeroplan.inputs import presets

    output_format = check_format(output.output_format, ("table", "json"))
    category = presets.category_of(name)
    fields = presets.show(category, name)
    if output_format == "json":
        write_text(json.dumps({"category": category, "name": name.lower(), **fields}, indent=2) + "\n", None)
        return
    write_text(f"# {category[:-1]} preset '{name.lower()}'\n" + yaml.safe_dump(fields, sort_keys=False), None)


@presets_app.command("validate")
def validate_presets(path: Annotated[str, typer.Argument(help="A presets YAML file.")]) -> None:
    """Check a presets file against the built-in schema; an error names FILE:LINE:COLUMN of the bad field."""
    from pathlib import Path

    from zeroplan.inputs import presets

    entries = presets.validate(Path(path).expanduser())
    lines = [f"{path}: valid"]
    for category in presets.CATEGORIES:
        for name in entries.get(category, {}):
            verb = "overrides" if name in presets.builtin()[category] else "adds"
            lines.append(f"  {verb} {category[:-1]} '{name}'")
    write_text("\n".join(lines) + "\n", None)

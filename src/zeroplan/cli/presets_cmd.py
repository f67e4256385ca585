"""`zeroplan presets list|show`."""

from __future__ import annotations

from typing import Annotated

import typer

from zeroplan.cli import options as opt
from zeroplan.render.sink import check_format, write_text

presets_app = typer.Typer(help="Built-in GPU, cluster and model presets.", no_args_is_help=True)


@presets_app.command("list")
def list_presets(output_format: opt.FormatTableJson = "table") -> None:
    """Every preset name, by category."""
    import json

    from zeroplan.inputs import presets

    output_format = check_format(output_format, ("table", "json"))
    listing = {category: {name: presets.entry(category, name).description for name in presets.names(category)}
               for category in presets.CATEGORIES}
    if output_format == "json":
        write_text(json.dumps(listing, indent=2) + "\n", None)
        return
    lines = []
    for category, entries in listing.items():
        lines.append(f"{category}:")
        width = max(len(name) for name in entries)
        lines += [f"  {name:<{width}}  {description}" for name, description in entries.items()]
    write_text("\n".join(lines) + "\n", None)


@presets_app.command("show")
def show_preset(name: Annotated[str, typer.Argument(help="A preset name.")],
                output_format: opt.FormatTableJson = "table") -> None:
    """One preset's fields and sources."""
    import json

    import yaml

    from zeroplan.inputs import presets

    output_format = check_format(output_format, ("table", "json"))
    category = presets.category_of(name)
    fields = presets.show(category, name)
    if output_format == "json":
        write_text(json.dumps({"category": category, "name": name.lower(), **fields}, indent=2) + "\n", None)
        return
    write_text(f"# {category[:-1]} preset '{name.lower()}'\n" + yaml.safe_dump(fields, sort_keys=False), None)

"""Typer parameters generated from the input sections (zeroplan.inputs.sections), where every option is declared.

A command says which fields of which sections it takes:

    @command(uses(ModelInputs, "model", "params"), uses(OutputInputs, "output_format", "output"), formats=(...))
    def estimate(model: ModelInputs, output: OutputInputs) -> None: ...

and receives one instance per section. The help panel, default, type and help text all come from the field's
Flag; a command may only move a field to another panel, make it required, or leave every default unset (None:
check and export take what is not given from a plan file).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional

import typer

from zeroplan.inputs.sections import Flag

_NO_PANEL = object()


@dataclass(frozen=True)
class Use:
    section: type
    fields: tuple[str, ...]
    panel: Any = _NO_PANEL  # one panel for every field (None: no panel), instead of each flag's own
    panels: tuple[tuple[str, str], ...] = ()  # (field, panel) moves
    required: tuple[str, ...] = ()
    unset: bool = False  # every default None: "not given", filled from a plan or config file


def uses(section: type, *fields: str, panel: Any = _NO_PANEL, panels: dict[str, str] | None = None,
         required: tuple[str, ...] = (), unset: bool = False) -> Use:
    names = fields or tuple(f.name for f in dataclasses.fields(section))
    return Use(section, names, panel, tuple((panels or {}).items()), required, unset)


def _parameter(use: Use, item: dataclasses.Field, formats: tuple[str, ...] | None) -> inspect.Parameter:
    declared: Flag = item.metadata["flag"]
    panel = dict(use.panels).get(item.name, declared.panel if use.panel is _NO_PANEL else use.panel)
    default = None if use.unset else item.default
    help_text = declared.help
    if item.name == "output_format" and formats is not None:
        help_text = help_text.format(choices=", ".join(formats[:-1]) + " or " + formats[-1])
        default = formats[0]
    kind = Optional[declared.kind] if default is None else declared.kind
    info = typer.Option(*declared.names, help=help_text, rich_help_panel=panel, hidden=declared.hidden,
                        callback=declared.callback)
    annotation = Annotated[kind, info]  # type: ignore[valid-type]  # built at run time from the Flag
    if item.name in use.required:
        return inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
    return inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


def command(*used: Use, formats: tuple[str, ...] | None = None,
            extra: tuple[inspect.Parameter, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The body, with typer parameters for the fields it uses; it is called with one instance per section
    (keyword: the section's key) and any `extra` parameters (e.g. a positional argument) by their names."""
    def wrap(body: Callable[..., Any]) -> Callable[..., Any]:
        owners: dict[str, Use] = {}
        parameters = list(extra)
        for use in used:
            by_name = {f.name: f for f in dataclasses.fields(use.section)}
            for name in use.fields:
                if name in owners or any(p.name == name for p in extra):
                    raise TypeError(f"{body.__name__}: two options named '{name}'")
                owners[name] = use
                parameters.append(_parameter(use, by_name[name], formats))

        @functools.wraps(body)
        def generated(**given: Any) -> Any:
            values: dict[Any, dict[str, Any]] = {use.section: {} for use in used}
            for use in used:  # unset: the fields the command does not take are not given either
                if use.unset:
                    values[use.section].update({f.name: None for f in dataclasses.fields(use.section)})
            passed = {p.name: given.pop(p.name) for p in extra}
            for name, value in given.items():
                values[owners[name].section][name] = value
            sections = {section.key: section(**fields) for section, fields in values.items()}
            return body(**sections, **passed)

        del generated.__wrapped__  # typer must see the generated signature, not the body's
        generated.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        generated.__annotations__ = {p.name: p.annotation for p in parameters}
        return generated

    return wrap

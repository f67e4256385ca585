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
    import typer  # here, not at import: `zeroplan estimate` runs without typer (cli/fast_path.py)

    kind = Optional[declared.kind] if default is None else declared.kind
    info = typer.Option(*declared.names, help=help_text, rich_help_panel=panel, hidden=declared.hidden,
                        callback=declared.callback)
    annotation = Annotated[kind, info]  # type: ignore[valid-type]  # built at run time from the Flag
    if item.name in use.required:
        return inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
    return inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


class GeneratedCommand:
    """A command body with typer parameters generated from the fields it uses. Typer reads the signature
    (built on first access, importing typer then); `zeroplan estimate` may instead be called straight from
    the command line by cli/fast_path.py, which reads the same declarations without typer."""

    def __init__(self, body: Callable[..., Any], used: tuple[Use, ...], formats: tuple[str, ...] | None,
                 extra: tuple[inspect.Parameter, ...]) -> None:
        # typer reads the name and the docstring (help); the signature is generated, never the body's
        functools.update_wrapper(self, body, assigned=("__module__", "__name__", "__qualname__", "__doc__"),
                                 updated=())
        del self.__dict__["__wrapped__"]
        self.body, self.used, self.formats, self.extra = body, used, formats, extra
        self.owners: dict[str, Use] = {}
        for use in used:
            for name in use.fields:
                if name in self.owners or any(p.name == name for p in extra):
                    raise TypeError(f"{body.__name__}: two options named '{name}'")
                self.owners[name] = use
        self._parameters: list[inspect.Parameter] | None = None

    def fields(self) -> list[tuple[Use, dataclasses.Field]]:
        """Every (use, field) the command takes, in declaration order."""
        found = []
        for use in self.used:
            by_name = {f.name: f for f in dataclasses.fields(use.section)}
            found += [(use, by_name[name]) for name in use.fields]
        return found

    def default(self, use: Use, item: dataclasses.Field) -> Any:
        """What the command line gives a field that is not on it (as the generated parameter's default)."""
        if use.unset:
            return None
        if item.name == "output_format" and self.formats is not None:
            return self.formats[0]
        return item.default

    @property
    def parameters(self) -> list[inspect.Parameter]:
        if self._parameters is None:
            self._parameters = list(self.extra) + [_parameter(use, item, self.formats) for use, item in self.fields()]
        return self._parameters

    @property
    def __signature__(self) -> inspect.Signature:  # read by typer when the command is built
        return inspect.Signature(self.parameters)

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]  # typer's get_type_hints reads them
        return {p.name: p.annotation for p in self.parameters}

    def __call__(self, **given: Any) -> Any:
        values: dict[Any, dict[str, Any]] = {use.section: {} for use in self.used}
        for use in self.used:  # unset: the fields the command does not take are not given either
            if use.unset:
                values[use.section].update({f.name: None for f in dataclasses.fields(use.section)})
        passed = {p.name: given.pop(p.name) for p in self.extra}
        for name, value in given.items():
            values[self.owners[name].section][name] = value
        sections = {section.key: section(**fields) for section, fields in values.items()}
        return self.body(**sections, **passed)


def command(*used: Use, formats: tuple[str, ...] | None = None,
            extra: tuple[inspect.Parameter, ...] = ()) -> Callable[[Callable[..., Any]], Any]:
    """The body, with typer parameters for the fields it uses; it is called with one instance per section
    (keyword: the section's key) and any `extra` parameters (e.g. a positional argument) by their names."""
    def wrap(body: Callable[..., Any]) -> GeneratedCommand:
        return GeneratedCommand(body, used, formats, extra)

    return wrap

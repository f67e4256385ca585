"""zeroplan's one error hierarchy. The CLI's entry point turns every ZeroplanError into one stderr line and
its exit status: 2 for bad input (InputError), 1 for a run or check that failed (RunFailed).

An InputError names the input the way the Python API takes it: by its field (`gpus`, `global_batch`), and
names other inputs inside its problem and fix through `ref()`. Whoever reports the error writes each name the
way its user typed it: `str(error)` gives the API's keywords (`gpus: ...`, `use pp=4`), the CLI's error table
the flags, through the option declarations (`--gpus: ...`, `use --pp 4`)."""

from __future__ import annotations

import re
from typing import Callable

# A reference inside an error's text: OPEN name [VALUE value] CLOSE (control characters no message holds).
_OPEN, _VALUE, _CLOSE = "\x0e", "\x1f", "\x0f"
_REFERENCE = re.compile(f"{_OPEN}([^{_VALUE}{_CLOSE}]*)(?:{_VALUE}([^{_CLOSE}]*))?{_CLOSE}")
_FIELD = re.compile(r"[a-z][a-z0-9_]*\*?")
_SEPARATOR = re.compile("(/|, )")


def ref(name: str, value: object = None) -> str:
    """An input named inside an error's problem or fix, with the value to give it if any: written out as the
    error's reader typed it (`--pp 4` on the command line, `pp=4` from Python)."""
    return _OPEN + name + ("" if value is None else _VALUE + str(value)) + _CLOSE


def keyword(name: str) -> str | None:
    """The Python API's name for a field: the field itself."""
    return name


def render(text: str, name_of: Callable[[str], str | None] = keyword, assign: str = "=") -> str:
    """`text` with every ref() written out: name_of(field) names it (None: the field as it is), `assign` joins
    a name and its value ("=" for keywords, " " for flags)."""
    def written(match: re.Match[str]) -> str:
        name = name_input(match.group(1), name_of)
        return name if match.group(2) is None else f"{name}{assign}{match.group(2)}"

    return _REFERENCE.sub(written, text) if _OPEN in text else text


def name_input(input_name: str, name_of: Callable[[str], str | None] = keyword) -> str:
    """An error's input written out: a field, or fields joined by "/" or ", " (`tp/pp`), each through name_of;
    a name that is not made of fields (a file, a config key path, an environment variable) stays as it is."""
    parts = _SEPARATOR.split(input_name)
    if not all(_FIELD.fullmatch(part) for part in parts[::2]):
        return input_name
    return "".join(part if index % 2 else name_of(part) or part for index, part in enumerate(parts))


class ZeroplanError(Exception):
    """An error zeroplan reports as one line; exit_code is the process's exit status."""

    exit_code = 1


class InputError(ZeroplanError, ValueError):
    """A user-supplied value is invalid. The message names the input and how to fix it: `input_name` is the
    field (or a file, a key), `problem` and `fix` may name other fields through ref()."""

    exit_code = 2

    def __init__(self, input_name: str, problem: str, fix: str = "") -> None:
        self.input_name = input_name
        self.problem = problem
        self.fix = fix
        super().__init__(self.message())

    def message(self, name_of: Callable[[str], str | None] = keyword, assign: str = "=") -> str:
        """The one line, each input named through name_of (default: the API's keywords)."""
        head = render(name_input(self.input_name, name_of), name_of, assign)  # a head may hold a ref() too
        message = f"{head}: {render(self.problem, name_of, assign)}"
        if self.fix:
            message += f" ({render(self.fix, name_of, assign)})"
        return message


class RunFailed(ZeroplanError, RuntimeError):
    """The inputs were fine but the outcome is a failure the user asked to be told of: a check found errors,
    nothing fits to export, a rank died, a prediction missed its tolerance. Exit status 1 unless given."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

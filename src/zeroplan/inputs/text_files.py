"""Reading a file a user named: bounded in size, regular files only, UTF-8, one-line errors naming it.

Every input file zeroplan reads (config.json, calibration profiles, DeepSpeed/accelerate/plan configs)
goes through read_user_text, so /dev/zero or a 10 GB log given by mistake is refused at once instead of
read until memory runs out, and JSON nested 100,000 levels deep is an input error, not a crash.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

from zeroplan.core.errors import InputError
from zeroplan.render.sink import note_input

# Far above any real config (the largest config.json on the Hub are a few hundred KB).
MAX_INPUT_BYTES = 16 * 2**20


def read_user_text(path: str | Path, fix: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The text of a regular file of at most max_bytes; InputError naming the path otherwise."""
    path = Path(path)
    where = str(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(where, "no such file", fix) from None
    except OSError as error:
        raise InputError(where, f"cannot be read: {error.strerror or error}", fix) from None
    if stat.S_ISDIR(mode):
        raise InputError(where, "is a directory, not a file", fix)
    if not stat.S_ISREG(mode):
        raise InputError(where, "is not a regular file (a device, pipe or socket)", fix)
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except OSError as error:
        raise InputError(where, f"cannot be read: {error.strerror or error}", fix) from None
    note_input(path)  # no output of this run replaces it
    if len(data) > max_bytes:
        raise InputError(where, f"is larger than {max_bytes // 2**20} MiB, far beyond any config", fix)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(where, f"is not UTF-8 text (byte {error.start})", fix) from None


def parse_json_text(text: str, where: str, fix: str) -> object:
    """json.loads with every failure as an InputError: syntax, nesting too deep, oversized integers."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(where, f"is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}",
                         fix) from None
    except RecursionError:
        raise InputError(where, "is nested too deeply to be a config (thousands of levels)", fix) from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits (Python's int-string limit)
        raise InputError(where, f"holds a value no config has: {str(error).split(';')[0]}", fix) from None

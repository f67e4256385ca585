"""Where a command's data goes: stdout, or --output FILE. Errors never go here.

Every file zeroplan writes for the user (--output, --write-deepspeed, --plot, --save-calibration) goes
through write_file: it refuses a file that is one of the command's inputs (same file through a symlink or
a hard link included), writes a temporary file beside the target and renames it over the target, so the
old file survives any failure (a full disk, `ulimit -f`, an interrupt) intact.

Only a regular file (or a new name) is replaced that way. A character device or a FIFO (`-o /dev/null`,
`-o >(gzip > x.gz)`) is written in place, as a shell redirection would: renaming over it would destroy the
device node (as root: the machine's /dev/null). A block device or a socket is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from zeroplan.core.errors import InputError, RunFailed
from zeroplan.render.terminal import Canvas

FORMATS = ("table", "json", "csv", "markdown")


def check_format(name: str, allowed: tuple[str, ...] = FORMATS) -> str:
    key = name.strip().lower()
    if key not in allowed:
        raise InputError("--format", f"unknown format '{name}'", f"use one of {', '.join(allowed)}")
    return key


InputPaths = Iterable["str | Path | None"]

# Every file this run has read (inputs.text_files.read_user_text notes each one, inputs.presets the presets
# files in use, the config directory's presets.yaml included): no output replaces one, whether or not the
# command listed it. zeroplan.cli.app.main starts each run with none.
_READ: set[str] = set()


def note_input(path: str | Path) -> None:
    """A file this run reads: write_file refuses to replace it."""
    with contextlib.suppress(OSError, ValueError):
        _READ.add(os.path.realpath(path))


def forget_inputs() -> None:
    _READ.clear()


def write_text(text: str, output: str | None, inputs: InputPaths = (), option: str = "-o") -> None:
    """`text` to stdout, or atomically to `output` (never over one of `inputs`)."""
    if output is None:
        write_stdout(text)
        return
    write_file(output, lambda temporary: Path(temporary).write_text(text, encoding="utf-8"), inputs, option)


def distinct_outputs(outputs: dict[str, "str | Path | None"]) -> None:
    """InputError (exit 2) before any work when two outputs of one command name the same file (--plot and
    --write-deepspeed on one name: the second write would replace the first); `outputs` maps option -> path."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None or str(path) == "-":
            continue
        key = real_path(path, option)
        if key in seen:
            raise InputError(f"{option} {path}", f"is also the {seen[key]} file", "give each output its own file")
        seen[key] = option


class ReaderGone(RunFailed):
    """stdout's reader closed the pipe (`| head -1`): the run ends quietly, as a filter killed by SIGPIPE does in
    a shell (status 128 + 13). Not an OSError, so no framework turns it into its own exit status on the way out."""

    STATUS = 141

    def __init__(self) -> None:
        super().__init__("stdout's reader closed the pipe", self.STATUS)


def write_stdout(text: str) -> None:
    """The command's data on stdout, flushed now, so a failure is this command's one-line error rather than
    a lost write at exit: stdout closed, or on a full device, is an InputError naming stdout (exit 2); a reader
    that went away (`| head -1`) raises ReaderGone, which zeroplan.cli.app ends quietly."""
    stream = sys.stdout
    if stream is None:
        raise InputError("stdout", "is closed: the report has nowhere to go", "leave stdout open or give -o FILE")
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise ReaderGone() from None
    except (OSError, ValueError) as exc:  # ValueError: a stream closed in this process
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is closed"
        raise InputError("stdout", f"cannot write: {reason}; the report is lost",
                         "write it with -o FILE to a device with space") from None


def real_path(path: str | Path, option: str) -> str:
    """os.path.realpath, or InputError when a relative path cannot be resolved (the working directory was
    deleted under the shell)."""
    try:
        return os.path.realpath(path)
    except FileNotFoundError:
        raise InputError(f"{option} {path}", "the working directory no longer exists",
                         "cd to a directory that exists, or give an absolute path") from None


def refuse_inputs(output: str | Path, inputs: InputPaths, option: str = "-o") -> None:
    """InputError (exit 2) when `output` is one of `inputs`: the same path, a symlink to it or a hard link.

    Call it before the work when the output is known early; write_file calls it again."""
    target = Path(real_path(output, option))
    for given in [*inputs, *sorted(_READ)]:
        if given is None or str(given) == "-":
            continue
        source = Path(given)
        if not source.is_file():  # a preset name, or nothing there to destroy
            continue
        same = str(target) == real_path(source, option)
        if not same:
            with contextlib.suppress(OSError):
                same = target.exists() and os.path.samefile(target, source)
        if same:
            raise InputError(f"{option} {output}", f"is the input {given}: writing it would replace the input",
                             "write to another file")


def write_file(output: str | Path, write: Callable[[str], object], inputs: InputPaths = (),
               option: str = "-o") -> None:
    """Call write(temporary path) for a file beside `output`, then rename it over `output`.

    A symlinked `output` is written through (its target is replaced). On any failure the temporary file is
    removed, the old `output` is untouched, and one line names the file: InputError, exit 2. SIGXFSZ
    (`ulimit -f`) is ignored while writing, so an oversized write fails with EFBIG instead of killing zeroplan.
    """
    refuse_inputs(output, inputs, option)
    if str(output).endswith(("/", os.sep)) and not os.path.isdir(output):
        raise InputError(f"{option} {output}", "names a directory (it ends with /), and there is none",
                         "give a file name, e.g. ds_config.json")
    target = Path(real_path(output, option))
    try:
        mode = target.stat().st_mode
    except OSError:
        mode = None  # a new file (or one we cannot see: mkstemp below says why)
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(f"{option} {output}", "is a directory", "give a file name")
    if mode is not None and not stat.S_ISREG(mode):
        _write_in_place(output, target, mode, write, option)
        return
    import tempfile  # only when a file is written: tempfile and shutil stay off the start-up path

    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InputError(f"{option} {output}", f"cannot write: {exc.strerror}", "choose a writable path") from None
    os.close(handle)
    try:
        with _file_size_limit_as_error():
            write(temporary)
        os.chmod(temporary, _mode_for(target))
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            reason = "the file-size limit (ulimit -f) was reached" if exc.errno == errno.EFBIG else exc.strerror
            raise InputError(f"{option} {output}", f"cannot write: {reason or exc}; the old file, if any, is "
                             "unchanged", "choose a writable path with space") from None
        raise


def _write_in_place(output: str | Path, target: Path, mode: int, write: Callable[[str], object],
                    option: str) -> None:
    """A character device or FIFO gets the bytes written into it (never a rename over the node)."""
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
        raise InputError(f"{option} {output}", f"is {kind}", "give a regular file, a character device or a FIFO")
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="zeroplan-") as scratch:
        temporary = os.path.join(scratch, target.name or "output")
        try:
            write(temporary)
            with open(temporary, "rb") as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)
        except OSError as exc:
            raise InputError(f"{option} {output}", f"cannot write: {exc.strerror or exc}",
                             "choose a writable path") from None


def _mode_for(target: Path) -> int:
    """The old file's permissions, or what a new file gets under the umask (mkstemp gives 0600)."""
    with contextlib.suppress(OSError):
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def _file_size_limit_as_error():
    if not hasattr(signal, "SIGXFSZ") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGXFSZ, previous)


def canvas_for(output: str | None):
    """The terminal renderer's canvas for stdout (its width, colour on a TTY), or for a file (160 columns,
    plain text); write its text() with write_text(text, output)."""
    return Canvas.for_output(output is not None)

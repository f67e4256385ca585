"""The single entry point: build the typer app, run it, and map every error to one stderr line.

Exit status: 0 success, 1 a failure while running (e.g. a benchmark rank died), 2 bad input.
`--debug` anywhere on the command line shows the traceback instead.
"""

from __future__ import annotations

import sys

import typer

from zeroplan.cli.estimate_cmd import estimate
from zeroplan.cli.presets_cmd import presets_app
from zeroplan.core.errors import InputError

app = typer.Typer(
    name="zeroplan",
    help="Plan DeepSpeed ZeRO and 3D-parallel training: memory per GPU, traffic, fit, and what to use.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("estimate")(estimate)
app.add_typer(presets_app, name="presets")


def _error_line(exc: BaseException) -> tuple[str, int]:
    """One table from exception type to (message, exit status)."""
    import click

    if isinstance(exc, InputError):
        return str(exc), 2
    if isinstance(exc, click.exceptions.UsageError):
        hint = " (see --help)" if exc.ctx is not None else ""
        return exc.format_message().replace("\n", " ") + hint, 2
    if isinstance(exc, (click.exceptions.Abort, KeyboardInterrupt)):
        return "interrupted", 130
    exit_code = getattr(exc, "exit_code", None)
    if isinstance(exit_code, int) and isinstance(exc, RuntimeError):
        return str(exc), exit_code
    return f"internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)", 1


def main(argv: list[str] | None = None) -> None:
    import click

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args = [a for a in args if a != "--debug"]
    command = typer.main.get_command(app)
    try:
        command.main(args=args, prog_name="zeroplan", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BaseException as exc:  # noqa: BLE001 - the one place every error becomes one line
        if isinstance(exc, SystemExit):
            raise
        if debug:
            raise
        message, status = _error_line(exc)
        sys.stderr.write(f"zeroplan: error: {message}\n")
        sys.exit(status)
    sys.exit(0)


if __name__ == "__main__":
    main()

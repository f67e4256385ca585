"""The single entry point: build the typer app, run it, and map every error to one stderr line.

Exit status: 0 success, 1 a failure while running (e.g. a benchmark rank died), 2 bad input.
`--debug` anywhere on the command line shows the traceback instead.
"""

from __future__ import annotations

import sys

import typer

from zeroplan.cli.bench_cmd import bench
from zeroplan.cli.check_cmd import check
from zeroplan.cli.estimate_cmd import estimate
from zeroplan.cli.export_cmd import export_app
from zeroplan.cli.plan_cmd import plan
from zeroplan.cli.sweep_cmd import sweep
from zeroplan.cli.validate_cmd import validate
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
app.command("bench")(bench)
app.command("check")(check)
app.add_typer(export_app, name="export")
app.command("validate")(validate)
app.command("plan")(plan)
app.command("sweep")(sweep)
app.add_typer(presets_app, name="presets")


def _is_click_error(exc: BaseException) -> bool:
    # typer vendors click (typer._click) in recent releases and uses click itself in older ones:
    # match click's exception protocol rather than one module's classes.
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


def _error_line(exc: BaseException) -> tuple[str, int]:
    """One table from exception type to (message, exit status)."""
    if isinstance(exc, InputError):
        return str(exc), 2
    if _is_click_error(exc):  # usage errors: unknown option, a value of the wrong type, ...
        return " ".join(exc.format_message().split()) + " (see --help)", 2 if exc.exit_code == 2 else exc.exit_code
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Abort":
        return "interrupted", 130
    exit_code = getattr(exc, "exit_code", None)
    if isinstance(exit_code, int) and isinstance(exc, RuntimeError):
        return str(exc), exit_code
    return f"internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)", 1


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args = [a for a in args if a != "--debug"]
    command = typer.main.get_command(app)
    try:
        # standalone_mode=False hands a raised typer.Exit(n) back as the return value n.
        returned = command.main(args=args, prog_name="zeroplan", standalone_mode=False)
    except BaseException as exc:  # noqa: BLE001 - the one place every error becomes one line
        if isinstance(exc, SystemExit):
            raise
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):  # --help, --version, typer.Exit
            sys.exit(exc.exit_code)
        if debug:
            raise
        message, status = _error_line(exc)
        sys.stderr.write(f"zeroplan: error: {message}\n")
        sys.exit(status)
    sys.exit(returned if isinstance(returned, int) else 0)


if __name__ == "__main__":
    main()

"""The single entry point: build the typer app, run it, and map every error to one stderr line.

Exit status: 0 success, 1 a failure while running (e.g. a benchmark rank died), 2 bad input.
`--debug` anywhere on the command line shows the traceback instead.
"""

from __future__ import annotations

import os
import sys

from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

if TYPE_CHECKING:
    import typer

from zeroplan import __version__
from zeroplan.cli.help_layout import keep_option_names_whole
from zeroplan.core.errors import InputError, ZeroplanError
from zeroplan.render.encoding import make_streams_safe

HELP = "Plan DeepSpeed ZeRO and 3D-parallel training: memory per GPU, traffic, fit, and what to use."


def _register(app: typer.Typer, name: str) -> None:
    """Import one command's module and add it. Each import is deferred to here so a run builds (and
    pays for) only the command it runs; typer would otherwise build every command's options."""
    if name == "estimate":
        from zeroplan.cli.estimate_cmd import estimate
        app.command("estimate")(estimate)
    elif name == "plan":
        from zeroplan.cli.plan_cmd import plan
        app.command("plan")(plan)
    elif name == "sweep":
        from zeroplan.cli.sweep_cmd import sweep
        app.command("sweep")(sweep)
    elif name == "check":
        from zeroplan.cli.check_cmd import check
        app.command("check")(check)
    elif name == "export":
        from zeroplan.cli.export_cmd import export_app
        app.add_typer(export_app, name="export")
    elif name == "bench":
        from zeroplan.cli.bench_cmd import bench
        app.command("bench")(bench)
    elif name == "validate":
        from zeroplan.cli.validate_cmd import validate
        app.command("validate")(validate)
    elif name == "trace":
        from zeroplan.cli.trace_cmd import trace
        app.command("trace")(trace)
    elif name == "presets":
        from zeroplan.cli.presets_cmd import presets_app
        app.add_typer(presets_app, name="presets")


COMMANDS = ("estimate", "plan", "sweep", "check", "export", "bench", "validate", "trace", "presets")


def _print_version(value: bool) -> None:
    import typer

    if value:
        sys.stdout.write(f"zeroplan {__version__}\n")
        raise typer.Exit(0)


def build_app(only: str | None = None, help_requested: bool = True) -> typer.Typer:
    """The whole CLI, or just one command of it (still invoked by name, as `zeroplan NAME ...`)."""
    import typer

    if help_requested:
        keep_option_names_whole()  # imports typer.rich_utils (~0.1 s): only when a help screen is drawn
    # markdown: help paragraphs are re-wrapped to the terminal (rich mode kept the docstrings' line breaks)
    # Completion options (typer.completion imports shellingham and subprocess, ~30 ms) only where they can be
    # used: on help screens, at `--install-completion`/`--show-completion`, and when a shell completes.
    app = typer.Typer(name="zeroplan", help=HELP, no_args_is_help=True, add_completion=help_requested,
                      rich_markup_mode="markdown", pretty_exceptions_enable=False)

    @app.callback()
    # The option as a default value: typer is imported here, not at module level, so an annotation naming it
    # could not be resolved from the module's globals.
    def _group(version: bool = typer.Option(  # noqa: B008 - typer's declaration style
            False, "--version", help="Print zeroplan's version and exit.", is_eager=True,
            callback=_print_version)) -> None:
        """Keeps commands as subcommands even when only one is registered."""

    for name in COMMANDS if only is None else (only,):
        _register(app, name)
    return app


def __getattr__(name: str):
    if name == "app":  # `from zeroplan.cli.app import app`: the whole CLI, for tests and embedding
        return build_app()
    raise AttributeError(name)


class _ClickError(Protocol):
    exit_code: int

    def format_message(self) -> str: ...


def _is_click_error(exc: BaseException) -> TypeGuard[_ClickError]:
    # typer vendors click (typer._click) in recent releases and uses click itself in older ones:
    # match click's exception protocol rather than one module's classes.
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


def _error_line(exc: BaseException) -> tuple[str, int]:
    """The one table from an exception to (message, exit status): zeroplan's own errors carry their
    status (InputError 2, RunFailed 1 or its own; an InputError names fields, written here as their flags
    through the option declarations), click's usage errors are input errors (2), an interrupt is 130,
    anything else is a bug (1, with how to report it)."""
    if isinstance(exc, InputError):  # named by its fields: each written as its flag (the option declarations)
        from zeroplan.inputs.flag_names import cli_message

        return cli_message(exc), exc.exit_code
    if isinstance(exc, ZeroplanError):
        return str(exc), exc.exit_code
    if _is_click_error(exc):  # usage errors: unknown option, a value of the wrong type, ...
        return " ".join(exc.format_message().split()) + " (see --help)", 2 if exc.exit_code == 2 else exc.exit_code
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Abort":
        return "interrupted", 130
    if isinstance(exc, FileNotFoundError) and not _cwd_exists():
        return "the working directory no longer exists (cd to a directory that exists and run it again)", 2
    if isinstance(exc, OSError) and exc.strerror:  # the machine's answer, not a bug: say what and where
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror} (errno {exc.errno})", 1
    return f"internal error: {type(exc).__name__}: {exc} (rerun with --debug and report it)", 1


def _cwd_exists() -> bool:
    try:
        os.getcwd()
    except OSError:
        return False
    return True


def _stderr_line(text: str) -> None:
    """One line on stderr, if there is a stderr: a closed one never changes the exit status."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (`zeroplan ... | head -1`): what is left unwritten is dropped, as a
    Unix filter does, with no message and no error at interpreter exit (stdout pointed at /dev/null)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


# A run whose stdout reader closed the pipe ends as a filter killed by SIGPIPE does in a shell: 128 + 13.
BROKEN_PIPE_STATUS = 141


def _run(args: list[str], only: str | None, help_requested: bool) -> Any:
    """The command: `estimate` with a plain command line straight from its declarations (cli/fast_path.py,
    no typer import), everything else through typer."""
    if only == "estimate" and not help_requested and "-h" not in args:
        from zeroplan.cli.estimate_cmd import estimate
        from zeroplan.cli.fast_path import parse

        given = parse(estimate, args[1:])
        if given is not None:
            return estimate(**given)
    import typer

    command = typer.main.get_command(build_app(only, help_requested))
    # standalone_mode=False hands a raised typer.Exit(n) back as the return value n.
    return command.main(args=args, prog_name="zeroplan", standalone_mode=False)


def main(argv: list[str] | None = None) -> None:
    from zeroplan.render.sink import forget_inputs

    make_streams_safe()
    forget_inputs()  # the files a run reads are its own
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args = [a for a in args if a != "--debug"]
    if args == ["--version"]:  # answered before any command is built
        sys.stdout.write(f"zeroplan {__version__}\n")
        sys.exit(0)
    if not args and not any(key.startswith("_ZEROPLAN_COMPLETE") for key in os.environ):
        args = ["--help"]  # a bare `zeroplan` shows the commands and exits 0 (a shell completing is not bare)
    only = args[0] if args and args[0] in COMMANDS else None
    # A help screen: asked for, or shown for a bare command group (`zeroplan export`).
    # `presets list` is a whole command that takes no arguments (its table is not a help screen).
    help_requested = ("--help" in args or len(args) < 2
                      or (only in ("export", "presets") and len(args) < 3 and args[1:] != ["list"])
                      or any(key.startswith("_ZEROPLAN_COMPLETE") for key in os.environ))
    try:
        returned = _run(args, only, help_requested)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, not at exit: a failure is this run's error line
    except BaseException as exc:  # noqa: BLE001 - the one place every error becomes one line
        if isinstance(exc, BrokenPipeError) or type(exc).__name__ == "ReaderGone":
            _quiet_broken_pipe()
            sys.exit(BROKEN_PIPE_STATUS)
        if isinstance(exc, SystemExit):
            raise
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):  # --help, --version, typer.Exit
            sys.exit(exc.exit_code)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `zeroplan export` alone: its help was shown
            sys.exit(0)
        if debug:
            raise
        message, status = _error_line(exc)
        from zeroplan.render.encoding import visible

        _stderr_line(f"zeroplan: error: {visible(message)}\n")
        sys.exit(status)
    sys.exit(returned if isinstance(returned, int) else 0)


if __name__ == "__main__":
    main()

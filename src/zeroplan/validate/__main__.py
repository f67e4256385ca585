"""`python -m zeroplan.validate [OPTIONS]`: the validate command on its own, for torchrun
(`torchrun --nproc-per-node 8 -m zeroplan.validate ...`): every process is one rank, rank 0 reports.
Bad input: one stderr line, exit 2; a failed rank or a missed prediction: one line, exit 1."""

from __future__ import annotations

import sys

import typer

from zeroplan.cli.validate_cmd import validate
from zeroplan.core.errors import InputError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(validate)


def main() -> int:
    try:
        code = app(standalone_mode=False)
    except InputError as exc:
        sys.stderr.write(f"zeroplan validate: {exc}\n")
        return 2
    except RuntimeError as exc:  # ValidateFailed carries its exit code
        if not isinstance(getattr(exc, "exit_code", None), int):
            raise
        sys.stderr.write(f"zeroplan validate: {exc}\n")
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except Exception as exc:  # click usage errors under standalone_mode=False
        show = getattr(exc, "show", None)
        if show is None:
            raise
        show()
        return getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())

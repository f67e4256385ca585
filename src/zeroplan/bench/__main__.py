"""`python -m zeroplan.bench [OPTIONS]`: the bench command on its own, for torchrun
(`torchrun --nproc-per-node 8 -m zeroplan.bench ...`). Bad input: one stderr line, exit 2, as in the CLI."""

from __future__ import annotations

import sys

import typer

from zeroplan.cli.bench_cmd import bench
from zeroplan.core.errors import InputError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(bench)


def main() -> int:
    try:
        code = app(standalone_mode=False)  # typer.Exit(n) comes back as the return value here
    except InputError as exc:
        sys.stderr.write(f"zeroplan bench: {exc}\n")
        return 2
    except RuntimeError as exc:  # BenchFailed, from zeroplan.bench.runner (not imported: it imports torch)
        if not isinstance(getattr(exc, "exit_code", None), int):
            raise
        sys.stderr.write(f"zeroplan bench: {exc}\n")
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

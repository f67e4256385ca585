"""`python -m zeroplan.bench [OPTIONS]`: the bench command on its own, for torchrun
(`torchrun --nproc-per-node 8 -m zeroplan.bench ...`). Bad input: one stderr line, exit 2, as in the CLI."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """`zeroplan bench ARGS` through the CLI's single entry point (one error table, one exit-status rule)."""
    from zeroplan.cli.app import main as cli_main

    try:
        cli_main(["bench", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

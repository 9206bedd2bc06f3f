"""`python -m tp_cli` runs the same command as the `tp` console script."""

from __future__ import annotations

from tp_cli.main import cli

if __name__ == "__main__":
    cli(prog_name="tp")

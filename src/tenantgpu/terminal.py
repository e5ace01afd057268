"""The rich console the CLI prints its tables to."""

from __future__ import annotations

from rich.console import Console

__all__ = ["table_console"]


def table_console(piped_width: int, *, stderr: bool = False) -> Console:
    """The terminal's width in a terminal; piped or redirected, `piped_width` columns, since rich would
    lay the tables out for 80 and cut cells such as GPU UUIDs and paths short."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=piped_width)

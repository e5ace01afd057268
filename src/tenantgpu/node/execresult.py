"""What a command run inside a simulated container wrote and how it ended."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecResult:
    """What a finished command wrote and how it ended."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0

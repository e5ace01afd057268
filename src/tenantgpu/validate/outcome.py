"""What a check reports: passed, failed (with expected, seen and a command to look), or skipped (with why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """The result of one check for one tenant (or for the whole lab)."""

    status: Status
    detail: str
    expected: str = ""
    seen: str = ""
    command: str = ""

    @classmethod
    def passed(cls, detail: str) -> Outcome:
        return cls("passed", detail)

    @classmethod
    def skipped(cls, reason: str) -> Outcome:
        return cls("skipped", reason)

    @classmethod
    def failed(cls, detail: str, *, expected: str = "", seen: str = "", command: str = "") -> Outcome:
        return cls("failed", detail, expected, seen, command)

    def explain(self) -> str:
        """Detail plus, for a failure, expected / seen / the command to look yourself, one per line."""
        lines = [self.detail]
        if self.expected:
            lines.append(f"expected: {self.expected}")
        if self.seen:
            lines.append(f"seen:     {self.seen}")
        if self.command:
            lines.append(f"look:     {self.command}")
        return "\n".join(lines)


class CheckFailed(Exception):
    """Raised inside a check to stop it with a failed outcome; the runner turns it into one."""

    def __init__(self, detail: str, *, expected: str = "", seen: str = "", command: str = "") -> None:
        super().__init__(detail)
        self.outcome = Outcome.failed(detail, expected=expected, seen=seen, command=command)


class CheckSkipped(Exception):
    """Raised inside a check when something it needs is missing (said in the reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.outcome = Outcome.skipped(reason)


class Cancelled(Exception):
    """The run was interrupted (Ctrl-C); the check stops waiting and cleans up."""

"""Tables derived from the installed `kubernetes` client's models, kept beside it between processes.

Deriving them imports the client's models, which takes most of a second; `make install` writes them
once under `<prefix>/share/tenantgpu/`, and each lab process reads them back in milliseconds. A table
missing or unreadable is derived again and written (whole, then renamed, so that another process never
reads half of one).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["cache_path", "read_json", "write_json"]

log = logging.getLogger(__name__)


def cache_path(name: str) -> Path:
    """Where the table `name` is kept for this installation."""
    return Path(sys.prefix) / "share" / "tenantgpu" / name


def read_json(path: Path) -> Any | None:
    """The table at `path`, or None when it is missing or unreadable."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


def write_json(path: Path, data: Any) -> None:
    """Keeps `data` at `path` if the directory can be written; a read-only installation just derives it
    in every process."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as fh:
            json.dump(data, fh)
        os.chmod(fh.name, 0o644)
        os.replace(fh.name, path)
        log.info("wrote %s", path)

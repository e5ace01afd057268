"""`make bench`: runs every benchmark module found in bench/ (each has a `main()`), or those named."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = argv or sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))
    if not names:
        print("no benchmarks yet")
        return 0
    for name in names:
        print(f"== bench/{name}")
        module = importlib.import_module(f"bench.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

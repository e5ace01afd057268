"""`make bench`: runs every benchmark module found in bench/ (each has a `main()`), or those named."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

USAGE = """usage: python -m bench [NAME ...]

Runs the benchmarks NAME (all of them when none is given); each prints its figures and writes JSON
under bench/results/. Benchmarks: {names}.
Their environment variables (TENANTS, PODS, PROFILE, ...) are described in each module's docstring."""


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    known = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))
    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE.format(names=", ".join(known)))
        return 0
    unknown = [name for name in argv if name not in known]
    if unknown:
        print(f"bench: no benchmark named {', '.join(unknown)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    names = argv or known
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

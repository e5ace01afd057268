"""The validation suite's figures on the seed lab: seconds per check and for the whole run, and `tenantgpu demo`
end to end (goal: under 20 s after installation)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "validate.json"
RUNS = 3


def _tenantgpu(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tenantgpu", *args], capture_output=True, text=True, timeout=timeout
    )


def main() -> None:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        state = str(Path(tmp) / "state")
        up = _tenantgpu("up", "-d", "--state-dir", state)
        if up.returncode != 0:
            print(f"the lab did not come up: {up.stderr.strip()}")
            return
        try:
            totals: list[float] = []
            per_check: dict[str, list[float]] = {}
            failed: list[str] = []
            for _ in range(RUNS):
                start = time.perf_counter()
                run = _tenantgpu("validate", "--state-dir", state, "-o", "json")
                totals.append(time.perf_counter() - start)
                data = json.loads(run.stdout)
                for check in data["checks"]:
                    per_check.setdefault(check["name"], []).append(check["seconds"])
                    if check["status"] == "failed":
                        failed.append(f"{check['name']}[{check['tenant']}]")
            figures["validate_seconds"] = {"min": min(totals), "max": max(totals), "runs": RUNS}
            figures["check_seconds_max"] = {name: max(v) for name, v in per_check.items()}
            figures["failed_checks"] = sorted(set(failed))
        finally:
            _tenantgpu("down", "--state-dir", state)
    start = time.perf_counter()
    demo = _tenantgpu("demo")
    figures["demo_seconds"] = time.perf_counter() - start
    figures["demo_exit_code"] = demo.returncode
    print(
        f"validate (seed lab, all checks): {figures['validate_seconds']['min']:.1f}–{figures['validate_seconds']['max']:.1f} s over {RUNS} runs"
    )
    for name, seconds in sorted(figures["check_seconds_max"].items(), key=lambda kv: -kv[1]):
        print(f"  {name:32s} ≤ {seconds:.2f} s")
    if figures["failed_checks"]:
        print(f"  failed: {', '.join(figures['failed_checks'])}")
    print(f"tenantgpu demo: {figures['demo_seconds']:.1f} s (exit {demo.returncode}; goal < 20 s)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

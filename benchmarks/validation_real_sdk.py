"""The `full` validation against the real .NET SDK on PATH (issue 42), side by side in one run:

  - warm: validation wall time of `all-pass-net10` ÷ the sum of its `dotnet` commands' own wall
    times (target ≤ 1.1: the validator adds next to nothing around the SDK), median of RUNS, the
    package folder warm (every package already restored once);
  - cold ÷ warm: the same validation with a fresh, empty NuGet package folder (NUGET_PACKAGES)
    against a warm one, alternating, median of RUNS each: what a first delivery on a new worker
    pays for restoring through the package source.

Not a test: nothing asserts a time. The fail-before/pass-after proof's share (issue 42 item 5)
is not measured here yet: the proof does not exist.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specops_dag.validation.dotnet import validate_full  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "dotnet_fixtures" / "all-pass-net10"
RUNS = 5


def one(work: Path, label: str, packages: Path) -> tuple[float, float]:
    """(wall time of one validation, the sum of its dotnet commands' wall times)."""
    root = work / label
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(FIXTURE, root)
    env = {**os.environ, "NUGET_PACKAGES": str(packages)}
    started = time.perf_counter()
    report = validate_full(root, work / f"{label}-logs", env=env)
    wall = time.perf_counter() - started
    assert report.passed, report.describe()
    return wall, sum(c["duration_s"] for c in report.commands)


def main() -> None:
    if shutil.which("dotnet") is None:
        sys.exit("validation_real_sdk: no `dotnet` on PATH; this benchmark needs the real SDK")
    with tempfile.TemporaryDirectory(prefix="bench-real-sdk-") as tmp:
        work = Path(tmp)
        warm_packages = work / "warm-packages"
        one(work, "prime", warm_packages)  # restores once into the warm folder
        warm, cold, ratios = [], [], []
        for i in range(RUNS):
            wall, commands = one(work, f"warm-{i}", warm_packages)
            warm.append(wall)
            ratios.append(wall / commands)
            cold_wall, _ = one(work, f"cold-{i}", work / f"cold-packages-{i}")
            cold.append(cold_wall)
        print(f"warm validation: median {statistics.median(warm):.2f} s "
              f"(runs {', '.join(f'{w:.2f}' for w in warm)})")
        print(f"wall ÷ sum of dotnet commands (warm): median {statistics.median(ratios):.3f} "
              f"(runs {', '.join(f'{r:.3f}' for r in ratios)}; target ≤ 1.1)")
        print(f"cold (empty package folder) ÷ warm: "
              f"{statistics.median(cold) / statistics.median(warm):.2f} "
              f"(cold median {statistics.median(cold):.2f} s)")


if __name__ == "__main__":
    main()

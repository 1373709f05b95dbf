"""Definitions load (issue #8): 500 generated nodes through our factory (`build_definitions`)
vs a bare `@asset` factory with the same deps, each in a fresh interpreter, medians side by side
in one run. Prints the ratio (target ≤ 1.3); not a test."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import benchmarks.chain_overhead as chain  # noqa: E402

RUNS = 5
OURS = ("import sys; from pathlib import Path; from specops_dag.definitions import "
        "build_definitions; import dagster as dg; d = build_definitions(Path(sys.argv[1])); "
        "dg.Definitions.validate_loadable(d)")
BARE = ("import dagster as dg\n"
        "p = dg.DynamicPartitionsDefinition(name='delivery')\n"
        "def make(i):\n"
        "    deps = [dg.AssetKey(['chain', f'n{i - 1}'])] if i else []\n"
        "    @dg.asset(key=['chain', f'n{i}'], deps=deps, partitions_def=p)\n"
        "    def a():\n        return None\n"
        "    return a\n"
        "assets = [make(i) for i in range(500)]\n"
        "d = dg.Definitions(assets=assets, jobs=[dg.define_asset_job('chain_job', "
        "selection=dg.AssetSelection.assets(*assets))])\n"
        "dg.Definitions.validate_loadable(d)\n")


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, stdin=subprocess.DEVNULL,
                   cwd=tempfile.gettempdir())
    return time.perf_counter() - started


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="specops-defs-bench-"))
    try:
        chain.N = 500
        chain.harness(work / "harness")
        ours, bare = [], []
        for _ in range(RUNS):
            ours.append(timed([sys.executable, "-c", OURS, str(work / "harness")]))
            bare.append(timed([sys.executable, "-c", BARE]))
        o, b = statistics.median(ours), statistics.median(bare)
        print(f"500 nodes: our factory {o:.2f} s (built-in workflows included), bare @asset "
              f"factory {b:.2f} s, ratio {o / b:.2f} (target <= 1.3)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

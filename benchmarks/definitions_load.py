"""Definitions load (issue #8): 500 generated nodes through our factory (`build_definitions`)
vs a bare `@asset` factory with the same deps, each in a fresh interpreter, medians side by side
in one run. Prints the ratio (target ≤ 1.3), and two references: the bare factory with our
assets' check specs and retry policy, and the bare factory with the same garbage-collector
handling as ours. Not a test."""

from __future__ import annotations

import os
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
from benchmarks import compile_package  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
# Loaded the way Dagster loads the code location: import the module (it builds `defs` for
# SPECOPS_ROOT), then resolve every asset, check, job, schedule and sensor.
OURS = ("import dagster as dg; from specops_dag.definitions import defs; "
        "dg.Definitions.validate_loadable(defs)")
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


# The same Dagster features our assets declare (two check specs, retry policy, code version),
# to show how much of the ratio is Dagster's own cost of those features.
FLOOR = BARE.replace(
    "@dg.asset(key=['chain', f'n{i}'], deps=deps, partitions_def=p)",
    "@dg.asset(key=['chain', f'n{i}'], deps=deps, partitions_def=p, output_required=False, "
    "retry_policy=dg.RetryPolicy(max_retries=2), code_version=str(i), "
    "check_specs=[dg.AssetCheckSpec(c, asset=dg.AssetKey(['chain', f'n{i}'])) "
    "for c in ('validation', 'handoff_current')])").replace(
    "    def a():\n        return None\n", "    def a():\n        yield from ()\n")


# The bare factory with the cyclic collector handled as `build_definitions` handles it (paused
# while building, the result frozen): shows how much of our lead is that tuning alone.
BARE_TUNED = ("import gc; gc.disable()\n" + BARE).replace(
    "dg.Definitions.validate_loadable(d)\n", "gc.freeze(); gc.enable()\n"
    "dg.Definitions.validate_loadable(d)\n")


def timed(argv: list[str], root: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, stdin=subprocess.DEVNULL,
                   cwd=tempfile.gettempdir(), env={**os.environ, "SPECOPS_ROOT": str(root)})
    return time.perf_counter() - started


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-defs-bench-"))
    try:
        chain.N = 500
        chain.harness(work / "harness")
        runs: dict[str, list[float]] = {"ours": [], "bare": [], "floor": [], "tuned": []}
        for _ in range(RUNS):  # interleaved, so a slow moment of the machine hits all four
            for name, code in (("ours", OURS), ("bare", BARE), ("floor", FLOOR),
                               ("tuned", BARE_TUNED)):
                runs[name].append(timed([sys.executable, "-c", code], work / "harness"))
        o, b, f, t = (statistics.median(runs[n]) for n in ("ours", "bare", "floor", "tuned"))
        print(f"500 nodes, medians of {RUNS}: our factory {o:.2f} s (built-in workflows "
              f"included), bare @asset factory {b:.2f} s, ratio {o / b:.2f} (target <= 1.3)\n"
              f"  bare @asset with the same check specs and retry policy {f:.2f} s, ratio "
              f"{o / f:.2f}\n  bare @asset with the collector paused and frozen as ours does "
              f"{t:.2f} s, ratio {o / t:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""CLI responsiveness (issue #19): `specops status` and `specops dry-run` on a 100-node delivery
against `python3 -c pass`, medians of interleaved runs in one process, plus proof that neither
command imports dagster. Prints ratios (target ≤ 20: the one click + pydantic implementation,
with lazy imports); not a test.

The baseline is the interpreter's own start (`<venv>/bin/python3 -c pass`). `python3` on PATH is
timed too but only shown: on a machine with pyenv it is a shell-script shim that takes ~10× an
interpreter start and would make every ratio look small. Two references show the floor set by
the libraries the CLI is written with: importing pydantic's BaseModel, and importing click."""

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

RUNS = 15


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-cli-bench-"))
    try:
        chain.N = 100
        root = work / "harness"
        chain.harness(root)
        bin_dir = Path(sys.executable).parent
        env = {**os.environ, "SPECOPS_ROOT": str(root), "DAGSTER_HOME": str(work / "dh")}
        (work / "dh").mkdir()
        subprocess.run([str(bin_dir / "specops"), "new", "chain", "b1", "--request", "bench"],
                       env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        python = str(bin_dir / "python3")
        on_path = shutil.which("python3") or python
        commands = {"python3 -c pass": [python, "-c", "pass"],
                    "specops status b1": [str(bin_dir / "specops"), "status", "b1"],
                    "specops dry-run b1": [str(bin_dir / "specops"), "dry-run", "b1"],
                    "(import pydantic.BaseModel)": [python, "-c", "from pydantic import BaseModel"],
                    "(import click)": [python, "-c", "import click"],
                    "(python3 on PATH -c pass)": [on_path, "-c", "pass"]}
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(RUNS):
            for name, argv in commands.items():
                times[name].append(timed(argv, env))
        base = statistics.median(times["python3 -c pass"])
        print(f"baseline: {python} -c pass; python3 on PATH is {on_path}")
        for name in commands:
            median = statistics.median(times[name])
            print(f"{name:<28} median {median * 1000:7.1f} ms  ratio {median / base:5.2f}")
        probe = ("import sys; from specops_dag.cli import main\n"
                 "for args in (['status', 'b1'], ['dry-run', 'b1']):\n"
                 "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
                 "print('dagster imported:', 'dagster' in sys.modules, file=sys.stderr)")
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                             text=True, check=True)
        print(out.stderr.strip().splitlines()[-1], "(target: False; ratio target <= 20)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

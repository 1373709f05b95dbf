"""What the one runner (`process.run_process`) adds to a child's own time, side by side in one run.

For children that end after 5, 40, 70 and 120 ms (`sleep`), the median wall time of
`run_process` over 15 runs each against the median of `subprocess.run` of the same argv (which
waits in the kernel: it sees the exit at once), printed as milliseconds more and as a ratio; and
the same for `git rev-parse HEAD` in this repository (a commit's short git command). The runner
tells the process's one reaper of each child (two pipe writes) and writes the output to files,
so it costs a little more at any length; it sees a child's exit when it happens (its pidfd
wakes the runner), so what it adds does not depend on when the child ends. A step pays it at
each of its commands. Not a test: nothing asserts a time.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from specops_dag.process import run_process  # noqa: E402

ROUNDS = 15


def main() -> None:
    print("child   subprocess.run   run_process   more    ratio")
    for argv in [["sleep", f"{s}"] for s in (0.005, 0.04, 0.07, 0.12)] + [
            ["git", "rev-parse", "HEAD"]]:
        plain, runner = [], []
        for _ in range(ROUNDS):  # alternately: a host that changes speed changes both
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, cwd=REPO,
                           stdout=subprocess.DEVNULL)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            assert run_process(argv, cwd=REPO, deadline_s=60).ok
            runner.append(time.perf_counter() - started)
        a, b = statistics.median(plain), statistics.median(runner)
        child = f"{float(argv[1]) * 1000:4.0f} ms" if argv[0] == "sleep" else "git rev-parse"
        print(f"{child}   {a * 1000:9.1f} ms   {b * 1000:8.1f} ms   "
              f"{(b - a) * 1000:4.1f} ms   {b / a:.2f}")


if __name__ == "__main__":
    main()

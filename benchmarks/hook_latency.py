"""Start-up cost of the PreToolUse hook (issue #6), which runs on every agent tool call.

Runs, interleaved in one loop (RUNS times each), on a small .NET-shaped repo in a temp folder:
  - `python3 -c pass` from PATH, and the venv's own interpreter with `-c pass` (bare start-up);
  - `.venv/bin/specops hook pre-tool-use` and `<venv python> -I <hooks/guard.py> pre-tool-use`
    (the command codex runs) on a typical shell payload, and on an apply_patch payload editing
    a C# file (TDD lookup).
Prints the median wall time of each and its ratio to both baselines (target ≤ 3).
Not a test: nothing asserts a time.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import compile_package  # noqa: E402

RUNS = 30
VENV_BIN = Path(sys.executable).parent
SHELL = {"tool_name": "Bash", "tool_input": {
    "command": "cd src/Orders && dotnet build -warnaserror 2>&1 | tail -n 20 && "
               "dotnet test ../../tests/Orders.Tests --no-build && git status --short"}}
PATCH = {"tool_name": "apply_patch", "tool_input": {
    "command": "*** Begin Patch\n*** Update File: src/Orders/OrderService.cs\n@@\n-    return 1;\n"
               "+    return 2;\n*** End Patch\n"}}


def repo(root: Path) -> None:
    for rel in ("src/Orders/OrderService.cs", "tests/Orders.Tests/OrderServiceTests.cs"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("class X {}\n")
    for i in range(40):  # a test tree of a realistic size to walk
        (root / f"tests/Orders.Tests/Feature{i}Tests.cs").write_text("class T {}\n")


def timed(argv: list[str], stdin: bytes, cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, cwd=cwd, capture_output=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0 or done.stdout.strip():
        raise SystemExit(f"{argv}: rc {done.returncode}, out {done.stdout!r} {done.stderr!r}")
    return took


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-hook-bench-"))
    try:
        repo(work)
        python3 = shutil.which("python3") or sys.executable
        py = str(VENV_BIN / "python")
        script = [str(VENV_BIN / "specops"), "hook", "pre-tool-use"]
        from specops_dag.agent.codex import HOOK_GUARD

        module = [py, "-I", str(HOOK_GUARD), "pre-tool-use"]
        cases = {
            "python3 -c pass (PATH)": ([python3, "-c", "pass"], b""),
            "venv python -c pass": ([py, "-c", "pass"], b""),
            "specops hook pre-tool-use, shell": (script, json.dumps(SHELL).encode()),
            "specops hook pre-tool-use, C# patch": (script, json.dumps(PATCH).encode()),
            "python -I hooks/guard.py, shell": (module, json.dumps(SHELL).encode()),
            "python -I hooks/guard.py, C# patch": (module, json.dumps(PATCH).encode()),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for argv, stdin in cases.values():  # warm the page cache once
            timed(argv, stdin, work)
        for _ in range(RUNS):
            for name, (argv, stdin) in cases.items():
                times[name].append(timed(argv, stdin, work))
        med = {name: statistics.median(t) for name, t in times.items()}
        base_path, base_venv = med["python3 -c pass (PATH)"], med["venv python -c pass"]
        print(f"{RUNS} interleaved runs each; python3 on PATH is {python3}")
        print(f"{'command':40} {'median ms':>10} {'/ python3':>10} {'/ venv py':>10}")
        for name, value in med.items():
            print(f"{name:40} {value * 1000:10.1f} {value / base_path:10.2f} "
                  f"{value / base_venv:10.2f}")
        print("target: each hook's ratio to the interpreter's own start (/ venv py) ≤ 3; "
              "python3 on PATH may be a shim (pyenv) that is slower than an interpreter start")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

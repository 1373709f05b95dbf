"""The `full` validation against the real .NET SDK on PATH (issue 42), side by side in one run:

  - warm: validation wall time of `all-pass-net10` ÷ the sum of its `dotnet` commands' own wall
    times (target ≤ 1.1: the validator adds next to nothing around the SDK), median of RUNS, the
    package folder warm (every package already restored once);
  - cold ÷ warm: the same validation with a fresh, empty NuGet package folder (NUGET_PACKAGES)
    and HTTP cache (NUGET_HTTP_CACHE_PATH) against a warm one, alternating, median of RUNS each:
    what a first delivery on a new worker pays for downloading through the package source;
  - proof ÷ validation: the fail-before, pass-after proof of a step's tests (issue 42 item 5)
    against that step's own validation, run one after the other on the same tree, median of RUNS,
    for a changed test that fails at the base (the base is built and tested) and a new test of a
    new method (the base does not compile).

Not a test: nothing asserts a time.
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

from specops_dag.gitflow import IDENTITY  # noqa: E402
from specops_dag.process import run_process  # noqa: E402
from specops_dag.validation.dotnet import validate_full  # noqa: E402
from specops_dag.validation.proof import prove  # noqa: E402
from specops_dag.workflow.model import ValidationConfig  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "dotnet_fixtures" / "all-pass-net10"
RUNS = 5
CALC = "src/Calc/Calculator.cs"
TESTS = "tests/Calc.Tests/CalculatorTests.cs"
# (file, old, new) edits of a step whose tests the proof proves
STEPS = {
    "fails at the base": [
        (CALC, "=> a + b;", "=> checked(a + b);"),
        (TESTS, "Assert.Equal(5, calculator.Add(2, 3));",
         "Assert.Equal(5, calculator.Add(2, 3));\n        "
         "Assert.Throws<OverflowException>(() => calculator.Add(int.MaxValue, 1));")],
    "does not compile at the base": [
        (CALC, "    public int Multiply",
         "    public int Subtract(int a, int b) => a - b;\n\n    public int Multiply"),
        (TESTS, "    public void Multiply_ReturnsProduct",
         "    public void Subtract_ReturnsDifference() => "
         "Assert.Equal(1, new Calculator().Subtract(3, 2));\n\n    [Fact]\n"
         "    public void Multiply_ReturnsProduct")]}


def one(work: Path, label: str, packages: Path, cold: bool = False) -> tuple[float, float]:
    """(wall time of one validation, the sum of its dotnet commands' wall times). `cold`: NuGet's
    HTTP cache is a fresh folder too, so every package is downloaded from the source again."""
    root = work / label
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(FIXTURE, root)
    env = {**os.environ, "NUGET_PACKAGES": str(packages)}
    if cold:
        env["NUGET_HTTP_CACHE_PATH"] = str(packages.with_name(packages.name + "-http-cache"))
    started = time.perf_counter()
    report = validate_full(root, work / f"{label}-logs", env=env)
    wall = time.perf_counter() - started
    assert report.passed, report.describe()
    return wall, sum(c["duration_s"] for c in report.commands)


def git(root: Path, *args: str) -> str:
    result = run_process(["git", *args], cwd=root, env={**os.environ, **IDENTITY},
                         deadline_s=60)
    assert result.ok, result.stderr
    return result.stdout.strip()


def proof_ratio(work: Path, label: str, packages: Path, edits: list) -> float:
    """The proof's wall time ÷ the wall time of the validation of the same step before it."""
    root = work / label
    shutil.copytree(FIXTURE, root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD")
    for path, old, new in edits:
        (root / path).write_text((root / path).read_text().replace(old, new, 1))
    env = {**os.environ, "NUGET_PACKAGES": str(packages)}
    started = time.perf_counter()
    report = validate_full(root, work / f"{label}-logs", env=env)
    validation = time.perf_counter() - started
    assert report.passed, report.describe()
    started = time.perf_counter()
    proof = prove(root, base, report, scratch=work / f"{label}-scratch",
                  log_dir=work / f"{label}-logs" / "proof", env=env, config=ValidationConfig())
    assert proof.verdict == "proven", proof
    return (time.perf_counter() - started) / validation


def main() -> None:
    if shutil.which("dotnet") is None:
        sys.exit("validation_real_sdk: no `dotnet` on PATH; this benchmark needs the real SDK")
    with tempfile.TemporaryDirectory(prefix="bench-real-sdk-") as tmp:
        work = Path(tmp)
        warm_packages = work / "warm-packages"
        one(work, "prime", warm_packages)  # restores once into the warm folder
        warm, cold, ratios = [], [], []
        proofs: dict[str, list[float]] = {name: [] for name in STEPS}
        for i in range(RUNS):
            wall, commands = one(work, f"warm-{i}", warm_packages)
            warm.append(wall)
            ratios.append(wall / commands)
            cold_wall, _ = one(work, f"cold-{i}", work / f"cold-packages-{i}", cold=True)
            cold.append(cold_wall)
            for n, (name, edits) in enumerate(STEPS.items()):
                proofs[name].append(proof_ratio(work, f"proof-{i}-{n}", warm_packages, edits))
        print(f"warm validation: median {statistics.median(warm):.2f} s "
              f"(runs {', '.join(f'{w:.2f}' for w in warm)})")
        print(f"wall ÷ sum of dotnet commands (warm): median {statistics.median(ratios):.3f} "
              f"(runs {', '.join(f'{r:.3f}' for r in ratios)}; target ≤ 1.1)")
        print(f"cold (empty package folder and HTTP cache) ÷ warm: "
              f"{statistics.median(cold) / statistics.median(warm):.2f} "
              f"(cold median {statistics.median(cold):.2f} s)")
        for name, values in proofs.items():
            print(f"proof ÷ the step's validation, a test that {name}: median "
                  f"{statistics.median(values):.2f} (runs {', '.join(f'{r:.2f}' for r in values)})")


if __name__ == "__main__":
    main()

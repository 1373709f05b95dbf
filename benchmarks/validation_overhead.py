"""The .NET validation on real repositories (issue 16), two ratios:

  - agent calls spent on a base that cannot validate (target 0): for each base that cannot
    pass (no global.json, a pre-existing warning, an orphan .cs, two solutions, an unreachable
    NuGetAudit source), one step is run with the real codex CLI against the replay agent, and
    the requests the agent answered are counted;
  - validation wall time of `all-pass` ÷ the sum of the `dotnet` commands' own wall times
    (target ≤ 1.1: the validator adds next to nothing around the SDK), median of RUNS.

The SDK is the test stand-in (tests/dotnet_standin/), as in the tests. Not a test: nothing
asserts a time.
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

from specops_dag.delivery.lifecycle import new_delivery  # noqa: E402
from specops_dag.delivery.store import Store  # noqa: E402
from specops_dag.execution.step import run_step  # noqa: E402
from specops_dag.validation.dotnet import validate_full  # noqa: E402
from specops_dag.workflow.catalog import definition_roots, load_catalog  # noqa: E402
from tests.support.agents import AGENTIC, replay, requests, settings_for  # noqa: E402
from tests.support.harness import write_tree  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "dotnet_standin"
RUNS = 7
BASES = [("no-global-json", "no-global-json"), ("compiler-warning", "compiler-warning"),
         ("orphan-cs", "orphan-cs"), ("two-solutions", "two-solutions"),
         ("all-pass", "nuget-audit-offline")]


def use_standin(answers: str) -> None:
    os.environ["DOTNET_STANDIN_ANSWERS"] = str(STANDIN / "answers" / f"{answers}.yaml")


def agent_calls_on(work: Path, fixture: str, answers: str) -> tuple[int, str]:
    root = work / fixture / "harness"
    shutil.copytree(REPO / "dotnet_fixtures" / fixture, root)
    write_tree(root, AGENTIC)
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                 "d1", "Write notes.", validation="full")
    use_standin(answers)
    with replay(work / fixture, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, work / fixture))
    log = work / fixture / "requests.jsonl"
    return (len(requests(work / fixture)) if log.exists() else 0), outcome.status


def overhead(work: Path) -> list[float]:
    use_standin("all-pass")
    ratios = []
    for i in range(RUNS):
        root = work / f"all-pass-{i}"
        shutil.copytree(REPO / "dotnet_fixtures" / "all-pass", root)
        start = time.perf_counter()
        report = validate_full(root, work / f"logs-{i}")
        wall = time.perf_counter() - start
        if not report.passed:
            raise SystemExit(f"all-pass did not pass: {report.describe()}")
        ratios.append(wall / sum(c["duration_s"] for c in report.commands))
    return ratios


def main() -> None:
    os.environ["PATH"] = f"{STANDIN}:{os.environ['PATH']}"
    work = Path(tempfile.mkdtemp(prefix="specops-validation-bench-"))
    try:
        calls = []
        for fixture, answers in BASES:
            n, status = agent_calls_on(work, fixture, answers)
            calls.append(n)
            print(f"base `{fixture}` (answers {answers}): step {status}, agent calls {n}")
        print(f"agent calls spent on a base that cannot validate: {sum(calls)} over "
              f"{len(BASES)} bases (target 0)")
        ratios = overhead(work)
        print(f"validation wall time of all-pass / sum of its dotnet commands' wall times: "
              f"median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max "
              f"{max(ratios):.3f}, {RUNS} runs; target <= 1.1)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

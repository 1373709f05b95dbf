"""Each built-in workflow end to end, as a user runs it: a .NET 8 fixture committed as a git
harness root, `specops new` / `approve` / `run` (so `dagster job execute`), every node a real
`codex exec` against the replay agent in its literal mode — it reads what the prompt's READ /
SKILLS name and writes what WRITE names, from its cwd, knowing nothing else — and the
independent validation through the `dotnet` stand-in."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
import pytest

from specops_dag.delivery.lifecycle import snapshot_catalog
from specops_dag.delivery.store import Store

from ..support.agents import replay
from ..support.dotnet import STANDIN, Harness, assert_clean_git, git_fixture
from ..support.prompts import (
    out_of_order,
    repeated_constraints,
    saved_prompts,
    undefined_files,
)

pytestmark = pytest.mark.e2e

# The develop/build product change: a doc comment on Calculator.Add through codex's apply_patch
# tool (cwd = the delivery's worktree). Its test file tests/Calc.Tests/CalculatorTests.cs exists,
# so the pre-tool-use hook lets the edit through.
PATCH = ("*** Begin Patch\n*** Update File: src/Calc/Calculator.cs\n@@ public class Calculator\n"
         " {\n+    /// <summary>Returns the sum of <paramref name=\"a\"/> and "
         "<paramref name=\"b\"/>.</summary>\n     public int Add(int a, int b) => a + b;\n"
         "*** End Patch\n")
PATCHED = ("namespace Calc;\n\npublic class Calculator\n{\n"
           "    /// <summary>Returns the sum of <paramref name=\"a\"/> and "
           "<paramref name=\"b\"/>.</summary>\n"
           "    public int Add(int a, int b) => a + b;\n\n"
           "    public int Multiply(int a, int b) => a * b;\n}\n")
# The same change as a shell edit, for the workflow that does not use apply_patch.
SED = ("sed -i 's|^    public int Multiply|    // Multiplies two integers.\\n    public int "
       "Multiply|' src/Calc/Calculator.cs")
SEDDED = ("namespace Calc;\n\npublic class Calculator\n{\n    public int Add(int a, int b) => a + b;"
          "\n\n    // Multiplies two integers.\n    public int Multiply(int a, int b) => a * b;\n}\n")


# full-delivery's design writes the task graph develop fans out over (docs/workflows.md, fan_out).
TASK_GRAPH = """kind: task-list
tasks:
  - id: document-multiply
    title: Document Calculator.Multiply
    paths: [src/Calc/Calculator.cs, tests/Calc.Tests/CalculatorTests.cs]
    tests: [Calc.Tests.CalculatorTests.Multiply_ReturnsProduct]
"""




@contextmanager
def harness(tmp_path: Path, clean_env: dict[str, str], nodes: dict) -> Iterator[Harness]:
    root = git_fixture(tmp_path)
    with replay(tmp_path, nodes) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home"),
               "PATH": f"{STANDIN}:{clean_env['PATH']}",
               "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers/all-pass.yaml")}
        yield Harness(root, env, tmp_path / "requests.jsonl")


def contract(test: str) -> list[dict]:
    """A sprint contract session of the literal agent: its contract.md names `test`, which the
    stand-in's TRX of the fixture shows passed (the evaluator's literal review agrees)."""
    return [{"literal": {"files": {"contract.md": "## Build\n\nA doc comment in "
                                   f"src/Calc/Calculator.cs.\n\n## Tests\n\n- {test}\n"}}}]


def literal(before: dict | None = None) -> list[dict]:
    """One attempt of the literal agent; `before`: the product change it makes first."""
    return [{"literal": {"before": [before]} if before else {}}]


# -- assertions shared by every workflow --------------------------------------------------------

RESTORED = "restored by the executor before attempt 1 (NuGet packages in "


def assert_steps_completed(h: Harness, delivery: str, validation: dict[str, str]) -> None:
    """Every step completed on its first attempt, after the executor's restore, its validation
    passed at the stage its phase declares (`docs-only`, or `test` for `full`)."""
    state = Store(h.root).read(delivery)
    assert state.status == "completed"
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        (n, "completed", 1) for n in validation]
    for step in state.steps:
        assert (step.preparation or "").startswith(RESTORED), (step.name, step.preparation)
        report = step.validation_report
        assert report is not None, step.name
        assert (report.stage, report.passed) == (validation[step.name], True), (step.name, report)
    assert h.status(delivery)["status"] == "completed"


def assert_handoffs(h: Harness, delivery: str, artifacts: dict[str, dict[str, str]]) -> None:
    """Every artifact registered at phases/<d>/<node>/<file> (given as `<node>/<file>`) with the
    sha256 of the file there, and committed as such on feat-<d>."""
    state = Store(h.root).read(delivery)
    repo = git.Repo(h.root)
    assert {s.name: sorted(s.handoff) for s in state.steps} == {
        n: sorted(a) for n, a in artifacts.items()}
    for step in state.steps:
        for art, ref in step.handoff.items():
            assert ref.path == f"phases/{delivery}/{artifacts[step.name][art]}"
            body = (h.root / ref.path).read_bytes()
            assert ref.sha256 == hashlib.sha256(body).hexdigest()
            blob = repo.commit(f"feat-{delivery}").tree / ref.path
            assert blob.data_stream.read() == body


def assert_no_literal_block(h: Harness, nodes: list[str]) -> None:
    """The literal agent ran on every node and never met a path it could not read or write."""
    requests = h.requests()
    assert sorted({e["node"] for e in requests}) == sorted(nodes)
    for entry in requests:
        assert "error" not in entry["turn"], entry["turn"]
        assert "BLOCKED" not in (entry["turn"].get("message") or ""), entry["turn"]
        assert (entry.get("literal") or {}).get("action") != "blocked", entry["literal"]
    done = [e["node"] for e in requests if (e.get("literal") or {}).get("action") in (
        "done", "review")]
    assert sorted(done) == sorted(nodes)


def assert_prompts_say_each_thing_once(h: Harness, delivery: str, sessions: int) -> None:
    """Every prompt the delivery's sessions were sent (generators, tasks, contracts, reviews)
    gives its sections in the one order and states each constraint at most once."""
    prompts = saved_prompts(h.root, delivery)
    assert len(prompts) == sessions, sorted(prompts)
    assert {k: v for k, v in ((k, out_of_order(t)) for k, t in prompts.items()) if v} == {}
    assert {k: v for k, v in ((k, repeated_constraints(t)) for k, t in prompts.items()) if v} == {}
    state = Store(h.root).read(delivery)
    catalog = snapshot_catalog(Store(h.root), state)
    nodes = {s.name: [a.path for a in catalog.phases[s.phase].output.artifacts]
             for s in state.steps}
    undefined = {k: undefined_files(t, t[t.rindex("# Current step"):], nodes)
                 for k, t in prompts.items()}
    assert {k: v for k, v in undefined.items() if v} == {}


def assert_product_commit(h: Harness, delivery: str, node: str, content: str) -> None:
    """The node's product commit holds exactly the agent's C# edit; its metadata commit follows."""
    step = Store(h.root).read(delivery).get_step(node)
    repo = git.Repo(h.root)
    product = repo.commit(step.commits["product"])
    assert sorted(product.stats.files) == ["src/Calc/Calculator.cs"]
    assert (product.tree / "src/Calc/Calculator.cs").data_stream.read().decode() == content
    assert repo.commit(step.commits["metadata"]).parents == (product,)


def metadata_subjects(delivery: str, nodes: list[str], product: str) -> list[str]:
    """The subjects of feat-<d>, newest first: one metadata commit per node, the product commit
    of `product` just before its metadata, on top of the fixture commit."""
    subjects = []
    for node in nodes:
        if node == product:
            subjects.append(f"[{delivery}] {node} attempt 1: product changes")
        subjects.append(f"[{delivery}] {node} attempt 1: metadata")
    return [*reversed(subjects), "fixture"]


# What a real SDK leaves in a worktree (restore writes obj/, build bin/); the stand-in writes none.
BUILD_OUTPUT = ("src/Calc/obj/project.assets.json", "src/Calc/bin/Release/net8.0/Calc.dll",
                "tests/Calc.Tests/bin/Release/net8.0/Calc.Tests.dll")


def leave_build_output(h: Harness, delivery: str) -> Path:
    worktree = h.root / ".specops/worktrees" / delivery
    assert worktree.is_dir()
    for rel in BUILD_OUTPUT:
        (worktree / rel).parent.mkdir(parents=True, exist_ok=True)
        (worktree / rel).write_bytes(b"build output\n")
    return worktree


def blocked_at(h: Harness, delivery: str) -> dict[str, str]:
    return {s.name: s.blocked_reason or "" for s in Store(h.root).read(delivery).steps
            if s.status == "blocked"}


# -- the workflows --------------------------------------------------------------------------------

def test_quick_delivery_completes_end_to_end_with_the_literal_agent_on_a_git_fixture(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    nodes = {"develop": literal({"apply_patch": PATCH}), "*": literal()}
    with harness(tmp_path, clean_env, nodes) as h:
        h.ok("new", "quick-delivery", "q1", "--request", "Document Calculator.Add.")
        h.run("q1", 3)
        assert blocked_at(h, "q1") == {"develop": "awaiting approval: target-write"}
        h.ok("approve", "q1", "target-write", "--note", "go")
        h.run("q1", 0)
    assert_steps_completed(h, "q1", {"develop": "test", "verify": "test", "delivery": "test"})
    assert_handoffs(h, "q1", {
        "develop": {"changes": "develop/changes.md", "red-green": "develop/red-green.md"},
        "verify": {"report": "verify/report.md"},
        "delivery": {"summary": "delivery/summary.md"}})
    assert_no_literal_block(h, ["develop", "verify", "delivery"])
    assert assert_clean_git(h, "q1") == metadata_subjects(
        "q1", ["develop", "verify", "delivery"], product="develop")
    assert_product_commit(h, "q1", "develop", PATCHED)
    assert_prompts_say_each_thing_once(h, "q1", 3)


def test_full_delivery_completes_end_to_end_with_the_literal_agent_and_its_four_gates(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    # design's task graph has one task; develop runs one session for it (`develop.<task>`),
    # after its sprint contract; integrate (no change of its own) agrees its own sprint contract
    # and is reviewed by full-evaluate
    nodes = {"design": [{"literal": {"files": {"design/tasks.yaml": TASK_GRAPH}}}],
             "develop.document-multiply.contract": contract(
                 "Calc.Tests.CalculatorTests.Multiply_ReturnsProduct"),
             "integrate.contract": contract("Calc.Tests.CalculatorTests.Multiply_ReturnsProduct"),
             "develop.document-multiply": literal({"shell": SED}), "*": literal()}
    order = ["requirements", "design", "develop", "integrate", "verify", "delivery"]
    with harness(tmp_path, clean_env, nodes) as h:
        h.ok("new", "full-delivery", "f1", "--request", "Document Calculator.Multiply.")
        h.run("f1", 3)
        assert blocked_at(h, "f1") == {"requirements": "awaiting approval: scope"}
        h.ok("approve", "f1", "scope", "--note", "in scope")
        h.run("f1", 3)
        assert blocked_at(h, "f1") == {"design": "awaiting approval: requirements"}
        worktree = leave_build_output(h, "f1")
        h.ok("approve", "f1", "requirements", "--note", "requirements fine")
        h.run("f1", 3)
        assert blocked_at(h, "f1") == {"develop": "awaiting approval: target-write"}
        h.ok("approve", "f1", "target-write", "--note", "go")
        assert blocked_at(h, "f1") == {"develop": "awaiting approval: design"}
        h.ok("approve", "f1", "design", "--note", "plan fine")
        assert blocked_at(h, "f1") == {}
        h.run("f1", 0)
    assert_steps_completed(h, "f1", {"requirements": "docs-only", "design": "docs-only",
                                     "develop": "test", "integrate": "test", "verify": "test",
                                     "delivery": "test"})
    assert_handoffs(h, "f1", {
        "requirements": {"spec": "requirements/spec.md",
                         "open-questions": "requirements/open-questions.md"},
        "design": {"plan": "design/plan.md", "task-graph": "design/tasks.yaml"},
        "develop": {"changes": "develop/changes.md", "red-green": "develop/red-green.md"},
        "integrate": {"changes": "integrate/changes.md", "red-green": "integrate/red-green.md"},
        "verify": {"report": "verify/report.md",
                   "acceptance-matrix": "verify/acceptance-matrix.md"},
        "delivery": {"summary": "delivery/summary.md",
                     "pull-request": "delivery/pull-request.md"}})
    assert_no_literal_block(h, ["requirements", "design", "develop.document-multiply.contract",
                                "develop.document-multiply.contract-review",
                                "develop.document-multiply", "integrate.contract",
                                "integrate.contract-review", "integrate", "integrate.review",
                                "verify", "delivery"])
    task = "[f1] develop.document-multiply attempt 1: product changes"
    merge = "[f1] develop: merge task document-multiply (feat-f1+develop+document-multiply)"
    subjects = metadata_subjects("f1", order, product="develop")
    assert sorted(assert_clean_git(h, "f1")) == sorted(
        [merge if s == "[f1] develop attempt 1: product changes" else s for s in subjects]
        + [task])
    first_parent = git.Repo(h.root).git.log("feat-f1", "--first-parent", "--format=%s")
    assert first_parent.splitlines() == [
        merge if s == "[f1] develop attempt 1: product changes" else s for s in subjects]
    assert_product_commit(h, "f1", "develop", SEDDED)  # the merge of its one task
    assert_prompts_say_each_thing_once(h, "f1", 11)
    state = Store(h.root).read("f1")
    develop = state.get_step("develop")
    assert [(t.id, t.status, t.attempts) for t in develop.tasks] == [
        ("document-multiply", "merged", 1)]
    [task] = develop.tasks
    assert (task.contract.agreed, task.contract.rounds, task.contract.tests) == (
        True, 1, ["Calc.Tests.CalculatorTests.Multiply_ReturnsProduct"])
    agreed = state.get_step("integrate").contract
    assert (agreed.agreed, agreed.rounds, agreed.tests) == (
        True, 1, ["Calc.Tests.CalculatorTests.Multiply_ReturnsProduct"])
    assert state.snapshot.reviews == {"integrate": "full-evaluate"}  # no web project
    [review] = state.get_step("integrate").reviews
    assert (review.round, review.verdict, review.qa) == (1, "PASS", None)
    assert list(review.scores) == ["acceptance-criteria-covered", "follows-the-design",
                                   "tests-prove-behaviour", "validation-evidence",
                                   "no-scope-creep"]
    assert [(worktree / rel).read_bytes() for rel in BUILD_OUTPUT] == [b"build output\n"] * 3


def test_plan_build_review_completes_end_to_end_with_the_literal_agent_and_a_passing_review(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    nodes = {"build.contract": contract("Calc.Tests.CalculatorTests.Add_ReturnsSum"),
             "build": literal({"apply_patch": PATCH}), "*": literal()}
    with harness(tmp_path, clean_env, nodes) as h:
        h.ok("new", "plan-build-review", "p1", "--request", "Document Calculator.Add.")
        h.ok("approve", "p1", "target-write", "--note", "go")
        h.run("p1", 0)
    assert_steps_completed(h, "p1", {"plan": "docs-only", "build": "test"})
    assert_handoffs(h, "p1", {"plan": {"spec": "plan/spec.md"},
                              "build": {"changes": "build/changes.md"}})
    assert_no_literal_block(h, ["plan", "build.contract", "build.contract-review", "build",
                                "build.review"])
    assert assert_clean_git(h, "p1") == metadata_subjects("p1", ["plan", "build"],
                                                          product="build")
    assert_product_commit(h, "p1", "build", PATCHED)
    assert_prompts_say_each_thing_once(h, "p1", 5)
    state = Store(h.root).read("p1")
    assert state.snapshot.reviews == {"build": "pbr-evaluate"}  # no web project: no QA
    build = state.get_step("build")
    assert (build.contract.agreed, build.contract.rounds, build.contract.tests,
            build.contract.path) == (True, 1, ["Calc.Tests.CalculatorTests.Add_ReturnsSum"],
                                     "phases/p1/build/contract.md")
    criteria = ["acceptance-criteria-covered", "tests-prove-behaviour", "validation-evidence",
                "no-scope-creep"]
    [review] = build.reviews
    assert (review.round, review.verdict, review.reason, review.sandbox_denials) == (
        1, "PASS", "all criteria met", [])
    assert review.scores == {c: 10 for c in criteria}
    assert review.report == "phases/p1/build/reviews/build-r1-report.md"
    report = (h.root / review.report).read_text().splitlines()
    assert report[0] == "VERDICT: PASS" and report[-2:] == ["FINDINGS:", "- none"]
    assert [line.split(" — ")[0] for line in report[1:-2]] == [
        f"SCORE {c}: 10" for c in criteria]
    assert [e["literal"] for e in h.requests() if e["node"] == "build.review"][-1] == {
        "action": "review", "criteria": criteria, "verbatim": False}

"""Sprint contracts (issue #20 item 3): before building, the generator writes contract.md — what
it will build and the named tests that prove it — and the evaluator reviews it read-only until it
agrees (at most 2 rounds); the build is judged against the agreed contract: every named test must
be among the passed tests of the attempt's TRX. Real codex, the literal replay agent, the
`dotnet` stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.agent.codex import AgentSettings
from specops_dag.delivery.store import Store
from specops_dag.execution.contract import contract_tests
from specops_dag.execution.step import run_step

from ..support.agents import agentic_git_harness, attempts, new, replay
from ..support.harness import write_tree

JUDGE = """kind: phase
id: c-judge
input: {ports: {}}
execution:
  goal: Judge the contract.
  executor: {kind: evaluator}
  sandbox: read-only
  timeout_s: 90
  idle_timeout_s: 30
  skills:
    - {id: c-judge-skill, path: skills/c-judge-skill/SKILL.md, load: entry, required: true}
  criteria:
    - {id: concrete, description: The contract is concrete., threshold: 7}
validation: none
"""

EDIT = ("sed -i 's|^    public int Add|    // Adds two integers.\\n    public int Add|' "
        "src/Calc/Calculator.cs")


def contract(test: str) -> dict:
    return {"literal": {"files": {"contract.md": (
        "## Build\n\nA comment on Calculator.Add in src/Calc/Calculator.cs.\n\n"
        f"## Tests\n\n- {test}\n")}}}


def verdict(v: str, why: str) -> dict:
    return {"literal": {"review": f"<<<REVIEW\nVERDICT: {v}\nFINDINGS:\n- {why}\n>>>"}}


def contract_harness(tmp_path: Path, review: bool = False) -> Store:
    root = agentic_git_harness(tmp_path, "all-pass")
    if review:  # the contract's evaluator also reviews the build, one round
        wf = root / "workflow_defs/workflows/agentic.yaml"
        wf.write_text(wf.read_text().replace(
            "{id: write, phase: c-write,", "{id: write, phase: c-write, review: {phase: c-judge, "
            "max_rounds: 1},"))
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace(
        "  skills:\n", "  contract: {evaluator: c-judge, max_rounds: 2}\n  skills:\n", 1)
        .replace("validation: none", "validation: full"))
    write_tree(root, {"workflow_defs/phases/c-judge.yaml": JUDGE,
                      "workflow_defs/skills/c-judge-skill/SKILL.md":
                          "---\nname: c-judge-skill\n---\nJudge.\n"})
    import git

    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.git.commit("-q", "-m", "a contract phase")
    return new(root)


def test_contract_tests_are_the_named_lines_under_the_tests_heading() -> None:
    text = ("## Build\n- Calc.Not.A_Test under build\n## Tests\n- `A.B.C`\n* D.E.F because\n"
            "- not a name\n- A.B.C\n## Notes\n- G.H.I\n")
    assert contract_tests(text) == ["A.B.C", "D.E.F"]


@pytest.mark.e2e
def test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it(
        tmp_path: Path, all_pass_dotnet: None) -> None:
    store = contract_harness(tmp_path)
    nodes = {"write.contract": [contract("Calc.Tests.Vague"),
                                contract("Calc.Tests.CalculatorTests.Add_ReturnsSum")],
             "write.contract-review": [verdict("BLOCK", "name a test of the fixture"),
                                       verdict("PASS", "concrete")],
             "write": [{"literal": {"before": [{"shell": EDIT}]}}]}
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "write", settings=settings)
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    assert (step.contract.agreed, step.contract.rounds, step.contract.tests, step.contract.path) == (
        True, 2, ["Calc.Tests.CalculatorTests.Add_ReturnsSum"], "phases/d1/write/contract.md")
    folder = store.delivery_dir("d1") / "write"
    assert (folder / "reviews/write-contract-r1-report.md").read_text().startswith(
        "VERDICT: BLOCK")
    # round 2's generator heard why round 1 was refused; the build was told the agreed contract
    second = (folder / "contract-r2-prompt.md").read_text()
    assert "The evaluator did not agree with your previous contract: name a test of the " \
           "fixture; the evaluator's report: " in second
    assert "CONTRACT FIRST (round 2 of 2): this session builds nothing." in second
    # it is not told to build, nor pointed at the build's skills
    assert "\nTASK of the build that follows (this session only writes its contract):\n" in second
    assert "\nTASK:\n" not in second and "SKILLS (from the delivery snapshot):" not in second
    review = (folder / "contract-r2-review-prompt.md").read_text()
    assert "review of the contract of `write` (contract round 2 of 2" in review
    build = (folder / "prompt.md").read_text()
    assert f"CONTRACT: build what the agreed contract {folder / 'contract.md'} (sha256 " \
           f"{step.contract.sha256}) says" in build
    roles = sorted(u.role for u in step.usage)
    assert roles == ["evaluator", "evaluator", "generator", "generator", "generator"]


@pytest.mark.e2e
def test_a_build_whose_contract_test_did_not_run_fails_its_attempt(tmp_path: Path,
                                                                   all_pass_dotnet: None) -> None:
    store = contract_harness(tmp_path)
    nodes = {"write.contract": [contract("Calc.Tests.CalculatorTests.Divide_ReturnsQuotient")],
             "write.contract-review": [verdict("PASS", "fine")],
             "write": [{"literal": {"before": [{"shell": EDIT}]}}] * 3}
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "write", settings=settings)
    assert (outcome.status, outcome.message) == ("failed", (
        "attempt 1/3 failed: the build does not hold the agreed contract "
        "phases/d1/write/contract.md: its tests Calc.Tests.CalculatorTests.Divide_ReturnsQuotient "
        "(not run) must exist, run and pass"))
    assert len(attempts(tmp_path, "write.contract")) == 1  # agreed once, not renegotiated


FAN = {
    "workflow_defs/workflows/plan-build.yaml": """kind: workflow
id: plan-build
inputs: {request: {contract: req}}
nodes:
  - {id: plan, phase: p-plan, inputs: {request: {input: request}}}
  - {id: build, phase: p-build, needs: [plan], inputs: {plan: {node: plan, output: plan}}}
""",
    "workflow_defs/phases/p-plan.yaml": """kind: phase
id: p-plan
input: {ports: {request: {contract: req}}}
execution:
  goal: Copy the task list.
  executor: {kind: command, argv: [sh, -c, 'cp plan/tasks.yaml "$SPECOPS_NODE_DIR/tasks.yaml"']}
output:
  ports: {plan: {contract: plan}}
  artifacts:
    - {id: tasks, path: tasks.yaml, required: true}
validation: none
""",
    "workflow_defs/phases/p-build.yaml": """kind: phase
id: p-build
input: {ports: {plan: {contract: plan}}}
execution:
  goal: Build the task.
  executor: {kind: codex}
  timeout_s: 90
  idle_timeout_s: 30
  skills:
    - {id: c-write-skill, path: skills/c-write-skill/SKILL.md, load: entry, required: true}
  fan_out: {tasks: {input: plan, artifact: tasks}}
  contract: {evaluator: c-judge}
output:
  ports: {built: {contract: built}}
  artifacts:
    - {id: changes, path: changes.md, required: true}
validation: full
""",
    "plan/tasks.yaml": """kind: task-list
tasks:
  - {id: add-comment, title: Comment Add, paths: [src/Calc/Calculator.cs], tests: [Calc.Tests.CalculatorTests.Add_ReturnsSum]}
""",
}


@pytest.mark.e2e
def test_each_fan_out_task_agrees_its_own_contract_before_it_builds(tmp_path: Path,
                                                                    all_pass_dotnet: None) -> None:
    import git

    from specops_dag.delivery import lifecycle as ops
    from specops_dag.workflow.catalog import definition_roots, load_catalog

    root = agentic_git_harness(tmp_path, "all-pass")
    write_tree(root, {**FAN, "workflow_defs/phases/c-judge.yaml": JUDGE,
                      "workflow_defs/skills/c-judge-skill/SKILL.md":
                          "---\nname: c-judge-skill\n---\nJudge.\n"})
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.git.commit("-q", "-m", "a fan-out with contracts")
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root),
                     "plan-build", "d1", "Comment Add.")
    assert run_step(store, "d1", "plan").status == "completed"
    nodes = {"build.add-comment.contract": [
                 contract("Calc.Tests.CalculatorTests.Add_ReturnsSum")],
             "build.add-comment.contract-review": [verdict("PASS", "concrete")],
             "build.add-comment": [{"literal": {"before": [{"shell": EDIT}]}}]}
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "build", settings=settings)
    assert outcome.status == "completed", outcome.message
    [task] = store.read("d1").get_step("build").tasks
    assert (task.status, task.contract.agreed, task.contract.tests, task.contract.path) == (
        "merged", True, ["Calc.Tests.CalculatorTests.Add_ReturnsSum"],
        "phases/d1/build/tasks/add-comment/contract.md")
    build = (store.delivery_dir("d1") / "build/tasks/add-comment/session1-prompt.md").read_text()
    assert "CONTRACT: build what the agreed contract " in build
    assert sorted(u.role for u in task.usage) == ["evaluator", "generator", "generator"]


@pytest.mark.e2e
def test_the_review_of_a_contract_build_scores_it_against_the_agreed_contract(
        tmp_path: Path, all_pass_dotnet: None) -> None:
    store = contract_harness(tmp_path, review=True)
    nodes = {"write.contract": [contract("Calc.Tests.CalculatorTests.Add_ReturnsSum")],
             "write.contract-review": [verdict("PASS", "concrete")],
             "write": [{"literal": {"before": [{"shell": EDIT}]}}],
             "write.review": [{"literal": {"review": (
                 "<<<REVIEW\nVERDICT: PASS\nSCORE concrete: 9 — as agreed\nFINDINGS:\n- none\n"
                 ">>>")}}]}
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "write", settings=settings)
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    folder = store.delivery_dir("d1") / "write"
    review = (folder / "reviews/write-r1-prompt.md").read_text()
    assert f"{folder / 'contract.md'} (sha256 {step.contract.sha256}) — the sprint contract the " \
           "generator agreed to" in review
    assert "Score the build against the agreed sprint contract (READ): what it says it builds " \
           "is built, and every test it names exists, runs and passes." in review
    assert [r.verdict for r in step.reviews] == ["PASS"]

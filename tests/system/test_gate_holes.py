"""Gates without holes: a risk raised by any node, the last included, is decided before the
delivery completes or is pushed; each push uses up its own external-write approval; review
rounds the call budget cannot honour are a load error."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import git
import psutil
import pytest

from specops_dag import gitflow
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.gates import approve, raise_risk
from specops_dag.delivery.store import Store
from specops_dag.errors import BlockedError
from specops_dag.execution.step import run_step

from ..support.cli import specops
from ..support.git import WHO, WRITE, git_harness, new, run_all
from ..support.harness import (
    DIAMOND,
    VENV_BIN,
    WF,
    complete,
    load_problems,
    make_delivery,
    write_tree,
)

# The git harness command (WRITE), and a risk.md in the node folder: the last node raises a risk.
RISKY_WRITE = WRITE.replace(
    "open(os.environ['CALLS']",
    "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'risk.md').write_text('# Risk: no rollback'); "
    "open(os.environ['CALLS']")
RISK_QUESTION = "Do you accept the risk the agent raised (or the evidence it had to omit)?"


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.log"
    monkeypatch.setenv("CALLS", str(path))
    return path


def risky_last_node(tmp_path: Path) -> tuple[Path, Path]:
    root, origin = git_harness(tmp_path)
    phase = root / "workflow_defs/phases/p-d.yaml"
    phase.write_text(phase.read_text().replace(WRITE, RISKY_WRITE))
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("p-d raises a risk", author=WHO, committer=WHO)
    return root, origin


def push_refusal(store: Store) -> str:
    with pytest.raises(BlockedError) as info:
        ops.push_delivery(store, "d1")
    return info.value.message


def origin_heads(origin: Path) -> list[str]:
    return [h.name for h in git.Repo(origin).heads]


@pytest.mark.e2e
def test_a_risk_raised_by_the_last_node_keeps_the_delivery_from_completing_and_push_refuses_until_it_is_approved(  # noqa: E501
        tmp_path: Path, calls: Path, clean_env: dict[str, str]) -> None:
    root, origin = risky_last_node(tmp_path)
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    state = store.read("d1")
    assert [(r.node, r.path) for r in state.risks] == [("d", "phases/d1/d/risk.md")]
    assert [e.detail for e in state.history if e.event == "risk raised"] == [
        "phases/d1/d/risk.md; gated: nothing downstream; decide with `specops approve d1 risk`"]
    env = {**clean_env, "CALLS": str(calls)}
    status = specops(env, root, "status", "d1")
    assert status.stdout.splitlines()[0] == "delivery d1  workflow diamond  status blocked"
    refused = specops(env, root, "run", "d1", "--push", "--executor", "in_process")
    assert refused.returncode == 3
    assert refused.stderr == (
        "error: not pushed: open risk: phases/d1/d/risk.md (raised by `d`); decide it with "
        "`specops approve d1 risk --note ...` (or `--reject --note ...`), then `specops run d1 "
        "--push`\n")
    assert "feat-d1" not in origin_heads(origin)
    # the external-write approval alone does not open the way past an open risk
    approve(store, "d1", "external-write", note="push when ready")
    assert push_refusal(store).startswith("not pushed: open risk: phases/d1/d/risk.md")
    approve(store, "d1", "risk", note="rollback by revert is enough")
    assert specops(env, root, "status", "d1").stdout.splitlines()[0] == (
        "delivery d1  workflow diamond  status completed")
    summary = ops.push_delivery(store, "d1")
    assert summary
    assert git.Repo(origin).heads["feat-d1"].commit.hexsha == (
        git.Repo(root).heads["feat-d1"].commit.hexsha)


@pytest.mark.e2e
def test_a_rejected_risk_of_the_last_node_still_refuses_the_push(
        tmp_path: Path, calls: Path) -> None:
    root, origin = risky_last_node(tmp_path)
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    approve(store, "d1", "external-write")
    approve(store, "d1", "risk", note="no rollback is not acceptable", reject=True)
    assert push_refusal(store) == (
        "not pushed: open risk: phases/d1/d/risk.md (raised by `d`); decide it with `specops "
        "approve d1 risk --note ...` (or `--reject --note ...`), then `specops run d1 --push`")
    assert "feat-d1" not in origin_heads(origin)


@pytest.mark.e2e
def test_a_second_push_needs_a_second_external_write_approval(
        tmp_path: Path, calls: Path) -> None:
    root, origin = git_harness(tmp_path)
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    first = approve(store, "d1", "external-write", note="first push")
    ops.push_delivery(store, "d1")
    pushed = git.Repo(root).heads["feat-d1"].commit.hexsha
    [used] = store.read("d1").approvals
    assert (used.at, used.used_by) == (first.at, f"push feat-d1 {pushed}")
    assert used.used_at is not None
    assert store.read("d1").history[-1].detail.endswith(
        f"; used the external-write approval of {first.at}")
    ops.reopen(store, "d1", "d", "one more change")
    assert run_step(store, "d1", "d").status == "completed"
    assert push_refusal(store) == (
        f"not pushed: the external-write approval of {first.at} was used by the push at "
        f"{used.used_at} (push feat-d1 {pushed}); each push needs its own approval: approve with "
        "`specops approve d1 external-write --note ...`, then `specops run d1 --push`")
    assert git.Repo(origin).heads["feat-d1"].commit.hexsha == pushed
    second = approve(store, "d1", "external-write", note="second push")
    assert second.revision == 0  # the same decision again, not a changed one
    ops.push_delivery(store, "d1")
    head = git.Repo(root).heads["feat-d1"].commit.hexsha
    assert head != pushed and git.Repo(origin).heads["feat-d1"].commit.hexsha == head
    assert [(a.note, a.used_by) for a in store.read("d1").approvals] == [
        ("first push", f"push feat-d1 {pushed}"), ("second push", f"push feat-d1 {head}")]


@pytest.mark.e2e
def test_a_push_git_rejects_leaves_the_external_write_approval_usable(
        tmp_path: Path, calls: Path) -> None:
    root, origin = git_harness(tmp_path)
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    approve(store, "d1", "external-write")
    git.Repo(root).delete_remote("origin")
    with pytest.raises(Exception, match="has no `origin` remote"):
        ops.push_delivery(store, "d1")
    [approval] = store.read("d1").approvals
    assert (approval.used_at, approval.used_by) == (None, None)
    git.Repo(root).create_remote("origin", str(origin))
    ops.push_delivery(store, "d1")
    assert "feat-d1" in origin_heads(origin)


@pytest.mark.e2e
def test_a_push_origin_refuses_as_no_fast_forward_names_the_rejection_and_is_never_forced(
        tmp_path: Path, calls: Path) -> None:
    root, origin = git_harness(tmp_path)
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    approve(store, "d1", "external-write")
    repo = git.Repo(root)  # someone else pushed a commit feat-d1 does not have
    other = repo.git.commit_tree("HEAD^{tree}", "-p", "main", "-m", "elsewhere")
    repo.git.push("origin", f"{other}:refs/heads/feat-d1")
    with pytest.raises(gitflow.GitError) as info:
        ops.push_delivery(store, "d1")
    assert str(info.value) == (
        "git push origin feat-d1 was rejected ([rejected] (non-fast-forward)); it is never "
        "forced: integrate the remote changes by hand")
    assert git.Repo(origin).heads["feat-d1"].commit.hexsha == other
    [approval] = store.read("d1").approvals
    assert (approval.used_at, approval.used_by) == (None, None)


@pytest.mark.e2e
def test_a_push_to_a_remote_that_never_answers_is_stopped_at_its_deadline_with_its_transport(
        tmp_path: Path, calls: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = git_harness(tmp_path)
    store = new(root)
    assert run_all(store) == ["completed"] * 4
    approve(store, "d1", "external-write")
    hang = tmp_path / "silent-ssh"
    hang.write_text("#!/bin/sh\nsleep 117\n")  # the shell and its sleep: a transport's tree
    hang.chmod(0o755)
    repo = git.Repo(root)
    repo.git.remote("set-url", "origin", "ssh://specops.invalid/origin.git")
    repo.git.config("core.sshCommand", str(hang))
    monkeypatch.setattr(gitflow, "GIT_DEADLINE_S", 2)
    with pytest.raises(gitflow.GitError) as info:
        ops.push_delivery(store, "d1")
    assert str(info.value) == (
        "git push origin feat-d1 did not finish within 2 s and was stopped; check that origin is "
        "reachable, then push again")
    left = [p for p in psutil.process_iter(["cmdline"])
            if str(hang) in (line := " ".join(p.info["cmdline"] or [])) or line == "sleep 117"]
    assert psutil.wait_procs(left, timeout=10)[1] == []
    [approval] = store.read("d1").approvals
    assert (approval.used_at, approval.used_by) == (None, None)


def last_node_risk(root: Path) -> Store:
    store = make_delivery(root)
    for node in "abcd":
        complete(store, "d1", node)
    with store.transaction("d1") as state:
        raise_risk(state, "d", "phases/d1/d/risk.md")
    return store


def status(root: Path, *args: str) -> str:
    result = specops(os.environ.copy(), root, "status", "d1", *args)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def test_status_lists_open_risks_with_their_files_in_text_and_json(diamond_root: Path) -> None:
    store = last_node_risk(diamond_root)
    assert store.read("d1").status == "blocked"  # every step is completed; a risk is open
    text = status(diamond_root).splitlines()
    assert text[0] == "delivery d1  workflow diamond  status blocked"
    assert text[6:10] == [
        "open risks (decide them before the delivery completes or is pushed):",
        "  phases/d1/d/risk.md (raised by `d`)",
        f"  question: {RISK_QUESTION}",
        "  next: `specops approve d1 risk --note ...` (or `specops approve d1 risk --reject "
        "--note ...`)"]
    report = json.loads(status(diamond_root, "--json"))
    [risk] = store.read("d1").risks
    assert report["status"] == "blocked"
    assert report["open_risks"] == [{"node": "d", "path": "phases/d1/d/risk.md",
                                     "raised_at": risk.raised_at}]
    approve(store, "d1", "risk", note="fine")
    report = json.loads(status(diamond_root, "--json"))
    assert (report["status"], report["open_risks"]) == ("completed", [])
    assert "open risks" not in status(diamond_root)


def test_status_of_a_used_external_write_approval_shows_it_used(diamond_root: Path) -> None:
    store = last_node_risk(diamond_root)
    approve(store, "d1", "risk")
    approve(store, "d1", "external-write")
    with store.transaction("d1") as state:  # as a push leaves it
        state.approvals[-1].used_at, state.approvals[-1].used_by = "2026-01-01T00:00:00Z", "push"
    report = json.loads(status(diamond_root, "--json"))
    assert (report["approvals"][-1]["used_at"], report["approvals"][-1]["used_by"]) == (
        "2026-01-01T00:00:00Z", "push")
    assert status(diamond_root).splitlines()[0] == (
        "delivery d1  workflow diamond  status completed")


EVALUATOR = """kind: phase
id: p-eval
input: {ports: {up: {contract: a-out}}}
execution:
  goal: Judge b.
  executor: {kind: evaluator}
  sandbox: read-only
  criteria:
    - {id: complete, description: Every request item is covered, threshold: 8}
  skills:
    - {id: p-eval-skill, path: skills/p-eval-skill/SKILL.md, load: entry, required: true}
validation: none
"""


def reviewed_diamond(tmp_path: Path, max_rounds: int) -> Path:
    files = {**DIAMOND, "workflow_defs/phases/p-eval.yaml": EVALUATOR,
             "workflow_defs/skills/p-eval-skill/SKILL.md": "# Judge\n"}
    files[WF] = files[WF].replace(
        "{id: b, phase: p-b,", f"{{id: b, phase: p-b, review: {{phase: p-eval, max_rounds: "
                               f"{max_rounds}}},")
    return write_tree(tmp_path / "harness", files)


def test_max_rounds_4_is_a_load_error_naming_the_file_the_yaml_path_and_the_fix(
        tmp_path: Path) -> None:
    root = reviewed_diamond(tmp_path, 4)
    expected = (f"{WF}: nodes[1].review.max_rounds: 4 rounds cannot run: each round is one of "
                "the step's 3 agent calls; use max_rounds ≤ 3")
    assert load_problems(root) == [expected]
    check = subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), "check"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 2
    assert expected in check.stdout + check.stderr


def test_max_rounds_3_loads(tmp_path: Path) -> None:
    from specops_dag.workflow.catalog import load_catalog

    root = reviewed_diamond(tmp_path, 3)
    catalog = load_catalog([root / "workflow_defs"], display_base=root)
    assert catalog.workflows["diamond"].nodes[1].review.max_rounds == 3

"""Reopen and rejection move the node's previous files aside (issue 43, item 11): a re-run starts
from nothing of its own, so an artifact, a report or a risk file of the earlier run never counts
as the new run's; the earlier files are kept under `phases/<d>/.revisions/<node>/<n>/` and named
in the step's `revisions[]`, in the harness root and on feat-<d>. The node's step record
(`docs/phase/<d>/<node>.md` of its work tree) goes there too, under the same path."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from specops_dag.delivery import gates
from specops_dag.delivery.lifecycle import reopen, workdir
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file

from ..support.agents import MODES, agentic_git_harness, create, replay, settings_for, world
from ..support.cli import specops

RISK = "# Risk: the notes are unchecked\n"
NOTHING = {"literal": {"skip": ["notes.md", "write.md", "handoff.md"]}}


def test_a_reopened_node_reruns_from_nothing_of_its_own_and_keeps_the_old_files_aside(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = create(root, None)
    folder = root / "phases/d1/write"
    aside = root / "phases/d1/.revisions/write/1"
    with replay(tmp_path, {"write": [{"literal": {"risk": RISK}}, NOTHING, NOTHING, NOTHING,
                                     {"literal": {}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert run_step(store, "d1", "write", settings=settings).status == "completed"
        old = (folder / "notes.md").read_text()
        gates.approve(store, "d1", "risk", note="checked")
        assert reopen(store, "d1", "write", "redo the notes") == ["write", "review"]
        step = store.read("d1").get_step("write")
        assert step.revisions[-1].files == "phases/d1/.revisions/write/1/"
        assert sorted(p.name for p in folder.iterdir()) == []
        assert (aside / "notes.md").read_text() == old
        assert (aside / "risk.md").read_text() == RISK
        # a re-run that writes nothing does not complete with the old report
        failed = [run_step(store, "d1", "write", settings=settings) for _ in range(3)]
        assert [o.status for o in failed] == ["failed", "failed", "error"]
        assert failed[-1].message == (
            "attempt 3/3 failed; budget spent: exit 0 but required artifacts are missing: "
            f"`notes` ({folder.resolve() / 'notes.md'})")
        assert [r.path for r in store.read("d1").risks] == ["phases/d1/write/risk.md"]
        reopen(store, "d1", "write", "once more")
        assert store.read("d1").get_step("write").revisions[-1].files == (
            "phases/d1/.revisions/write/2/")
        done = run_step(store, "d1", "write", settings=settings)
    assert done.status == "completed", done.message
    state = store.read("d1")
    assert [r.path for r in state.risks] == ["phases/d1/write/risk.md"]  # not raised again
    assert not (folder / "risk.md").exists()
    tree = git.Repo(root).commit("feat-d1").tree
    committed = {b.path for b in tree.traverse() if b.type == "blob"}
    assert "phases/d1/.revisions/write/1/risk.md" in committed
    assert "phases/d1/write/risk.md" not in committed
    assert "phases/d1/write/notes.md" in committed
    # the re-run's evidence names its own files only, with their new hashes
    record = json.loads((root / state.get_step("write").evidence.path).read_text())
    assert {k: v["path"] for k, v in record["handoffs"].items()} == {
        "notes": "phases/d1/write/notes.md"}
    assert record["handoffs"]["notes"]["sha256"] == sha256_file(folder / "notes.md")
    assert ".revisions" not in json.dumps(record) and "risk.md" not in json.dumps(record)
    assert record["attempts"] == 1


FIRST_RECORD = "# write: the first run's step record\n"


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
def test_a_reopen_moves_the_nodes_step_record_aside_so_a_rerun_that_writes_none_leaves_none(
        tmp_path: Path, mode: str) -> None:
    root, target = world(tmp_path, mode)
    store = create(root, target)
    record = "docs/phase/d1/write.md"
    aside = root / "phases/d1/.revisions/write/1"
    with replay(tmp_path, {"write": [{"literal": {"files": {"write.md": FIRST_RECORD}}},
                                     {"literal": {"skip": ["write.md"]}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert run_step(store, "d1", "write", settings=settings).status == "completed"
        tree = workdir(store, store.read("d1"))  # the feat-d1 worktree, or the plain folder
        assert (tree / record).read_text() == FIRST_RECORD
        assert reopen(store, "d1", "write", "redo it") == ["write", "review"]
        assert store.read("d1").get_step("write").revisions[-1].files == (
            "phases/d1/.revisions/write/1/")
        assert not (tree / record).exists()
        assert (aside / record).read_text() == FIRST_RECORD
        assert (aside / "notes.md").is_file()
        rerun = run_step(store, "d1", "write", settings=settings)  # it writes no step record
    assert rerun.status == "completed", rerun.message
    assert not (tree / record).exists()  # the old one does not stand in for it
    assert (aside / record).read_text() == FIRST_RECORD
    if mode != MODES[2]:  # on feat-d1: the old record is committed aside, none in its place
        tree_files = {b.path for b in git.Repo(target or root).commit("feat-d1").tree.traverse()
                      if b.type == "blob"}
        assert f"phases/d1/.revisions/write/1/{record}" in tree_files
        assert record not in tree_files


@pytest.mark.e2e
def test_a_gate_rejection_moves_the_reopened_nodes_files_and_step_record_aside_and_names_them(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = agentic_git_harness(tmp_path)
    workflow = root / "workflow_defs/workflows/agentic.yaml"
    workflow.write_text(workflow.read_text().replace(
        "{id: write, phase: c-write,", "{id: write, phase: c-write, gates: {after: requirements},"))
    store = create(root, None)
    folder = root / "phases/d1/write"
    aside = root / "phases/d1/.revisions/write/1"
    with replay(tmp_path, {"write": [{"literal": {"files": {"write.md": FIRST_RECORD}}}]}) \
            as server:
        assert run_step(store, "d1", "write",
                        settings=settings_for(server, tmp_path)).status == "completed"
    notes = (folder / "notes.md").read_text()
    prompt = (folder / "prompt.md").read_text()
    tree = workdir(store, store.read("d1"))
    result = specops(clean_env, root, "approve", "d1", "requirements", "--reject", "--note",
                     "AC 3 is ambiguous")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[1:] == [
        "reopened: write (their earlier files are kept under phases/d1/.revisions/); "
        "`specops run d1` runs them again"]
    step = store.read("d1").get_step("write")
    assert step.status == "pending"
    assert [(r.reason, r.files) for r in step.revisions] == [
        ("gate `requirements` rejected: AC 3 is ambiguous", "phases/d1/.revisions/write/1/")]
    assert list(folder.iterdir()) == []
    assert (aside / "notes.md").read_text() == notes
    assert (aside / "prompt.md").read_text() == prompt
    assert (aside / "docs/phase/d1/write.md").read_text() == FIRST_RECORD
    assert not (tree / "docs/phase/d1/write.md").exists()

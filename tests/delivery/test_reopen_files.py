"""Reopen and rejection move the node's previous files aside (issue 43, item 11): a re-run starts
from nothing of its own, so an artifact, a report or a risk file of the earlier run never counts
as the new run's; the earlier files are kept under `phases/<d>/.revisions/<node>/<n>/` and named
in the step's `revisions[]`, in the harness root and on feat-<d>."""

from __future__ import annotations

import json
from pathlib import Path

import git

from specops_dag.delivery import gates
from specops_dag.delivery.lifecycle import reopen
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file

from ..support.agents import agentic_git_harness, create, replay, settings_for

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

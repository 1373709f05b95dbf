"""How the pre-tool-use hook reads an apply_patch text (`hooks/patch.py`)."""

from __future__ import annotations

from specops_dag.hooks import patch as patches


def patch(*lines: str) -> str:
    return "*** Begin Patch\n" + "\n".join(lines) + "\n*** End Patch\n"


def test_patch_changes_reads_adds_updates_moves_and_deletes() -> None:
    text = patch("*** Add File: a.cs", "+one", "+two", "*** Update File: b.cs",
                 "*** Move to: c.cs", "@@", " ctx", "-old", "+new", "*** Delete File: d.cs")
    assert patches.patch_changes(text) == [("add", "a.cs", "one\ntwo"), ("delete", "b.cs", ""),
                                           ("update", "c.cs", "new"), ("delete", "d.cs", "")]

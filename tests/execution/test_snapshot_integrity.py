"""The snapshot is frozen (issue 43, item 16): a file `specops new` copied into
`phases/<d>/snapshot/` and recorded with its sha256 that was edited since is refused before
anything runs, naming the file, and the state does not change."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from specops_dag.errors import UsageError
from specops_dag.execution.step import run_step

from ..support.harness import make_delivery


def test_an_edited_snapshot_file_is_refused_before_the_step_runs(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    phase = diamond_root / "phases/d1/snapshot/phases/p-a.yaml"
    frozen = hashlib.sha256(phase.read_bytes()).hexdigest()
    phase.write_text(phase.read_text() + "# edited after specops new\n")
    now = hashlib.sha256(phase.read_bytes()).hexdigest()
    before = store.index_path("d1").read_bytes()
    with pytest.raises(UsageError) as err:
        run_step(store, "d1", "a")
    assert err.value.message == (
        f"phases/d1/snapshot/phases/p-a.yaml changed since `specops new` froze it (sha256 "
        f"{now[:12]}, frozen {frozen[:12]}): a delivery runs only the definitions it was created "
        "with; put it back as it was, or create a new delivery for the new definitions")
    assert store.index_path("d1").read_bytes() == before
    assert not (diamond_root / "phases/d1/a/out.txt").exists()

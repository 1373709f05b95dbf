from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ..support.cli import job_execute, specops
from ..support.harness import VENV_BIN, command_phase

# Writes the command line of its step process's parent to out.txt.
STEP_PARENT = ("[python3, -c, \"import os,pathlib; stat=open('/proc/%d/stat' % os.getppid()).read(); "
               "parent=stat.rsplit(')', 1)[1].split()[1]; "
               "cmd=' '.join(open('/proc/%s/cmdline' % parent).read().split(chr(0))); "
               "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text(cmd)\"]")


@pytest.mark.e2e
def test_multiprocess_steps_fork_from_a_warm_forkserver_unless_spawn_is_configured(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    (diamond_root / "workflow_defs/phases/p-a.yaml").write_text(
        command_phase("p-a", STEP_PARENT, {"request": "req"}, {"out": "a-out"}))
    for delivery in ("d1", "d2"):
        assert specops(clean_env, diamond_root, "new", "diamond", delivery, "--request", "Go."
                       ).returncode == 0
    assert job_execute(clean_env, diamond_root, "diamond_job", "d1", executor="multiprocess"
                       ).returncode == 0
    forked_from = (diamond_root / "phases/d1/a/out.txt").read_text()
    assert "from multiprocessing.forkserver import main" in forked_from
    assert "'specops_dag.definitions', 'specops_dag.dagster_adapter.forkserver']" in forked_from  # preloaded
    spawn = diamond_root / "spawn.yaml"
    spawn.write_text("execution:\n  config:\n    multiprocess: {start_method: {spawn: {}}}\n")
    run = subprocess.run(
        [str(VENV_BIN / "dagster"), "job", "execute", "-m", "specops_dag.definitions", "-j",
         "diamond_job", "-c", str(spawn), "--tags", json.dumps({"dagster/partition": "d2"})],
        env={**clean_env, "SPECOPS_ROOT": str(diamond_root)}, cwd=diamond_root,
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "dagster job execute" in (diamond_root / "phases/d2/a/out.txt").read_text()

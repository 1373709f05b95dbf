"""Harness roots written into tmp_path: file trees, command phases, the diamond workflow and
deliveries on it, and digests that show a tree unchanged."""

from __future__ import annotations

import hashlib
import os
import sys
import textwrap
from pathlib import Path

import pytest

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.model import FileRef
from specops_dag.delivery.store import Store
from specops_dag.errors import DefinitionError
from specops_dag.files import now_iso
from specops_dag.workflow.catalog import definition_roots, load_catalog

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def command_phase(pid: str, argv: str, inputs: dict[str, str] | None = None,
                  outputs: dict[str, str] | None = None, artifact: str = "out.txt",
                  extra: str = "") -> str:
    """A `kind: command` phase YAML with the given ports (name -> contract)."""
    ins = ", ".join(f"{k}: {{contract: {v}}}" for k, v in (inputs or {}).items())
    outs = ", ".join(f"{k}: {{contract: {v}}}" for k, v in (outputs or {"out": pid}).items())
    return (f"kind: phase\nid: {pid}\ninput: {{ports: {{{ins}}}}}\nexecution:\n"
            f"  goal: Run {pid}.\n  executor: {{kind: command, argv: {argv}, timeout_s: 30}}\n"
            f"{extra}"
            f"output:\n  ports: {{{outs}}}\n  artifacts:\n"
            f"    - {{id: result, path: {artifact}, required: true}}\nvalidation: none\n")


# A diamond: a -> (b, c) -> d, every phase a deterministic command writing out.txt.
WRITE_OUT = "[python3, -c, \"import os,pathlib; p=pathlib.Path(os.environ['SPECOPS_NODE_DIR'],'out.txt'); p.write_text(os.environ['SPECOPS_NODE'])\"]"
FAIL = "[python3, -c, \"import sys; print('boom on stdout'); sys.exit(7)\"]"


DIAMOND = {
    "workflow_defs/workflows/diamond.yaml": """
        kind: workflow
        id: diamond
        inputs: {request: {contract: req}}
        nodes:
          - {id: a, phase: p-a, inputs: {request: {input: request}}}
          - {id: b, phase: p-b, needs: [a], inputs: {up: {node: a, output: out}}}
          - {id: c, phase: p-c, needs: [a], inputs: {up: {node: a, output: out}}}
          - {id: d, phase: p-d, needs: [b, c], inputs: {left: {node: b, output: out}, right: {node: c, output: out}}}
        outputs: {result: {node: d, output: out}}
    """,
    "workflow_defs/phases/p-a.yaml": command_phase("p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"}),
    "workflow_defs/phases/p-b.yaml": command_phase("p-b", WRITE_OUT, {"up": "a-out"}, {"out": "b-out"}),
    "workflow_defs/phases/p-c.yaml": command_phase("p-c", WRITE_OUT, {"up": "a-out"}, {"out": "c-out"}),
    "workflow_defs/phases/p-d.yaml": command_phase("p-d", WRITE_OUT, {"left": "b-out", "right": "c-out"}, {"out": "d-out"}),
}


def tree_digest(folder: Path) -> str:
    """Every path under `folder` (itself included): mode, mtime, size, file bytes and symlink
    targets. A rejected input must change none of it, not even a lock file's mtime."""
    digest = hashlib.sha256()
    for path in [folder, *sorted(folder.rglob("*"))]:
        st = path.lstat()
        digest.update(f"{path.relative_to(folder)}\0{st.st_mode:o}\0{st.st_mtime_ns}\0"
                      f"{st.st_size}\0".encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body, encoding="utf-8")


def tree_state(folder: Path) -> str:
    """Content, mode and mtime of every file and folder: a dry run must change none of it."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        digest.update(f"{path.relative_to(folder)}:{st.st_mode}:{st.st_mtime_ns}".encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


# Sleeps NAP seconds and records when it ran, so tests can see overlap without timing anything.
SLEEP = ("[python3, -c, \"import os,pathlib,time,json; t=time.time(); "
         "time.sleep(float(os.environ.get('NAP', '0'))); d=os.environ['SPECOPS_NODE_DIR']; "
         "pathlib.Path(d,'ran.json').write_text(json.dumps([t, time.time()])); "
         "pathlib.Path(d,'out.txt').write_text('x')\"]")


WF = "workflow_defs/workflows/diamond.yaml"


def diamond_with(nodes: str, inputs: str = "{request: {contract: req}}") -> str:
    """The diamond workflow's file with other `nodes` (and `inputs`)."""
    return f"kind: workflow\nid: diamond\ninputs: {inputs}\nnodes:\n{nodes}"


def load_problems(root: Path) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        load_catalog([root / "workflow_defs"], display_base=root)
    return info.value.problems


def make_delivery(root: Path, delivery: str = "d1", lock_timeout_s: float = 10.0) -> Store:
    store = Store(root, lock_timeout_s=lock_timeout_s)
    catalog = load_catalog(definition_roots(root), display_base=root)
    ops.new_delivery(store, catalog, "diamond", delivery, "Add an RSS cache.")
    return store


def complete(store: Store, delivery: str, node: str) -> None:
    """Mark a step completed with one handoff file, as a successful run would."""
    out = store.delivery_dir(delivery) / node / "out.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(node)
    with store.transaction(delivery) as state:
        step = state.get_step(node)
        state.move(step, "running", "run")
        state.move(step, "completed", "run")
        step.handoff = {"result": FileRef(path=f"phases/{delivery}/{node}/out.txt",
                                          sha256="0" * 64)}
        step.completed_at = now_iso()

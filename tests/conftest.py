"""Shared builders for tests: small harness roots written into tmp_path."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
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


@pytest.fixture
def diamond_root(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "harness", DIAMOND)


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An environment for child processes with a private DAGSTER_HOME."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    env = {**os.environ, "DAGSTER_HOME": str(home), "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    env.pop("SPECOPS_ROOT", None)
    return env

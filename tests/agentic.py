"""A small harness root whose phases run the real codex CLI against the replay agent."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from specops_dag.codex import AgentSettings
from specops_dag.replay import ReplayServer, Scenario

from .conftest import write_tree


def codex_phase(pid: str, inputs: dict[str, str], output: tuple[str, str], artifact: str,
                timeout_s: int = 90, idle_timeout_s: int = 30) -> str:
    ins = ", ".join(f"{k}: {{contract: {v}}}" for k, v in inputs.items())
    return f"""kind: phase
id: {pid}
input: {{ports: {{{ins}}}}}
execution:
  goal: Produce {artifact} for the next step.
  executor: {{kind: codex}}
  timeout_s: {timeout_s}
  idle_timeout_s: {idle_timeout_s}
  skills:
    - {{id: {pid}-skill, path: skills/{pid}-skill/SKILL.md, load: entry, required: true}}
output:
  ports: {{{output[0]}: {{contract: {output[1]}}}}}
  artifacts:
    - {{id: {Path(artifact).stem}, path: {artifact}, required: true}}
validation: none
"""


AGENTIC = {
    "workflow_defs/workflows/agentic.yaml": """
        kind: workflow
        id: agentic
        inputs: {request: {contract: req}}
        nodes:
          - {id: write, phase: c-write, inputs: {request: {input: request}}}
          - {id: review, phase: c-review, needs: [write], inputs: {notes: {node: write, output: notes}}}
    """,
    "workflow_defs/phases/c-write.yaml": codex_phase("c-write", {"request": "req"},
                                                     ("notes", "notes"), "notes.md"),
    "workflow_defs/phases/c-review.yaml": codex_phase("c-review", {"notes": "notes"},
                                                      ("review", "review"), "review.md"),
    "workflow_defs/skills/c-write-skill/SKILL.md": "---\nname: c-write-skill\n---\nWrite notes.\n",
    "workflow_defs/skills/c-review-skill/SKILL.md": "---\nname: c-review-skill\n---\nReview.\n",
    "AGENTS.md": "# Agents\nBe precise.\n",
}

WRITE_NOTES = {"shell": 'printf "notes for $SPECOPS_DELIVERY\\n" > "$SPECOPS_NODE_DIR/notes.md"'}
WRITE_REVIEW = {"shell": 'printf "looks fine\\n" > "$SPECOPS_NODE_DIR/review.md"'}


def agentic_root(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "harness", AGENTIC)


@contextmanager
def replay(tmp_path: Path, nodes: dict) -> Iterator[ReplayServer]:
    scenario = Scenario.model_validate({"nodes": nodes})
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump({"nodes": nodes}))
    server = ReplayServer(scenario, log_path=tmp_path / "requests.jsonl").start()
    try:
        yield server
    finally:
        server.stop()


def settings_for(server: ReplayServer, tmp_path: Path) -> AgentSettings:
    return AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))

"""A small harness root whose phases run the real codex CLI against the replay agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from specops_dag.agent.codex import AgentSettings
from specops_dag.agent.replay import ReplayServer, Scenario

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


def wrote(node: str, artifact: str, phases: str = "phases", delivery: str = "d1") -> str:
    """The final message of a literal attempt (`{"literal": {}}`) of a node of AGENTIC: its
    artifact as WRITE names it (`phases`: the harness root's `phases/` as the agent's working
    directory sees it: relative when that directory is the harness root, else absolute), then
    the step record and the delivery handoff."""
    return (f"Wrote: {phases}/{delivery}/{node}/{artifact}, docs/phase/{delivery}/{node}.md, "
            f"docs/phase/{delivery}/handoff.md")


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


def requests(tmp_path: Path) -> list[dict]:
    """Every request the replay agent answered, in order (its log)."""
    return [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]


def attempts(tmp_path: Path, node: str) -> list[list[dict]]:
    """The requests of `node`, one list per codex thread (one attempt), in order."""
    threads: dict[str, list[dict]] = {}
    for request in requests(tmp_path):
        if request["node"] == node:
            threads.setdefault(request["thread"], []).append(request)
    return list(threads.values())


def settings_for(server: ReplayServer, tmp_path: Path) -> AgentSettings:
    return AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))

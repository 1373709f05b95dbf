"""Harness roots whose phases run the real codex CLI against the replay agent: the agentic
workflow (write -> review), its deliveries and target modes, an evaluator review of it, and the
replay agent's scenarios and request log."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
import yaml

from specops_dag.agent.codex import AgentSettings
from specops_dag.agent.replay import ReplayServer, Scenario
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.model import FileRef
from specops_dag.delivery.store import Store
from specops_dag.files import now_iso, sha256_file
from specops_dag.workflow.catalog import definition_roots, load_catalog

from .dotnet import FIXTURES
from .git import WHO, commit_all
from .harness import write_tree


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
  infra_backoff_s: 0.2
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


def outputs_seen(tmp_path: Path, node: str) -> dict[str, str]:
    """Each shell command of `node`'s first attempt and the output codex gave the model."""
    calls: dict[str, str] = {}
    seen: dict[str, str] = {}
    for request in attempts(tmp_path, node)[0]:
        for item in request["input"]:
            if item.get("type") == "function_call" and item.get("name") == "exec_command":
                calls[item["call_id"]] = json.loads(item["arguments"])["cmd"]
            elif item.get("type") == "function_call_output" and item.get("call_id") in calls:
                out = item.get("output")
                seen[calls[item["call_id"]]] = out if isinstance(out, str) else str(out)
    return seen


def settings_for(server: ReplayServer, tmp_path: Path) -> AgentSettings:
    return AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))


def new(root: Path, delivery: str = "d1") -> Store:
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                 delivery, "Write release notes.")
    return store


def set_context(root: Path, delivery: str, node: str, files: list) -> None:
    path = root / "phases" / delivery / "index.json"
    data = json.loads(path.read_text())
    for step in data["steps"]:
        if step["name"] == node:
            step["context_files"] = files
    path.write_text(json.dumps(data, indent=2))


def completed_write(root: Path, summary: str = "Wrote the notes.") -> None:
    store = Store(root)
    notes = root / "phases/d1/write/notes.md"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("the notes\n")
    with store.transaction("d1") as state:
        step = state.get_step("write")
        state.move(step, "running", "run")
        state.move(step, "completed", "run")
        step.handoff = {"notes": FileRef(path="phases/d1/write/notes.md",
                                         sha256=sha256_file(notes))}
        step.summary, step.completed_at = summary, now_iso()
        handoff = root / "docs/phase/d1/handoff.md"
        step.delivery_handoff = sha256_file(handoff) if handoff.is_file() else None


EVALUATOR = """kind: phase
id: c-eval
input: {ports: {notes: {contract: notes}}}
execution:
  goal: Judge the notes.
  executor: {kind: evaluator}
  sandbox: read-only
  timeout_s: 90
  idle_timeout_s: 30
  criteria:
    - {id: complete, description: Every request item is covered, threshold: 8}
    - {id: clear, description: A newcomer understands it, threshold: 6}
  skills:
    - {id: c-eval-skill, path: skills/c-eval-skill/SKILL.md, load: entry, required: true}
validation: none
"""


def review_root(tmp_path: Path, max_rounds: int = 2) -> Store:
    root = agentic_root(tmp_path)
    add_review(root, max_rounds)
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic", "d1",
                 "Write notes.")
    return store


def verdict(v: str, complete: int, clear: int) -> dict:
    """An evaluator attempt of the literal agent: it reads what READ names, then answers this."""
    return {"literal": {"review": f"Done.\n<<<REVIEW\nVERDICT: {v}\nSCORE complete: {complete} "
                                  f"— checked\nSCORE clear: {clear} — read it\n>>>"}}


TARGET_AGENTS = "# Agents of the target\nWork in the target.\n"
MODES = ["harness root is the git target", "a separate git target", "a plain-folder target"]


def world(tmp_path: Path, mode: str) -> tuple[Path, Path | None]:
    """(harness root with the agentic workflow, --target or None) for one target mode."""
    root = write_tree(tmp_path / "harness", AGENTIC)
    if mode == MODES[0]:
        commit_all(root)
        return root, None
    target = write_tree(tmp_path / "target", {"AGENTS.md": TARGET_AGENTS, "README.md": "# t\n"})
    if mode == MODES[1]:
        commit_all(target)
    return root, target


def create(root: Path, target: Path | None) -> Store:
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                     "d1", "Write the notes.", target=target)
    return store


def agentic_git_harness(tmp_path: Path, fixture: str | None = None) -> Path:
    root = tmp_path / "harness"
    if fixture:
        shutil.copytree(FIXTURES / fixture, root)
    write_tree(root, {**AGENTIC, ".gitignore": ".dagster_home/\n"})
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)
    return root


def guarded_harness(tmp_path: Path) -> Store:
    """The `all-pass` fixture as an agentic git harness whose `write` node validates `full`."""
    root = agentic_git_harness(tmp_path, "all-pass")
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("validation: none", "validation: full"))
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.git.commit("-q", "-m", "a full phase")
    return new(root)


def add_review(root: Path, max_rounds: int = 2) -> None:
    """The agentic workflow's `write` node reviewed by the `c-eval` evaluator phase."""
    write_tree(root, {"workflow_defs/phases/c-eval.yaml": EVALUATOR,
                      "workflow_defs/skills/c-eval-skill/SKILL.md": "---\nname: c-eval-skill\n"
                                                                   "---\nBe skeptical.\n"})
    wf = root / "workflow_defs/workflows/agentic.yaml"
    wf.write_text(wf.read_text().replace(
        "{id: write, phase: c-write,",
        f"{{id: write, phase: c-write, review: {{phase: c-eval, max_rounds: {max_rounds}}},"))

"""Prompt hygiene on the golden prompts of every built-in node (issue 43): the prompt a capable
model gets, its entry skill and the context the state hook adds, as `specops new` creates them on
the all-pass fixture, as a git repository and as a plain folder. One instruction order; each
constraint stated once; the branch and the base commit named (a plain folder's CHANGES line,
there when the node's goal or skills point at it, says it has none and names what lists the
change); every delivery file the texts mention is one the
prompt defines; every WRITE target is one the session can write."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import git
import pytest

from specops_dag.agent.prompt import preview
from specops_dag.delivery.lifecycle import snapshot_catalog
from specops_dag.delivery.model import Delivery, Step
from specops_dag.delivery.store import Store
from specops_dag.execution.attempt import step_env
from specops_dag.hooks.context import state_context
from specops_dag.workflow.catalog import Catalog

from ..support.cli import specops_at
from ..support.dotnet import copy_fixture
from ..support.git import commit_all
from ..support.prompts import repeated_constraints, undefined_files

WORKFLOWS = ("full-delivery", "quick-delivery", "plan-build-review")


class Golden(NamedTuple):
    workflow: str
    state: Delivery
    step: Step
    catalog: Catalog
    prompt: str  # what codex receives
    current: str  # its last part, the current step
    skill: str  # the entry skill's text
    hook: str  # what the state hook adds on the session's first prompt
    state_root: Path

    @property
    def text(self) -> str:
        """Everything the session is told for this node."""
        return "\n".join((self.prompt, self.skill, self.hook))


def golden_prompts(root: Path) -> list[Golden]:
    """Every built-in node's golden prompt, skill and hook text on the fixture at `root`."""
    store = Store(root)
    out = []
    for i, workflow in enumerate(WORKFLOWS):
        result = specops_at(root, "new", workflow, f"d{i}", "--request", "Document Add.")
        assert result.returncode == 0, result.stderr
        state = store.read(f"d{i}")
        catalog = snapshot_catalog(store, state)
        for step in state.steps:
            prompt = preview(root, state, step, catalog)
            assert prompt is not None
            entry = [s for s in state.snapshot.skills.get(step.phase, []) if s.load == "entry"]
            skill = "".join((store.delivery_dir(state.phase) / s.path).read_text()
                            for s in entry)
            hook = state_context("user-prompt-submit", step_env(store, state, step)) or ""
            out.append(Golden(workflow, state, step, catalog, prompt.text,
                              prompt.parts[-1].text, skill, hook, root))
    return out


@pytest.fixture(scope="module")
def goldens(tmp_path_factory: pytest.TempPathFactory) -> list[Golden]:
    root = copy_fixture(tmp_path_factory.mktemp("golden"), "all-pass-net10")
    commit_all(root)
    return golden_prompts(root)


@pytest.fixture(scope="module")
def plain_goldens(tmp_path_factory: pytest.TempPathFactory) -> list[Golden]:
    """The same nodes on a plain-folder target: the fixture's files, not a git repository."""
    root = copy_fixture(tmp_path_factory.mktemp("plain-golden"), "all-pass-net10")
    assert not (root / ".git").exists()
    return golden_prompts(root)


@pytest.fixture(params=["git", "plain"], scope="module")
def every_golden(request: pytest.FixtureRequest) -> list[Golden]:
    """The golden prompts of both kinds of target, each checked the same way."""
    return request.getfixturevalue("goldens" if request.param == "git" else "plain_goldens")


def node_ids(goldens: list[Golden]) -> list[str]:
    return [f"{g.workflow}/{g.step.name}" for g in goldens]


ORDER = ("READ (in order):", "SKILLS (from the delivery snapshot):", "TASK:", "TARGET:",
         "CHANGES:", "WRITE:", "Node folder:", "RISK:", "REPORT:")


def test_every_built_in_node_prompt_gives_its_sections_in_one_order(
        every_golden: list[Golden]) -> None:
    for g in every_golden:
        heads = [line.split(" ")[0] for line in g.current.splitlines()
                 if line.startswith(tuple(h.split(" ")[0] for h in ORDER))]
        order = [h.split(" ")[0] for h in ORDER
                 if h != "CHANGES:" or has_changes_line(g) or not is_plain(g)]
        assert heads == order, (g.workflow, g.step.name)


def is_plain(g: Golden) -> bool:
    return not (g.state_root / ".git").exists()


def has_changes_line(g: Golden) -> bool:
    return any(line.startswith("CHANGES:") for line in g.current.splitlines())


def points_at_changes(g: Golden) -> bool:
    """Does the node's goal, or a skill bound to its phase (on-demand ones too), point at the
    CHANGES line?"""
    folder = g.state_root / "phases" / g.state.phase
    texts = [g.catalog.phases[g.step.phase].execution.goal] + [
        (folder / s.path).read_text() for s in g.state.snapshot.skills.get(g.step.phase, [])]
    return any("CHANGES" in text for text in texts)


def test_every_constraint_is_stated_at_most_once_per_built_in_node(
        every_golden: list[Golden]) -> None:
    repeated = {f"{g.workflow}/{g.step.name}": repeated_constraints(g.text) for g in every_golden}
    assert {k: v for k, v in repeated.items() if v} == {}


def test_every_git_delivery_prompt_names_its_branch_and_base_commit(
        goldens: list[Golden]) -> None:
    base = git.Repo(goldens[0].state_root).head.commit.hexsha  # what main was at `specops new`
    for g in goldens:
        line = next(x for x in g.current.splitlines() if x.startswith("CHANGES:"))
        assert line.startswith(f"CHANGES: feat-{g.state.phase}, this delivery's branch, began at "
                               f"{base};"), (g.workflow, g.step.name)


def test_a_plain_folder_prompt_has_a_changes_line_exactly_when_its_texts_point_at_one(
        plain_goldens: list[Golden]) -> None:
    for g in plain_goldens:
        assert has_changes_line(g) == points_at_changes(g), (g.workflow, g.step.name)
        if not has_changes_line(g):  # nothing it is told about names a line it does not have
            assert "CHANGES" not in g.text, (g.workflow, g.step.name)
    assert {f"{g.workflow}/{g.step.name}" for g in plain_goldens if has_changes_line(g)} == {
        "full-delivery/verify", "full-delivery/delivery", "quick-delivery/verify",
        "quick-delivery/delivery"}


def test_every_plain_folder_prompt_says_it_has_no_git_history_and_names_what_lists_the_change(
        plain_goldens: list[Golden]) -> None:
    for g in plain_goldens:
        assert "feat-" not in g.text and ".specops/worktrees" not in g.text, (g.workflow,
                                                                              g.step.name)
        if not has_changes_line(g):
            continue
        request = f"phases/{g.state.phase}/request.md"  # the harness root is the target here
        line = next(x for x in g.current.splitlines() if x.startswith("CHANGES:"))
        assert line.startswith(
            "CHANGES: this working directory is a plain folder, not a git repository: there is "
            "no branch, base commit or diff, and nothing is committed. `find . -type f -newer "
            f"{request} -not -path './phases/*' "), (g.workflow, g.step.name)
        assert f"({request} was written at `specops new`)" in line
        assert (g.state_root / request).is_file()


def artifacts(g: Golden, workflows: dict[str, dict[str, list[str]]]) -> dict[str, list[str]]:
    """node -> its artifact paths, over every built-in workflow (skills serve several)."""
    merged: dict[str, list[str]] = {}
    for nodes in workflows.values():
        for node, paths in nodes.items():
            merged.setdefault(node, []).extend(paths)
    return merged


def test_every_delivery_file_a_built_in_node_is_told_about_is_one_its_prompt_defines(
        every_golden: list[Golden]) -> None:
    workflows: dict[str, dict[str, list[str]]] = {}
    for g in every_golden:
        nodes = workflows.setdefault(g.workflow, {})
        nodes[g.step.name] = [a.path for a in g.catalog.phases[g.step.phase].output.artifacts]
    undefined = []
    for g in every_golden:
        own = workflows[g.workflow]
        every = artifacts(g, workflows)
        for where, text, nodes in (("prompt", g.prompt, own), ("skill", g.skill, every),
                                   ("hook", g.hook, own)):
            undefined += [f"{g.workflow}/{g.step.name} {where}: {name}"
                          for name in undefined_files(text, g.current, nodes)]
    assert sorted(set(undefined)) == []


def test_every_write_target_of_a_built_in_node_is_in_its_node_folder_or_its_worktree(
        every_golden: list[Golden]) -> None:
    for g in every_golden:
        lines = g.current.splitlines()
        writes = lines[lines.index("WRITE:") + 1:lines.index("", lines.index("WRITE:"))]
        tree = Path(next(x for x in lines if x.startswith("Working directory: "))
                    .removeprefix("Working directory: ").split(". Every path")[0])
        node = Path(next(x for x in lines if x.startswith("Node folder: "))
                    .removeprefix("Node folder: ").split("/ — ")[0])
        node = node if node.is_absolute() else tree / node  # relative in a plain harness root
        for line in writes:
            path = Path(line.removeprefix("- ").split(" (")[0])
            path = path if path.is_absolute() else tree / path
            assert path.is_relative_to(node) or (
                path.is_relative_to(tree) and not path.is_relative_to(tree / ".git")
                and not path.is_relative_to(tree / "phases")), (g.workflow, g.step.name, line)


"""One world for the agent (issue #15, items 1-3): every path the prompt names resolves from the
agent's working directory inside the codex sandbox, in all three target modes, with an agent that
knows only its prompt (the replay agent's literal mode) on the real codex CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specops_dag.agent.codex import codex_argv
from specops_dag.agent.prompt import preview
from specops_dag.delivery import gates
from specops_dag.delivery.lifecycle import resume, snapshot_catalog
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.execution.step import run_step

from ..support.agents import (
    AGENTIC,
    MODES,
    TARGET_AGENTS,
    agentic_git_harness,
    create,
    replay,
    requests,
    set_context,
    settings_for,
    world,
)
from ..support.cli import specops_at
from ..support.git import commit_all
from ..support.harness import write_tree

LITERAL = {"*": [{"literal": {}}, {"literal": {}}, {"literal": {}}]}  # every node, 3 attempts


def texts(request: dict) -> list[str]:
    return [c.get("text", "") for item in request["input"] if item.get("role") == "user"
            for c in item.get("content", []) if isinstance(c, dict)]


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
def test_a_literal_agent_completes_the_chain_in_every_target_mode(tmp_path: Path,
                                                                   mode: str) -> None:
    root, target = world(tmp_path, mode)
    store = create(root, target)
    with replay(tmp_path, LITERAL) as server:
        settings = settings_for(server, tmp_path)
        outcomes = [run_step(store, "d1", n, settings=settings) for n in ("write", "review")]
    assert [o.status for o in outcomes] == ["completed"] * 2, [o.message for o in outcomes]
    assert outcomes[0].message == (f"Wrote: {root / 'phases/d1/write/notes.md'}, "
                                   "docs/phase/d1/write.md, docs/phase/d1/handoff.md")
    state = store.read("d1")
    cwd = (root / state.worktree).resolve() if state.worktree else (target or root).resolve()
    notes = root / "phases/d1/write/notes.md"
    assert state.get_step("write").handoff["notes"].path == "phases/d1/write/notes.md"
    assert notes.read_text().startswith(f"# {notes}\n")
    assert (cwd / "docs/phase/d1/write.md").is_file()
    prompt = (root / "phases/d1/review/prompt.md").read_text()
    assert f"Working directory: {cwd}. Every path below is absolute or relative to it." in prompt
    assert f"1. {notes} (sha256 " in prompt
    assert f"- {root / 'phases/d1/review/review.md'} (required)" in prompt
    first = requests(tmp_path)[0]
    agents = TARGET_AGENTS if target else "# Agents\nBe precise.\n"
    assert sum(t.count(agents) for t in texts(first)) == 1  # sent once, from the agent's tree
    assert not any("BLOCKED" in json.dumps(r) for r in requests(tmp_path))
    if mode != MODES[2]:
        status = subprocess.run(["git", "status", "--porcelain"], cwd=target or root,
                                capture_output=True, text=True, timeout=30, check=True)
        assert status.stdout == ""


@pytest.mark.e2e
@pytest.mark.parametrize("mode", MODES)
def test_an_agent_that_knows_only_its_prompt_raises_a_risk_a_person_decides(
        tmp_path: Path, mode: str) -> None:
    root, target = world(tmp_path, mode)
    store = create(root, target)
    risk = root / "phases/d1/write/risk.md"
    with replay(tmp_path, {"write": [{"literal": {"risk": "# Risk: the notes are unchecked\n"}}],
                           "review": [{"literal": {}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert run_step(store, "d1", "write", settings=settings).status == "completed"
        assert f"RISK: {risk} — a risk or question a person must decide" in (
            root / "phases/d1/write/prompt.md").read_text()
        assert risk.read_text() == "# Risk: the notes are unchecked\n"
        state = store.read("d1")
        assert [(r.node, r.path) for r in state.risks] == [("write", "phases/d1/write/risk.md")]
        assert run_step(store, "d1", "review", settings=settings).message == (
            "awaiting approval: risk")
        gates.approve(store, "d1", "risk", note="checked by hand")
        assert run_step(store, "d1", "review", settings=settings).status == "completed"
    assert not any("BLOCKED" in json.dumps(r) for r in requests(tmp_path))


STOPPED = "# Risk: the request needs a schema change\n\nA person must decide on it.\n"


def parked(tmp_path: Path, root: Path, play: dict, why: str) -> Store:
    """The write node's first attempt plays `play`; it must park at the risk gate for `why`."""
    store = create(root, None)
    with replay(tmp_path, {"write": [{"literal": play}, {"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    state = store.read("d1")
    step = state.get_step("write")
    assert (outcome.status, step.status, step.attempts) == ("environment", "blocked", 1)
    assert step.blocked_reason.startswith(
        "the agent stopped and raised a risk (phases/d1/write/risk.md): " + why), step.blocked_reason
    assert step.blocked_reason.endswith(
        "; a person decides with `specops approve d1 risk` (or `--reject`), then `specops "
        "resume d1 write`")
    assert [(r.node, r.path) for r in state.risks] == [("write", "phases/d1/write/risk.md")]
    return store


@pytest.mark.e2e
def test_an_agent_that_writes_only_its_risk_file_parks_the_step_until_a_person_decides(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    why = ("exit 0 but required artifacts are missing: `notes` "
           f"({root.resolve() / 'phases/d1/write/notes.md'})")
    store = parked(tmp_path, root, {"risk": STOPPED, "skip": ["notes.md", "write.md",
                                                               "handoff.md"]}, why)
    gates.approve(store, "d1", "risk", note="go on without the schema change")
    resume(store, "d1", "write")
    with replay(tmp_path, {"write": [{"literal": {}}, {"literal": {}}]}) as server:
        again = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert again.status == "completed", again.message
    assert [(r.node, r.path) for r in store.read("d1").risks] == [
        ("write", "phases/d1/write/risk.md")]  # decided once, not raised again


@pytest.mark.e2e
def test_an_agent_that_changes_no_product_and_raises_a_risk_parks_the_step(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace(
        "  infra_backoff_s: 0.2\n", "  infra_backoff_s: 0.2\n  expects_product_change: true\n"))
    parked(tmp_path, root, {"risk": STOPPED},
           "exit 0 but the product did not change: the phase expects a product change and "
           "nothing outside phases/ and docs/phase/ changed since ")


@pytest.mark.e2e
def test_dry_run_before_the_first_run_shows_exactly_the_prompt_the_run_sends(
        tmp_path: Path) -> None:
    root, _ = world(tmp_path, MODES[0])
    store = create(root, None)
    state = store.read("d1")
    assert state.worktree is None
    expected = preview(root, state, state.get_step("write"), snapshot_catalog(store, state))
    assert not (root / ".specops/worktrees/d1").exists()  # the preview created nothing
    with replay(tmp_path, LITERAL) as server:
        assert run_step(store, "d1", "write", settings=settings_for(server, tmp_path)).status == (
            "completed")
    assert (root / "phases/d1/write/prompt.md").read_text() == expected.text


@pytest.mark.e2e
def test_a_context_file_only_in_the_users_checkout_fails_dry_run_and_run_alike(
        tmp_path: Path) -> None:
    root, _ = world(tmp_path, MODES[0])
    create(root, None)
    write_tree(root, {"docs/local.md": "only in the user's checkout\n"})
    set_context(root, "d1", "write", ["docs/local.md"])
    worktree = (root / ".specops/worktrees/d1").resolve()
    message = ("phases/d1/index.json: steps[0].context_files[0]: `docs/local.md` not found in "
               f"{worktree}; fix the path or remove it")
    result = specops_at(root, "dry-run", "d1")
    assert (result.returncode, result.stderr) == (2, f"error: {message}\n")
    with pytest.raises(UsageError) as err:
        run_step(Store(root), "d1", "write")
    assert err.value.message == message
    step = Store(root).read("d1").get_step("write")
    assert (step.status, step.attempts) == ("pending", 0)


def test_the_agents_caches_and_node_folder_are_writable_roots_and_network_is_opt_in(
        tmp_path: Path) -> None:
    argv = codex_argv("codex", sandbox="workspace-write", workdir=tmp_path, last_message=tmp_path
                      / "last.txt", settings=settings_for_none(), delivery="d1", node="n",
                      idle_timeout_s=60, add_dirs=(tmp_path / "node",), network=True)
    assert argv[argv.index("--add-dir") + 1] == str(tmp_path / "node")
    assert "sandbox_workspace_write.network_access=true" in argv
    assert "project_doc_max_bytes=0" in argv
    quiet = codex_argv("codex", sandbox="workspace-write", workdir=tmp_path,
                       last_message=tmp_path / "last.txt", settings=settings_for_none(),
                       delivery="d1", node="n", idle_timeout_s=60)
    assert "sandbox_workspace_write.network_access=true" not in quiet


def settings_for_none():
    from specops_dag.agent.codex import AgentSettings

    return AgentSettings()


def dotnet_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: Path | None) -> Store:
    """The all-pass .NET fixture as a git harness root running the agentic workflow; the
    stand-in `dotnet` on PATH with `answers` (None: no `dotnet` at all)."""
    import shutil

    from ..support.dotnet import FIXTURES, STANDIN, path_without_dotnet

    root = tmp_path / "harness"
    shutil.copytree(FIXTURES / "all-pass", root)
    write_tree(root, AGENTIC)
    commit_all(root)
    if answers is None:
        monkeypatch.setenv("PATH", path_without_dotnet(tmp_path))
    else:
        monkeypatch.setenv("PATH", f"{STANDIN}:{monkeypatch_path()}")
        monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(answers))
        monkeypatch.setenv("DOTNET_STANDIN_LOG", str(tmp_path / "dotnet.log"))
    return create(root, None)


def monkeypatch_path() -> str:
    import os

    return os.environ["PATH"]


PROBE = ('printf "%s\\n%s\\n" "$NUGET_PACKAGES" "$DOTNET_CLI_HOME" > caches.txt && '
         'touch "$NUGET_PACKAGES/probe" "$DOTNET_CLI_HOME/probe"')


@pytest.mark.e2e
def test_the_executor_restores_before_the_first_attempt_into_caches_the_agent_can_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ..support.dotnet import STANDIN

    store = dotnet_world(tmp_path, monkeypatch, STANDIN / "answers" / "all-pass.yaml")
    root = store.root
    with replay(tmp_path, {"write": [{"literal": {"before": [{"shell": PROBE}]}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    cache = root.resolve() / ".specops/cache"
    assert (tmp_path / "dotnet.log").read_text().splitlines() == [
        "restore '{root}/Calc.sln' -nologo -nodeReuse:false -tl:off -warnaserror "
        "-warnNotAsError:NU1901,NU1902,NU1903,NU1904"]
    step = store.read("d1").get_step("write")
    assert step.preparation == (
        f"restored by the executor before attempt 1 (NuGet packages in {cache}/nuget-packages, "
        f"dotnet home {cache}/dotnet-home); logs in {root.resolve()}/phases/d1/write/validation/"
        "restore")
    worktree = root / ".specops/worktrees/d1"
    assert (worktree / "caches.txt").read_text() == (
        f"{cache}/nuget-packages\n{cache}/dotnet-home\n")
    assert (cache / "nuget-packages/probe").is_file() and (cache / "dotnet-home/probe").is_file()


@pytest.mark.e2e
def test_without_dotnet_the_restore_is_skipped_and_the_step_record_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = dotnet_world(tmp_path, monkeypatch, None)
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        assert run_step(store, "d1", "write", settings=settings_for(server, tmp_path)).status == (
            "completed")
    assert store.read("d1").get_step("write").preparation == (
        "restore skipped: `dotnet` is not on PATH, so the worktree was not restored and the "
        "agent cannot build or test")


@pytest.mark.e2e
def test_a_failed_restore_blocks_the_step_before_any_agent_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = tmp_path / "offline.yaml"
    answers.write_text(
        "answers:\n"
        "  - argv: [restore, '{root}/Calc.sln', -nologo, '-nodeReuse:false', '-tl:off', "
        "-warnaserror, '-warnNotAsError:NU1901,NU1902,NU1903,NU1904']\n"
        "    stdout: |\n"
        "      {root}/src/Calc/Calc.csproj : error NU1301: Unable to load the service index "
        "for source https://api.nuget.org/v3/index.json.\n"
        "    exit: 1\n")
    store = dotnet_world(tmp_path, monkeypatch, answers)
    root = store.root.resolve()
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    reason = ("environment error: the executor's `dotnet restore` before the first attempt "
              "failed, no agent call was made: `dotnet restore` of Calc.sln failed (exit 1); first "
              f"error: {root}/.specops/worktrees/d1/src/Calc/Calc.csproj : error NU1301: Unable "
              "to load the service index for source https://api.nuget.org/v3/index.json.; "
              f"logs in {root}/phases/d1/write/validation/restore; fix the package sources or "
              "the network, then `specops resume d1 write`")
    assert (outcome.status, outcome.message) == ("environment", f"blocked: {reason}")
    step = store.read("d1").get_step("write")
    assert (step.status, step.blocked_reason, step.preparation) == ("blocked", reason, reason)
    assert not (tmp_path / "requests.jsonl").exists()

"""A new user's first hour (issue #44): what the demo prints works as printed, a demo root answers
every run, `new` and `status` name the gate in the way, a missing SDK names `--validation
docs-only`, one broken definition does not block the others, and `dry-run --prompt` shows the
prompt itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import dagster as dg
import git
import pytest

from specops_dag.agent.replay import ReplayState, Scenario, load_scenario
from specops_dag.builtin import DEMO_SCENARIO, WORKSPACE
from specops_dag.cli.ui import demo_replay_server, ui_argv
from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.store import Store
from specops_dag.errors import DefinitionError, ToolMissing
from specops_dag.execution.step import run_step
from specops_dag.validation import validate_attempt
from specops_dag.workflow.catalog import definition_roots, load_catalog, load_catalog_for

from ..support.agents import AGENTIC, agentic_root, new, replay, settings_for
from ..support.cli import specops
from ..support.dotnet import STANDIN, git_fixture, path_without_dotnet
from ..support.git import WHO
from ..support.harness import VENV_BIN, write_tree
from ..support.processes import free_port

INSTALL_HINT = (
    "the .NET SDK (`dotnet`) is not installed or not on PATH: install the .NET 10 SDK "
    "(https://dot.net/download; it also builds net8.0) so full validation can build and test; "
    "without an SDK, a delivery whose change is documentation only can run: create it with "
    "`specops new WORKFLOW DELIVERY --validation docs-only ...` (`specops validate --mode "
    "docs-only` for a folder)")


def demo_root(tmp_path: Path, clean_env: dict[str, str]) -> tuple[Path, dict[str, str],
                                                                   list[str]]:
    """`specops demo` without an SDK (docs-only) and without DAGSTER_HOME, as a new user runs
    it: its root, the environment it ran in, and what it printed."""
    env = {k: v for k, v in clean_env.items() if k != "DAGSTER_HOME"}
    env["PATH"] = path_without_dotnet(tmp_path, env["PATH"])
    result = specops(env, tmp_path, "demo", "--dir", str(tmp_path / "demo"),
                     "--executor", "in_process")
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path / "demo/demo-1", env, result.stdout.splitlines()


def printed(lines: list[str], prefix: str) -> str:
    [line] = [line for line in lines if line.startswith(prefix)]
    return line.removeprefix(prefix)


# -- 1. the demo's UI and schedule commands ----------------------------------------------------

@pytest.mark.e2e
def test_the_demo_prints_absolute_ui_and_schedule_commands_with_everything_they_need(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root, _, lines = demo_root(tmp_path, clean_env)
    home = root / ".dagster_home"
    assert lines[-3:] == [
        f"UI: DAGSTER_HOME={home} {VENV_BIN / 'specops'} --root {root} ui",
        "  dagster dev on http://127.0.0.1:3000 with this demo's replay agent: a run the UI, the "
        "gate_approvals sensor or the nightly schedule launches plays the demo's scenario, never "
        "a model provider; Ctrl-C stops both",
        f"nightly schedule: SPECOPS_ROOT={root} DAGSTER_HOME={home} {VENV_BIN / 'dagster'} "
        f"schedule start nightly -w {VENV_BIN.parent.parent / 'workspace.yaml'}"]


@pytest.mark.e2e
def test_the_printed_schedule_command_starts_the_nightly_schedule_from_the_harness_root(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root, env, lines = demo_root(tmp_path, clean_env)
    command = printed(lines, "nightly schedule: ")
    result = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert "Started schedule nightly" in result.stdout
    listed = subprocess.run(["bash", "-c", command.replace(" start nightly ", " list ")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert "Schedule: nightly [RUNNING]" in listed.stdout.splitlines(), listed.stderr


@pytest.mark.e2e
def test_a_gate_approved_on_the_cli_is_run_by_the_sensor_of_the_printed_ui_with_the_replay_agent(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root, env, lines = demo_root(tmp_path, clean_env)
    created = specops(env, root, "new", "quick-delivery", "d2", "--request",
                      "Document Calculator.Add.", "--validation", "docs-only")
    assert created.returncode == 0, created.stderr
    port = free_port()
    logs = tmp_path / "ui.log"
    with open(logs, "w") as out:  # the printed command, as a user pastes it
        ui = subprocess.Popen(["bash", "-c", f"{printed(lines, 'UI: ')} --port {port}"],
                              cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert ui.poll() is None and time.monotonic() < deadline, logs.read_text()
                time.sleep(0.5)
        approved = specops(env, root, "approve", "d2", "target-write", "--note", "go")
        assert approved.returncode == 0, approved.stderr
        deadline = time.monotonic() + 300  # the sensor's next tick, then a three-node run
        while Store(root).read("d2").status != "completed":
            assert ui.poll() is None and time.monotonic() < deadline, logs.read_text()[-3000:]
            time.sleep(2)
        # The state completes with the last step; the run ends a moment later. Stopping
        # `dagster dev` before that would end the run as a failure.
        os.environ["DAGSTER_HOME"] = str(root / ".dagster_home")
        with dg.DagsterInstance.get() as instance:
            while not all(r.is_finished for r in runs_of(instance, "d2")):
                assert time.monotonic() < deadline, logs.read_text()[-3000:]
                time.sleep(1)
    finally:
        os.killpg(ui.pid, signal.SIGTERM)  # ours: dagster dev, its children, the replay agent
        ui.wait(timeout=90)
    log = logs.read_text()
    assert log.startswith("demo root: the replay agent on http://127.0.0.1:")
    assert f" plays {root}/.specops/demo-scenario.yaml; no model provider is called\n" in log
    played = [json.loads(line) for line in
              (root / ".specops/replay-requests.jsonl").read_text().splitlines()]
    assert {r["node"] for r in played if r["delivery"] == "d2"} == {"develop", "verify",
                                                                    "delivery"}
    with dg.DagsterInstance.get() as instance:
        runs = runs_of(instance, "d2")
        assert [(r.tags.get("dagster/sensor_name"), r.status) for r in runs] == [
            ("gate_approvals", dg.DagsterRunStatus.SUCCESS)]


def runs_of(instance: dg.DagsterInstance, delivery: str) -> list[dg.DagsterRun]:
    return instance.get_runs(dg.RunsFilter(tags={"dagster/partition": delivery}))


def test_the_ui_runs_the_venvs_dagster_dev_on_localhost_with_the_shipped_workspace() -> None:
    assert ui_argv(3917) == [str(VENV_BIN / "dagster"), "dev", "-w", str(WORKSPACE), "-h",
                             "127.0.0.1", "-p", "3917"]


def test_only_a_demo_root_without_a_replay_url_of_its_own_gets_the_demo_replay_agent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECOPS_REPLAY_URL", raising=False)
    assert demo_replay_server(tmp_path) is None  # not a demo root: the real provider
    write_tree(tmp_path, {".specops/demo-scenario.yaml": DEMO_SCENARIO.read_text()})
    server = demo_replay_server(tmp_path)
    assert server is not None and server.state.scenario.repeat
    server.server_close()
    monkeypatch.setenv("SPECOPS_REPLAY_URL", "http://127.0.0.1:9")
    assert demo_replay_server(tmp_path) is None  # the agent the user named


# -- 4. the demo answers a node however often it is asked --------------------------------------

def test_the_demo_scenario_answers_a_node_however_often_it_is_asked() -> None:
    state = ReplayState(load_scenario(DEMO_SCENARIO), None)
    first = [state.next_turn("demo-1", "develop", f"thread-{i}").turn for i in range(5)]
    assert all(t is not None and t.shell is not None and "calculator-usage.md" in t.shell
               for t in first)
    once = ReplayState(Scenario.model_validate({"nodes": {"a": [[{"message": "hi"}]]}}), None)
    assert once.next_turn("d", "a", "t1").turn is not None
    assert once.next_turn("d", "a", "t2").error == "replay scenario for `a` has 1 attempt(s), not 2"


@pytest.mark.e2e
def test_a_demo_delivery_reopened_runs_again_with_the_demo_roots_own_replay_agent(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root, env, _ = demo_root(tmp_path, clean_env)
    reopened = specops(env, root, "reopen", "demo-1", "develop", "--reason", "once more")
    assert reopened.returncode == 0, reopened.stderr
    rerun = specops(env, root, "run", "demo-1", "--executor", "in_process")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    first = rerun.stdout.splitlines()[0]
    assert first.startswith("demo root: the replay agent on http://127.0.0.1:")
    assert first.endswith(f" plays {root}/.specops/demo-scenario.yaml; no model provider is "
                          "called")
    state = Store(root).read("demo-1")
    assert [(s.name, s.status) for s in state.steps] == [
        ("develop", "completed"), ("verify", "completed"), ("delivery", "completed")]
    assert (root / ".specops/worktrees/demo-1/docs/calculator-usage.md").read_text() == (
        "# Using Calculator.Add\n\n`new Calculator().Add(2, 3)` returns `5`.\n\nRevised: "
        "`Add(-2, 3)` returns `1`; negative numbers work the same way.\n")


# -- 2. the gate in the way of the first run ---------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize(("workflow", "lines"), [
    pytest.param("quick-delivery", [
        "before the first run: gate `target-write` in front of `develop` needs approval: "
        "`specops approve d1 target-write --note ...`, then `specops run d1`",
        "  question: May the agent change the target repository now?"], id="quick-delivery"),
    pytest.param("full-delivery", [
        "before the first run: gate `scope` in front of `requirements` needs approval: "
        "`specops approve d1 scope --note ...`, then `specops run d1`",
        "  question: Is this the right workflow and scope for the request, and the right "
        "repository?"], id="full-delivery"),
    pytest.param("plan-build-review", [
        "before the first run reaches `build`: gate `target-write` needs approval, or the run "
        "stops there: `specops approve d1 target-write --note ...`",
        "  question: May the agent change the target repository now?"], id="plan-build-review"),
])
def test_new_and_status_name_the_gate_that_stops_the_first_run(
        tmp_path: Path, clean_env: dict[str, str], workflow: str, lines: list[str]) -> None:
    root = git_fixture(tmp_path)
    created = specops(clean_env, root, "new", workflow, "d1", "--request", "Document Add.")
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[-2:] == lines
    status = specops(clean_env, root, "status", "d1")
    assert status.stdout.splitlines()[-2:] == lines


@pytest.mark.e2e
def test_a_gate_after_a_node_that_has_not_run_is_named_but_not_offered_for_approval(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = git_fixture(tmp_path)
    assert specops(clean_env, root, "new", "full-delivery", "d1", "--request", "x"
                   ).returncode == 0
    assert specops(clean_env, root, "approve", "d1", "scope", "--note", "ok").returncode == 0
    status = specops(clean_env, root, "status", "d1")
    assert status.stdout.splitlines()[-2:] == [
        "next: `specops run d1` runs requirements",
        "the first run stops at gate `requirements` in front of `design`: it decides on what "
        "`requirements` writes; decide it once that has run"]
    ahead = json.loads(specops(clean_env, root, "status", "d1", "--json").stdout)["gates_ahead"]
    assert ahead == [{"decides_on": ["requirements"], "gate": "requirements", "node": "design",
                      "question": "Is the requirements specification correct and complete?",
                      "after": ["requirements"],
                      "approve": "specops approve d1 requirements --note ..."}]


# -- 3. no .NET SDK -----------------------------------------------------------------------------

@pytest.mark.e2e
def test_new_without_dotnet_says_the_full_steps_will_block_and_names_validation_docs_only(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = git_fixture(tmp_path)
    env = {**clean_env, "PATH": path_without_dotnet(tmp_path, clean_env["PATH"])}
    created = specops(env, root, "new", "quick-delivery", "d1", "--request", "x")
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[-1] == (
        "note: `dotnet` is not on PATH and develop, verify, delivery validate `full` (a .NET "
        "build and tests), so the first of them will block before its agent call: install the "
        ".NET 10 SDK (https://dot.net/download), or, for a change of documentation only, create "
        "the delivery with `specops new quick-delivery <id> --validation docs-only ...`")
    docs = specops(env, root, "new", "quick-delivery", "d2", "--request", "x",
                   "--validation", "docs-only")
    assert "dotnet" not in docs.stdout


def docs_only_harness(tmp_path: Path) -> Store:
    """The `all-pass` fixture as a git harness root of the agentic workflow, delivery `d1`
    validating `docs-only`."""
    root = git_fixture(tmp_path)
    write_tree(root, AGENTIC)
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("agentic", author=WHO, committer=WHO)
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic",
                 "d1", "Write notes.", validation="docs-only")
    return store


# Not documentation, and not C# either (the TDD hook would ask for a test first).
NOT_DOCS = {"write": [{"literal": {"before": [{"shell": "echo x > src/Calc/notes.txt"}]}}]}
FELL_BACK = "docs-only fell back to full validation: not documentation: src/Calc/notes.txt"


@pytest.mark.e2e
def test_a_docs_only_step_that_validates_in_full_says_why_in_its_report_and_in_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_env: dict[str, str]) -> None:
    monkeypatch.setenv("PATH", f"{STANDIN}:{os.environ['PATH']}")
    monkeypatch.setenv("DOTNET_STANDIN_ANSWERS", str(STANDIN / "answers/all-pass.yaml"))
    store = docs_only_harness(tmp_path)
    with replay(tmp_path, NOT_DOCS) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    assert (outcome.validation["mode"], outcome.validation["notes"][0]) == (
        "docs-only→full", FELL_BACK)  # the Dagster check's metadata is this dict
    status = specops(clean_env, store.root, "status", "d1").stdout.splitlines()
    assert status[2].startswith("  ✔  0 write            completed")
    assert status[3] == f"       {FELL_BACK}"


@pytest.mark.e2e
def test_a_docs_only_step_without_dotnet_names_the_fallback_and_validation_docs_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = docs_only_harness(tmp_path)
    with replay(tmp_path, NOT_DOCS) as server:
        settings = settings_for(server, tmp_path)
        codex_dir = str(VENV_BIN.parent.parent / "node_modules/.bin")
        monkeypatch.setenv("PATH", path_without_dotnet(tmp_path, f"{codex_dir}:/usr/bin:/bin"))
        outcome = run_step(store, "d1", "write", settings=settings)
    assert outcome.status == "environment"
    assert store.read("d1").get_step("write").blocked_reason == (
        f"environment error: {FELL_BACK}; {INSTALL_HINT}")


def test_a_docs_only_validation_that_cannot_find_dotnet_says_why_it_needed_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = git_fixture(tmp_path)
    (root / "src/Calc/notes.txt").write_text("x\n")
    monkeypatch.setenv("PATH", path_without_dotnet(tmp_path, "/usr/bin:/bin"))
    with pytest.raises(ToolMissing) as info:
        validate_attempt("docs-only", root, delivery="d1", base_commit="HEAD",
                         log_dir=tmp_path / "logs")
    assert info.value.message == f"{FELL_BACK}; {INSTALL_HINT}"


# -- 5. one broken definition ------------------------------------------------------------------

BROKEN_OTHER = {"workflow_defs/workflows/other.yaml": "kind: workflow\nid: other\nnodes: [\n"}
OTHER_PROBLEM = ("workflow_defs/workflows/other.yaml: invalid YAML at line 4, column 1: expected "
                 "the node content, but found '<stream end>'; fix the syntax")


@pytest.mark.parametrize(("files", "problems"), [
    pytest.param(BROKEN_OTHER, None, id="another-workflow-unreadable"),
    pytest.param({"workflow_defs/workflows/other.yaml": "kind: workflow\nid: other\nnodes:\n"
                  "  - {id: x, phase: nowhere}\n"}, None, id="another-workflow-unknown-phase"),
    pytest.param({"workflow_defs/phases/lonely.yaml": "kind: phase\nid: lonely\n"}, None,
                 id="a-phase-only-others-could-use"),
    pytest.param({"workflow_defs/workflows/diamond.yaml": "kind: workflow\nid: diamond\n"},
                 ["workflow_defs/workflows/diamond.yaml: nodes: missing required key `nodes`; "
                  "add it"], id="its-own-file"),
    pytest.param({"workflow_defs/phases/p-b.yaml": "kind: phase\nid: p-b\n"}, [
        "workflow_defs/phases/p-b.yaml: execution: missing required key `execution`; add it",
        "workflow_defs/workflows/diamond.yaml: nodes[1].phase: unknown phase `p-b` (known: "
        "full-contract, full-delivery, full-design, full-develop, full-evaluate, "
        "full-integrate, full-integrate-contract, full-qa, full-requirements, full-verify, p-a, "
        "p-c, p-d, pbr-build, pbr-contract, pbr-evaluate, pbr-plan, pbr-qa, quick-delivery, "
        "quick-develop, quick-verify); add workflow_defs/phases/p-b.yaml or fix the id"], id="a-phase-it-uses"),
    pytest.param({"workflow_defs/validation.yaml": "validation: {judge: nobody}\n"}, [
        "workflow_defs/validation.yaml: validation.judge: Input should be 'absolute' or "
        "'regressions'"], id="validation-yaml"),
])
def test_a_broken_definition_blocks_only_the_workflows_that_use_it(
        diamond_root: Path, files: dict[str, str], problems: list[str] | None) -> None:
    write_tree(diamond_root, files)
    roots = definition_roots(diamond_root)
    with pytest.raises(DefinitionError):
        load_catalog(roots, display_base=diamond_root)  # `specops check` still names it
    if problems is None:
        catalog, others = load_catalog_for(roots, "diamond", display_base=diamond_root)
        assert "diamond" in catalog.workflows and others
        return
    with pytest.raises(DefinitionError) as info:
        load_catalog_for(roots, "diamond", display_base=diamond_root)
    assert info.value.problems == problems


@pytest.mark.e2e
def test_new_warns_about_a_broken_file_it_does_not_use_and_names_specops_check(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    write_tree(diamond_root, BROKEN_OTHER)
    created = specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "x")
    assert (created.returncode, created.stderr) == (0, (
        "warning: 1 problem(s) in definitions `diamond` does not use "
        "(workflow_defs/workflows/other.yaml); `specops check` lists them\n"))
    assert created.stdout.startswith("created delivery d1 (diamond, 4 steps)")
    checked = specops(clean_env, diamond_root, "check")
    assert (checked.returncode, checked.stderr) == (2, f"{OTHER_PROBLEM}\nerror: 1 problem(s) in "
                                                       "the definitions; nothing was changed\n")


# -- 6. dry-run --prompt -----------------------------------------------------------------------

@pytest.mark.e2e
def test_dry_run_prompt_prints_exactly_the_prompt_the_next_attempt_sends(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    shown = specops(clean_env, root, "dry-run", "d1", "--prompt")
    as_json = json.loads(specops(clean_env, root, "dry-run", "d1", "--json").stdout)
    assert shown.returncode == 0, shown.stderr
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    sent = (root / "phases/d1/write/prompt.md").read_text()
    assert shown.stdout == sent + ("" if sent.endswith("\n") else "\n")
    assert as_json["prompt"] == sent and as_json["total_chars"] == len(sent)


def test_dry_run_prompt_shows_secret_values_as_its_prompt_md_does(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = agentic_root(tmp_path)
    (root / "AGENTS.md").write_text("# Agents\nThe key is sk-live-12345.\n")
    new(root)
    env = {**clean_env, "OPENAI_API_KEY": "sk-live-12345"}
    shown = specops(env, root, "dry-run", "d1", "--prompt").stdout
    assert "The key is ***." in shown and "sk-live-12345" not in shown

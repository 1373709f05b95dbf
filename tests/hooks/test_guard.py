"""What codex runs for the product's hooks (`hooks/guard.py`). The guard fails closed (issue #17,
item 1): codex runs the hooks as `python -I <hook_guard.py> EVENT`, so nothing in the session's
working directory can shadow their imports, and every internal failure of pre-tool-use is a
deny, never a "hook failed". The e2e tests run the hooks on real codex calls (the replay agent
plays the model)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import git
import pytest

from specops_dag import hooks as hook
from specops_dag.agent import codex
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.hooks import guard as hook_guard

from ..support.agents import agentic_git_harness, new, replay, settings_for, wrote

PUSH = {"hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "git push --force origin HEAD:refs/heads/x"}}


def hook_command(event: str) -> str:
    """The shell command codex runs for `event`, from the product's own `-c hooks.…` overrides."""
    overrides = codex.hook_overrides()
    name = {"pre-tool-use": "PreToolUse", "session-start": "SessionStart",
            "user-prompt-submit": "UserPromptSubmit"}[event]
    value = next(v for v in overrides if v.startswith(f"hooks.{name}="))
    start = value.index("command=") + len("command=")
    return json.loads(value[start:value.index(", timeout=")])


def run_shell(command: str, cwd: Path, payload: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, input=json.dumps(payload | {
        "cwd": str(cwd)}), capture_output=True, text=True, timeout=60)


def test_the_hooks_run_isolated_from_an_absolute_script_path() -> None:
    command = shlex.split(hook_command("pre-tool-use"))
    assert command == [sys.executable, "-I", str(Path(hook_guard.__file__).resolve()),
                       "pre-tool-use"]


@pytest.mark.parametrize("shadow", ["json.py", "specops_dag/__init__.py", "sitecustomize.py"])
def test_a_module_the_agent_writes_in_its_cwd_cannot_switch_the_guard_off(
        tmp_path: Path, shadow: str) -> None:
    (tmp_path / shadow).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / shadow).write_text("raise SystemExit(1)\n")
    result = run_shell(hook_command("pre-tool-use"), tmp_path, PUSH)
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "force" in decision["permissionDecisionReason"]


def test_a_hook_that_cannot_import_the_product_denies_the_call(tmp_path: Path) -> None:
    guard = str(Path(hook_guard.__file__).resolve())
    result = subprocess.run(["/usr/bin/python3", "-I", guard, "pre-tool-use"], cwd=tmp_path,
                            input=json.dumps(PUSH), capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("specops hook pre-tool-use failed (ModuleNotFoundError: No module "
                             "named 'specops_dag'); the call is denied, since specops denies "
                             "what it cannot check\n")


def test_a_state_hook_that_cannot_import_the_product_stays_silent(tmp_path: Path) -> None:
    guard = str(Path(hook_guard.__file__).resolve())
    result = subprocess.run(["/usr/bin/python3", "-I", guard, "user-prompt-submit"],
                            cwd=tmp_path, input="{}", capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_an_exception_anywhere_in_pre_tool_use_is_a_deny(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture) -> None:
    def broken(argv: list[str]) -> int:
        raise MemoryError("no room")

    monkeypatch.setattr(hook, "main", broken)
    assert hook_guard.run(["pre-tool-use"]) == 2
    assert capsys.readouterr().err == ("specops hook pre-tool-use failed (MemoryError: no room); "
                                       "the call is denied, since specops denies what it cannot "
                                       "check\n")


def origin_world(tmp_path: Path) -> tuple[Path, Path]:
    """The agentic workflow in a git harness root with a local bare `origin` (under /tmp, a
    writable root of the sandbox: a push the hook allows would land)."""
    import git

    from ..support.agents import world

    root, _ = world(tmp_path, "harness root is the git target")
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True)
    git.Repo(root).create_remote("origin", str(origin))
    git.Repo(root).git.push("origin", "main")
    return root, origin


def origin_refs(origin: Path) -> list[str]:
    import git

    return sorted(r.path for r in git.Repo(origin).refs)


ATTACKS = [
    {"shell": "printf 'raise SystemExit(1)\\n' > json.py && mkdir -p specops_dag && "
              "printf 'raise SystemExit(1)\\n' > specops_dag/__init__.py"},
    {"shell": "git push --force origin HEAD:refs/heads/forced-1"},
    {"shell": "$(echo git) push --force origin HEAD:refs/heads/forced-2"},
    {"shell": "G=git; eval \"$G push --force origin HEAD:refs/heads/forced-3\""},
    {"shell": "bash", "tty": True},
    {"shell": "echo git push --force origin HEAD:refs/heads/forced-4 | bash"},
]


@pytest.mark.e2e
def test_no_forced_ref_lands_on_origin_whatever_the_agent_writes_or_runs(
        tmp_path: Path) -> None:
    from specops_dag.execution.step import run_step

    from ..support.agents import create, replay, settings_for

    root, origin = origin_world(tmp_path)
    store = create(root, None)
    nodes = {"write": [[*ATTACKS, {"message": "done"}]]}
    with replay(tmp_path, nodes) as server:
        run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert origin_refs(origin) == ["refs/heads/main"]
    outputs = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    answers = [item.get("output", "") for item in outputs[-1]["input"]  # the whole thread
               if item.get("type") == "function_call_output"]
    blocked = [a for a in answers if "Command blocked by PreToolUse hook" in a]
    assert len(blocked) == 5, answers  # every attack but writing the shadowing modules
    assert (root / ".specops/worktrees/d1/json.py").is_file()


@pytest.mark.e2e
def test_a_target_repositorys_own_codex_hooks_never_run(tmp_path: Path) -> None:
    import git

    from specops_dag.execution.step import run_step

    from ..support.agents import create, replay, settings_for, world

    marker = tmp_path / "repo-hook-ran"
    root, _ = world(tmp_path, "harness root is the git target")
    hooks = {"hooks": {event: [{"hooks": [{"type": "command", "command": f"touch {marker}",
                                           "timeout": 5}]}]
                       for event in ("PreToolUse", "SessionStart", "UserPromptSubmit")}}
    (root / ".codex").mkdir()
    (root / ".codex/hooks.json").write_text(json.dumps(hooks))
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("a repo hook")
    store = create(root, None)
    with replay(tmp_path, {"*": [{"literal": {}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert [run_step(store, "d1", n, settings=settings).status
                for n in ("write", "review")] == ["completed", "completed"]
    assert (root / ".specops/worktrees/d1/.codex/hooks.json").is_file()  # the worktree has it
    assert not marker.exists()


BLOCKED = "Command blocked by PreToolUse hook"


def tool_outputs(tmp_path: Path) -> list[str]:
    """The tool results codex sent back to the model, in order (from the replay log)."""
    outputs = []
    for line in (tmp_path / "requests.jsonl").read_text().splitlines():
        request = json.loads(line)
        last = request["input"][-1] if request["input"] else {}
        if last.get("type") in ("function_call_output", "custom_tool_call_output"):
            outputs.append(str(last.get("output")))
    return outputs


@pytest.mark.e2e
def test_destructive_commands_are_denied_and_the_repo_stays_intact(tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = new(root)
    dangerous = [{"shell": "git push --force origin HEAD"}, {"shell": "rm -rf .git"},
                 {"shell": "bash -c 'git reset --hard HEAD~1'"}]
    with replay(tmp_path, {"write": [{"literal": {"before": dangerous}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.message) == ("completed",
                                                 wrote("write", "notes.md", f"{root}/phases"))
    outputs = tool_outputs(tmp_path)  # the three denials, then the literal agent's own calls
    assert [BLOCKED in o for o in outputs[:3]] == [True, True, True], outputs
    assert not any(BLOCKED in o for o in outputs[3:]), outputs
    worktree = root / ".specops/worktrees/d1"
    assert (worktree / ".git").exists() and (root / ".git").is_dir()
    assert git.Repo(root).head.commit.message == "initial"


PRODUCT = "*** Begin Patch\n*** Add File: src/Foo.cs\n+namespace App;\n+public class Foo {}\n*** End Patch\n"
TEST = ("*** Begin Patch\n*** Add File: tests/FooTests.cs\n+namespace App.Tests;\n"
        "+public class FooTests {}\n*** End Patch\n")


@pytest.mark.e2e
def test_a_csharp_edit_without_its_test_file_is_denied_and_with_it_allowed(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = new(root)
    patches = [{"apply_patch": PRODUCT}, {"apply_patch": TEST}, {"apply_patch": PRODUCT}]
    with replay(tmp_path, {"write": [{"literal": {"before": patches}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.message) == ("completed",
                                                 wrote("write", "notes.md", f"{root}/phases"))
    outputs = tool_outputs(tmp_path)  # the three patches, then the literal agent's own calls
    assert [BLOCKED in o for o in outputs[:3]] == [True, False, False], outputs
    assert not any(BLOCKED in o for o in outputs[3:]), outputs
    assert "src/Foo.cs" in outputs[0]
    worktree = root / ".specops/worktrees/d1"
    assert (worktree / "src/Foo.cs").is_file() and (worktree / "tests/FooTests.cs").is_file()


@pytest.mark.e2e
def test_the_workflow_state_is_injected_on_each_prompt(tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = new(root)
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        assert run_step(store, "d1", "write",
                        settings=settings_for(server, tmp_path)).status == "completed"
    first = json.loads((tmp_path / "requests.jsonl").read_text().splitlines()[0])
    text = json.dumps(first["input"])
    assert "<workflow-state>" in text and "<skill-invocation>" in text
    assert "c-write-skill" in text
    assert Store(root).read("d1").get_step("write").status == "completed"

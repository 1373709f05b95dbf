"""`specops hook pre-tool-use` (`hooks/pre_tool_use.py`): the codex answers, payloads it cannot read,
internal errors and a check out of time are denied, nothing crashes it, and it imports only the
standard library."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specops_dag import hooks as hook
from specops_dag.hooks import pre_tool_use, walk

from ..support.harness import REPO, VENV_BIN
from ..support.hooks import SPECOPS_VARS, call, check, denial, payload

PUSH = {"hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "git push --force origin HEAD:refs/heads/x"}}


def test_an_allowed_call_exits_0_with_no_output(repo: Path) -> None:
    assert call("pre-tool-use", payload("dotnet test", repo)) == (0, "")


def test_a_denied_call_answers_with_the_codex_deny_json(repo: Path) -> None:
    code, out = call("pre-tool-use", payload("git push --force", repo))
    assert code == 0
    assert json.loads(out) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "`git push --force` force-pushes (`--force`), which rewrites "
                                    "remote history; the product commits and pushes after "
                                    "validation: push nothing"}}


def test_the_apply_patch_tool_itself_runs_nothing(repo: Path) -> None:
    patch = ("*** Begin Patch\n*** Add File: docs/notes.md\n+never run rm -rf / or "
             "git push --force\n*** End Patch\n")
    assert call("pre-tool-use", payload(patch, repo, tool="apply_patch")) == (0, "")


@pytest.mark.parametrize(("data", "reason"), [
    (b"not json", "the PreToolUse payload on stdin is not JSON (Expecting value: line 1 column 1 "
                  "(char 0)); specops denies calls it cannot check"),
    (b"[1, 2]", "the PreToolUse payload on stdin is not a JSON object; specops denies calls it "
                "cannot check"),
    (b'{"tool_input": "rm -rf /"}', "tool_input is not a JSON object; specops denies calls it "
                                    "cannot check"),
    (b'{"tool_input": {"command": 7}}', "tool_input.command is int, not a string; specops "
                                        "denies calls it cannot check"),
], ids=["not json", "not an object", "tool_input", "command type"])
def test_a_payload_that_cannot_be_read_is_denied(repo: Path, data: bytes, reason: str) -> None:
    assert denial(call("pre-tool-use", data)[1]) == reason


def test_a_tool_without_a_command_is_allowed(repo: Path) -> None:
    data = json.dumps({"tool_name": "mcp__docs__search", "tool_input": {"query": "rm -rf /"}})
    assert call("pre-tool-use", data.encode()) == (0, "")


def test_a_command_given_as_argv_is_checked_word_by_word(repo: Path) -> None:
    assert check(repo, ["bash", "-lc", "git push --force"]) is not None
    assert check(repo, ["bash", "-lc", "echo 'git push --force'"]) is None


def test_an_internal_error_denies_the_call(repo: Path, monkeypatch) -> None:
    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(walk, "inspect", broken)
    assert check(repo, "ls") == ("specops hook pre-tool-use could not check this call "
                                 "(RuntimeError: boom), so it is denied; retry with a simpler "
                                 "command")


def test_a_check_that_runs_out_of_its_time_is_denied(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    def slow(command: str, repo: str, env: dict, cwd: str | None = None) -> None:
        time.sleep(5)

    monkeypatch.setattr(pre_tool_use, "PRE_TOOL_BUDGET_S", 0.3)
    monkeypatch.setattr(walk, "inspect", slow)
    monkeypatch.setattr(sys, "stdin", type("In", (), {"buffer": type("B", (), {
        "read": staticmethod(lambda: json.dumps(PUSH).encode())})()})())
    started = time.monotonic()
    assert hook.main(["pre-tool-use"]) == 0
    assert time.monotonic() - started < 3
    decision = json.loads(capsys.readouterr().out)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert decision["permissionDecisionReason"] == (
        "specops hook pre-tool-use could not check this call (BudgetExceeded: the 0.3 s budget "
        "of the hook ran out), so it is denied; retry with a simpler command")


def test_the_hook_works_where_its_bytecode_cannot_be_written(repo: Path, monkeypatch) -> None:
    for module in (hook, pre_tool_use):
        spec = copy.copy(module.__spec__)
        spec.cached = "/proc/specops/__pycache__/hook.cpython-311.pyc"
        monkeypatch.setattr(module, "__spec__", spec)
    assert check(repo, "git push --force") is not None
    assert check(repo, "dotnet test") is None


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
SHELLISH = st.lists(st.sampled_from([
    "rm", "-rf", "/", "~", "*", ".", ".git", "git", "push", "--force", "+HEAD", "reset", "--hard",
    "bash", "-c", "sh", "eval", "sudo", "env", "X=1", "$(", ")", "`", "'", '"', "\\", ";", "&&",
    "||", "|", "&", "(", "{", "}", "<<", "<<<", "<", ">", ">>", "EOF", "\n", " ", "$HOME",
    "${", "$'", "#", "cd", "..", "apply_patch", "*** Begin Patch", "*** Add File: a.sh",
    "+rm -rf /", "psql", "DROP TABLE t", "DELETE FROM t", "xargs", "find", "-delete"]),
    max_size=40).map("".join)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_well_formed(data: bytes) -> None:
    code, out = call("pre-tool-use", data)
    assert code == 0
    denial(out)


@FUZZ
@given(JSON)
def test_arbitrary_json_never_crashes_the_hook(value: object) -> None:
    assert_well_formed(json.dumps(value).encode())


@FUZZ
@given(JSON)
def test_arbitrary_tool_input_never_crashes_the_hook(value: object) -> None:
    assert_well_formed(json.dumps({"tool_name": "Bash", "tool_input": {"command": value}}).encode())


@FUZZ
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_never_crash_the_hook(data: bytes) -> None:
    assert_well_formed(data)


@FUZZ
@given(st.one_of(SHELLISH, st.text(max_size=300)))
def test_arbitrary_commands_never_crash_the_hook(command: str) -> None:
    assert_well_formed(payload(command, tool="Bash"))
    assert_well_formed(payload(command, tool="apply_patch"))


@settings(max_examples=10, deadline=None)
@given(st.text(alphabet="$()`'\"\\;|&<> \nab", min_size=1, max_size=300),
       st.integers(min_value=10_000, max_value=walk.MAX_COMMAND))
def test_huge_random_commands_never_crash_the_hook(chunk: str, size: int) -> None:
    command = (chunk * (size // len(chunk) + 1))[:size]
    assert_well_formed(payload(command, tool="Bash"))


@pytest.mark.parametrize("argv", [[str(VENV_BIN / "specops"), "hook", "pre-tool-use"],
                                  [sys.executable, "-m", "specops_dag.hooks", "pre-tool-use"]],
                         ids=["console script", "python -m"])
def test_the_installed_hook_commands_deny_and_allow(tmp_path: Path, argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in SPECOPS_VARS}
    runs = [subprocess.run(argv, input=payload(command), cwd=tmp_path, env=env,
                           capture_output=True, timeout=60, check=False)
            for command in ("bash -c 'rm -rf ~'", "dotnet test")]
    assert [r.returncode for r in runs] == [0, 0]
    assert denial(runs[0].stdout.decode()) == (
        "`rm -rf ~` deletes the home folder; delete single files by name (`rm <file>`, or "
        "apply_patch `*** Delete File: <file>`) and build output by folder (`rm -r bin`)")
    assert runs[1].stdout == b"" and runs[1].stderr == b""


def test_the_pre_tool_use_hook_imports_only_the_standard_library(tmp_path: Path) -> None:
    code = ("import sys; from specops_dag import hooks; hooks.main(['pre-tool-use']); "
            "heavy = {'dagster', 'pydantic', 'yaml', 'click', 'git', 'psutil', 'shlex'}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code], input=payload("rm -rf bin obj", tmp_path),
                         cwd=REPO, capture_output=True, timeout=60, check=True)
    assert out.stdout.decode().splitlines()[-1] == "[]"

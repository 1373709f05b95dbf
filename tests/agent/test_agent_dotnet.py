"""The real .NET SDK in the agent's world (issue 42): the executor restores the worktree through
the package source before the first attempt, and inside the codex sandbox the agent's own
`dotnet build --no-restore` and `dotnet test --no-restore` run for real (no first-run, home
folder, node-reuse or pipe failure), while the network and the worktree's `.git` stay closed.
The agent is the replay agent issuing those commands as tool calls through the real codex CLI;
it reads their output from what codex sends back."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from specops_dag.execution.step import run_step

from ..support.agents import (
    agentic_git_harness,
    create,
    outputs_seen,
    replay,
    settings_for,
)

BUILD = "dotnet build --no-restore -c Release"
TEST = "dotnet test --no-restore -c Release"


@pytest.mark.dotnet
@pytest.mark.e2e
def test_the_agent_builds_and_tests_the_restored_worktree_with_the_real_sdk_in_the_sandbox(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path, "all-pass-net10")
    store = create(root, None)
    turns = [{"shell": BUILD, "yield_time_ms": 240_000}, {"shell": TEST, "yield_time_ms": 240_000}]
    with replay(tmp_path, {"write": [{"literal": {"before": turns}}]}) as server:
        settings = settings_for(server, tmp_path)
        outcome = run_step(store, "d1", "write", settings=settings)
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    assert step.preparation is not None and step.preparation.startswith(
        "restored by the executor before attempt 1")
    seen = outputs_seen(tmp_path, "write")
    build, test = seen[BUILD], seen[TEST]
    assert "Process exited with code 0" in build, build
    assert "Build succeeded." in build and " 0 Error(s)" in build, build
    assert "Process exited with code 0" in test, test
    assert "Passed!  - Failed:     0, Passed:     2, Skipped:     0, Total:     2" in test, test
    for text in (build, test):
        for trouble in ("Welcome to .NET", "Permission denied", "Read-only file system",
                        "MSB4166", "Broken pipe", "NU1301"):
            assert trouble not in text, text


@pytest.mark.e2e
def test_in_the_writing_sandbox_the_network_and_the_worktrees_git_stay_closed(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = create(root, None)
    listener = socket.create_server(("127.0.0.1", 0))  # open on the host all along
    port = listener.getsockname()[1]
    commit = 'touch "$(git rev-parse --git-dir)/escaped"'  # past the hook, which denies git writes
    host = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
            "timeout=5)\"")
    out = ("python3 -c \"import urllib.request; "
           "urllib.request.urlopen('http://example.com/', timeout=20)\"")
    turns = [{"shell": commit}, {"shell": host}, {"shell": out, "yield_time_ms": 30_000}]
    with listener, replay(tmp_path, {"write": [{"literal": {"before": turns}}]}) as server:
        run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    seen = outputs_seen(tmp_path, "write")
    assert "Process exited with code 1" in seen[commit], seen[commit]
    assert "Read-only file system" in seen[commit], seen[commit]
    assert "Process exited with code 1" in seen[host], seen[host]
    assert "ConnectionRefusedError" in seen[host], seen[host]
    assert seen[out] == ('exec_command failed: ProcessFailed { message: "Network access to '
                         '\\"example.com\\" was blocked: domain is not on the allowlist for the '
                         'current sandbox mode." }')


@pytest.mark.e2e
def test_a_downstream_agent_cannot_rewrite_an_upstream_handoff_even_under_a_writable_tmp(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)  # under /tmp, which the sandbox makes writable
    store = create(root, None)
    notes = (root / "phases/d1/write/notes.md").resolve()
    state_file = (root / "phases/d1/index.json").resolve()
    rewrite = f"printf 'forged' > {notes}"
    edit = f"printf '{{}}' > {state_file}"
    with replay(tmp_path, {"write": [{"literal": {}}],
                           "review": [{"literal": {"before": [{"shell": rewrite},
                                                              {"shell": edit}]}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert run_step(store, "d1", "write", settings=settings).status == "completed"
        before = notes.read_bytes()
        review = run_step(store, "d1", "review", settings=settings)
    assert review.status == "completed", review.message  # its own node folder stays writable
    seen = outputs_seen(tmp_path, "review")
    for command in (rewrite, edit):
        assert "Process exited with code 1" in seen[command], seen[command]
        assert "Read-only file system" in seen[command], seen[command]
    assert notes.read_bytes() == before

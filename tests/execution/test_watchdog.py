"""The watchdog of a codex attempt: a running agent command suspends the idle timer and has its own
cap (`command_timeout_s`); a hang without a command is still idle. Units on synthetic JSONL, then
the real codex CLI against the replay agent."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from specops_dag.agent.codex import (
    CodexRun,
    JsonlTail,
    codex_argv,
    find_codex,
    run_codex,
    summarize,
)
from specops_dag.agent.replay import ReplayServer
from specops_dag.process import ProcessResult

from ..support.agents import replay, settings_for
from ..support.harness import REPO


def started(item_id: str, command: str) -> dict:
    return {"type": "item.started", "item": {"id": item_id, "type": "command_execution",
                                             "command": command, "aggregated_output": "",
                                             "exit_code": None, "status": "in_progress"}}


def completed(item_id: str, command: str, exit_code: int = 0) -> dict:
    return {"type": "item.completed", "item": {"id": item_id, "type": "command_execution",
                                               "command": command, "aggregated_output": "ok\n",
                                               "exit_code": exit_code, "status": "completed"}}


def append(path: Path, *events: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in events)


def test_a_started_command_runs_until_its_item_completes(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    tail = JsonlTail(path)
    append(path, {"type": "thread.started", "thread_id": "t1"}, {"type": "turn.started"},
           started("item_2", "/bin/bash -lc 'dotnet test'"))
    assert tail.command_age() is not None
    assert tail.oldest_command() == "/bin/bash -lc 'dotnet test'"
    append(path, completed("item_2", "/bin/bash -lc 'dotnet test'"))
    assert (tail.command_age(), tail.oldest_command(), tail.commands) == (None, None, {})


def test_two_commands_are_paired_by_item_id_and_the_oldest_sets_the_age(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    tail = JsonlTail(path)
    append(path, started("item_1", "dotnet build"))
    tail.read()
    time.sleep(0.4)
    append(path, started("item_2", "dotnet test"))
    first_age = tail.command_age()
    assert first_age is not None and first_age >= 0.4
    assert list(tail.commands) == ["item_1", "item_2"]
    append(path, completed("item_1", "dotnet build", exit_code=1))
    second_age = tail.command_age()
    assert second_age is not None and second_age < first_age
    assert tail.oldest_command() == "dotnet test"
    append(path, completed("item_2", "dotnet test"))
    assert tail.command_age() is None


def test_a_command_that_never_completes_keeps_running_until_the_turn_ends(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    tail = JsonlTail(path)
    # Codex's background exec session: the model polls with write_stdin, which adds no item.
    append(path, started("item_2", "/bin/bash -lc 'sleep 600'"),
           {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message",
                                               "text": "still waiting"}})
    first = tail.command_age()
    time.sleep(0.3)
    later = tail.command_age()
    assert first is not None and later is not None and later >= first + 0.3
    assert tail.oldest_command() == "/bin/bash -lc 'sleep 600'"
    append(path, {"type": "turn.completed", "usage": {"input_tokens": 1}})
    assert (tail.command_age(), tail.commands) == (None, {})


def test_other_items_and_a_half_written_line_start_no_command(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    tail = JsonlTail(path)
    append(path, {"type": "item.started", "item": {"id": "item_1", "type": "file_change",
                                                   "changes": [], "status": "in_progress"}})
    line = json.dumps(started("item_2", "dotnet test"))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line[:40])
    assert tail.command_age() is None
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line[40:] + "\n")
    assert tail.command_age() is not None and tail.oldest_command() == "dotnet test"


def test_the_age_counts_from_when_the_tail_first_saw_the_command(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    append(path, started("item_2", "dotnet test"))
    time.sleep(0.5)  # written before the tail looked: the tail cannot know better
    tail = JsonlTail(path)
    age = tail.command_age()
    assert age is not None and age < 0.3
    append(path, started("item_2", "dotnet test"))  # a repeated start keeps the first sighting
    time.sleep(0.3)
    again = tail.command_age()
    assert again is not None and again >= 0.3


def test_the_failure_names_the_shortened_command_and_the_limit() -> None:
    process = ProcessResult(argv=("codex",), exit_code=None, timed_out=False,
                            idle_timed_out=False, duration_s=2.1, stdout="", stderr="",
                            busy_timed_out=True)
    run = summarize(process, [{"type": "thread.started", "thread_id": "t1"}],
                    overrun_command="/bin/bash -lc 'dotnet test   --no-build\nMyApp.sln'",
                    command_timeout_s=2)
    assert (run.ok, run.environment_error) == (False, None)
    assert run.failure(3600, 600) == (
        "codex's command `dotnet test --no-build MyApp.sln` ran longer than the 2 s command limit "
        "(command_timeout_s) and was killed; run something shorter or raise the phase's "
        "execution.command_timeout_s")
    assert CodexRun.short("x" * 100) == "x" * 79 + "…"


# -- the real codex CLI against the replay agent -------------------------------------------------

def attempt(tmp_path: Path, server: ReplayServer, *, idle_timeout_s: int,
            command_timeout_s: int = 1800, timeout_s: int = 60) -> CodexRun:
    settings = settings_for(server, tmp_path)
    work = tmp_path / "repo"
    work.mkdir(exist_ok=True)
    home = Path(str(settings.codex_home))
    home.mkdir(parents=True, exist_ok=True)
    argv = codex_argv(find_codex(settings, REPO), sandbox="workspace-write", workdir=work,
                      last_message=tmp_path / "last.txt", settings=settings, delivery="d1",
                      node="write", idle_timeout_s=idle_timeout_s)
    return run_codex(argv, "Run the command.", workdir=work,
                     env={**os.environ, "CODEX_HOME": str(home)}, timeout_s=timeout_s,
                     idle_timeout_s=idle_timeout_s, command_timeout_s=command_timeout_s,
                     stdout_path=tmp_path / "stdout.jsonl", stderr_path=tmp_path / "stderr.txt")


def command_items(run: CodexRun) -> list[dict]:
    events = [json.loads(line) for line in run.process.stdout.splitlines() if line.strip()]
    return [e["item"] for e in events if e.get("type") == "item.completed"
            and e["item"].get("type") == "command_execution"]


def survivors(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"])
            if marker in " ".join(p.info["cmdline"] or [])]


@pytest.mark.e2e
def test_an_agent_command_longer_than_the_idle_timeout_completes(tmp_path: Path) -> None:
    nodes = {"write": [[{"shell": "sleep 6 && echo slept"}, {"message": "Slept."}]]}
    with replay(tmp_path, nodes) as server:
        run = attempt(tmp_path, server, idle_timeout_s=2)
    assert run.ok, run.failure(60, 2)
    assert (run.process.idle_timed_out, run.last_message) == (False, "Slept.")
    [item] = command_items(run)
    assert (item["command"], item["exit_code"]) == ("/bin/bash -lc 'sleep 6 && echo slept'", 0)
    assert item["aggregated_output"].endswith("slept\n")
    assert run.process.duration_s >= 6


@pytest.mark.e2e
def test_a_command_left_running_in_a_background_exec_session_still_suspends_the_idle_timer(
        tmp_path: Path) -> None:
    # Codex answers "Process running with session ID …" after 0.5 s; the model then thinks for
    # 5.5 s while the command runs on with no JSONL event, and completes after it ended.
    nodes = {"write": [[{"shell": "sleep 5 && echo slept", "yield_time_ms": 500},
                        {"message": "Slept.", "sleep_s": 5.5}]]}
    with replay(tmp_path, nodes) as server:
        run = attempt(tmp_path, server, idle_timeout_s=3)
    assert run.ok, run.failure(60, 3)
    [item] = command_items(run)
    assert (item["exit_code"], item["aggregated_output"].endswith("slept\n")) == (0, True)
    logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    [output] = [i["output"] for i in logged[1]["input"] if i.get("type") == "function_call_output"]
    assert "Process running with session ID" in output


@pytest.mark.e2e
def test_a_command_past_command_timeout_s_is_killed_with_its_name_before_the_deadline(
        tmp_path: Path) -> None:
    nodes = {"write": [[{"shell": "sleep 4713"}, {"message": "never sent"}]]}
    with replay(tmp_path, nodes) as server:
        began = time.monotonic()
        run = attempt(tmp_path, server, idle_timeout_s=2, command_timeout_s=3)
        took = time.monotonic() - began
    assert (run.process.busy_timed_out, run.process.idle_timed_out) == (True, False)
    assert run.environment_error is None  # a retry may run something shorter
    assert run.failure(60, 2) == (
        "codex's command `sleep 4713` ran longer than the 3 s command limit (command_timeout_s) "
        "and was killed; run something shorter or raise the phase's execution.command_timeout_s")
    assert took < 15
    assert survivors("sleep 4713") == []


@pytest.mark.e2e
def test_a_background_command_past_its_cap_is_killed_while_the_model_hangs(
        tmp_path: Path) -> None:
    nodes = {"write": [[{"shell": "sleep 4714", "yield_time_ms": 500}, {"hang": True}]]}
    with replay(tmp_path, nodes) as server:
        run = attempt(tmp_path, server, idle_timeout_s=2, command_timeout_s=3)
    assert (run.process.busy_timed_out, run.process.idle_timed_out) == (True, False)
    assert run.failure(60, 2).startswith(
        "codex's command `sleep 4714` ran longer than the 3 s command limit")
    assert run.process.duration_s < 15
    assert survivors("sleep 4714") == []


@pytest.mark.e2e
def test_a_hanging_model_with_no_command_running_is_still_killed_as_idle(tmp_path: Path) -> None:
    nodes = {"write": [[{"shell": "echo ran"}, {"hang": True}]]}
    with replay(tmp_path, nodes) as server:
        run = attempt(tmp_path, server, idle_timeout_s=2, command_timeout_s=3)
    assert (run.process.idle_timed_out, run.process.busy_timed_out) == (True, False)
    assert run.failure(60, 2) == ("codex sent no JSONL event for 2 s and was killed by the idle "
                                  "watchdog")
    [item] = command_items(run)
    assert item["exit_code"] == 0
    assert run.process.duration_s < 15

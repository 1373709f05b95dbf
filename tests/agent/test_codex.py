from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from specops_dag.agent.codex import (
    AgentSettings,
    codex_argv,
    find_codex,
    hook_overrides,
    hook_trust_hash,
    sandbox_args,
)
from specops_dag.delivery.store import Store
from specops_dag.errors import ToolMissing
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file
from specops_dag.hooks import guard as hook_guard

from ..support.agents import agentic_root, attempts, new, replay, settings_for, wrote


def user_text(request: dict) -> str:
    return "\n".join(c.get("text", "") for item in request["input"]
                     if item.get("role") == "user" for c in item.get("content", []))


def test_codex_argv_is_the_documented_command_line(tmp_path: Path) -> None:
    settings = AgentSettings(replay_url="http://127.0.0.1:9", codex_home=str(tmp_path / "home"),
                             config=("model_reasoning_effort=\"low\"",))
    argv = codex_argv("/bin/codex", sandbox="workspace-write", workdir=tmp_path,
                      last_message=tmp_path / "last.txt", settings=settings, delivery="d1",
                      node="develop", idle_timeout_s=600)
    profile = (f'permissions.specops_write={{filesystem={{"/"="read", "/tmp"="write", '
               f'"{tmp_path}"="write", "{tmp_path}/.git"="read", "{tmp_path}/.codex"="read"}}, '
               "network={enabled=true, domains={}, allow_local_binding=true, "
               "dangerously_allow_all_unix_sockets=true}}")
    assert argv == [
        "/bin/codex", "exec", "--json", "-c", profile, "-c", 'default_permissions="specops_write"',
        "-c", "features.network_proxy=true", "-C", str(tmp_path),
        "-o", str(tmp_path / "last.txt"), "--skip-git-repo-check",
        "-c", 'shell_environment_policy.exclude=["*KEY*", "*SECRET*", "*TOKEN*", "*_API_KEY"]',
        "-c", "shell_environment_policy.ignore_default_excludes=false",
        "-c", "project_doc_max_bytes=0",
        "-c", "check_for_update_on_startup=false", *hook_overrides(), "--ignore-user-config",
        "-c", "model_provider=specops_replay",
        "-c", 'model_providers.specops_replay={name="specops replay", base_url='
              '"http://127.0.0.1:9/d/d1/develop/v1", wire_api="responses", request_max_retries=0, '
              'stream_max_retries=0, stream_idle_timeout_ms=1200000}',
        "-m", "gpt-5.5", "-c", 'model_reasoning_effort="low"', "-"]


def test_the_product_hooks_run_from_this_python_isolated_and_only_they_are_trusted() -> None:
    guard = f"{sys.executable} -I {Path(hook_guard.__file__).resolve()}"
    state = ", ".join(
        f'"/<session-flags>/config.toml:{label}:0:0"={{enabled=true, trusted_hash='
        f'"{hook_trust_hash(event, f"{guard} {arg}", matcher, timeout)}"}}'
        for event, label, arg, matcher, timeout in (
            ("PreToolUse", "pre_tool_use", "pre-tool-use", ".*", 30),
            ("SessionStart", "session_start", "session-start", None, 5),
            ("UserPromptSubmit", "user_prompt_submit", "user-prompt-submit", None, 5)))
    assert hook_overrides() == [
        "-c", 'hooks.PreToolUse=[{matcher=".*", hooks=[{type="command", command="'
              f'{guard} pre-tool-use", timeout=30}}]}}]',
        "-c", 'hooks.SessionStart=[{hooks=[{type="command", command="'
              f'{guard} session-start", timeout=5}}]}}]',
        "-c", 'hooks.UserPromptSubmit=[{hooks=[{type="command", command="'
              f'{guard} user-prompt-submit", timeout=5}}]}}]',
        "-c", f"hooks.state={{{state}}}"]
    assert "--dangerously-bypass-hook-trust" not in codex_argv(
        "codex", sandbox="workspace-write", workdir=Path("/w"), last_message=Path("/w/l"),
        settings=AgentSettings(), delivery="d1", node="n", idle_timeout_s=60)


def test_the_trust_hash_is_codexs_sha256_of_the_canonical_hook_definition() -> None:
    # codex 0.171 hashes {event_name, hooks: [handler], matcher?} as sorted compact JSON
    blob = ('{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"/x/py -I g.py '
            'pre-tool-use","timeout":30,"type":"command"}],"matcher":".*"}')
    import hashlib

    assert hook_trust_hash("PreToolUse", "/x/py -I g.py pre-tool-use", ".*", 30) == (
        "sha256:" + hashlib.sha256(blob.encode()).hexdigest())
    assert hook_trust_hash("SessionStart", "c", None, 0).endswith(hashlib.sha256(
        b'{"event_name":"session_start","hooks":[{"async":false,"command":"c","timeout":1,'
        b'"type":"command"}]}').hexdigest())


def test_an_agent_that_writes_its_artifact_completes_with_registered_handoffs(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    nodes = {"write": [{"literal": {"files": {"notes.md": "notes for d1\n"}}}],
             "review": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d1", "review", settings=settings_for(server, tmp_path))
    assert (first.status, second.status) == ("completed", "completed")
    assert (first.message, second.message) == (wrote("write", "notes.md"),
                                                wrote("review", "review.md"))
    notes = root / "phases/d1/write/notes.md"
    assert notes.read_text() == "notes for d1\n"
    state = store.read("d1")
    write = state.get_step("write")
    assert write.handoff["notes"].model_dump() == {"path": "phases/d1/write/notes.md",
                                                   "sha256": sha256_file(notes)}
    assert write.summary == wrote("write", "notes.md")
    [usage] = write.usage  # three model requests (read, write, final message), 1000 + 200 each
    assert (usage.attempt, usage.input_tokens, usage.output_tokens) == (1, 3000, 600)
    assert usage.thread_id and first.usage == usage
    output = json.loads((root / "phases/d1/write/step0-output.json").read_text())
    assert output["exit_code"] == 0 and output["thread_id"] == usage.thread_id
    assert '"type":"turn.completed"' in output["jsonl"]
    prompt = (root / "phases/d1/review/prompt.md").read_text()
    assert f"1. phases/d1/write/notes.md (sha256 {sha256_file(notes)})" in prompt
    assert "notes for d1" not in prompt  # paths, never upstream bodies
    [review] = attempts(tmp_path, "review")
    assert "# Current step: `review`" in user_text(review[0])
    assert review[0]["literal"] == {"action": "read", "paths": [
        "phases/d1/write/notes.md", "phases/d1/snapshot/skills/c-review-skill/SKILL.md"]}


@pytest.mark.e2e
def test_exit_zero_without_the_artifact_is_retried_with_a_summary_naming_it(
        tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    nodes = {"write": [{"literal": {"skip": ["notes.md"]}}, {"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert first.status == "failed" and first.retryable
    assert first.message == ("attempt 1/3 failed: exit 0 but required artifacts are missing: "
                             "`notes` (phases/d1/write/notes.md)")
    assert second.status == "completed" and second.attempt == 2
    assert second.message == wrote("write", "notes.md")
    first_attempt, second_attempt = attempts(tmp_path, "write")
    assert first_attempt[-1]["literal"] == {
        "action": "done", "wrote": ["docs/phase/d1/write.md", "docs/phase/d1/handoff.md"],
        "skipped": ["phases/d1/write/notes.md"]}
    retry_prompt = user_text(second_attempt[0])
    assert ("# Previous attempt failed\n\nexit 0 but required artifacts are missing: `notes` "
            "(phases/d1/write/notes.md)") in retry_prompt
    assert "(step 0 of delivery `d1`, phase `c-write`, attempt 2 of 3)" in retry_prompt
    assert [u.attempt for u in store.read("d1").get_step("write").usage] == [1, 2]


@pytest.mark.e2e
def test_three_failures_leave_the_step_in_error(tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    nodes = {"write": [[{"fail": "http-400"}]] * 3}
    with replay(tmp_path, nodes) as server:
        outcomes = [run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
                    for _ in range(3)]
    assert [o.status for o in outcomes] == ["failed", "failed", "error"]
    step = store.read("d1").get_step("write")
    assert (step.status, step.attempts) == ("error", 3)
    assert step.error_message == ('codex turn failed (exit 1): {"error": {"message": "replay: '
                                  'scripted failure"}}')
    assert [(a.attempt, a.reason, a.counted) for a in step.attempt_log] == [
        (1, "agent-error", True), (2, "agent-error", True), (3, "agent-error", True)]


@pytest.mark.e2e
def test_two_http_500s_are_retried_as_infrastructure_without_costing_an_agent_call(
        tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    nodes = {"write": [[{"fail": "http-500"}], [{"fail": "http-500"}], {"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.attempt, outcome.message) == (
        "completed", 1, wrote("write", "notes.md"))
    step = store.read("d1").get_step("write")
    assert step.attempts == 1
    [ended] = step.attempt_log
    assert (ended.attempt, ended.reason, ended.counted) == (1, "completed", True)
    assert [(r.session, r.reason, r.wait_s) for r in ended.infra_retries] == [
        ("write", "the model provider failed (codex exit 1): We’re currently experiencing high "
                  "demand, which may cause temporary errors.", 0.2),
        ("write", "the model provider failed (codex exit 1): We’re currently experiencing high "
                  "demand, which may cause temporary errors.", 0.4)]
    assert outcome.ended == ended
    assert len(attempts(tmp_path, "write")) == 3  # three codex sessions, one agent attempt


@pytest.mark.e2e
def test_a_provider_that_stays_down_blocks_the_step_and_gives_the_agent_call_back(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("infra_backoff_s: 0.2",
                                               "infra_backoff_s: 0.1\n  infra_retries: 1"))
    store = new(root)
    nodes = {"write": [[{"fail": "http-429"}], [{"fail": "http-503"}]]}
    with replay(tmp_path, nodes) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    url = f"{server.url}/d/d1/write/v1/responses"
    reason = ("infrastructure: the model provider failed (codex exit 1): unexpected status 503 "
              f"Service Unavailable: replay: scripted failure, url: {url}; retried 1 of 1 times "
              "(execution.infra_retries) over 0.1 s of backoff; this does not count against the "
              "agent calls: when the provider is back, `specops resume d1 write`")
    assert (outcome.status, outcome.retryable, outcome.message) == (
        "environment", False, f"blocked: {reason}")
    step = store.read("d1").get_step("write")
    assert (step.status, step.attempts, step.blocked_reason) == ("blocked", 0, reason)
    [ended] = step.attempt_log
    assert (ended.reason, ended.counted) == ("infrastructure", False)
    assert [r.reason for r in ended.infra_retries] == [
        "the model provider failed (codex exit 1): exceeded retry limit, last status: 429 Too "
        "Many Requests"]


@pytest.mark.e2e
def test_a_hanging_model_is_killed_by_the_idle_watchdog_and_no_process_survives(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("idle_timeout_s: 30", "idle_timeout_s: 3"))
    store = new(root)
    marker = "sleep 4711"
    # The tool process starts in its own session; the model then hangs mid-turn.
    nodes = {"write": [[{"shell": f"{marker} & echo started"}, {"hang": True}]]}
    with replay(tmp_path, nodes) as server:
        started = time.monotonic()
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        took = time.monotonic() - started
    assert outcome.status == "failed"
    assert outcome.message == ("attempt 1/3 failed: codex sent no JSONL event for 3 s and was "
                               "killed by the idle watchdog")
    assert took < 30
    survivors = [p for p in psutil.process_iter(["cmdline"])
                 if marker in " ".join(p.info["cmdline"] or [])]
    assert survivors == []


def test_a_missing_codex_binary_blocks_the_step_on_its_host_without_spending_an_attempt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECOPS_WORKER", raising=False)
    store = new(agentic_root(tmp_path))
    settings = AgentSettings(codex_bin=str(tmp_path / "no-codex"), replay_url="http://127.0.0.1:9")
    outcome = run_step(store, "d1", "write", settings=settings)
    assert (outcome.status, outcome.retryable) == ("environment", False)
    step = store.read("d1").get_step("write")
    assert step.status == "blocked"
    assert step.blocked_reason == (f"environment error: SPECOPS_CODEX_BIN={tmp_path / 'no-codex'} "
                                   "is not an executable file; fix it or unset it (found on host "
                                   f"`{socket.gethostname()}` before the attempt: no agent call "
                                   "was made and no attempt was spent)")
    assert (step.attempts, step.attempt_log, step.started_at, step.ran_on) == (0, [], None, None)
    assert outcome.message == f"blocked: {step.blocked_reason}"


def test_codex_is_found_in_node_modules_when_no_override_is_set(tmp_path: Path) -> None:
    found = find_codex(AgentSettings(), tmp_path)
    assert found.endswith("node_modules/.bin/codex")
    with pytest.raises(ToolMissing):
        find_codex(AgentSettings(codex_bin="/nonexistent/codex"), tmp_path)


@pytest.mark.e2e
def test_an_unreachable_provider_is_retried_then_blocks_not_an_endless_loop(
        tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    settings = AgentSettings(replay_url="http://127.0.0.1:9", codex_home=str(tmp_path / "h"))
    started = time.monotonic()
    outcome = run_step(store, "d1", "write", settings=settings)
    assert outcome.status == "environment"
    assert outcome.message.startswith("blocked: infrastructure: codex cannot reach its model "
                                      "provider (`Reconnecting... waiting for network` 3 times)")
    assert time.monotonic() - started < 120
    step = store.read("d1").get_step("write")
    assert (step.status, step.attempts) == ("blocked", 0)
    assert [r.wait_s for r in step.attempt_log[0].infra_retries] == [0.2, 0.4, 0.8]


@pytest.mark.e2e
def test_api_keys_stay_out_of_agent_commands_and_saved_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_API_KEY", "sk-very-secret-123")
    store = new(agentic_root(tmp_path))
    root = store.root
    output = root / "phases/d1/write/step0-output.json"

    def leaks() -> list[str]:
        return [p.name for p in (output, output.parent / "prompt.md", root / "phases/d1/index.json")
                if "sk-very-secret-123" in p.read_text()]

    dump = {"shell": 'echo "key=${DEMO_API_KEY:-none}" > key.txt'}  # an env dump, in the cwd
    nodes = {"write": [[{"message": "sk-very-secret-123 ?"}],  # says the key, writes nothing
                       {"literal": {"before": [dump],  # then types it into a command
                                    "files": {"notes.md": "sk-very-secret-123 ?\n"}}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        said, leaked_first = json.loads(output.read_text())["last_message"], leaks()
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (first.status, second.status) == ("failed", "completed")
    assert (said, leaked_first, leaks()) == ("*** ?", [], [])
    assert (root / "key.txt").read_text() == "key=none\n"
    assert (root / "phases/d1/write/notes.md").read_text() == "sk-very-secret-123 ?\n"
    command = "cat > phases/d1/write/notes.md <<'SPECOPS_EOF'\\n*** ?\\nSPECOPS_EOF"
    assert command in json.loads(output.read_text())["jsonl"]  # the write, as saved: redacted
    assert os.environ["DEMO_API_KEY"] == "sk-very-secret-123"


@pytest.mark.e2e
def test_a_codex_delivery_runs_through_dagster_with_retries_and_token_metadata(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    import dagster as dg

    from ..support.cli import job_execute, specops

    root = agentic_root(tmp_path)
    assert specops(clean_env, root, "new", "agentic", "d1", "--request", "Notes.").returncode == 0
    nodes = {"write": [{"literal": {"skip": ["notes.md"]}}, {"literal": {}}],
             "review": [{"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")}
        run = job_execute(env, root, "agentic_job", "d1")
    assert run.returncode == 0, run.stderr[-3000:]
    state = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        ("write", "completed", 2), ("review", "completed", 1)]
    with dg.DagsterInstance.get() as instance:
        run_id = instance.get_runs(limit=1)[0].run_id
        retries = [e for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
                   if e.step_key == "agentic__write"]
        assert len(retries) == 1
        record = instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(["agentic", "write"]), asset_partitions=["d1"]),
            limit=1).records[0]
        meta = record.asset_materialization.metadata
        usage = state.get_step("write").usage[-1]
        assert meta["attempt"].value == 2
        assert meta["codex_thread_id"].value == usage.thread_id
        # Each attempt: three model requests of 1000 input + 200 output tokens (the one that
        # skipped notes.md still wrote the step record and the handoff).
        assert meta["tokens"].value == {"input_tokens": 3000, "cached_input_tokens": 0,
                                        "output_tokens": 600, "reasoning_output_tokens": 0}
        assert meta["prompt_chars"].value > 0
        assert (meta["tokens_attempt"].value, meta["tokens_node"].value) == (3600, 7200)
        assert meta["tokens_delivery"].value == 7200
        # the same tokens in USD at gpt-5.5's dated default price ($1.25 / $10 per 1M)
        assert (meta["usd_attempt"].value, meta["usd_node"].value) == (0.00975, 0.0195)
        assert meta["usd_delivery"].value == 0.0195  # the review node had not run yet
        assert (meta["model"].value, meta["provider"].value) == ("gpt-5.5", "specops_replay")
        assert (meta["attempt_reason"].value, meta["infra_retries"].value) == ("completed", 0)
        evidence = state.get_step("write").evidence
        assert (meta["evidence"].value, meta["evidence_sha256"].value) == (
            evidence.path, evidence.sha256)


@pytest.mark.e2e
def test_a_bad_codex_option_is_an_environment_error_not_a_retry(tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "h"),
                                 config=('sandbox_mode="sideways"',))
        outcome = run_step(store, "d1", "write", settings=settings)
    assert (outcome.status, outcome.retryable) == ("environment", False)
    assert outcome.message.startswith("blocked: codex failed before starting a session (exit 1; "
                                      "bad option, config or provider): ")
    assert store.read("d1").get_step("write").status == "blocked"


def test_the_replay_server_command_serves_a_scenario_on_loopback(tmp_path: Path) -> None:
    import subprocess
    import urllib.request

    from ..support.harness import VENV_BIN

    scenario = tmp_path / "s.yaml"
    scenario.write_text("nodes:\n  write:\n    - - message: hello from replay\n")
    proc = subprocess.Popen([str(VENV_BIN / "specops"), "replay-server", "--scenario",
                             str(scenario), "--log", str(tmp_path / "log.jsonl")],
                            stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        assert url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(f"{url}/d/d1/write/v1/responses",
                                         data=json.dumps({"input": []}).encode(),
                                         headers={"thread-id": "t1"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read().decode()
        assert response.headers["content-type"] == "text/event-stream"
        assert "event: response.output_item.done" in body and "hello from replay" in body
        bad = urllib.request.Request(f"{url}/d/d1/other/v1/responses", data=b"{}",
                                     headers={"thread-id": "t2"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(bad, timeout=10)
        assert info.value.code == 400
        assert json.loads(info.value.read())["error"]["message"] == (
            "replay scenario has no entry for node `other`")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_read_only_and_networked_sessions_keep_codexs_own_sandbox_modes(tmp_path: Path) -> None:
    assert sandbox_args("read-only", tmp_path, (tmp_path / "n",), False) == [
        "-s", "read-only", "--add-dir", str(tmp_path / "n")]
    assert sandbox_args("workspace-write", tmp_path, (), True) == [
        "-s", "workspace-write", "-c", "sandbox_workspace_write.network_access=true"]


def test_the_writing_profile_adds_tmpdir_and_every_extra_root_as_writable(tmp_path: Path) -> None:
    args = sandbox_args("workspace-write", tmp_path / "w", (tmp_path / "node",), False,
                        tmpdir=str(tmp_path / "t"))
    assert args[1].startswith(
        f'permissions.specops_write={{filesystem={{"/"="read", "/tmp"="write", '
        f'"{tmp_path}/t"="write", "{tmp_path}/w"="write", "{tmp_path}/node"="write", '
        f'"{tmp_path}/w/.git"="read", "{tmp_path}/w/.codex"="read"}}, ')


def test_the_delivery_folder_is_read_only_in_the_profile_but_the_nodes_own_folder_is_not(
        tmp_path: Path) -> None:
    delivery = tmp_path / "phases/d1"
    args = sandbox_args("workspace-write", tmp_path / "w", (delivery / "review",), False,
                        read_only=(delivery,))
    assert f'"{delivery / "review"}"="write"' in args[1]
    assert args[1].endswith(f'"{tmp_path}/w/.codex"="read", "{delivery}"="read"}}, '
                            "network={enabled=true, domains={}, allow_local_binding=true, "
                            "dangerously_allow_all_unix_sockets=true}}")

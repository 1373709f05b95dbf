"""What a node's sessions really ran, how many attempts it took and what it read (issue 43 item
15): the model and provider codex itself reported for each session (its rollout file) when only
the user's codex config.toml names them, priced into USD; the evidence's `attempts` agreeing
with its `attempt_log` across a risk approval and a resume; and the request file a request-only
node was given, in `consumed`. Real codex against the replay agent."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from specops_dag.agent.codex import AgentSettings, configured_model, session_report
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step

from ..support.agents import (
    agentic_git_harness,
    agentic_root,
    create,
    guarded_harness,
    new,
    replay,
    settings_for,
)
from ..support.cli import specops_at

TESTS = "tests/Calc.Tests/CalculatorTests.cs"


def user_config(home: Path, base_url: str, model: str = "gpt-5-mini") -> Path:
    """A codex home whose config.toml alone names the model and a custom provider (the usual
    set-up); the product's settings name neither."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{model}"\n'
        'model_provider = "acme"\n\n'
        "[model_providers.acme]\n"
        'name = "Acme gateway"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n")
    return home


def set_budget(store: Store, usd: float) -> None:
    with store.transaction("d1") as state:
        state.budget_usd = usd


@pytest.mark.e2e
def test_a_model_and_provider_named_only_in_the_users_codex_config_are_recorded_and_priced(
        tmp_path: Path) -> None:
    store = create(agentic_git_harness(tmp_path), None)
    set_budget(store, 1.0)  # a dollar budget is counted with the configured model's price
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        home = user_config(tmp_path / "codex-home", f"{server.url}/d/d1/write/v1")
        settings = AgentSettings(codex_home=str(home))  # no replay_url: no -m, no provider
        outcome = run_step(store, "d1", "write", settings=settings)
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    [usage] = step.usage
    assert (usage.model, usage.provider) == ("gpt-5-mini", "acme")
    assert session_report(home, usage.thread_id) == ("gpt-5-mini", "acme")
    # four requests of the replay agent (4,000 input, 800 output tokens) at the dated default
    # price of gpt-5-mini: $0.25 and $2 per 1M
    assert (usage.input_tokens, usage.output_tokens, outcome.usd) == (
        4000, 800, {"attempt": 0.0026, "node": 0.0026, "delivery": 0.0026})
    record = json.loads((store.root / step.evidence.path).read_text())
    assert (record["agent"]["model"], record["agent"]["provider"]) == ("gpt-5-mini", "acme")
    assert [(s["model"], s["usd"]) for s in record["cost"]["sessions"]] == [("gpt-5-mini", 0.0026)]
    assert (record["cost"]["usd"], record["cost"]["unpriced"]) == (0.0026, None)
    shown = json.loads(specops_at(store.root, "status", "d1", "--json").stdout)
    assert (shown["cost"]["delivery"], shown["cost"]["budget"]) == (0.0026, 1.0)


@pytest.mark.e2e
def test_a_configured_model_without_a_price_is_recorded_and_its_money_is_not_counted_with_why(
        tmp_path: Path) -> None:
    store = create(agentic_git_harness(tmp_path), None)
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        home = user_config(tmp_path / "codex-home", f"{server.url}/d/d1/write/v1",
                           model="acme-coder-1")
        outcome = run_step(store, "d1", "write", settings=AgentSettings(codex_home=str(home)))
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    assert [(u.model, u.provider) for u in step.usage] == [("acme-coder-1", "acme")]
    record = json.loads((store.root / step.evidence.path).read_text())
    assert (record["agent"]["model"], record["agent"]["provider"]) == ("acme-coder-1", "acme")
    assert (record["cost"]["usd"], record["cost"]["unpriced"]) == (
        None, "model `acme-coder-1` has no price; add it to prices.yaml")
    assert outcome.usd == {}


def test_a_dollar_budget_stops_before_any_call_when_the_configured_model_has_no_price(
        tmp_path: Path) -> None:
    store = new(agentic_root(tmp_path))
    set_budget(store, 1.0)
    home = user_config(tmp_path / "codex-home", "http://127.0.0.1:9/v1", model="acme-coder-1")
    outcome = run_step(store, "d1", "write", settings=AgentSettings(codex_home=str(home)))
    assert (outcome.status, outcome.message) == (
        "blocked", "budget: delivery `d1` budget.usd is set but model `acme-coder-1` has no "
                   "price; add it to prices.yaml; no codex call is made until then")
    assert store.read("d1").get_step("write").usage == []


@pytest.mark.parametrize(("config", "flags", "replaying", "expected"), [
    ('model = "m1"\nmodel_provider = "acme"\n', (), False, ("m1", "acme")),
    ('profile = "fast"\nmodel = "m1"\n[profiles.fast]\nmodel = "m2"\nmodel_provider = "p2"\n',
     (), False, ("m2", "p2")),
    ('model = "m1"\n', ('model="m3"', "model_provider=p3"), False, ("m3", "p3")),
    ('profile = "fast"\n[profiles.fast]\nmodel = "m2"\n', ('model="m3"',), False, ("m2", "openai")),
    ('model = "m1"\nmodel_provider = "acme"\n', (), True, ("gpt-5.5", "specops_replay")),
    ("", (), False, (None, "openai")),
], ids=["top level", "profile over top level", "-c flags over the file",
        "profile over -c flags", "--ignore-user-config of replay sessions", "nothing named"])
def test_the_configured_model_and_provider_are_resolved_as_codex_resolves_them(
        tmp_path: Path, config: str, flags: tuple[str, ...], replaying: bool,
        expected: tuple[str | None, str]) -> None:
    (tmp_path / "config.toml").write_text(config)
    settings = AgentSettings(codex_home=str(tmp_path), config=flags,
                             replay_url="http://127.0.0.1:9" if replaying else None)
    assert configured_model(settings, {}) == expected


@pytest.mark.e2e
def test_the_evidence_counts_every_attempt_since_the_reopen_across_a_risk_approval_and_resume_and_keeps_each_attempts_logs(
        tmp_path: Path, all_pass_dotnet: None) -> None:
    from specops_dag.delivery.gates import approve
    from specops_dag.delivery.lifecycle import resume

    store = guarded_harness(tmp_path)
    risk = store.root / "phases/d1/write/risk.md"
    write_risk = f"cat > {risk} <<'MD'\n{TESTS} is deleted on purpose.\nMD"
    nodes = {"write": [
        {"literal": {"before": [{"shell": f"rm {TESTS}"}]}},
        {"literal": {"before": [{"shell": write_risk}]}},
        {"literal": {}}]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        approve(store, "d1", "risk", note="the calculator goes away")
        resume(store, "d1", "write")
        third = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (first.status, second.status, third.status) == ("failed", "environment", "completed")
    step = store.read("d1").get_step("write")
    assert step.attempts == 1  # the attempt budget the resume restarted
    assert [(a.attempt, a.reason) for a in step.attempt_log] == [
        (1, "verification-failed"), (2, "environment"), (3, "completed")]
    assert third.ended == step.attempt_log[-1]
    assert [u.attempt for u in step.usage] == [1, 2, 3]
    # at gpt-5.5's dated default price ($1.25 and $10 per 1M): five requests of the replay agent
    # (5,000 input, 1,000 output tokens) in each of the first two attempts, four in the third, whose
    # own money is its session's alone
    assert [(u.input_tokens, u.output_tokens) for u in step.usage] == [
        (5000, 1000), (5000, 1000), (4000, 800)]
    assert third.usd == {"attempt": 0.013, "node": 0.0455, "delivery": 0.0455}
    record = json.loads((store.root / step.evidence.path).read_text())
    assert record["attempts"] == len(record["attempt_log"]) == 3
    # each validated attempt keeps its own logs: the resumed attempt 3 did not overwrite 1's
    logs = store.root / "phases/d1/write/validation"
    assert sorted(p.name for p in logs.iterdir()) == [
        "attempt-1", "attempt-2", "attempt-3", "preflight", "restore"]
    assert [s["attempt"] for s in record["cost"]["sessions"]] == [1, 2, 3]
    body = specops_at(store.root, "evidence", "d1", "write").stdout
    assert "3 agent attempt(s), " in body
    assert "- attempts: 1: verification-failed, 2: environment, 3: completed\n" in body
    status = specops_at(store.root, "status", "d1").stdout
    assert "write            completed  1 handoff(s), attempt 3 [16800 tokens, $0.0455]" in status


@pytest.mark.e2e
def test_a_node_whose_only_input_is_the_request_records_the_request_file_it_was_given(
        tmp_path: Path) -> None:
    store = create(agentic_git_harness(tmp_path), None)
    request = store.root / "phases/d1/request.md"
    digest = hashlib.sha256(request.read_bytes()).hexdigest()
    with replay(tmp_path, {"write": [{"literal": {}}], "review": [{"literal": {}}]}) as server:
        assert run_step(store, "d1", "write", settings=settings_for(server, tmp_path)).status == (
            "completed")
        assert run_step(store, "d1", "review", settings=settings_for(server, tmp_path)).status == (
            "completed")
    prompt = (store.root / "phases/d1/write/prompt.md").read_text()
    assert f"phases/d1/request.md (sha256 {digest}) — input `request`: the delivery request" in (
        prompt)
    state = store.read("d1")
    write, review = state.get_step("write"), state.get_step("review")
    assert {k: v.model_dump() for k, v in write.consumed.items()} == {
        "request": {"path": "phases/d1/request.md", "sha256": digest}}
    assert list(review.consumed) == ["write/notes"]  # upstream handoffs keep their keys
    record = json.loads((store.root / write.evidence.path).read_text())
    assert record["consumed"] == {"request": {"path": "phases/d1/request.md", "sha256": digest}}

"""The evaluator's own prompt, its work counted and kept, and a generator that knows what it is
graded on (issue #18, items 2, 3 and 5), with the literal replay agent on the real codex CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.agent.prompt import assemble_prompt
from specops_dag.delivery.lifecycle import snapshot_catalog
from specops_dag.delivery.queries import delivery_tokens, step_tokens
from specops_dag.execution.step import run_step

from ..support.agents import replay, review_root, settings_for, verdict

pytestmark = pytest.mark.e2e


def run_rounds(tmp_path: Path, verdicts: list[dict]):
    store = review_root(tmp_path)
    nodes = {"write": [{"literal": {}}] * len(verdicts), "write.review": verdicts}
    with replay(tmp_path, nodes) as server:
        outcomes = [run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
                    for _ in verdicts]
    return store, outcomes


def test_the_evaluator_gets_its_own_goal_criteria_skills_and_report_not_the_generators_rules(
        tmp_path: Path) -> None:
    store, _ = run_rounds(tmp_path, [verdict("PASS", 9, 7)])
    root = store.root.resolve()
    prompt = (root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    skill = store.read("d1").snapshot.skills["c-eval"][0]
    notes = store.read("d1").get_step("write").handoff["notes"].sha256
    request = {k: v.model_dump() for k, v in store.read("d1").get_step("write").consumed.items()}
    assert prompt == (
        "# Agents\nBe precise.\n\n\n"
        "# Current step: review of `write` (review round 1 of 2; evaluator, read-only)\n\n"
        f"Working directory: {root}. Every path below is absolute or relative to it.\n\n"
        "READ (in order):\n"
        f"1. phases/d1/request.md (sha256 {request_sha(root)}) — input `request`: the "
        "delivery request\n"
        f"2. phases/d1/write/notes.md (sha256 {notes}) — the generator's artifact `notes`\n\n"
        "SKILLS (from the delivery snapshot):\n"
        "- entry: `c-eval-skill` phases/d1/snapshot/skills/c-eval-skill/SKILL.md "
        f"(sha256 {skill.sha256})\n\n"
        "TASK:\nJudge the notes.\n" + prompt.split("Judge the notes.\n", 1)[1])
    assert "WRITE:" not in prompt and "Common work rules" not in prompt
    assert "- - " not in prompt
    # the generator consumed nothing upstream, only the request its prompt named
    assert request == {"request": {"path": "phases/d1/request.md", "sha256": request_sha(root)}}


def request_sha(root: Path) -> str:
    from specops_dag.files import sha256_file

    return sha256_file(root / "phases/d1/request.md")


def test_evaluator_tokens_are_recorded_per_round_and_counted_in_the_totals(
        tmp_path: Path) -> None:
    store, outcomes = run_rounds(tmp_path, [verdict("BLOCK", 5, 7), verdict("PASS", 9, 7)])
    assert [o.status for o in outcomes] == ["failed", "completed"]
    step = store.read("d1").get_step("write")
    roles = [(u.role, u.attempt) for u in step.usage]
    assert roles == [("generator", 1), ("evaluator", 1), ("generator", 2), ("evaluator", 2)]
    # the literal agent: 3 requests a generator attempt, 2 an evaluator round (read, verdict)
    assert step_tokens(step, "generator") == 2 * 3 * 1200
    assert step_tokens(step, "evaluator") == 2 * 2 * 1200
    assert step_tokens(step) == delivery_tokens(store.read("d1")) == 12000
    assert step.reviews[0].usage.model_dump() == {
        "thread_id": step.usage[1].thread_id, "input_tokens": 2000, "cached_input_tokens": 0,
        "output_tokens": 400, "reasoning_output_tokens": 0}


def test_each_evaluator_session_is_kept_beside_its_report_and_never_committed(
        tmp_path: Path) -> None:
    store, _ = run_rounds(tmp_path, [verdict("PASS", 9, 7)])
    record = store.read("d1").get_step("write").reviews[0]
    assert record.transcript == "phases/d1/write/reviews/sessions/write-r1.jsonl"
    sessions = store.root / "phases/d1/write/reviews/sessions"
    assert sorted(p.name for p in sessions.iterdir()) == [
        "write-r1.jsonl", "write-r1.last-message.md", "write-r1.stderr.txt"]
    assert '"type":"turn.completed"' in (sessions / "write-r1.jsonl").read_text().replace(" ", "")
    assert (sessions / "write-r1.last-message.md").read_text().startswith("Done.\n<<<REVIEW")


def test_the_generator_knows_the_criteria_from_round_one_and_the_score_trend_after(
        tmp_path: Path) -> None:
    store, _ = run_rounds(tmp_path, [verdict("BLOCK", 5, 7), verdict("PASS", 9, 7)])
    second = (store.root / "phases/d1/write/prompt.md").read_text()  # attempt 2's
    assert ("REVIEW: after the validation, an independent read-only evaluator (`c-eval`, round 2 "
            "of 2) scores your work 0-10 on each criterion; every score must reach its threshold:\n"
            "- `complete` (threshold 8/10): Every request item is covered\n"
            "- `clear` (threshold 6/10): A newcomer understands it\n"
            "Scores of the earlier rounds:\n"
            "- round 1: BLOCK (complete 5, clear 7) — the evaluator's verdict is BLOCK; under "
            "threshold: complete 5/8\n"
            "If the scores did not rise since the last round, change your approach rather than "
            "polishing the same one.") in second
    fresh = review_root(tmp_path / "fresh")
    state = fresh.read("d1")
    first = assemble_prompt(fresh.root, state, state.get_step("write"),
                            snapshot_catalog(fresh, state), fresh.root.resolve()).text
    assert "(`c-eval`, round 1 of 2)" in first and "Scores of the earlier rounds" not in first


def test_the_evaluator_phase_budget_stops_further_review_rounds(tmp_path: Path) -> None:
    store = review_root(tmp_path)
    phase = store.root / "workflow_defs/phases/c-eval.yaml"
    phase.write_text(phase.read_text().replace("validation: none",
                                               "validation: none").replace(
        "  criteria:", "  budget: {tokens: 2000}\n  criteria:"))
    from specops_dag.delivery.lifecycle import new_delivery
    from specops_dag.workflow.catalog import definition_roots, load_catalog

    new_delivery(store, load_catalog(definition_roots(store.root), display_base=store.root),
                 "agentic", "d2", "Write notes.")
    nodes = {"write": [{"literal": {}}] * 2,
             "write.review": [verdict("BLOCK", 5, 7), verdict("PASS", 9, 7)]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d2", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d2", "write", settings=settings_for(server, tmp_path))
    assert first.status == "failed"
    assert (second.status, second.message) == (
        "environment", "blocked: budget: the review rounds of step `write` used 2400 of its 2000 "
        "tokens (phase `c-eval` budget.tokens); no further codex call is made")


def test_budgets_count_uncached_input_and_status_shows_cached_input_beside(
        tmp_path: Path) -> None:
    from ..support.cli import specops_at

    usage = {"input_tokens": 1000, "cached_input_tokens": 800, "output_tokens": 100}
    store = review_root(tmp_path)
    nodes = {"write": [{"literal": {"usage": usage}}],
             "write.review": [{"literal": {"usage": usage, "review": verdict(
                 "PASS", 9, 7)["literal"]["review"]}}]}
    with replay(tmp_path, nodes) as server:
        assert run_step(store, "d1", "write", settings=settings_for(server, tmp_path)).status == (
            "completed")
    step = store.read("d1").get_step("write")
    assert step_tokens(step) == 5 * (1000 - 800 + 100)  # 3 generator + 2 evaluator requests
    text = specops_at(store.root, "status", "d1").stdout
    # priced as gpt-5.5 (the replay agent's model): uncached input $1.25, cached input $0.125,
    # output $10 per 1M tokens: 1000, 4000 and 500 of them
    assert "[1500 tokens, 4000 cached, $0.00675]" in text
    assert "tokens: 1500 (uncached input + output; 4000 cached input beside)" in text
    assert ("cost: $0.00675 (prices as of 2026-12-01, built-in; cached input priced as cached)"
            in text.splitlines())
    cost = json.loads(specops_at(store.root, "status", "d1", "--json").stdout)["cost"]
    assert cost == {"delivery": 0.00675, "budget": None, "per_node": {"write": 0.00675},
                    "unpriced": None, "as_of": "2026-12-01", "source": "built-in"}

"""The generator ⇄ evaluator loop with the real codex CLI (the replay agent plays both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.execution.step import run_step

from ..support.agents import (
    attempts,
    replay,
    requests,
    review_root,
    settings_for,
    verdict,
    wrote,
)

pytestmark = pytest.mark.e2e

# What the evaluator's READ and SKILLS name, as the literal agent read them before each verdict.
# (`validation: none`: no validation logs to read)
EVALUATOR_READS = ["phases/d1/request.md", "phases/d1/write/notes.md",
                   "phases/d1/snapshot/skills/c-eval-skill/SKILL.md"]


def test_a_block_then_a_pass_completes_in_round_two_with_the_review_as_feedback(
        tmp_path: Path) -> None:
    store = review_root(tmp_path)
    nodes = {"write": [{"literal": {}}, {"literal": {}}],
             "write.review": [verdict("BLOCK", 5, 7), verdict("PASS", 9, 7)]}
    with replay(tmp_path, nodes) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (first.status, second.status) == ("failed", "completed")
    assert first.message.startswith("attempt 1/3 failed: review round 1 blocked: the evaluator's "
                                    "verdict is BLOCK; under threshold: complete 5/8; read the "
                                    "full report at phases/d1/write/reviews/write-r1-report.md")
    step = store.read("d1").get_step("write")
    assert [(r.round, r.verdict) for r in step.reviews] == [(1, "BLOCK"), (2, "PASS")]
    assert step.reviews[1].scores == {"complete": 9, "clear": 7}
    report = store.root / "phases/d1/write/reviews/write-r1-report.md"
    assert report.read_text().startswith("VERDICT: BLOCK")
    second_generator = attempts(tmp_path, "write")[1][0]
    assert "review round 1 blocked" in json.dumps(second_generator["input"])
    assert second.review["verdict"] == "PASS"
    assert step.summary == wrote("write", "notes.md")
    evaluator = [[r["literal"] for r in a] for a in attempts(tmp_path, "write.review")]
    reviewed = {"action": "review", "criteria": ["complete", "clear"], "verbatim": True}
    assert evaluator == [  # each round read the generator's notes first, round 2 also round 1's
        [{"action": "read", "paths": EVALUATOR_READS}, reviewed],
        [{"action": "read", "paths": [*EVALUATOR_READS[:2],
                                      "phases/d1/write/reviews/write-r1-report.md",
                                      EVALUATOR_READS[2]]}, reviewed]]


def test_max_rounds_without_a_pass_is_an_error(tmp_path: Path) -> None:
    store = review_root(tmp_path, max_rounds=2)
    nodes = {"write": [{"literal": {}}, {"literal": {}}],
             "write.review": [verdict("BLOCK", 5, 7), verdict("BLOCK", 6, 7)]}
    with replay(tmp_path, nodes) as server:
        outcomes = [run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
                    for _ in range(2)]
    assert [o.status for o in outcomes] == ["failed", "error"]
    assert outcomes[1].message.startswith("review: max_rounds 2 reached without PASS: review "
                                          "round 2 blocked: ")
    assert store.read("d1").get_step("write").status == "error"


def test_a_malformed_report_is_asked_for_again_in_the_same_round_and_never_charged(
        tmp_path: Path) -> None:
    store = review_root(tmp_path)
    nodes = {"write": [{"literal": {}}],
             "write.review": [{"literal": {"review": "Looks great to me!"}},
                              verdict("PASS", 9, 7)]}
    with replay(tmp_path, nodes) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed"
    record = store.read("d1").get_step("write").reviews[0]
    assert (record.round, record.verdict, record.reasked) == (
        1, "PASS", "malformed report: no <<<REVIEW … >>> block in the evaluator's last message; "
                   "excerpt: Looks great to me!")
    reviews = store.root / "phases/d1/write/reviews"
    assert "Your review could not be read (malformed report: no <<<REVIEW" in (
        reviews / "write-r1-reask-prompt.md").read_text()
    assert (reviews / "sessions/write-r1.last-message.md").read_text() == "Looks great to me!"


def test_a_report_unreadable_twice_blocks_the_step_and_is_not_charged_to_the_generator(
        tmp_path: Path) -> None:
    store = review_root(tmp_path)
    nodes = {"write": [{"literal": {}}],
             "write.review": [{"literal": {"review": "Looks great to me!"}},
                              {"literal": {"review": "<<<REVIEW\nVERDICT: PASS\nVERDICT: BLOCK\n>>>"}}]}
    with replay(tmp_path, nodes) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    reason = ("review round 1: the evaluator's report could not be read twice (malformed report: "
              "2 VERDICT lines; give exactly one; excerpt: VERDICT: PASS VERDICT: BLOCK); it is not "
              "charged to the generator: read phases/d1/write/reviews/write-r1-report.md, then "
              "`specops resume d1 write`")
    assert (outcome.status, outcome.message) == ("environment", f"blocked: {reason}")
    step = store.read("d1").get_step("write")
    assert (step.status, step.blocked_reason, step.last_failure) == ("blocked", reason, None)
    report = store.root / "phases/d1/write/reviews/write-r1-report.md"
    assert report.read_text() == "VERDICT: PASS\nVERDICT: BLOCK\n"


def test_an_evaluator_that_tries_to_write_is_stopped_by_the_sandbox(tmp_path: Path) -> None:
    store = review_root(tmp_path)
    attempt = verdict("PASS", 9, 9)
    attempt["literal"]["before"] = [{"shell": "echo pwned > hacked.txt"}]
    nodes = {"write": [{"literal": {}}], "write.review": [attempt]}
    with replay(tmp_path, nodes) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed"
    assert not (store.root / "hacked.txt").exists()
    after_write = [r for r in requests(tmp_path) if r["node"] == "write.review"][1]
    output = json.dumps(after_write["input"][-1])
    assert "Read-only file system" in output or "denied" in output.lower()
    review = store.read("d1").get_step("write").reviews[0]
    assert review.sandbox_denials == ['{"cmd": "echo pwned > hacked.txt"}']

"""Verdicts as models write them: fences, emphasis, punctuation, bullets, tables, `9/10`."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.agent.review import Criterion, extract_review_block, read_review, save_report

CRITERIA = [Criterion("correctness", "The behaviour is right.", 8),
            Criterion("no-scope-creep", "Nothing outside the spec changed.", 6)]


def review_of(tmp_path: Path, message: str):
    path = save_report(tmp_path / "build", "build", 1, extract_review_block(message), message)
    return read_review(path, CRITERIA)


DECORATED = [
    ("Report:\n```text\n<<<REVIEW\nVERDICT: PASS\nSCORE correctness: 9 — src/A.cs:3\n"
     "SCORE no-scope-creep: 8 — diff is small\n>>>\n```\nDone.",
     "PASS", {"correctness": 9, "no-scope-creep": 8}),
    ("<<<REVIEW\n```\nVERDICT: BLOCK\nSCORE correctness: 4 — no test\nSCORE no-scope-creep: 9 — ok"
     "\n```\n>>>", "BLOCK", {"correctness": 4, "no-scope-creep": 9}),
    ("```\n<<<REVIEW\nVERDICT: BLOCK\nSCORE correctness: 3 — `hash >>> 7` in src/Hash.cs:4\n"
     "SCORE no-scope-creep: 9 — ok >>>\n```", "BLOCK", {"correctness": 3, "no-scope-creep": 9}),
    ("<<<REVIEW\n**VERDICT:** PASS\n- SCORE correctness: **9** / 10 — checked\n"
     "SCORE `no-scope-creep`: 9/10 — diff\n>>>", "PASS", {"correctness": 9, "no-scope-creep": 9}),
    ("<<<REVIEW\nVerdict: **pass**.\nscore Correctness: 10/10.\n"
     "SCORE NO-SCOPE-CREEP: 6\n>>>", "PASS", {"correctness": 10, "no-scope-creep": 6}),
    ("<<<REVIEW\n- VERDICT: PASS\n- **correctness**: 9/10\n- __no-scope-creep__: 8 — clean\n"
     "FINDINGS:\n- correctness: 3 tests could assert more\n>>>",
     "PASS", {"correctness": 9, "no-scope-creep": 8}),
    ("<<<REVIEW\n| VERDICT | PASS |\n\n| Criterion | Score | Evidence |\n|---|:---:|---|\n"
     "| correctness | 9/10 | src/A.cs:3 |\n| `No-Scope-Creep` | **8** | diff |\n"
     "| overall | 8/10 | not a criterion |\n>>>", "PASS", {"correctness": 9, "no-scope-creep": 8}),
    ("<<<REVIEW\nVERDICT — BLOCK\n| Criterion | Threshold | Score |\n|---|---|---|\n"
     "| correctness | 8 | 5 / 10 |\n| no-scope-creep | 6 | 7 |\n>>>",
     "BLOCK", {"correctness": 5, "no-scope-creep": 7}),
    ("<<<REVIEW\n## VERDICT: BLOCK — tests fail\nScore summary: mixed\n"
     "1. SCORE correctness: 2 — red\n2. SCORE no-scope-creep: 9 — ok\n"
     "| correctness | 2/10 | the same score again |\n>>>",
     "BLOCK", {"correctness": 2, "no-scope-creep": 9}),
    ("<<<REVIEW\n| VERDICT: PASS | all criteria met |\nSCORE correctness = 8\n"
     "SCORE no-scope-creep — 10/10 — nothing else touched\n>>>",
     "PASS", {"correctness": 8, "no-scope-creep": 10}),
]


@pytest.mark.parametrize("message, verdict, scores", DECORATED, ids=[
    "fenced-block", "fence-inside", "close-at-end-of-last-line", "emphasis-and-slash-ten",
    "lowercase-and-punctuation", "bullets", "tables", "table-score-column", "heading-and-numbers",
    "table-verdict-cell-and-separators"])
def test_a_decorated_review_reads_as_its_exact_verdict_and_scores(
        tmp_path: Path, message: str, verdict: str, scores: dict[str, int]) -> None:
    review = review_of(tmp_path, message)
    assert (review.verdict, review.scores) == (verdict, scores), review.reason


UNKNOWN = "(criteria: correctness, no-scope-creep)"
MALFORMED = [
    ("SCORE correctness: 9 — x\nSCORE no-scope-creep: 9 — y",
     "no `VERDICT: PASS` or `VERDICT: BLOCK` line"),
    ("**VERDICT:** PASS\n| VERDICT | BLOCK |\nSCORE correctness: 9",
     "2 VERDICT lines; give exactly one"),
    ("Verdict: pass or block", "VERDICT `pass or block` is neither PASS nor BLOCK"),
    ("VERDICT: PASS\nSCORE correctness: 11 — x",
     "SCORE correctness is `11`, not an integer from 0 to 10"),
    ("VERDICT: PASS\n- SCORE correctness: **11** / 10", "SCORE correctness is `11 / 10`, not an "
     "integer from 0 to 10"),
    ("VERDICT: PASS\nSCORE correctness: 9/8 — x",
     "SCORE correctness is `9/8`, not a score out of 10"),
    ("VERDICT: PASS\n| correctness | 12 | x |", "SCORE correctness is `12`, not an integer from 0 "
     "to 10"),
    ("VERDICT: PASS\n| correctness | high | x |",
     "SCORE correctness is `high`, not an integer from 0 to 10"),
    ("VERDICT: PASS\nSCORE speed: 9 — fast", f"SCORE for unknown criterion `speed` {UNKNOWN}"),
    ("VERDICT: PASS\nSCORE correctness: 9 — x\n| correctness | 5/10 | y |",
     "criterion `correctness` is scored twice"),
]


@pytest.mark.parametrize("block, problem", MALFORMED, ids=[
    "no-verdict", "two-verdicts", "neither-verdict", "score-eleven", "eleven-out-of-ten",
    "out-of-eight", "table-score-twelve", "table-score-word", "unknown-criterion",
    "conflicting-scores"])
def test_an_unreadable_block_is_malformed_with_the_problem_and_an_excerpt(
        tmp_path: Path, block: str, problem: str) -> None:
    review = review_of(tmp_path, f"<<<REVIEW\n{block}\n>>>")
    assert (review.verdict, review.passed, review.scores) == ("MALFORMED", False, {})
    assert review.failures == ("correctness", "no-scope-creep")
    assert review.reason == f"malformed report: {problem}; excerpt: {' '.join(block.split())}"


def test_a_message_without_a_block_is_malformed_with_an_excerpt_of_the_message(
        tmp_path: Path) -> None:
    review = review_of(tmp_path, "I think it passes.\n\nVERDICT: PASS")
    assert (review.verdict, review.passed) == ("MALFORMED", False)
    assert review.reason == ("malformed report: no <<<REVIEW … >>> block in the evaluator's last "
                             "message; excerpt: I think it passes. VERDICT: PASS")


def test_the_excerpt_is_cut_to_two_hundred_characters(tmp_path: Path) -> None:
    block = "SCORE correctness: 9 — " + "x" * 300
    review = review_of(tmp_path, f"<<<REVIEW\n{block}\n>>>")
    excerpt = review.reason.split("; excerpt: ", 1)[1]
    assert excerpt == block[:199] + "…"
    assert len(excerpt) == 200


def test_a_decorated_pass_under_a_threshold_is_a_block_naming_the_criterion(
        tmp_path: Path) -> None:
    review = review_of(tmp_path, "```\n<<<REVIEW\n**VERDICT:** pass\n"
                                 "| correctness | 7/10 | one path untested |\n"
                                 "- SCORE no-scope-creep: **9** / 10\n>>>\n```")
    assert (review.verdict, review.scores) == ("BLOCK", {"correctness": 7, "no-scope-creep": 9})
    assert review.failures == ("correctness",)
    assert review.reason == ("hard thresholds overrule the evaluator's PASS: under threshold: "
                             "correctness 7/8")


def test_without_declared_criteria_score_lines_are_ignored_and_the_verdict_decides(
        tmp_path: Path) -> None:
    # a contract review: the evaluator's own skill asks for SCORE lines, the contract has none
    report = tmp_path / "write-contract-r1-report.md"
    report.write_text("VERDICT: PASS\nSCORE acceptance-criteria-covered: 9 — the tests are named\n"
                      "FINDINGS:\n- none\n")
    review = read_review(report, ())
    assert (review.verdict, review.scores, review.failures) == ("PASS", {}, ())

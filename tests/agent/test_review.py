from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specops_dag.agent.review import (
    Criterion,
    Review,
    evaluator_prompt_section,
    extract_review_block,
    feedback_for_generator,
    read_review,
    save_report,
)
from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.errors import UsageError
from specops_dag.workflow.catalog import load_catalog

CRITERIA = [
    Criterion("acceptance-criteria-covered", "Every AC of plan/spec.md is implemented.", 8),
    Criterion("tests-prove-behaviour", "Each AC has a test that checks its behaviour.", 7),
    Criterion("no-scope-creep", "Nothing outside the spec changed.", 6),
]

PASSING = """\
Checked the build against plan/spec.md.
<<<REVIEW
VERDICT: PASS
SCORE acceptance-criteria-covered: 9 — AC-1..AC-3 in src/Feeds/FeedCache.cs:12-48
SCORE tests-prove-behaviour: 8 — FeedCacheTests.Get_Expired_Refetches asserts the refetch
SCORE no-scope-creep: 10 — git diff touches only src/Feeds and tests/Feeds.Tests
FINDINGS:
- none
>>>
Report above."""


def report(verdict: str = "PASS", **scores: object) -> str:
    lines = [f"VERDICT: {verdict}"]
    lines += [f"SCORE {cid.replace('_', '-')}: {s} — evidence" for cid, s in scores.items()]
    return "<<<REVIEW\n" + "\n".join(lines) + "\n>>>"


def saved(tmp_path: Path, message: str, round_no: int = 1) -> Path:
    return save_report(tmp_path / "build", "build", round_no, extract_review_block(message),
                       message)


def test_a_passing_report_round_trips_through_the_saved_file(tmp_path: Path) -> None:
    path = saved(tmp_path, PASSING)
    assert path == tmp_path / "build/reviews/build-r1-report.md"
    assert path.read_text().startswith("VERDICT: PASS\nSCORE acceptance-criteria-covered: 9 — ")
    assert path.read_text().endswith("FINDINGS:\n- none\n")
    review = read_review(path, CRITERIA)
    assert review == Review(
        "PASS", {"acceptance-criteria-covered": 9, "tests-prove-behaviour": 8,
                 "no-scope-creep": 10}, (), "all criteria met", path.read_text(), 1,
        {"acceptance-criteria-covered": 8, "tests-prove-behaviour": 7, "no-scope-creep": 6})
    assert review.passed


def test_the_verdict_is_read_from_the_file_not_from_the_chat(tmp_path: Path) -> None:
    path = saved(tmp_path, PASSING)
    path.write_text(path.read_text().replace("VERDICT: PASS", "VERDICT: BLOCK"))
    assert read_review(path, CRITERIA).verdict == "BLOCK"


def test_a_block_verdict_stays_block_even_when_every_threshold_is_met(tmp_path: Path) -> None:
    path = saved(tmp_path, report("BLOCK", acceptance_criteria_covered=9,
                                  tests_prove_behaviour=9, no_scope_creep=9))
    review = read_review(path, CRITERIA)
    assert (review.verdict, review.failures) == ("BLOCK", ())
    assert review.reason == ("the evaluator's verdict is BLOCK although every criterion reached "
                             "its threshold; see the findings in the report")


def test_a_block_verdict_names_the_criteria_under_threshold(tmp_path: Path) -> None:
    path = saved(tmp_path, report("BLOCK", acceptance_criteria_covered=5,
                                  tests_prove_behaviour=9, no_scope_creep=2))
    review = read_review(path, CRITERIA)
    assert review.failures == ("acceptance-criteria-covered", "no-scope-creep")
    assert review.reason == ("the evaluator's verdict is BLOCK; under threshold: "
                             "acceptance-criteria-covered 5/8, no-scope-creep 2/6")


def test_hard_thresholds_block_a_pass_verdict_with_a_score_below_threshold(tmp_path: Path) -> None:
    path = saved(tmp_path, report("PASS", acceptance_criteria_covered=8,
                                  tests_prove_behaviour=6, no_scope_creep=10))
    review = read_review(path, CRITERIA)
    assert (review.verdict, review.failures) == ("BLOCK", ("tests-prove-behaviour",))
    assert review.reason == ("hard thresholds overrule the evaluator's PASS: under threshold: "
                             "tests-prove-behaviour 6/7")


def test_a_criterion_the_evaluator_did_not_score_blocks_a_pass(tmp_path: Path) -> None:
    path = saved(tmp_path, report("PASS", acceptance_criteria_covered=3,
                                  tests_prove_behaviour=10))
    review = read_review(path, CRITERIA)
    assert review.verdict == "BLOCK"
    assert review.scores == {"acceptance-criteria-covered": 3, "tests-prove-behaviour": 10}
    assert review.failures == ("acceptance-criteria-covered", "no-scope-creep")
    assert review.reason == ("hard thresholds overrule the evaluator's PASS: under threshold: "
                             "acceptance-criteria-covered 3/8; not scored: no-scope-creep")


def test_a_message_without_a_review_block_is_saved_marked_and_is_malformed(
        tmp_path: Path) -> None:
    message = "VERDICT: PASS\nEverything looks great."
    assert extract_review_block(message) is None
    path = saved(tmp_path, message)
    assert path.read_text() == ("MALFORMED: no <<<REVIEW … >>> block in the evaluator's last "
                                "message\n\nVERDICT: PASS\nEverything looks great.\n")
    review = read_review(path, CRITERIA)
    assert (review.verdict, review.scores, review.passed) == ("MALFORMED", {}, False)
    assert review.failures == tuple(c.id for c in CRITERIA)
    assert review.reason == ("malformed report: no <<<REVIEW … >>> block in the evaluator's last "
                             "message; excerpt: VERDICT: PASS Everything looks great.")


def test_an_empty_last_message_is_saved_with_a_note(tmp_path: Path) -> None:
    path = saved(tmp_path, "  \n")
    assert path.read_text().endswith("\n\n(the last message was empty)\n")


@pytest.mark.parametrize("block, reason", [
    ("SCORE acceptance-criteria-covered: 9 — x",
     "no `VERDICT: PASS` or `VERDICT: BLOCK` line"),
    ("VERDICT: PASS|BLOCK", "VERDICT `PASS|BLOCK` is neither PASS nor BLOCK"),
    ("VERDICT: PASS\nVERDICT: BLOCK", "2 VERDICT lines; give exactly one"),
    ("VERDICT: PASS\nSCORE speed: 9 — fast",
     "SCORE for unknown criterion `speed` (criteria: acceptance-criteria-covered, "
     "tests-prove-behaviour, no-scope-creep)"),
    ("VERDICT: PASS\nSCORE no-scope-creep: 8.5 — x",
     "SCORE no-scope-creep is `8.5`, not an integer from 0 to 10"),
    ("VERDICT: PASS\nSCORE no-scope-creep: 11 — x",
     "SCORE no-scope-creep is `11`, not an integer from 0 to 10"),
    ("VERDICT: PASS\nSCORE no-scope-creep: <0-10> — <one-line evidence>",
     "SCORE no-scope-creep is `<0-10>`, not an integer from 0 to 10"),
    ("VERDICT: PASS\nSCORE no-scope-creep 9",
     "SCORE line `SCORE no-scope-creep 9` does not match `SCORE <criterion-id>: <0-10> — "
     "<evidence>`"),
    ("VERDICT: PASS\nSCORE no-scope-creep: 9 — a\nSCORE no-scope-creep: 7 — b",
     "criterion `no-scope-creep` is scored twice"),
], ids=["no-verdict", "template-verdict", "two-verdicts", "unknown-criterion", "decimal",
        "above-ten", "template-score", "no-colon", "scored-twice"])
def test_a_malformed_report_is_malformed_with_the_problem_named(tmp_path: Path, block: str,
                                                                reason: str) -> None:
    path = saved(tmp_path, f"<<<REVIEW\n{block}\n>>>")
    review = read_review(path, CRITERIA)
    assert (review.verdict, review.scores) == ("MALFORMED", {})
    assert review.failures == tuple(c.id for c in CRITERIA)
    assert review.reason == f"malformed report: {reason}; excerpt: {' '.join(block.split())}"


def test_the_last_of_several_review_blocks_wins(tmp_path: Path) -> None:
    draft = report("BLOCK", acceptance_criteria_covered=2)
    message = f"First pass:\n{draft}\nAfter a closer look:\n{PASSING}"
    assert extract_review_block(message).startswith("VERDICT: PASS\n")
    assert read_review(saved(tmp_path, message), CRITERIA).verdict == "PASS"


def test_a_block_is_ended_by_a_line_of_its_own_not_by_a_shift_operator_in_evidence() -> None:
    message = ("<<<REVIEW\nVERDICT: BLOCK\nSCORE no-scope-creep: 3 — `hash >>> 7` added in "
               "src/Hash.cs:4\n>>>\n")
    assert extract_review_block(message) == ("VERDICT: BLOCK\nSCORE no-scope-creep: 3 — `hash "
                                             ">>> 7` added in src/Hash.cs:4")


def test_a_block_without_its_closing_marker_is_absent() -> None:
    assert extract_review_block("<<<REVIEW\nVERDICT: PASS\n") is None
    assert extract_review_block("<<<REVIEW VERDICT: PASS >>>") == "VERDICT: PASS"


def test_a_stale_report_of_the_same_round_is_overwritten_never_read(tmp_path: Path) -> None:
    stale = saved(tmp_path, PASSING, round_no=2)
    fresh = saved(tmp_path, "I could not finish the review.", round_no=2)
    assert fresh == stale
    assert fresh.read_text().startswith("MALFORMED: ")
    assert read_review(fresh, CRITERIA).verdict == "MALFORMED"
    assert sorted(p.name for p in fresh.parent.iterdir()) == ["build-r2-report.md"]


def test_each_round_keeps_its_own_report(tmp_path: Path) -> None:
    first = saved(tmp_path, report("BLOCK", no_scope_creep=1), round_no=1)
    second = saved(tmp_path, PASSING, round_no=2)
    assert (first.name, second.name) == ("build-r1-report.md", "build-r2-report.md")
    assert read_review(first, CRITERIA).round_no == 1
    assert read_review(second, CRITERIA).round_no == 2


def test_reading_a_file_that_is_not_a_round_report_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("VERDICT: PASS\n")
    with pytest.raises(UsageError) as err:
        read_review(path, CRITERIA)
    assert err.value.message == (f"{path}: not a review report name (expected "
                                 "<node>-r<N>-report.md); read reports written by save_report")


def test_the_generator_feedback_names_the_reason_the_report_path_and_the_scores(
        tmp_path: Path) -> None:
    path = saved(tmp_path, report("PASS", acceptance_criteria_covered=9,
                                  tests_prove_behaviour=4), round_no=2)
    review = read_review(path, CRITERIA)
    text = feedback_for_generator(review, "phases/d1/build/reviews/build-r2-report.md")
    assert text == (
        "review round 2 blocked: hard thresholds overrule the evaluator's PASS: under threshold: "
        "tests-prove-behaviour 4/7; not scored: no-scope-creep; read the full report at "
        "phases/d1/build/reviews/build-r2-report.md\n"
        "scores:\n"
        "- acceptance-criteria-covered: 9/8\n"
        "- tests-prove-behaviour: 4/7 (below threshold)\n"
        "- no-scope-creep: not scored (threshold 6)\n"
        "Fix every finding in the report that applies to your work, keep the validation green, "
        "then finish the step as before; the next review round evaluates the code afresh.")
    assert "evidence" not in text  # the evaluator's text stays in the file


def test_the_feedback_of_a_malformed_report_says_so(tmp_path: Path) -> None:
    review = read_review(saved(tmp_path, "no block here"), CRITERIA)
    first = feedback_for_generator(review, "r.md").splitlines()[0]
    assert first == ("review round 1 blocked: malformed report: no <<<REVIEW … >>> block in the "
                     "evaluator's last message; excerpt: no block here; read the full report at "
                     "r.md")


def test_the_prompt_section_lists_read_paths_criteria_and_the_exact_block_format() -> None:
    read = ["phases/d1/plan/plan/spec.md (sha256 aa11) — input `spec`",
            "phases/d1/build/build/changes.md (sha256 bb22) — generator output"]
    text = evaluator_prompt_section(CRITERIA, "build", read, 2, 3,
                                    skill_lines=["entry: `pbr-evaluator` phases/d1/s.md"])
    assert text.startswith("# Current step: review of `build` (review round 2 of 3; evaluator, "
                           "read-only)\n\nREAD (in order):\n"
                           "1. phases/d1/plan/plan/spec.md (sha256 aa11) — input `spec`\n"
                           "2. phases/d1/build/build/changes.md (sha256 bb22) — generator output\n"
                           "\nSKILLS (from the delivery snapshot):\n"
                           "- entry: `pbr-evaluator` phases/d1/s.md\n\nTASK:\n")
    assert "Read-only: do not modify, create or delete any file" in text
    assert "The generator revised its work after review round 1" in text
    assert "- `tests-prove-behaviour` (threshold 7/10): Each AC has a test that checks" in text
    assert text.endswith(
        "<<<REVIEW\n"
        "VERDICT: PASS|BLOCK\n"
        "SCORE acceptance-criteria-covered: <0-10> — <one-line evidence>\n"
        "SCORE tests-prove-behaviour: <0-10> — <one-line evidence>\n"
        "SCORE no-scope-creep: <0-10> — <one-line evidence>\n"
        "FINDINGS:\n"
        "- <path:line — what is wrong and what would fix it>\n"
        ">>>")


def test_the_prompt_section_names_paths_and_never_pastes_file_bodies(tmp_path: Path) -> None:
    spec = tmp_path / "spec.md"
    spec.write_text("AC-1 SECRET-BODY-LINE\n")
    text = evaluator_prompt_section(CRITERIA, "build", [f"{spec} (sha256 x)"], 1, 3)
    assert str(spec) in text
    assert "SECRET-BODY-LINE" not in text
    assert "revised its work" not in text
    assert "SKILLS" not in text


def test_the_built_in_plan_build_review_workflow_reviews_build_with_pbr_evaluate() -> None:
    catalog = load_catalog([BUILTIN_DEFS])
    wf = catalog.workflows["plan-build-review"]
    assert [(n.id, n.phase, n.needs) for n in wf.nodes] == [
        ("plan", "pbr-plan", []), ("build", "pbr-build", ["plan"])]
    build = wf.nodes[1]
    assert (build.review.phase, build.review.max_rounds, build.review.platforms) == (
        "pbr-evaluate", 3, {"aspnetcore": "pbr-qa"})
    contract = catalog.phases["pbr-build"].execution.contract
    assert (contract.evaluator, contract.max_rounds) == ("pbr-contract", 2)
    for pid in ("pbr-qa", "pbr-contract"):
        judge = catalog.phases[pid].execution
        assert (judge.executor.kind, judge.sandbox) == ("evaluator", "read-only")
    evaluate = catalog.phases["pbr-evaluate"]
    assert (evaluate.execution.executor.kind, evaluate.execution.sandbox) == (
        "evaluator", "read-only")
    assert 3 <= len(evaluate.execution.criteria) <= 5
    assert catalog.phases["pbr-build"].execution.gates.before == "target-write"
    frozen = [f.display.removeprefix("built-in:") for f in catalog.files_of("plan-build-review")]
    assert {f"workflow_defs/phases/{pid}.yaml" for pid in ("pbr-evaluate", "pbr-qa",
                                                           "pbr-contract")} <= set(frozen)
    text = evaluator_prompt_section(evaluate.execution.criteria, "build", [], 1, 3)
    assert "SCORE acceptance-criteria-covered: <0-10>" in text


def test_the_built_in_full_delivery_reviews_the_integrated_work_and_contracts_each_task() -> None:
    catalog = load_catalog([BUILTIN_DEFS])
    wf = catalog.workflows["full-delivery"]
    nodes = {n.id: n for n in wf.nodes}
    assert nodes["develop"].review is None  # a fan-out: its merged tasks never run again
    review = nodes["integrate"].review
    assert (review.phase, review.max_rounds, review.platforms) == (
        "full-evaluate", 3, {"aspnetcore": "full-qa"})
    assert (nodes["integrate"].needs, nodes["verify"].needs) == (["develop"], ["integrate"])
    assert {p: r.node for p, r in nodes["verify"].inputs.items()} == {
        "previous": "integrate", "requirements": "requirements"}
    assert nodes["delivery"].inputs["implementation"].node == "integrate"
    contract = catalog.phases["full-develop"].execution.contract
    assert (contract.evaluator, contract.max_rounds) == ("full-contract", 2)
    contract = catalog.phases["full-integrate"].execution.contract
    assert (contract.evaluator, contract.max_rounds) == ("full-integrate-contract", 2)
    for pid in ("full-evaluate", "full-qa", "full-contract", "full-integrate-contract"):
        judge = catalog.phases[pid].execution
        assert (judge.executor.kind, judge.sandbox) == ("evaluator", "read-only")
    qa = catalog.phases["full-qa"].execution.qa
    assert (qa.probes, [(b.id, b.path, b.status) for b in qa.browser]) == ([], [("home", "/", None)])


def test_importing_the_review_module_does_not_import_dagster() -> None:
    code = "import sys, specops_dag.agent.review; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "False", out.stderr

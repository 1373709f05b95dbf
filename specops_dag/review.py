"""The evaluator's side of a review loop (seed 003, seed 000, DESIGN §9): its READ / TASK / REPORT
prompt section, saving the `<<<REVIEW … >>>` block of its last message to `reviews/`, and the
verdict read back from that file under hard per-criterion thresholds. Never reads chat for one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from .errors import UsageError
from .state import write_text_atomic

OPEN, CLOSE = "<<<REVIEW", ">>>"
MALFORMED = "MALFORMED: no <<<REVIEW … >>> block in the evaluator's last message"
REPORT_NAME = re.compile(r"-r(\d+)-report\.md$")
# Keywords are upper case as the format says, so prose such as "Score summary" is not a line.
VERDICT_LINE = re.compile(r"^VERDICT\s*:\s*(?P<verdict>.*?)\s*$")
SCORE_LINE = re.compile(r"^SCORE\s+(?P<id>[^\s:]+)\s*:\s*(?P<score>\S+)"
                        r"(?:\s+(?:[—–-]+\s*)?(?P<evidence>.*))?$")
SCORE_SHAPE = "`SCORE <criterion-id>: <0-10> — <evidence>`"


class CriterionLike(Protocol):
    id: str
    description: str
    threshold: int


@dataclass(frozen=True)
class Criterion:
    """What an evaluator phase declares: scored 0–10, it must reach `threshold` (seed 003)."""

    id: str
    description: str
    threshold: int


@dataclass(frozen=True)
class Review:
    verdict: str  # "PASS" or "BLOCK", after the hard thresholds
    scores: dict[str, int]  # criterion id -> 0..10, declared order
    failures: tuple[str, ...]  # criterion ids under threshold or not scored; all if malformed
    reason: str
    body: str  # the report text as saved
    round_no: int = 0
    thresholds: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"


def evaluator_prompt_section(criteria: Iterable[CriterionLike], generator_node: str,
                             read_lines: list[str], round_no: int, max_rounds: int,
                             skill_lines: Sequence[str] = (), where: str = "") -> str:
    """The evaluator's current step: READ (paths + sha256 as given), TASK, REPORT block format.
    Paths only, never file bodies (seed 000)."""
    criteria = list(criteria)
    out = [f"# Current step: review of `{generator_node}` (review round {round_no} of "
           f"{max_rounds}; evaluator, read-only)", "", *([where, ""] if where else []),
           "READ (in order):"]
    out += [f"{i}. {line}" for i, line in enumerate(read_lines, 1)] or ["(nothing to read)"]
    if skill_lines:
        out += ["", "SKILLS (from the delivery snapshot):", *(f"- {s}" for s in skill_lines)]
    out += ["", "TASK:",
            f"Evaluate the work of `{generator_node}` against each criterion below. Be skeptical: "
            "its changes list, step record and final message are claims, not evidence. Open the "
            "changed code and tests yourself and check the validation evidence (build and test "
            "logs, TRX files); look for what is missing, stubbed, untested or only claimed. Score "
            "every criterion from 0 to 10 with one line of concrete evidence (path:line, test "
            "name, log or TRX path). A score below the threshold blocks the work, whatever the "
            "rest looks like; do not talk yourself into passing a real problem.",
            "Read-only: do not modify, create or delete any file (no fixes, no notes, no builds "
            "that write output); the caller saves your report."]
    if round_no > 1:
        out.append(f"The generator revised its work after review round {round_no - 1}; judge the "
                   "current state of the code afresh, not its description of the fixes.")
    out += ["", "Criteria (a criterion passes at or above its threshold):"]
    out += [f"- `{c.id}` (threshold {c.threshold}/10): {c.description.strip()}" for c in criteria]
    if not criteria:
        out.append("- (none declared: the VERDICT alone decides)")
    ids = [c.id for c in criteria] or ["<criterion-id>"]
    out += ["", "REPORT: your LAST message must contain exactly one block in this format, one "
            "SCORE line per criterion in this order; VERDICT is PASS only if every score reaches "
            "its threshold, otherwise BLOCK. Findings go under FINDINGS, one per line, each with "
            "a path and what would fix it. The verdict is read from the saved block, not from "
            "anything else you say.",
            OPEN, "VERDICT: PASS|BLOCK",
            *(f"SCORE {cid}: <0-10> — <one-line evidence>" for cid in ids),
            "FINDINGS:", "- <path:line — what is wrong and what would fix it>", CLOSE]
    return "\n".join(out)


def extract_review_block(last_message: str) -> str | None:
    """The text between the LAST `<<<REVIEW` and the `>>>` after it (a `>>>` on its own line
    first, so C#'s `>>>` operator in evidence does not end the block); None if absent."""
    start = last_message.rfind(OPEN)
    if start < 0:
        return None
    rest = last_message[start + len(OPEN):]
    own_line = re.search(r"^[ \t]*>>>[ \t]*$", rest, re.MULTILINE)
    end = own_line.start() if own_line else rest.find(CLOSE)
    return None if end < 0 else rest[:end].strip()


def report_file(node_dir: Path, node: str, round_no: int) -> Path:
    return node_dir / "reviews" / f"{node}-r{round_no}-report.md"


def save_report(node_dir: Path, node: str, round_no: int, block: str | None,
                last_message: str) -> Path:
    """Write this round's report, replacing any stale file of the same round (seed 000: an old
    report must never be read as the new verdict). No block → the whole message, marked."""
    path = report_file(node_dir, node, round_no)
    if block is None:
        text = f"{MALFORMED}\n\n{last_message.strip() or '(the last message was empty)'}\n"
    else:
        text = block.strip() + "\n"
    write_text_atomic(path, text)
    return path


def read_review(path: Path, criteria: Iterable[CriterionLike]) -> Review:
    """The verdict from the saved file. Hard thresholds decide: a criterion not scored or below
    its threshold blocks even a PASS; a malformed report blocks."""
    criteria = list(criteria)
    found = REPORT_NAME.search(path.name)
    if found is None:
        raise UsageError(f"{path}: not a review report name (expected <node>-r<N>-report.md); "
                         "read reports written by save_report")
    try:
        body = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise UsageError(f"{path}: cannot read the review report ({err.strerror}); re-run the "
                         "review round") from err
    thresholds = {c.id: c.threshold for c in criteria}
    base = Review("BLOCK", {}, tuple(thresholds), "", body, int(found.group(1)), thresholds)
    verdict, scores, problem = parse_report(body, thresholds)
    if problem is not None:
        return replace(base, reason=f"malformed report: {problem}")
    under = [f"{cid} {scores[cid]}/{t}" for cid, t in thresholds.items()
             if cid in scores and scores[cid] < t]
    missing = [cid for cid in thresholds if cid not in scores]
    failures = tuple(cid for cid, t in thresholds.items() if scores.get(cid, -1) < t)
    detail = "; ".join(([f"under threshold: {', '.join(under)}"] if under else [])
                       + ([f"not scored: {', '.join(missing)}"] if missing else []))
    if verdict == "PASS" and not failures:
        reason = "all criteria met"
    elif verdict == "PASS":
        reason = f"hard thresholds overrule the evaluator's PASS: {detail}"
    elif failures:
        reason = f"the evaluator's verdict is BLOCK; {detail}"
    else:
        reason = ("the evaluator's verdict is BLOCK although every criterion reached its "
                  "threshold; see the findings in the report")
    final = "PASS" if verdict == "PASS" and not failures else "BLOCK"
    return Review(final, scores, failures, reason, body, base.round_no, thresholds)


def parse_report(body: str, thresholds: dict[str, int]) -> tuple[str, dict[str, int], str | None]:
    """(verdict, scores in declared order, problem or None) from a saved report's text."""
    first = body.split("\n", 1)[0]
    if first.startswith("MALFORMED:"):
        return "", {}, first.removeprefix("MALFORMED:").strip()
    verdicts: list[str] = []
    raw: dict[str, int] = {}
    for line in (ln.strip() for ln in body.splitlines()):
        if m := VERDICT_LINE.match(line):
            verdicts.append(m["verdict"].upper())
        elif re.match(r"^SCORE\b", line):
            m = SCORE_LINE.match(line)
            if m is None:
                return "", {}, f"SCORE line `{line}` does not match {SCORE_SHAPE}"
            cid, score = m["id"], m["score"]
            if cid not in thresholds:
                known = ", ".join(thresholds) or "none"
                return "", {}, f"SCORE for unknown criterion `{cid}` (criteria: {known})"
            if not re.fullmatch(r"\d{1,2}", score) or int(score) > 10:
                return "", {}, f"SCORE {cid} is `{score}`, not an integer from 0 to 10"
            if cid in raw:
                return "", {}, f"criterion `{cid}` is scored twice"
            raw[cid] = int(score)
    if not verdicts:
        return "", {}, "no `VERDICT: PASS` or `VERDICT: BLOCK` line"
    if len(verdicts) > 1:
        return "", {}, f"{len(verdicts)} VERDICT lines; give exactly one"
    if verdicts[0] not in ("PASS", "BLOCK"):
        return "", {}, f"VERDICT `{verdicts[0]}` is neither PASS nor BLOCK"
    return verdicts[0], {cid: raw[cid] for cid in thresholds if cid in raw}, None


def feedback_for_generator(review: Review, report_path: str) -> str:
    """What the next generator attempt is told: the reason, the path of the full report, and the
    per-criterion scores; never the evaluator's whole text (seed 000: paths, not bodies)."""
    state = "passed" if review.passed else "blocked"
    lines = [f"review round {review.round_no} {state}: {review.reason}; read the full report at "
             f"{report_path}", "scores:"]
    for cid, threshold in review.thresholds.items():
        if cid not in review.scores:
            lines.append(f"- {cid}: not scored (threshold {threshold})")
        else:
            low = " (below threshold)" if review.scores[cid] < threshold else ""
            lines.append(f"- {cid}: {review.scores[cid]}/{threshold}{low}")
    if not review.thresholds:
        lines.append("- (no criteria declared)")
    if not review.passed:
        lines.append("Fix every finding in the report that applies to your work, keep the "
                     "validation green, then finish the step as before; the next review round "
                     "evaluates the code afresh.")
    return "\n".join(lines)

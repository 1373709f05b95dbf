"""The evaluator's side of a review loop (seed 003, seed 000, DESIGN §9): its READ / TASK / REPORT
prompt section, saving the `<<<REVIEW … >>>` block of its last message to `reviews/`, and the
verdict read back from that file under hard per-criterion thresholds. Never reads chat for one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from specops_dag.errors import UsageError
from specops_dag.files import write_text_atomic

OPEN, CLOSE = "<<<REVIEW", ">>>"
MALFORMED = "MALFORMED: no <<<REVIEW … >>> block in the evaluator's last message"
REPORT_NAME = re.compile(r"-r(\d+)-report\.md$")
EXCERPT_CHARS = 200
# Lines are read after markdown is looked through (see _plain): `**VERDICT:** pass.` is a verdict.
VERDICT_LINE = re.compile(r"^verdict(?:\s*[:=]|\s+[—–-]+|\s*[—–]+)\s*(?P<verdict>.*?)\s*$", re.I)
VERDICT_BARE = re.compile(r"^verdict\s+(?P<verdict>(?:pass|block)\b\W*)$", re.I)
# `SCORE` in upper case is always a score line (an unknown id is an error); in any other case,
# and without the keyword (`**id**: 9/10`), a line counts only for a declared criterion id.
SCORE_LINE = re.compile(r"^score\s+(?P<id>[^\s:=]+?)(?:\s*[:=]|\s+[—–-]+)\s*(?P<rest>.*)$", re.I)
BARE_SCORE = re.compile(r"^(?P<id>[^\s:=]+?)(?:\s*[:=]|\s+[—–-]+)\s*(?P<rest>.*)$")
SCORE_VALUE = re.compile(r"(?P<n>[-+]?\d+(?:[.,]\d+)?)(?:\s*/\s*(?P<d>[-+]?\d+(?:[.,]\d+)?))?"
                         r"(?=$|[\s.,;:)\]—–])")
SCORE_SHAPE = "`SCORE <criterion-id>: <0-10> — <evidence>`"
FENCE = re.compile(r"^[ \t]*(?:```|~~~)[\w.+-]*[ \t]*$")

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
    verdict: str  # "PASS" or "BLOCK" after the hard thresholds, or "MALFORMED" (unreadable)
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
                             skill_lines: Sequence[str] = (), where: str = "",
                             goal: str = "", qa: str = "", target: str | None = None,
                             changes: str | None = None) -> str:
    """The evaluator's current step, in the generator's order: READ (paths + sha256 as given),
    SKILLS, TASK, TARGET, CHANGES, the criteria, REPORT block format. Paths only, never file
    bodies (seed 000)."""
    criteria = list(criteria)
    out = [f"# Current step: review of `{generator_node}` (review round {round_no} of "
           f"{max_rounds}; evaluator, read-only)", "", *([where, ""] if where else []),
           "READ (in order):"]
    out += [f"{i}. {line}" for i, line in enumerate(read_lines, 1)] or ["(nothing to read)"]
    if skill_lines:
        out += ["", "SKILLS (from the delivery snapshot):", *(f"- {s}" for s in skill_lines)]
    out += ["", "TASK:", *([goal.strip()] if goal.strip() else []),
            f"Evaluate the work of `{generator_node}` against each criterion below. Be skeptical: "
            "its changes list, step record and final message are claims, not evidence. Open the "
            "changed code and tests yourself and check the validation evidence (build and test "
            "logs, TRX files); look for what is missing, stubbed, untested or only claimed. Score "
            "every criterion from 0 to 10 with one line of concrete evidence (path:line, test "
            "name, log or TRX path). A score below the threshold blocks the work, whatever the "
            "rest looks like; do not talk yourself into passing a real problem.",
            "Read-only: do not modify, create or delete any file (no fixes, no notes, no builds "
            "that write output); the caller saves your report.", *([qa] if qa else [])]
    if round_no > 1:
        out.append(f"The generator revised its work after review round {round_no - 1}; judge the "
                   "current state of the code afresh, not its description of the fixes.")
    if target:
        out += ["", target]
    if changes:
        out += ["", changes]
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


def contract_prompt_section(generator: str, read_lines: list[str], round_no: int,
                            max_rounds: int, where: str = "", goal: str = "",
                            review: str = "") -> str:
    """The evaluator's step when it reviews a sprint contract (the last READ line) before any
    build: agree (PASS) or say what to change (BLOCK); the verdict alone decides. `goal` is the
    generator's TASK the contract is for, `review` the evaluator phase's own goal (what it
    checks), else the general rule."""
    out = [f"# Current step: review of the contract of `{generator}` (contract round {round_no} "
           f"of {max_rounds}; evaluator, read-only)", "", *([where, ""] if where else []),
           "READ (in order):"]
    out += [f"{i}. {line}" for i, line in enumerate(read_lines, 1)]
    check = review.strip() or (
        "Agree only if its `## Build` is concrete and within the work below and every test "
        "under `## Tests` is named fully (Namespace.Class.Method) and would prove it.")
    out += ["", "TASK:", f"Nothing is built yet: review the CONTRACT `{generator}` proposes (the "
            "last READ file). " + check, "Agree with VERDICT: PASS; otherwise BLOCK and say "
            "under FINDINGS what to change.",
            *([f"The work the contract is for (`{generator}`'s TASK): {goal.strip()}"]
              if goal.strip() else []),
            "Read-only: do not modify, create or delete any file; the caller saves your report.",
            "", "REPORT: your LAST message must contain exactly one block in this format; the "
            "verdict is read from the saved block, not from anything else you say.",
            OPEN, "VERDICT: PASS|BLOCK", "FINDINGS:",
            "- <what is missing or wrong in the contract and what would fix it>", CLOSE]
    return "\n".join(out)


def extract_review_block(last_message: str) -> str | None:
    """The text between the LAST `<<<REVIEW` and the `>>>` after it; None if absent. The end is
    a `>>>` on its own line first, else the first line ending in `>>>`, so C#'s `>>>` operator
    inside evidence does not end the block. A markdown fence around the block or just inside
    it (```` ``` ````, ```` ```text ````) is not part of it."""
    start = last_message.rfind(OPEN)
    if start < 0:
        return None
    rest = last_message[start + len(OPEN):]
    own_line = re.search(r"^[ \t]*>>>[ \t]*(?:```[ \t]*)?$", rest, re.MULTILINE)
    line_end = own_line or re.search(r">>>[ \t]*(?:```[ \t]*)?$", rest, re.MULTILINE)
    end = line_end.start() if line_end else rest.find(CLOSE)
    if end < 0:
        return None
    lines = rest[:end].strip().splitlines()
    if lines and FENCE.match(lines[0]):
        lines = lines[1:]
    if lines and FENCE.match(lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines).strip()


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
    its threshold blocks even a PASS. A report that cannot be read (no block, no verdict or two,
    a score outside 0–10) is MALFORMED, never a BLOCK: the evaluator is asked again, the
    generator is not charged; its reason names the problem and an excerpt of the text."""
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
    verdict, scores, problem = parse_report(body, thresholds)
    if problem is not None:
        text = body.split("\n", 1)[1] if body.startswith("MALFORMED:") and "\n" in body else body
        return Review("MALFORMED", {}, tuple(thresholds),
                      f"malformed report: {problem}; excerpt: {excerpt(text)}", body,
                      int(found.group(1)), thresholds)
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
    return Review(final, scores, failures, reason, body, int(found.group(1)), thresholds)


def excerpt(text: str) -> str:
    """The first ≤ 200 characters of `text` on one line (whitespace runs become one space)."""
    flat = " ".join(text.split()) or "(empty)"
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS - 1] + "…"


class _Unreadable(Exception):
    """A report line that makes the whole block unreadable; its text is the problem."""


def parse_report(body: str, thresholds: dict[str, int]) -> tuple[str, dict[str, int], str | None]:
    """(verdict, scores in declared order, problem or None) from a saved report's text, read as
    models write it: emphasis, inline code, bullets, headings and tables are looked through, a
    score may be `9`, `9/10` or `9 / 10`, criterion ids match case-insensitively. Exactly one
    verdict; every score an integer from 0 to 10 (out of 10); lines that are not a verdict or a
    declared criterion's score are ignored, except an upper-case SCORE line for an unknown id."""
    first = body.split("\n", 1)[0]
    if first.startswith("MALFORMED:"):
        return "", {}, first.removeprefix("MALFORMED:").strip()
    ids = {cid.lower(): cid for cid in thresholds}
    verdicts: list[str] = []
    scores: dict[str, tuple[int, bool]] = {}  # id -> (score, from a SCORE line)

    def add(cid: str, score: int, keyword: bool) -> None:
        if cid in scores and ((keyword and scores[cid][1]) or scores[cid][0] != score):
            raise _Unreadable(f"criterion `{cid}` is scored twice")
        if cid not in scores or keyword:
            scores[cid] = (score, keyword or (cid in scores and scores[cid][1]))

    column = 1  # the score column of the current table (a header cell `Score` moves it)
    try:
        for line in (ln.strip() for ln in body.splitlines()):
            cells = [_plain(c) for c in line.strip("|").split("|")]
            if line.startswith("|") and len(cells) > 1:
                column = _table_row(cells, ids, column, verdicts, add)
                continue
            column = 1
            line = cells[0] if line.startswith("|") else line  # a one-cell row is a line
            plain = _plain(re.sub(r"^(?:(?:[-+*]|\d+[.)])\s+|#+\s*|>\s*)+", "", line))
            if m := VERDICT_LINE.match(plain) or VERDICT_BARE.match(plain):
                verdicts.append(m["verdict"])
            elif not ids and re.match(r"SCORE\b", plain):
                continue  # no criteria declared (a contract review): the VERDICT alone decides
            elif re.match(r"SCORE\b", plain) or ((m := SCORE_LINE.match(plain))
                                                 and _id(m["id"]).lower() in ids):
                m = SCORE_LINE.match(plain)
                if m is None:
                    raise _Unreadable(f"SCORE line `{line}` does not match {SCORE_SHAPE}")
                cid = ids.get(_id(m["id"]).lower())
                if cid is None:
                    known = ", ".join(thresholds) or "none"
                    raise _Unreadable(f"SCORE for unknown criterion `{_id(m['id'])}` "
                                      f"(criteria: {known})")
                add(cid, _score(cid, m["rest"]), keyword=True)
            elif (m := BARE_SCORE.match(plain)) and _id(m["id"]).lower() in ids:
                cid = ids[_id(m["id"]).lower()]
                if _looks_scored(m["rest"]):
                    add(cid, _score(cid, m["rest"]), keyword=False)
    except _Unreadable as problem:
        return "", {}, str(problem)
    if not verdicts:
        return "", {}, "no `VERDICT: PASS` or `VERDICT: BLOCK` line"
    if len(verdicts) > 1:
        return "", {}, f"{len(verdicts)} VERDICT lines; give exactly one"
    verdict = _verdict(verdicts[0])
    if verdict is None:
        return "", {}, f"VERDICT `{verdicts[0]}` is neither PASS nor BLOCK"
    return verdict, {cid: scores[cid][0] for cid in thresholds if cid in scores}, None


def _plain(text: str) -> str:
    """Markdown emphasis and inline code looked through: `**9**`, `_pass_`, `` `id` `` → text.
    Underscores inside a word (`no_scope`) stay."""
    return re.sub(r"[*`]|(?<!\w)_+|_+(?!\w)", "", text).strip()


def _id(text: str) -> str:
    return text.strip("[]()\"'")


def _table_row(cells: list[str], ids: dict[str, str], column: int, verdicts: list[str],
               add) -> int:
    """Read one `| … |` row: `| VERDICT | PASS |`, `| SCORE id | 9 |`, or `| id | 9/10 | … |`
    when the first cell is a declared criterion id; returns the table's score column."""
    if all(re.fullmatch(r":?-*:?", c) for c in cells):
        return column  # the |---|---| line under a header
    head = cells[0].removesuffix(":").strip()
    if head.lower() == "verdict":
        verdicts.append(cells[1])
    elif m := VERDICT_LINE.match(cells[0]) or VERDICT_BARE.match(cells[0]):
        verdicts.append(m["verdict"])  # | VERDICT: PASS | all criteria met |
    elif m := re.fullmatch(r"score\s+(?P<id>\S+)", head, re.I):
        cid = ids.get(_id(m["id"]).lower())
        if cid is not None:
            add(cid, _score(cid, cells[1], whole=True), keyword=True)
        elif head.startswith("SCORE") and ids:
            raise _Unreadable(f"SCORE for unknown criterion `{_id(m['id'])}` (criteria: "
                              f"{', '.join(ids.values()) or 'none'})")
    elif (cid := ids.get(_id(head).lower())) is not None:
        add(cid, _score(cid, cells[column] if column < len(cells) else "", whole=True),
            keyword=False)
    elif "score" in (lowered := [c.lower() for c in cells]):
        return lowered.index("score")  # a header row: | Criterion | Threshold | Score | … |
    return column


def _looks_scored(rest: str) -> bool:
    """Whether a bare `id: …` line gives a score (`9/10`, `9`, `9 — evidence`) rather than prose
    that starts with a number (`3 tests are missing`)."""
    m = SCORE_VALUE.match(rest)
    if m is None:
        return False
    after = rest[m.end():].lstrip(" \t.,;")
    return bool(m["d"]) or not after or after[0] in "—–-(:"


def _score(cid: str, text: str, whole: bool = False) -> int:
    """An integer 0–10 from the start of `text` (`9`, `9/10`, `9 / 10`, `9.`); otherwise the
    report is unreadable (the message shows the first word, or the whole table cell)."""
    text = text.strip()
    m = SCORE_VALUE.match(text)
    if m is None:
        if not text:
            raise _Unreadable(f"SCORE {cid} has no score; give an integer from 0 to 10")
        shown = text if whole else text.split()[0]
        raise _Unreadable(f"SCORE {cid} is `{shown}`, not an integer from 0 to 10")
    if m["d"] is not None and m["d"] != "10":
        raise _Unreadable(f"SCORE {cid} is `{m[0]}`, not a score out of 10")
    if not re.fullmatch(r"\d{1,2}", m["n"]) or int(m["n"]) > 10:
        raise _Unreadable(f"SCORE {cid} is `{m[0]}`, not an integer from 0 to 10")
    return int(m["n"])


def _verdict(text: str) -> str | None:
    """PASS or BLOCK from a verdict's value (`pass.`, `BLOCK — tests fail`, `PASS ✅`); None
    when it is neither or not only one (`PASS|BLOCK`, `PASS or BLOCK`)."""
    m = re.match(r"(pass|block)\b(.*)$", text.strip(" \t\"'[](){}<>"), re.I)
    if m is None:
        return None
    rest = m[2].strip()
    return m[1].upper() if not rest or rest[0] in "—–-:(,;.!" or not re.search(r"\w", rest) \
        else None


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

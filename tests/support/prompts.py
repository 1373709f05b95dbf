"""Prompt hygiene shared by the golden-prompt tests and the end-to-end runs of the built-in
workflows: each constraint a prompt states, in any wording the built-in texts use for it, is
stated at most once."""

from __future__ import annotations

import re
from pathlib import Path

# Each constraint, in any wording the built-in texts use for it: stated at most once.
CONSTRAINTS = {
    "global.json is not edited": r"(?i)\b(?:never|not|no)\b[^.\n]{0,40}global\.json"
                                 r"|global\.json`? (?:untouched|unchanged)",
    "the target framework is kept": r"TargetFramework`? (?:exactly|stays|on the)",
    "the agent does not commit": r"(?i)\b(?:do not|never|don't) commit",
    "no rm -rf": r"rm -rf",
    "the sandbox has no network": r"(?i)(?:sandbox|session) has no network|no network here",
    "the final message is short": r"1,000 characters",
    "the test comes first": r"(?i)\btest first",
    "file bodies are not pasted": r"(?i)never paste",
    "nullable warnings are fixed": r"(?i)nullable warnings",
    "tests are not skipped or weakened": r"(?i)\bno\b[^.\n]{0,10}tests?\b[^.\n]{0,10}skipped",
    "packages were restored": r"(?i)restored (?:the packages|before your first)",
    "the READ files are not changed": r"(?i)(?:change|modify) none of the files you read"
                                      r"|do not modify the files you read",
    "the session writes nothing": r"(?i)\bread-only: ",
    "the risk file stops the session": r"(?i)never accept (?:a|one) (?:risk )?silently",
}


RUBRIC = re.compile(r"^- `[\w-]+` \(threshold \d+/10\): .*$", re.M)


def repeated_constraints(text: str) -> dict[str, int]:
    """Each constraint `text` states more than once, with its count (a REVIEW block quotes the
    evaluator's criteria: what it checks, not a rule of the session, so it is left out)."""
    counts = {name: len(re.findall(rx, RUBRIC.sub("", text))) for name, rx in CONSTRAINTS.items()}
    return {name: n for name, n in counts.items() if n > 1}


def saved_prompts(root: Path, delivery: str) -> dict[str, str]:
    """Every prompt a session of `delivery` was sent (generator, task, contract, review), by its
    path under phases/<delivery>/, as the executor saved it."""
    folder = root / "phases" / delivery
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(folder.rglob("*prompt.md")) if "snapshot" not in p.parts}


# The current step's sections, in the one order every session's prompt gives those it has.
ORDER = ("READ (in order):", "SKILLS (from the delivery snapshot):", "TASK", "TARGET:",
         "CHANGES:", "CONTRACT:", "REVIEW:", "Criteria (", "WRITE:", "Node folder:",
         "Task folder:", "RISK:", "REPORT:")


def sections(text: str) -> list[str]:
    """The sections of the prompt's (last) current step, in the order it gives them."""
    current = text[text.rindex("# Current step"):]
    return [head for line in current.splitlines() for head in ORDER if line.startswith(head)]


def out_of_order(text: str) -> list[str]:
    """The sections that come before one the order puts ahead of them (empty: in order)."""
    found = sections(text)
    return [b for a, b in zip(found, found[1:], strict=False)
            if ORDER.index(b) <= ORDER.index(a)]


# A delivery file written short: `<node>/<file>` of a built-in node, or a file name of its own.
SHORT = re.compile(r"(?<![\w/<>.-])(requirements|design|develop|integrate|verify|delivery|plan|"
                   r"build)/([\w.-]+\.\w+|[\w-]+/)")
NAMED = re.compile(r"(?<![\w/.-])([\w-]+\.(?:md|json|yaml))\b")
# Files of the product repository a text may name (it does not define them; the repo has them
# or the agent creates them as product or test files).
PRODUCT_FILES = {"global.json", "tasks.yaml", "SKILL.md"}


def undefined_files(text: str, current: str, nodes: dict[str, list[str]]) -> list[str]:
    """The delivery files `text` names that neither a path of the prompt's current step
    (`current`) nor an artifact of a node (`nodes`: node -> artifact paths) defines."""
    out = [f"{node}/{rest}" for node, rest in SHORT.findall(text)
           if not any(p == rest or p.startswith(rest) or rest.endswith("/")
                      for p in nodes.get(node, []))]
    defined = {Path(p).name for p in re.findall(r"[\w./-]+\.(?:md|json|yaml)", current)}
    defined |= {Path(p).name for paths in nodes.values() for p in paths}
    defined |= set(re.findall(r"^# ([\w.-]+\.md)$", text, re.M))  # a part of the prompt: `# AGENTS.md`
    return out + [name for name in NAMED.findall(text) if name not in defined | PRODUCT_FILES]

"""The test-integrity guard: compares the tests on disk with a base commit, independent of what
the agent says, and lists the changes that make tests pass by weakening them (a deleted or
emptied test file or test, an added skip, a removed assertion, a trait excluded from the run,
fewer executed or more skipped tests in the TRX). It reads git and files and never writes;
what to do with a finding (fail the attempt, waive it) is the caller's.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from specops_dag.validation.changeset import Changeset, read_changeset
from specops_dag.validation.csharp import TestMethod, scan

SOURCE_RULES = ("deleted-test-file", "emptied-test-file", "deleted-test", "added-skip",
                "removed-assertion", "trait-exclusion")
COUNT_RULES = ("fewer-executed", "more-skipped")
COUNTS_PATH = "TRX"
NAMES_SHOWN = 5
NAMED_SKIP = re.compile(r"\b(Skip|Ignore|IgnoreReason|IgnoreMessage)\s*=(?!=)"
                        r"|\b(Explicit)\s*=\s*true\b")
CATEGORIES = ("Category", "TestCategory")
# Where `dotnet test` finds a test case filter without an argument from us.
FILTER = re.compile(r"<(VSTestTestCaseFilter|TestCaseFilter)>(?P<xml>.*?)</\1>"
                    r"|--filter[\s=:]+(?P<arg>\"[^\"]*\"|'[^']*'|\S+)"
                    r"|\b(?:VSTestTestCaseFilter|TestCaseFilter)[=:](?P<prop>\"[^\"]*\"|\S+)",
                    re.S)
EXCLUSION = re.compile(r"([\w.]+)\s*(!=|!~)\s*([^|&()\s\"'<>]+)")


@dataclass(frozen=True)
class Finding:
    """One change that weakens the tests; `rule` is one of SOURCE_RULES or COUNT_RULES. `line`
    is in the current file, or in the base's for a deleted test; None for a whole file or a TRX
    count (whose `path` is "TRX"). `tests` are the tests it is about (`Class.Method`)."""

    path: str
    line: int | None
    rule: str
    change: str
    tests: tuple[str, ...] = ()

    def line_text(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.change}"

    def as_dict(self) -> dict:
        return {**asdict(self), "tests": list(self.tests)}


@dataclass(frozen=True)
class Exclusion:
    """`Category!=Slow` (or `!~`) in a test case filter of a run configuration file."""

    path: str
    line: int
    prop: str
    op: str
    value: str

    @property
    def label(self) -> str:
        return f"{self.prop}{self.op}{self.value}"

    def excludes(self, value: str) -> bool:
        v, mine = value.lower(), self.value.lower()
        return v == mine if self.op == "!=" else mine in v


def check_tree(tree: Path, base_commit: str) -> list[Finding]:
    """The source findings (deleted/emptied test files and tests, added skips, removed
    assertions, trait exclusions) of the files on disk under `tree` against `base_commit`. Only
    files changed since the base are read. A new test added already skipped counts as an added
    skip (it inflates the skipped count the same way); raise a risk when it is meant."""
    src = read_changeset(tree, base_commit)
    base = {p: scan(text, p) for p, text in src.base.items() if p.lower().endswith(".cs")}
    now = {p: scan(text, p) for p, text in src.now.items() if p.lower().endswith(".cs")}
    pairs, gone, new = pair([t for ts in base.values() for t in ts],
                            [t for ts in now.values() for t in ts])
    exclusions = {p: exclusions_in(text, p) for p, text in src.configs.items()}
    current = [e for es in exclusions.values() for e in es]
    found = [*_file_findings(base, now, gone, src),
             *(f for b, n in pairs for f in _weakened(b, n, current)),
             *(f for n in new for f in _weakened(None, n, current)),
             *_added_filters(exclusions, src)]
    return sorted(found, key=lambda f: (f.path, f.line or 0, f.rule, f.change))


def pair(base: list[TestMethod], now: list[TestMethod]
         ) -> tuple[list[tuple[TestMethod, TestMethod]], list[TestMethod], list[TestMethod]]:
    """(pairs, gone, new): base tests matched with tests now by (class, method) first, then by
    body hash (a renamed or moved test), then by file and method (a renamed class), each test
    now matched once, the same file preferred."""
    index: dict[tuple, list[int]] = defaultdict(list)
    for i, t in enumerate(now):
        for key in _keys(t):
            index[key].append(i)
    claimed: set[int] = set()
    pairs: dict[int, tuple[TestMethod, TestMethod]] = {}
    for rank in range(3):
        for j, b in enumerate(base):
            if j in pairs:
                continue
            free = [i for i in index[_keys(b)[rank]] if i not in claimed]
            if free:
                i = next((i for i in free if now[i].path == b.path), free[0])
                claimed.add(i)
                pairs[j] = (b, now[i])
    gone = [b for j, b in enumerate(base) if j not in pairs]
    return ([pairs[j] for j in sorted(pairs)], gone,
            [t for i, t in enumerate(now) if i not in claimed])


def _keys(t: TestMethod) -> tuple[tuple, tuple, tuple]:
    return ("name", t.cls, t.name), ("body", t.body_hash), ("file", t.path, t.name)


def _file_findings(base: dict[str, list[TestMethod]], now: dict[str, list[TestMethod]],
                   gone: list[TestMethod], src: Changeset) -> list[Finding]:
    """A test file deleted or left without tests, and a test deleted from a file that stays,
    when what went is found nowhere else now."""
    found = []
    for path, tests in base.items():
        lost = [t for t in gone if t.path == path]
        if not lost:
            continue
        names = tuple(t.full_name for t in lost)
        if path not in src.now:
            found.append(Finding(path, None, "deleted-test-file",
                                 f"test file deleted; {_lost(names, len(tests))}", names))
        elif not now.get(path):
            what = "emptied" if not src.now[path].strip() else "left without tests"
            found.append(Finding(path, None, "emptied-test-file",
                                 f"test file {what}; {_lost(names, len(tests))}", names))
        else:
            found += [Finding(path, t.line, "deleted-test",
                              f"test `{t.full_name}` deleted: no test now has its name or body "
                              "(the line is the base's)", (t.full_name,)) for t in lost]
    return found


def _lost(names: tuple[str, ...], total: int) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:NAMES_SHOWN])
    if len(names) > NAMES_SHOWN:
        shown += f" and {len(names) - NAMES_SHOWN} more"
    if total == 1:
        return f"its test {shown} is found nowhere else"
    if len(names) == total:
        return f"its {total} tests are found nowhere else: {shown}"
    return f"{len(names)} of its {total} tests are found nowhere else: {shown}"


def _weakened(b: TestMethod | None, n: TestMethod, exclusions: list[Exclusion]
              ) -> list[Finding]:
    """What a test now lost against its base (`b`; None for a new test): assertions, a skip
    added, a trait added that a filter of the run excludes."""
    name, found = n.full_name, []
    if b is not None and n.assertions < b.assertions:
        lost = ("its only assertion" if b.assertions == 1
                else f"{b.assertions - n.assertions} of {b.assertions} assertions")
        found.append(Finding(n.path, n.line, "removed-assertion", f"test `{name}` lost {lost}",
                             (name,)))
    before = Counter(m[:2] for m in skips(b)) if b is not None else Counter()
    for code, on_class, line in skips(n):
        if before[(code, on_class)] > 0:
            before[(code, on_class)] -= 1
            continue
        where = " on its class" if on_class else ""
        change = (f"new test `{name}` is skipped: `{code}`{where}" if b is None
                  else f"test `{name}` is now skipped: `{code}` added{where}")
        found.append(Finding(n.path, line, "added-skip", change, (name,)))
    had = {t[:2] for t in traits(b)} if b is not None else set()
    for trait, value, line in traits(n):
        ex = next((e for e in exclusions if e.excludes(value)), None)
        if (trait, value) not in had and ex is not None:
            found.append(Finding(n.path, line, "trait-exclusion",
                                 f"test `{name}` gets trait `{trait}={value}`, which the filter "
                                 f"`{ex.label}` ({ex.path}:{ex.line}) leaves out of the test run",
                                 (name,)))
    return found


def skips(test: TestMethod | None) -> list[tuple[str, bool, int]]:
    """(code, on its class, line) of every skip of `test`: `[Ignore]`/`[Explicit]`, a test
    attribute's `Skip =`/`Ignore =`/`Explicit = true`, `Assert.Inconclusive(...)` and kin."""
    if test is None:
        return []
    found = []
    for on_class, attrs in ((True, test.class_attributes), (False, test.attributes)):
        for a in attrs:
            named = NAMED_SKIP.search(a.code)
            if a.name in ("Ignore", "Explicit"):
                found.append((f"[{a.name}]", on_class, a.line))
            elif named:
                arg = named.group(1) or "Explicit"
                found.append((f"[{a.name}({arg} = ...)]", on_class, a.line))
    return found + [(f"{call}(...)", False, line) for call, line in test.skip_calls]


def traits(test: TestMethod | None) -> list[tuple[str, str, int]]:
    """(name, value, line) of the traits of `test` and its class: `[Trait("Category", "X")]`
    (xUnit), `[Category("X")]` (NUnit), `[TestCategory("X")]` (MSTest)."""
    if test is None:
        return []
    found = []
    for a in (*test.class_attributes, *test.attributes):
        strings = a.strings()
        if a.name == "Trait" and len(strings) >= 2:
            found.append((strings[0], strings[1], a.line))
        elif a.name in CATEGORIES and strings:
            found.append((a.name, strings[0], a.line))
    return found


def exclusions_in(text: str, path: str) -> list[Exclusion]:
    """The `!=`/`!~` conditions of every test case filter in a run configuration file."""
    found = []
    for m in FILTER.finditer(text):
        group = next(g for g in ("xml", "arg", "prop") if m.group(g) is not None)
        for e in EXCLUSION.finditer(text, m.start(group), m.end(group)):
            found.append(Exclusion(path, text.count("\n", 0, e.start()) + 1, *e.groups()))
    return found


def _added_filters(exclusions: dict[str, list[Exclusion]], src: Changeset) -> list[Finding]:
    """An exclusion in a changed run configuration file that its base version lacks."""
    found = []
    for path, now in exclusions.items():
        if path not in src.changed:
            continue
        before = Counter(e.label for e in exclusions_in(src.base.get(path, ""), path))
        for e in now:
            if before[e.label] > 0:
                before[e.label] -= 1
                continue
            found.append(Finding(path, e.line, "trait-exclusion",
                                 f"test filter `{e.label}` added: the tests it matches no "
                                 "longer run"))
    return found


def check_counts(baseline_executed: int | None, baseline_skipped: int | None,
                 executed: int | None, skipped: int | None) -> list[Finding]:
    """Fewer executed or more skipped tests in the TRX than at the base (None: unknown, no
    finding for that count)."""
    found = []
    if baseline_executed is not None and executed is not None and executed < baseline_executed:
        found.append(Finding(COUNTS_PATH, None, "fewer-executed",
                             f"{executed} tests executed, {baseline_executed - executed} fewer "
                             f"than at the base ({baseline_executed})"))
    if baseline_skipped is not None and skipped is not None and skipped > baseline_skipped:
        found.append(Finding(COUNTS_PATH, None, "more-skipped",
                             f"{skipped} tests skipped, {skipped - baseline_skipped} more than "
                             f"at the base ({baseline_skipped})"))
    return found


def waived(findings: list[Finding], approved_risk_texts: list[str]
           ) -> tuple[list[Finding], list[Finding]]:
    """(kept, waived). A finding is waived when one approved risk text names it:
    - its file: the path as written in the finding, not part of a longer path; a bare path
      names every finding of that file, `path:N` only those at line N;
    - or every test it is about, each in backticks as `Class.Method` (or namespace-qualified,
      `Ns.Class.Method`);
    - for a TRX count (no file): its rule in backticks, `fewer-executed` or `more-skipped`."""
    kept, gone = [], []
    for f in findings:
        (gone if any(_names(text, f) for text in approved_risk_texts) else kept).append(f)
    return kept, gone


def _names(text: str, f: Finding) -> bool:
    quoted = re.findall(r"`([^`\n]+)`", text)
    if f.rule in COUNT_RULES:
        return f.rule in quoted
    if f.tests and all(any(q == t or q.endswith("." + t) for q in quoted) for t in f.tests):
        return True
    for m in re.finditer(rf"(?<![\w./-]){re.escape(f.path)}(?::(\d+))?(?![\w/-]|\.\w)", text):
        if m.group(1) is None or (f.line is not None and int(m.group(1)) == f.line):
            return True
    return False


def summary(findings: list[Finding], base_commit: str, delivery: str,
            risk_path: str = "risk.md") -> str:
    """The attempt's failure text: every finding, and how to restore or approve them
    (`risk_path`: the risk file as the agent reaches it)."""
    n = len(findings)
    head = (f"test integrity: {n} change{'s' if n != 1 else ''} "
            f"weaken{'' if n != 1 else 's'} the tests (compared with base commit "
            f"{base_commit[:12]}):")
    tail = (f"Restore them, or raise a risk ({risk_path}) that names each one (its path, "
            "`path:line` or `Class.Method`; `fewer-executed` or `more-skipped` for a TRX count) "
            f"for a person to approve with `specops approve {delivery} risk`.")
    return "\n".join([head, *(f"- {f.line_text()}" for f in findings), tail])

"""Sprint contracts (`execution.contract`, seed 003, issue #20 item 3): before a node or a fan-out
task builds anything, its generator writes `contract.md` — what it will build and the tests, by
name, that prove it — and the evaluator phase reviews it read-only until it agrees (at most
`max_rounds` rounds). The build is then judged against the agreed contract: every test it names
must be among the attempt's passed tests in its TRX files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from specops_dag.agent.codex import AgentSettings, find_codex
from specops_dag.agent.prompt import (
    ContractAsk,
    TaskView,
    assemble_prompt,
    failure_summary,
    read_list,
    where_line,
)
from specops_dag.agent.review import (
    contract_prompt_section,
    extract_review_block,
    read_review,
    save_report,
)
from specops_dag.delivery.model import ContractRecord, Delivery, InfraRetry, Step, Usage
from specops_dag.delivery.queries import agent_path
from specops_dag.delivery.store import Store
from specops_dag.execution.attempt import codex_session
from specops_dag.files import sha256_file
from specops_dag.validation.dotnet import ValidationReport
from specops_dag.validation.trx import TrxCorrupt, parse_trx
from specops_dag.workflow.catalog import Catalog

CONTRACT_FILE = "contract.md"
TEST_LINE = re.compile(r"^\s*[-*]\s+`?([A-Za-z_][\w.]*\.[\w]+)`?")


@dataclass(frozen=True)
class Negotiation:
    """How a contract negotiation ended: the record (agreed, or the last one proposed), why it
    was not agreed (None when it was), and the tokens of every session it took."""

    record: ContractRecord | None
    refused: str | None
    usage: tuple[Usage, ...]
    retries: tuple[InfraRetry, ...] = ()  # its sessions the provider failed, retried


def contract_tests(text: str) -> list[str]:
    """The test names under the contract's `## Tests` heading, in order, each once."""
    names: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("#"):
            inside = line.lstrip("#").strip().lower() == "tests"
            continue
        match = TEST_LINE.match(line) if inside else None
        if match and match.group(1) not in names:
            names.append(match.group(1))
    return names


def findings(body: str) -> list[str]:
    """The `- ` lines under FINDINGS: of a saved review block."""
    lines = body.splitlines()
    at = next((i for i, line in enumerate(lines) if line.strip() == "FINDINGS:"), len(lines))
    return [line.strip()[2:].strip() for line in lines[at + 1:] if line.strip().startswith("- ")]


def negotiate(store: Store, state: Delivery, step: Step, catalog: Catalog,
              settings: AgentSettings, *, cwd: Path, folder: Path, label: str,
              env: dict[str, str], task: TaskView | None = None) -> Negotiation:
    """Contract rounds until the evaluator agrees: the generator writes `folder/contract.md`
    (nothing else), the evaluator reviews it read-only; its reason goes back to the next round."""
    spec = catalog.phases[step.phase].execution.contract
    phase, evaluator = catalog.phases[step.phase], catalog.phases[spec.evaluator]
    path = folder / CONTRACT_FILE
    codex_bin = find_codex(settings, store.root)
    usage: list[Usage] = []
    retries: list[InfraRetry] = []
    record: ContractRecord | None = None
    feedback = ""
    for round_no in range(1, spec.max_rounds + 1):
        ask = ContractAsk(path, round_no, spec.max_rounds, feedback)
        prompt = assemble_prompt(store.root, state, step, catalog, cwd, task=task, contract=ask)
        path.unlink(missing_ok=True)  # a stale contract is never read as this round's
        wrote = codex_session(store, settings, phase, codex_bin, prompt=prompt.text, cwd=cwd,
                              folder=folder, delivery=state.phase, label=f"{label}.contract",
                              attempt=round_no, env={**env, "SPECOPS_CONTRACT": "1"},
                              output=folder / f"contract-r{round_no}-output.json")
        usage.append(wrote.usage)
        retries.extend(wrote.retries)
        (folder / f"contract-r{round_no}-prompt.md").write_text(wrote.shown(prompt.text),
                                                                encoding="utf-8")
        if not wrote.run.ok:
            failure = wrote.run.failure(phase.execution.timeout_s, phase.execution.idle_timeout_s)
            return Negotiation(record, f"contract round {round_no}: the generator's session "
                               f"failed: {failure_summary(wrote.shown(failure))}", tuple(usage),
                               tuple(retries))
        shown = agent_path(path, cwd)
        tests = contract_tests(path.read_text(encoding="utf-8")) if path.is_file() else []
        if not path.is_file() or not tests:
            feedback = (f"{shown} was not written" if not path.is_file() else
                        f"{shown} names no test under `## Tests` (one `- Namespace.Class.Method` "
                        "line per test)")
            continue
        sha = sha256_file(path)
        lines = read_list(store.root, state, step, catalog, cwd) + [
            f"{shown} (sha256 {sha}) — the contract `{label}` proposes"]
        goal = phase.execution.goal.strip().replace("<delivery>", state.phase)
        if task is not None:
            goal += f"\nThe task: `{task.record.id}` — {task.record.title}."
        text = contract_prompt_section(label, lines, round_no, spec.max_rounds,
                                       where=where_line(cwd), goal=goal,
                                       review=evaluator.execution.goal)
        agents = cwd / "AGENTS.md"
        text = (agents.read_text(encoding="utf-8") + "\n\n" if agents.is_file() else "") + text
        judged = codex_session(store, settings, evaluator, codex_bin, prompt=text, cwd=cwd,
                               folder=folder, delivery=state.phase,
                               label=f"{label}.contract-review", attempt=round_no,
                               env={**env, "SPECOPS_REVIEW_PHASE": evaluator.id},
                               output=folder / f"contract-r{round_no}-review-output.json",
                               sandbox="read-only")
        usage.append(judged.usage.model_copy(update={"role": "evaluator"}))
        retries.extend(judged.retries)
        (folder / f"contract-r{round_no}-review-prompt.md").write_text(judged.shown(text),
                                                                       encoding="utf-8")
        said = judged.shown(judged.run.last_message)
        report = save_report(folder, f"{label}-contract", round_no, extract_review_block(said),
                             said)
        review = read_review(report, ())
        why = "; ".join(findings(review.body)) or review.reason
        record = ContractRecord(path=path.relative_to(store.root).as_posix(), sha256=sha,
                                tests=tests, agreed=judged.run.ok and review.verdict == "PASS",
                                rounds=round_no, reason=why)
        if record.agreed:
            return Negotiation(record, None, tuple(usage), tuple(retries))
        feedback = f"{why}; the evaluator's report: {agent_path(report, cwd)}"
    return Negotiation(record, f"no agreed contract after {spec.max_rounds} round(s): "
                       f"{feedback}; read it, then `specops resume {state.phase} {step.name}`",
                       tuple(usage), tuple(retries))


def unproven(record: ContractRecord, report: ValidationReport) -> list[str]:
    """The agreed contract's tests that are not among the passed tests of the attempt's TRX
    files, each with why (`not run`, or its outcome)."""
    passed: set[str] = set()
    failed = {t for p in report.projects for t in p.get("failed_tests", [])}
    skipped = {t for p in report.projects for t in p.get("skipped_tests", [])}
    for project in report.projects:
        trx = project.get("trx")
        if trx and Path(trx).is_file():
            try:
                passed |= set(parse_trx(Path(trx)).passed_tests)
            except TrxCorrupt:
                continue

    def ran(test: str, names: set[str]) -> bool:  # a theory's rows carry their arguments
        return test in names or any(n.startswith(test + "(") for n in names)

    return [f"{t} ({'failed' if ran(t, failed) else 'skipped' if ran(t, skipped) else 'not run'})"
            for t in record.tests if not ran(t, passed)]


def judge(record: ContractRecord | None, report: ValidationReport | None) -> str | None:
    """Why the build does not hold the agreed contract, or None."""
    if record is None or not record.agreed:
        return None
    if report is None or report.mode == "none" or not report.projects:
        return (f"the agreed contract {record.path} names tests ({', '.join(record.tests)}) but "
                "this attempt's validation ran no tests, so none of them is proven")
    missing = unproven(record, report)
    if missing:
        return (f"the build does not hold the agreed contract {record.path}: its tests "
                f"{', '.join(missing)} must exist, run and pass")
    return None

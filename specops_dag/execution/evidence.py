"""The evidence record of a completed node (issue 21): `phases/<d>/<node>/evidence.json`, written
as the node completes, before its metadata commit, from the delivery state and the node's own
files — what it handed off, what proved it, what was waived and by whom, what it cost — and its
markdown form, a pull-request body. It reads; it decides nothing about the step.
"""

from __future__ import annotations

import json
from pathlib import Path

from specops_dag import gitflow
from specops_dag.agent.codex import AgentSettings, configured_model, find_codex
from specops_dag.delivery import pricing
from specops_dag.delivery.model import Delivery, FileRef, Step
from specops_dag.delivery.queries import tokens, usd_text
from specops_dag.delivery.store import Store, restore_advice
from specops_dag.errors import DefinitionError, SpecopsError, StateError, UsageError
from specops_dag.files import sha256_file, write_text_atomic

EVIDENCE_FILE = "evidence.json"
EVIDENCE_VERSION = 1
TOKEN_KINDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def write_evidence(store: Store, state: Delivery, step: Step, tree: Path,
                   settings: AgentSettings, codex: bool) -> FileRef:
    """Write the node's evidence.json (atomically) and return its path and sha256."""
    path = store.delivery_dir(state.phase) / step.name / EVIDENCE_FILE
    record = build_evidence(store, state, step, tree, settings, codex)
    write_text_atomic(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return FileRef(path=path.relative_to(store.root).as_posix(), sha256=sha256_file(path))


def build_evidence(store: Store, state: Delivery, step: Step, tree: Path,
                   settings: AgentSettings, codex: bool) -> dict:
    folder = store.delivery_dir(state.phase) / step.name
    prompt = folder / "prompt.md"
    return {
        "evidence_version": EVIDENCE_VERSION,
        "delivery": state.phase, "workflow": state.workflow, "node": step.name,
        "phase": step.phase, "status": step.status, "attempts": attempts_of(step),
        "started_at": step.started_at, "completed_at": step.completed_at,
        "duration_s": round(sum(a.duration_s for a in step.attempt_log), 3),
        "handoffs": {k: v.model_dump() for k, v in step.handoff.items()},
        "consumed": {k: v.model_dump() for k, v in step.consumed.items()},
        "validation": validation_of(step),
        "test_delta": test_delta(step),
        "integrity": [f.model_dump() for f in step.integrity],
        "proof": step.proof.model_dump() if step.proof is not None else None,
        "waivers": waivers(state) if any(f.waived for f in step.integrity) or (
            step.proof is not None and any(t.waived for t in step.proof.tests)) else [],
        "commits": {"base": step.base_commit, **{k: v for k, v in step.commits.items()
                                                if k != "metadata"}},
        "diff": diff_stats(tree, step.base_commit, step.commits.get("product")),
        "attempt_log": [a.model_dump() for a in step.attempt_log],
        "reviews": [{"round": r.round, "verdict": r.verdict, "reason": r.reason,
                     "scores": r.scores, "report": r.report, "thread_id": r.thread_id}
                    for r in step.reviews],
        "contract": step.contract.model_dump() if step.contract else None,
        "tasks": [{"id": t.id, "status": t.status, "attempts": t.attempts,
                   "commits": t.commits, "infra_retries": len(t.infra_retries)}
                  for t in step.tasks],
        "cost": cost_of(store, state, step),
        "agent": agent_of(store, settings, step) if codex else None,
        "prompt_sha256": sha256_file(prompt) if codex and prompt.is_file() else None,
    }


def validation_of(step: Step) -> dict | None:
    report = step.validation_report
    if report is None:
        return None
    return {"passed": report.passed, "mode": report.mode, "stage": report.stage,
            "message": report.message, "sdk_version": report.sdk_version,
            "trx": {"total": report.total, "executed": report.executed,
                    "passed": report.passed_tests, "failed": report.failed,
                    "skipped": report.skipped},
            "failed_tests": [t for p in report.projects for t in p.failed_tests]
            or list(report.failing_tests),
            "skipped_tests": [t for p in report.projects for t in p.skipped_tests]}


def test_delta(step: Step) -> dict | None:
    """Executed and skipped tests now against the base tree's preflight (None: no baseline)."""
    base, now = step.preflight, step.validation_report
    if base is None or now is None or not base.passed:
        return None
    return {"baseline": {"executed": base.executed, "skipped": base.skipped},
            "now": {"executed": now.executed, "skipped": now.skipped},
            "executed": now.executed - base.executed, "skipped": now.skipped - base.skipped}


def waivers(state: Delivery) -> list[dict]:
    """The risk decisions that waived the guard's findings: who decided, when, what they said."""
    return [{"gate": a.gate, "decision": a.decision, "note": a.note, "at": a.at, "by": a.by,
             "risks": [r.path for r in state.risks if r.raised_at <= a.at]}
            for a in state.approvals if a.gate == "risk"]


def diff_stats(tree: Path, base: str | None, product: str | None) -> dict:
    """Files, insertions and deletions of the node's product commit against its base."""
    if not base or not product:
        return {"files": [], "insertions": 0, "deletions": 0}
    try:
        out = gitflow.numstat(tree, base, product)
    except SpecopsError:
        return {"files": [], "insertions": 0, "deletions": 0, "error": "not readable"}
    files = []
    for line in out.splitlines():
        added, removed, name = line.split("\t", 2)
        files.append({"path": name, "insertions": int(added) if added.isdigit() else 0,
                      "deletions": int(removed) if removed.isdigit() else 0})
    return {"files": files, "insertions": sum(f["insertions"] for f in files),
            "deletions": sum(f["deletions"] for f in files)}


def cost_of(store: Store, state: Delivery, step: Step) -> dict:
    """Tokens of every kind per session (attempt, role, round, task) and the money they cost."""
    try:
        table = pricing.delivery_prices(store.root, state)
    except DefinitionError as err:
        table, unpriced = None, "; ".join(err.problems)
    sessions = []
    for u in step.usage:
        usd = pricing.cost_usd(u, table, None) if table else None
        sessions.append({"attempt": u.attempt, "role": u.role, "task": u.task, "model": u.model,
                         "thread_id": u.thread_id, **{k: getattr(u, k) for k in TOKEN_KINDS},
                         "tokens": tokens(u), "usd": usd})
    usd = pricing.node_cost(step, table, None) if table else None
    if table is not None:
        unpriced = next((pricing.unpriced_reason(table, u.model) for u in step.usage
                         if pricing.cost_usd(u, table, None) is None), None)
    return {"sessions": sessions, "tokens": sum(tokens(u) for u in step.usage),
            "usd": usd, "unpriced": unpriced,
            "prices": {"as_of": table.as_of, "source": table.source} if table else None}


def attempts_of(step: Step) -> int:
    """Every attempt of the node since its last reopen, those before a `specops resume` too:
    its `attempt_log` (numbered 1…), which a resume does not restart as it restarts the
    state's `attempts` (the agent calls its attempt budget counts)."""
    return len(step.attempt_log) or step.attempts


def agent_of(store: Store, settings: AgentSettings, step: Step) -> dict:
    """The codex CLI, and the model and provider of the node's latest session as codex reported
    them (`session_report`); what the settings and codex's config name only when it did not."""
    model = next((u.model for u in reversed(step.usage) if u.model), None)
    provider = next((u.provider for u in reversed(step.usage) if u.provider), None)
    if model is None or provider is None:
        named, configured = configured_model(settings)
        model, provider = model or named, provider or configured
    return {"codex_version": codex_version(settings, store.root), "model": model,
            "provider": provider,
            "thread_ids": list(dict.fromkeys(u.thread_id for u in step.usage if u.thread_id))}


def codex_version(settings: AgentSettings, root: Path) -> str | None:
    """The version of the codex CLI the sessions ran, from its npm package.json (no process)."""
    try:
        binary = Path(find_codex(settings, root)).resolve()
    except SpecopsError:
        return None
    for parent in binary.parents:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                return None
            return str(data.get("version")) if data.get("name") == "@openai/codex" else None
    return None


def read_evidence(store: Store, state: Delivery, node: str | None) -> list[dict]:
    """The evidence records of `node`, or of every node that has one, checked against the
    sha256 the state registered; a missing or changed file is an exact error."""
    if node is not None and node not in {s.name for s in state.steps}:
        raise UsageError(f"node `{node}` is not in delivery `{state.phase}` (its nodes: "
                         f"{', '.join(s.name for s in state.steps)})")
    steps = [s for s in state.steps if (node is None or s.name == node)]
    chosen = [s for s in steps if s.evidence is not None]
    if node is not None and not chosen:
        raise UsageError(f"node `{node}` of `{state.phase}` has no evidence record: it is "
                         f"`{steps[0].status}`; evidence.json is written when a node completes "
                         f"(`specops run {state.phase}`)")
    if not chosen:
        raise UsageError(f"delivery `{state.phase}` has no evidence record yet: no node has "
                         f"completed; run it with `specops run {state.phase}`")
    records = []
    for step in chosen:
        ref = step.evidence
        path = store.root / ref.path
        if not path.is_file():
            raise StateError(f"{ref.path}: the evidence of `{step.name}` is missing; "
                             f"{restore_advice(ref.path, store.root)}, or `specops reopen "
                             f"{state.phase} {step.name}` to make it again")
        if sha256_file(path) != ref.sha256:
            raise StateError(f"{ref.path}: changed since `{step.name}` completed (registered "
                             f"sha256 {ref.sha256[:12]}, now {sha256_file(path)[:12]}); "
                             f"{restore_advice(ref.path, store.root)} — evidence is never edited")
        records.append(json.loads(path.read_text(encoding="utf-8")))
    return records


def render_markdown(state: Delivery, records: list[dict]) -> str:
    """A pull-request body: what changed, what proves it, what was waived and by whom, cost."""
    title = (state.request.strip().splitlines() or ["(no request)"])[0][:100]
    lines = [f"# {state.phase}: {title}", "",
             f"Workflow `{state.workflow}`, branch `feat-{state.phase}`; "
             f"{len(records)} node(s) with evidence.", ""]
    for rec in records:
        lines += node_markdown(rec)
    return "\n".join(lines).rstrip() + "\n"


def node_markdown(rec: dict) -> list[str]:
    diff, val = rec["diff"], rec["validation"]
    lines = [f"## {rec['node']} (phase `{rec['phase']}`)", "",
             f"{rec['attempts']} agent attempt(s), {rec['duration_s']:g} s; completed "
             f"{rec['completed_at']}.", "", "### What changed", ""]
    commits = rec["commits"]
    if commits.get("product"):
        lines.append(f"- product commit `{commits['product'][:12]}` on base "
                     f"`{(commits.get('base') or '')[:12]}`: {len(diff['files'])} file(s), "
                     f"+{diff['insertions']} −{diff['deletions']}")
        lines += [f"  - `{f['path']}` +{f['insertions']} −{f['deletions']}"
                  for f in diff["files"]]
    else:
        lines.append("- no product change")
    lines += [f"- handoff `{k}`: `{v['path']}` (sha256 `{v['sha256'][:12]}`)"
              for k, v in rec["handoffs"].items()]
    lines += ["", "### What proves it", ""]
    if val is None:
        lines.append("- no validation recorded")
    else:
        trx = val["trx"]
        lines.append(f"- validation `{val['mode']}`: {'passed' if val['passed'] else 'FAILED'} "
                     f"at `{val['stage']}` — {val['message']}")
        if trx["total"] or trx["executed"]:
            lines.append(f"- tests: {trx['executed']} executed, {trx['passed']} passed, "
                         f"{trx['failed']} failed, {trx['skipped']} skipped")
        lines += [f"  - skipped: `{t}`" for t in val["skipped_tests"]]
        lines += [f"  - failed: `{t}`" for t in val["failed_tests"]]
    delta = rec["test_delta"]
    if delta:
        lines.append(f"- against the base: {delta['executed']:+d} executed, "
                     f"{delta['skipped']:+d} skipped (base {delta['baseline']['executed']} "
                     f"executed, {delta['baseline']['skipped']} skipped)")
    kept = [f for f in rec["integrity"] if not f["waived"]]
    lines.append("- test integrity: " + ("no change weakens the tests" if not rec["integrity"]
                                         else f"{len(rec['integrity'])} finding(s), "
                                         f"{len(kept)} not waived"))
    lines += [f"- review round {r['round']}: {r['verdict']} — {r['reason']}"
              + (" (" + ", ".join(f"{k} {v}" for k, v in r["scores"].items()) + ")"
                 if r["scores"] else "") for r in rec["reviews"]]
    if rec["contract"]:
        lines.append(f"- sprint contract `{rec['contract']['path']}`: "
                     + ("agreed" if rec["contract"]["agreed"] else "not agreed")
                     + f", tests {', '.join(f'`{t}`' for t in rec['contract']['tests'])}")
    lines += proof_markdown(rec.get("proof"))
    lines += ["", "### What was waived, and by whom", ""]
    waived = [f for f in rec["integrity"] if f["waived"]]
    proven = [t for t in (rec.get("proof") or {}).get("tests", []) if t["waived"]]
    if not waived and not proven:
        lines.append("- nothing")
    lines += [f"- `{f['path']}`{':' + str(f['line']) if f['line'] else ''} ({f['rule']}): "
              f"{f['change']}" for f in waived]
    lines += [f"- `{t['path']}:{t['line']}` (passes-at-base): test `{t['name']}` passed at the "
              "base" for t in proven]
    lines += [f"- {w['decision']} by {w['by'] or 'an unrecorded user'} at {w['at']}"
              + (f": “{w['note']}”" if w["note"] else "")
              + (f" (risks: {', '.join(w['risks'])})" if w["risks"] else "")
              for w in rec["waivers"]]
    lines += ["", "### Cost and sessions", ""]
    cost = rec["cost"]
    money = (usd_text(cost["usd"]) if cost["usd"] is not None
             else f"not counted ({cost['unpriced']})")
    lines.append(f"- {cost['tokens']} tokens (uncached input + output), {money}")
    retries = sum(len(a["infra_retries"]) for a in rec["attempt_log"])
    reasons = ", ".join(f"{a['attempt']}: {a['reason']}" for a in rec["attempt_log"])
    if reasons:
        lines.append(f"- attempts: {reasons}" + (f"; {retries} provider failure(s) retried"
                                                 if retries else ""))
    agent = rec["agent"]
    if agent:
        lines.append(f"- codex {agent['codex_version'] or '(version unknown)'}, model "
                     f"`{agent['model'] or 'not reported'}`, provider {agent['provider']}; prompt "
                     f"sha256 `{(rec['prompt_sha256'] or '')[:12]}`; threads "
                     + ", ".join(f"`{t}`" for t in agent["thread_ids"]))
    return lines + [""]


def proof_markdown(proof: dict | None) -> list[str]:
    """The fail-before, pass-after proof: each test at the base and at the head, and the TRX."""
    if proof is None:
        return []
    lines = ["", "### Fail before, pass after", "",
             f"- {proof['verdict']} ({proof['duration_s']:g} s): {proof['detail']}"]
    lines += [f"  - `{t['name']}` ({t['change']}, `{t['path']}:{t['line']}`): {t['base']} at "
              f"the base, {t['head']} at the head" + (" (waived)" if t["waived"] else "")
              for t in proof["tests"]]
    if proof["compile_error"]:
        lines.append(f"- the base's first error: `{proof['compile_error']}`")
    for side in ("base", "head"):
        if proof[f"{side}_trx"] and proof["tests"]:
            lines.append(f"- {side} TRX: " + ", ".join(f"`{t}`" for t in proof[f"{side}_trx"]))
    return lines

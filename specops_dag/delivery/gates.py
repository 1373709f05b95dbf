"""The six human confirmation points (seed 004): decisions, revisions of changed decisions, risks
raised at run time, and what a person is asked at each gate. One approval never carries to the
next gate; a changed decision never rewrites history: it opens a revision and reopens what
consumed the old decision. Plain Python over the state store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from specops_dag.delivery.lifecycle import downstream_of, reopen, snapshot_catalog
from specops_dag.delivery.model import Approval, Delivery, Risk, Step
from specops_dag.delivery.queries import closed_gates
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.files import now_iso
from specops_dag.workflow.model import GATE_NAMES

WAITING = ("awaiting approval: ", "rejected: ")


def gates_of(state: Delivery) -> list[str]:
    """Every gate of the delivery; external-write guards `specops run --push`, so all have it,
    and a raised risk must be decided even when no step is behind it (the last node's)."""
    risk = ["risk"] if state.risks else []
    return list(dict.fromkeys([*(g for s in state.steps for g in s.gates), *risk,
                               "external-write"]))


def decider() -> str:
    """Who records a decision: the OS user and host of this process."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (a container)
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class Decision:
    """A recorded decision and what it did besides: the earlier decision it only repeats (None
    when it is the first or a change) and the nodes it sent back to pending."""

    approval: Approval
    repeated: Approval | None
    reopened: list[str]

    def notes(self, delivery: str) -> tuple[str | None, str | None]:
        """(the repeat's note, the reopened nodes' line), as `specops approve` prints them."""
        a, r = self.approval, self.repeated
        return ((f"note: `{a.gate}` was already {a.decision} at {r.at} by {r.by}; recorded "
                 "again, nothing else changed") if r is not None else None,
                (f"reopened: {', '.join(self.reopened)} (their earlier files are kept under "
                 f"phases/{delivery}/.revisions/); `specops run {delivery}` runs them again")
                if self.reopened else None)


def decide(store: Store, delivery: str, gate: str, note: str = "",
           reject: bool = False) -> Decision:
    """`approve`, with what the decision did read from the state before and after it."""
    before = store.read(delivery)
    approval = approve(store, delivery, gate, note, reject)
    after = {s.name: s.status for s in store.read(delivery).steps}
    earlier = [a for a in before.approvals if a.gate == gate]
    repeated = earlier[-1] if earlier and earlier[-1].decision == approval.decision else None
    reopened = [s.name for s in before.steps
                if s.status != "pending" and after.get(s.name) == "pending"]
    return Decision(approval, repeated, reopened)


def approve(store: Store, delivery: str, gate: str, note: str = "",
            reject: bool = False) -> Approval:
    """Record a decision; approvals unblock steps waiting only on it, rejections keep them
    blocked with the note, a changed decision is a revision that reopens its consumers."""
    if gate not in GATE_NAMES:
        raise UsageError(f"unknown gate `{gate}` (gates: {', '.join(GATE_NAMES)})")
    with store.transaction(delivery) as state:
        used = gates_of(state)
        if gate not in used:
            raise UsageError(f"delivery `{delivery}` has no `{gate}` gate (its gates: "
                             f"{', '.join(used)})")
        unrun = not_yet_run(store, state, gate)
        if unrun:
            names = ", ".join(f"`{n}`" for n in unrun)
            states = "; ".join(f"{n}: {state.get_step(n).status}" for n in unrun)
            raise UsageError(f"gate `{gate}` decides on what {names} wrote, and it has not run "
                             f"yet ({states}): run `specops run {delivery}` first, then decide "
                             "on its output")
        earlier = [a for a in state.approvals if a.gate == gate]
        decision = "rejected" if reject else "approved"
        changed = bool(earlier) and earlier[-1].decision != decision
        approval = Approval(gate=gate, decision=decision, note=note, at=now_iso(), by=decider(),
                            revision=(max(a.revision for a in earlier) + 1) if changed else 0)
        state.approvals.append(approval)
        state.log(f"gate {decision}", detail=f"{gate}: {note}" if note else gate)
        consumers = [s.name for s in state.steps if gate in s.gates
                     and s.status in ("completed", "running")] if changed else []
        for step in state.steps:
            if step.status == "blocked" and (step.blocked_reason or "").startswith(WAITING):
                refresh_block(state, step)
    if reject:  # a rejected `after` gate sends the node that asked it back, with the note
        state = store.read(delivery)
        for name in first_of_each_branch(state, asked_after(store, state, gate)):
            reopen(store, delivery, name, f"gate `{gate}` rejected" + (f": {note}" if note else ""))
    state = store.read(delivery)
    consumers = [n for n in consumers if state.get_step(n).status in ("completed", "running")]
    for name in first_of_each_branch(state, consumers):
        reopen(store, delivery, name, f"decision on gate `{gate}` changed to {decision}"
               + (f": {note}" if note else ""))
    return approval


def not_yet_run(store: Store, state: Delivery, gate: str) -> list[str]:
    """The nodes that ask `gate` after their work and have not completed it: a decision on
    their output cannot be given before it exists."""
    catalog = snapshot_catalog(store, state)
    nodes = {n.id: n for n in catalog.workflows[state.workflow].nodes}
    return [s.name for s in state.steps if s.status != "completed" and gate in (
        nodes[s.name].gates.after, catalog.phases[s.phase].execution.gates.after)]


def asked_after(store: Store, state: Delivery, gate: str) -> list[str]:
    """Completed nodes that ask `gate` after their work (`gates: {after: …}` on the node or
    its phase, in the delivery's snapshot)."""
    catalog = snapshot_catalog(store, state)
    nodes = {n.id: n for n in catalog.workflows[state.workflow].nodes}
    return [s.name for s in state.steps if s.status == "completed" and gate in (
        nodes[s.name].gates.after, catalog.phases[s.phase].execution.gates.after)]


def refresh_block(state: Delivery, step: Step) -> None:
    """Re-evaluate a step blocked at a gate: pending when every gate is open, else say why."""
    closed = closed_gates(state, step)
    if not closed:
        state.unblock(step)
        return
    step.blocked_reason = block_reason(state, closed[0])


def block_reason(state: Delivery, gate: str) -> str:
    decisions = [a for a in state.approvals if a.gate == gate]
    if decisions and decisions[-1].decision == "rejected":
        note = f": {decisions[-1].note}" if decisions[-1].note else ""
        return f"rejected: {gate}{note}"
    return f"awaiting approval: {gate}"


def first_of_each_branch(state: Delivery, names: list[str]) -> list[str]:
    """The names not downstream of another name: reopening them reopens the rest."""
    covered: set[str] = set()
    wanted = set(names)
    out = []
    for step in state.steps:
        if step.name in wanted and step.name not in covered:
            out.append(step.name)
            covered |= set(downstream_of(state, step.name))
    return out


def raise_risk(state: Delivery, node: str, path: str, sha256: str | None = None) -> list[str]:
    """A risk file appeared in `node`'s folder (or changed since it was raised, `sha256` its
    content now): its direct downstream must pass the risk gate, and until it is decided the
    delivery is not completed nor pushed (`reading.open_risks`), also when nothing is
    downstream."""
    state.risks.append(Risk(node=node, path=path, raised_at=now_iso(), sha256=sha256))
    gated = []
    for step in state.steps:
        if node in step.needs and "risk" not in step.gates:
            step.gates.append("risk")
            gated.append(step.name)
    state.log("risk raised", node, f"{path}; gated: {', '.join(gated) or 'nothing downstream'}"
              f"; decide with `specops approve {state.phase} risk`")
    return gated

"""The `approve_gate` job: one op recording a human decision on a delivery's gate from run config
(the Launchpad form of `specops approve`). The decision is `delivery.gates.approve`'s, imported
when the op runs; this translates its errors into a Dagster `Failure` and logs what it did as
`specops approve` prints it: the decision, a decision that only repeats the last one, and the
nodes a rejection or a changed decision reopened."""

from typing import TYPE_CHECKING, Literal

import dagster as dg

from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.errors import SpecopsError

if TYPE_CHECKING:
    from specops_dag.delivery.model import Approval, Delivery


class ApproveGateConfig(dg.Config):
    delivery: str
    gate: str
    decision: Literal["approved", "rejected"] = "approved"
    note: str = ""


@dg.op
def decide_gate(context: dg.OpExecutionContext, config: ApproveGateConfig,
                specops: SpecopsResource) -> None:
    """Record a human decision on a delivery's gate (the Launchpad form of `specops approve`)."""
    from specops_dag.delivery.gates import approve

    store = specops.store()
    try:
        before = store.read(config.delivery)
        approval = approve(store, config.delivery, config.gate, config.note,
                           reject=config.decision == "rejected")
        after = store.read(config.delivery)
    except SpecopsError as err:
        raise dg.Failure(description=err.message, allow_retries=False) from err
    context.log.info(f"{config.gate} {approval.decision} for {config.delivery} at {approval.at}"
                     + (f" (revision {approval.revision})" if approval.revision else ""))
    repeated, reopened = consequences(before, after, approval)
    if repeated is not None:
        context.log.warning(f"note: `{config.gate}` was already {approval.decision} at "
                            f"{repeated.at} by {repeated.by}; recorded again, nothing else "
                            "changed")
    if reopened:
        context.log.info(f"reopened: {', '.join(reopened)} (their earlier files are kept under "
                         f"phases/{config.delivery}/.revisions/); `specops run "
                         f"{config.delivery}` runs them again")


def consequences(before: "Delivery", after: "Delivery",
                 approval: "Approval") -> "tuple[Approval | None, list[str]]":
    """What a decision did besides being recorded, read from the delivery's state before and
    after it as `specops approve` reads it: the earlier decision it only repeats (None when it is
    the first or a change), and the nodes it sent back to pending."""
    earlier = [a for a in before.approvals if a.gate == approval.gate]
    repeated = earlier[-1] if earlier and earlier[-1].decision == approval.decision else None
    status = {s.name: s.status for s in after.steps}
    return repeated, [s.name for s in before.steps
                      if s.status != "pending" and status.get(s.name) == "pending"]


@dg.job(name="approve_gate", description="Approve or reject a delivery's human gate.")
def approve_gate_job() -> None:
    decide_gate()

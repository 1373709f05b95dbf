"""The `approve_gate` job: one op recording a human decision on a delivery's gate from run config
(the Launchpad form of `specops approve`). The decision is `delivery.gates.approve`'s, imported
when the op runs; this translates its errors into a Dagster `Failure` and logs what it did as
`specops approve` prints it: the decision, a decision that only repeats the last one, and the
nodes a rejection or a changed decision reopened."""

from typing import Literal

import dagster as dg

from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.errors import SpecopsError


class ApproveGateConfig(dg.Config):
    delivery: str
    gate: str
    decision: Literal["approved", "rejected"] = "approved"
    note: str = ""


@dg.op
def decide_gate(context: dg.OpExecutionContext, config: ApproveGateConfig,
                specops: SpecopsResource) -> None:
    """Record a human decision on a delivery's gate (the Launchpad form of `specops approve`)."""
    from specops_dag.delivery.gates import decide

    try:
        made = decide(specops.store(), config.delivery, config.gate, config.note,
                      reject=config.decision == "rejected")
    except SpecopsError as err:
        raise dg.Failure(description=err.message, allow_retries=False) from err
    approval = made.approval
    context.log.info(f"{config.gate} {approval.decision} for {config.delivery} at {approval.at}"
                     + (f" (revision {approval.revision})" if approval.revision else ""))
    repeated, reopened = made.notes(config.delivery)
    if repeated is not None:
        context.log.warning(repeated)
    if reopened is not None:
        context.log.info(reopened)


@dg.job(name="approve_gate", description="Approve or reject a delivery's human gate.")
def approve_gate_job() -> None:
    decide_gate()

"""The `approve_gate` job: one op recording a human decision on a delivery's gate from run config
(the Launchpad form of `specops approve`). The decision is `delivery.gates.approve`'s, imported
when the op runs; this only translates its errors into a Dagster `Failure`."""

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
    from specops_dag.delivery.gates import approve

    try:
        approval = approve(specops.store(), config.delivery, config.gate, config.note,
                           reject=config.decision == "rejected")
    except SpecopsError as err:
        raise dg.Failure(description=err.message, allow_retries=False) from err
    context.log.info(f"{config.gate} {approval.decision} for {config.delivery} at {approval.at}"
                     + (f" (revision {approval.revision})" if approval.revision else ""))


@dg.job(name="approve_gate", description="Approve or reject a delivery's human gate.")
def approve_gate_job() -> None:
    decide_gate()

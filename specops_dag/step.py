"""Runs one attempt of one step of one delivery: the domain function behind every node asset.

It claims the step under the delivery lock, runs the phase's executor outside the lock, verifies
the required artifacts independently, registers handoffs as {path, sha256} and records the verdict.
Executors today: `command` (seed 004). `codex` / `evaluator` are refused as not available.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .catalog import sha256_file
from .definition import Phase
from .delivery import (
    closed_gates,
    current_owner,
    owner_alive,
    snapshot_catalog,
    target_path,
)
from .errors import SpecopsError, UsageError
from .process import run_process
from .prompt import failure_summary
from .state import Delivery, FileRef, Step, Store, move, now_iso, write_json_atomic

MAX_ATTEMPTS = 3
AVAILABLE_EXECUTORS = ("command",)
DEFAULT_COMMAND_TIMEOUT_S = 600

Status = Literal["completed", "reused", "blocked", "failed", "error", "skipped"]


@dataclass(frozen=True)
class StepOutcome:
    """What happened to a step in this call. `retryable` tells the caller another call may help."""

    status: Status
    node: str
    message: str = ""
    attempt: int = 0
    duration_s: float = 0.0
    handoff: dict[str, FileRef] = field(default_factory=dict)
    retryable: bool = False


@dataclass(frozen=True)
class AttemptResult:
    ok: bool
    summary: str
    handoff: dict[str, FileRef]


def run_step(store: Store, delivery: str, node: str, workflow: str | None = None,
             max_attempts: int = MAX_ATTEMPTS) -> StepOutcome:
    """Run the next attempt of `node` if it may run; otherwise say why not. Never fakes success."""
    claim = claim_step(store, delivery, node, workflow, max_attempts)
    if isinstance(claim, StepOutcome):
        return claim
    state, phase = claim
    step = state.get_step(node)
    started = time.monotonic()
    try:
        result = run_command_attempt(store, state, step, phase)
    except SpecopsError as err:  # environment errors stop at once: no retry (seed 001 §6)
        finish_attempt(store, delivery, node, AttemptResult(False, err.message, {}), final=True)
        return StepOutcome("error", node, err.message, step.attempts,
                           round(time.monotonic() - started, 3))
    final = result.ok or step.attempts >= max_attempts
    finish_attempt(store, delivery, node, result, final=final)
    duration = round(time.monotonic() - started, 3)
    if result.ok:
        return StepOutcome("completed", node, "", step.attempts, duration, result.handoff)
    if final:
        return StepOutcome("error", node, f"attempt {step.attempts}/{max_attempts} failed; budget "
                           f"spent: {result.summary}", step.attempts, duration)
    return StepOutcome("failed", node, f"attempt {step.attempts}/{max_attempts} failed: "
                       f"{result.summary}", step.attempts, duration, retryable=True)


def claim_step(store: Store, delivery: str, node: str, workflow: str | None,
               max_attempts: int) -> tuple[Delivery, Phase] | StepOutcome:
    """Under the lock: decide whether the step runs now and, if so, mark it running for us."""
    with store.transaction(delivery) as state:
        if workflow is not None and state.workflow != workflow:
            raise UsageError(f"delivery `{delivery}` runs workflow `{state.workflow}`, not "
                             f"`{workflow}`; launch `{state.workflow.replace('-', '_')}_job` for it")
        step = state.get_step(node)
        early = _not_runnable(store, state, step, max_attempts)
        if early is not None:
            return early
        phase = snapshot_catalog(store, state).phases[step.phase]
        kind = phase.execution.executor.kind
        if kind not in AVAILABLE_EXECUTORS:
            return StepOutcome("error", node, f"executor not available: phase `{step.phase}` uses "
                               f"`executor: {{kind: {kind}}}`, which this version of specops-dag "
                               "cannot run yet; nothing was run and the step stays "
                               f"`{step.status}`")
        move(state, step, "running", "run")
        step.attempts += 1
        step.started_at = step.started_at or now_iso()
        step.owner = current_owner()
        step.consumed = upstream_handoffs(state, step)
        state.log("attempt started", node, f"attempt {step.attempts}/{max_attempts}")
        return state.model_copy(deep=True), phase


def _not_runnable(store: Store, state: Delivery, step: Step, max_attempts: int
                  ) -> StepOutcome | None:
    name, d = step.name, state.phase
    if step.status == "completed":
        return StepOutcome("reused", name, "completed earlier; not re-run", step.attempts,
                           handoff=step.handoff)
    if step.status == "error":
        return StepOutcome("error", name, f"step `{name}` is in error since {step.failed_at}: "
                           f"{step.error_message}; fix the cause, then `specops resume {d} {name}`")
    if step.status == "running" and owner_alive(step.owner):
        return StepOutcome("blocked", name, f"write conflict: step `{name}` is already running "
                           f"(pid {step.owner.pid})")
    not_done = [n for n in step.needs if state.get_step(n).status != "completed"]
    if not_done:
        return StepOutcome("skipped", name, "upstream not completed: " + ", ".join(
            f"`{n}` is `{state.get_step(n).status}`" for n in not_done))
    gates = closed_gates(state, step)
    missing = [ref.path for n in step.needs for ref in state.get_step(n).handoff.values()
               if not (store.root / ref.path).is_file()]
    reason = (f"awaiting approval: {gates[0]}" if gates else
              f"missing input: {missing[0]} (registered by an upstream step) is gone; restore it "
              f"or `specops reopen {d} <upstream>`" if missing else None)
    if step.status == "blocked":
        if reason is None and not (step.blocked_reason or "").startswith("awaiting approval"):
            reason = step.blocked_reason
        if reason is None:
            move(state, step, "pending", "approve")
            step.blocked_reason = step.blocked_at = None
            return None
        return StepOutcome("blocked", name, reason or "")
    if reason is not None:
        move(state, step, "blocked", "run")
        step.blocked_reason, step.blocked_at = reason, now_iso()
        return StepOutcome("blocked", name, reason)
    if step.attempts >= max_attempts:  # an interrupted last attempt: the budget is spent
        move(state, step, "running", "run")
        _record_error(state, step, f"budget spent: {step.attempts} of {max_attempts} attempts "
                      "used (the last one was interrupted)")
        return StepOutcome("error", name, step.error_message or "", step.attempts)
    return None


def upstream_handoffs(state: Delivery, step: Step) -> dict[str, FileRef]:
    """Every handoff of every direct upstream step, keyed `<node>/<artifact>`, in needs order."""
    return {f"{n}/{art}": ref for n in step.needs
            for art, ref in state.get_step(n).handoff.items()}


def node_dir(store: Store, delivery: str, node: str) -> Path:
    return store.delivery_dir(delivery) / node


def run_command_attempt(store: Store, state: Delivery, step: Step, phase: Phase) -> AttemptResult:
    """Run the phase's argv in the target with the SPECOPS_* environment; then verify artifacts."""
    executor = phase.execution.executor
    folder = node_dir(store, state.phase, step.name)
    folder.mkdir(parents=True, exist_ok=True)
    target = target_path(store, state)
    env = {**os.environ, "SPECOPS_ROOT": str(store.root.resolve()),
           "SPECOPS_DELIVERY": state.phase, "SPECOPS_NODE": step.name,
           "SPECOPS_NODE_DIR": str(folder.resolve()), "SPECOPS_TARGET": str(target),
           "SPECOPS_ATTEMPT": str(step.attempts),
           "SPECOPS_INPUTS": json.dumps({k: v.model_dump() for k, v in step.consumed.items()})}
    argv = list(executor.argv or [])
    result = run_process(argv, cwd=target, env=env,
                         deadline_s=executor.timeout_s or DEFAULT_COMMAND_TIMEOUT_S)
    write_json_atomic(folder / f"step{step.step}-output.json", {
        "attempt": step.attempts, "argv": argv, "exit_code": result.exit_code,
        "timed_out": result.timed_out, "duration_s": result.duration_s,
        "stdout": result.stdout, "stderr": result.stderr})
    if not result.ok:
        why = (f"timed out after {executor.timeout_s or DEFAULT_COMMAND_TIMEOUT_S} s"
               if result.timed_out else f"exited {result.exit_code}")
        log = (result.stdout + result.stderr).strip()
        text = f"`{shlex.join(argv)}` {why}" + (f"\n{log}" if log else "")
        return AttemptResult(False, failure_summary(text), {})
    return verify_artifacts(store, state, step, phase)


def verify_artifacts(store: Store, state: Delivery, step: Step, phase: Phase) -> AttemptResult:
    """Independent check after exit 0: required artifacts exist; register all that exist."""
    folder = node_dir(store, state.phase, step.name)
    handoff, missing = {}, []
    for art in phase.output.artifacts:
        path = folder / art.path
        rel = path.relative_to(store.root).as_posix()
        if path.is_file():
            handoff[art.id] = FileRef(path=rel, sha256=sha256_file(path))
        elif art.required:
            missing.append(f"`{art.id}` ({rel})")
    if missing:
        return AttemptResult(False, "exit 0 but required artifacts are missing: "
                             + ", ".join(missing), {})
    return AttemptResult(True, "", handoff)


def finish_attempt(store: Store, delivery: str, node: str, result: AttemptResult,
                   final: bool) -> None:
    with store.transaction(delivery) as state:
        step = state.get_step(node)
        me = current_owner()
        if step.status != "running" or step.owner is None or step.owner.pid != me.pid:
            state.log("attempt result dropped", node, "the step was reopened or taken over "
                      "while it ran")
            return
        step.owner = None
        if result.ok:
            move(state, step, "completed", "run")
            step.handoff, step.last_failure = result.handoff, None
            step.completed_at = now_iso()
            state.log("completed", node, f"attempt {step.attempts}")
        elif final:
            step.last_failure = result.summary
            _record_error(state, step, result.summary)
        else:
            step.last_failure = result.summary
            state.log("attempt failed", node, f"attempt {step.attempts}")


def _record_error(state: Delivery, step: Step, message: str) -> None:
    move(state, step, "error", "run")
    step.owner = None
    step.error_message, step.failed_at = message, now_iso()


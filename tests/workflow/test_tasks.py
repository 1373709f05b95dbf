"""A phase's `execution.fan_out` and the task list it expands (issue #20 item 2, the format): the
FanOut model, reading a `kind: task-list` file with one exact message per problem (file, line,
YAML path, fix), the order the tasks run in, and the load-time checks of a fan-out."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specops_dag.workflow.model import FanOut, Phase, TaskSource

CODEX = {"goal": "Build each task.", "executor": {"kind": "codex"}}


def phase_with(fan_out: object) -> dict:
    return {"kind": "phase", "id": "p-build", "input": {"ports": {"plan": {"contract": "plan"}}},
            "execution": {**CODEX, "fan_out": fan_out}}


def test_a_fan_out_runs_two_sessions_at_a_time_unless_it_says_otherwise() -> None:
    phase = Phase.model_validate(phase_with({"tasks": {"input": "plan", "artifact": "tasks"}}))
    assert phase.execution.fan_out == FanOut(tasks=TaskSource(input="plan", artifact="tasks"),
                                             max_parallel=2)
    assert Phase.model_validate(phase_with({"tasks": {"input": "plan", "artifact": "tasks"},
                                            "max_parallel": 16})).execution.fan_out.max_parallel == 16


def test_a_phase_without_fan_out_has_none() -> None:
    phase = Phase.model_validate({"kind": "phase", "id": "p", "execution": CODEX})
    assert phase.execution.fan_out is None


TASKS = {"input": "plan", "artifact": "tasks"}
BAD_FAN_OUT = [
    pytest.param({"tasks": TASKS, "max_parallel": 0}, [
        (("max_parallel",), "Input should be greater than or equal to 1")], id="zero-parallel"),
    pytest.param({"tasks": TASKS, "max_parallel": 17}, [
        (("max_parallel",), "Input should be less than or equal to 16")], id="17-parallel"),
    pytest.param({"tasks": TASKS, "max_parallel": "two"}, [
        (("max_parallel",), "Input should be a valid integer, unable to parse string as an "
                            "integer")], id="parallel-not-a-number"),
    pytest.param({"max_parallel": 3}, [(("tasks",), "Field required")], id="no-tasks"),
    pytest.param({"tasks": {"input": "plan"}}, [(("tasks", "artifact"), "Field required")],
                 id="no-artifact"),
    pytest.param({"tasks": {"input": "Plan", "artifact": "tasks"}}, [
        (("tasks", "input"), "String should match pattern '^[a-z0-9][a-z0-9_-]{0,62}$'")],
        id="port-not-an-id"),
    pytest.param({"tasks": "plan"}, [
        (("tasks",), "Input should be a valid dictionary or instance of TaskSource")],
        id="tasks-not-a-mapping"),
    pytest.param({"tasks": {**TASKS, "path": "tasks.yaml"}, "parallel": 3}, [
        (("tasks", "path"), "Extra inputs are not permitted"),
        (("parallel",), "Extra inputs are not permitted")], id="unknown-keys"),
]


@pytest.mark.parametrize(("fan_out", "errors"), BAD_FAN_OUT)
def test_a_bad_fan_out_value_is_refused_where_it_is(fan_out: dict,
                                                    errors: list[tuple[tuple, str]]) -> None:
    with pytest.raises(ValidationError) as caught:
        Phase.model_validate(phase_with(fan_out))
    assert [(e["loc"], e["msg"]) for e in caught.value.errors()] == [
        (("execution", "fan_out", *loc), msg) for loc, msg in errors]


def test_a_fan_out_is_frozen() -> None:
    fan_out = FanOut(tasks=TaskSource(input="plan", artifact="tasks"))
    with pytest.raises(ValidationError):
        fan_out.max_parallel = 3  # type: ignore[misc]

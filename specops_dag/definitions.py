"""The code location's module name (`workspace.yaml`, `dagster job execute -m
specops_dag.definitions`): the definitions are built in `dagster_adapter.definitions`."""

from specops_dag.dagster_adapter.definitions import defs

__all__ = ["defs"]

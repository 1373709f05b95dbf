"""The Dagster Component for `dg` projects: a `defs.yaml` of type `SpecopsWorkflowsComponent`
points at a harness root, whose `workflow_defs/` stay in specops' own format (as dagster-dbt's
component keeps dbt's); `build_defs` hands that root to `build_definitions`, unchanged.
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import dagster as dg

from .errors import SpecopsError

# The files a `dg` project declares a component in, as Dagster looks for them.
YAML_NAMES = ("defs.yaml", "defs.yml", "component.yaml")


class HarnessRootError(SpecopsError):
    """`harness_root` of a component's `defs.yaml` is not a harness root."""


def harness_root_of(component_dir: Path, harness_root: str) -> Path:
    """The harness root that `harness_root` names, relative to the component's folder (an
    absolute path stays as it is); raises `HarnessRootError` saying what to change."""
    root = (component_dir / harness_root).resolve()
    declared = next((p for p in (component_dir / n for n in YAML_NAMES) if p.is_file()),
                    component_dir)
    where = f"`harness_root: {harness_root}` in {declared}"
    fix = ("point `harness_root` at the harness root (the folder holding `workflow_defs/`), "
           f"relative to {component_dir} or absolute")
    if not root.exists():
        raise HarnessRootError(f"{where}: {root} does not exist; {fix}")
    if not root.is_dir():
        raise HarnessRootError(f"{where}: {root} is a file, not a folder; {fix}")
    if root.name == "workflow_defs":
        raise HarnessRootError(f"{where} names the `workflow_defs/` folder itself; name the "
                               "folder holding it: `harness_root: "
                               f"{os.path.relpath(root.parent, component_dir)}`")
    if not (root / "workflow_defs").is_dir():
        raise HarnessRootError(f"{where}: {root} has no `workflow_defs/` folder; {fix}")
    return root


@dataclass
class SpecopsWorkflowsComponent(dg.Component, dg.Resolvable):
    """The specops workflows of a harness root's `workflow_defs/`, one asset per node.

    With them come one job per workflow, the `nightly` schedule, the `gate_approvals` sensor,
    the `approve_gate` job and the `specops` resource, as in the `specops_dag.definitions` code
    location. The workflow, phase and skill files (the root's and the built-in ones) are read
    by specops itself; the deliveries' state lives under the root's `phases/`. Declare one such
    component per project: each brings the built-in workflows and the same job names.
    """

    harness_root: Annotated[str, dg.Resolver.default(
        description="The harness root: the folder holding `workflow_defs/` (and the deliveries' "
                    "`phases/`), relative to this component's folder or absolute.",
        examples=["../../../harness", "{{ context.project_root }}/harness"])]

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        # Imported here: `dg list components` / `dg check yaml` import this module only for its
        # schema, and `specops_dag.definitions` builds the code location's own `defs` on import.
        from .definitions import build_definitions

        return build_definitions(harness_root_of(context.path, self.harness_root))

"""Preloaded by the forkserver of the multiprocess executor (`executor.executor`): Dagster, its
instance storage, the code location's resolved repository and jobs and the step executor are
loaded once per run, so every step process forks warm instead of importing and resolving them
again (~1 s a step).

Nothing here may raise: the forkserver survives only ImportError, and a cold step is merely slower.
"""

import sys


def warm() -> None:
    try:
        import dagster as dg

        location = sys.modules.get("specops_dag.definitions")
        if location is not None:  # preloaded just before this module when it is the job's module
            location.defs.get_repository_def().get_all_jobs()
        import specops_dag.execution.step  # noqa: F401 - what every step runs; the location loads it lazily
        with dg.DagsterInstance.get():  # imports the run/event/schedule storage modules
            pass
    except Exception:  # noqa: BLE001 - a failed warm-up leaves the steps to load cold
        pass


warm()

"""The code location's executor: Dagster's default, except that multiprocess steps fork from a
forkserver preloaded with the job's module and `forkserver` instead of spawning a cold
interpreter. It chooses the start method only: it runs no step and imports nothing of specops."""

import dagster as dg

FORKSERVER_PRELOAD = "specops_dag.dagster_adapter.forkserver"


def _warm_multiprocess(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Dagster's default executor, except that `multiprocess` without a `start_method` starts
    its step processes from a forkserver preloaded with the job's module and
    `dagster_adapter.forkserver`: each step forks warm instead of spawning a fresh interpreter that
    imports Dagster and this code location again. `start_method: {spawn: {}}` restores spawn."""
    config = dict(init_context.executor_config)
    multi = config.get("multiprocess")
    if isinstance(multi, dict) and not multi.get("start_method"):
        module = getattr(init_context.job, "get_module", lambda: None)()
        preload = [m for m in (module, FORKSERVER_PRELOAD) if m]
        config["multiprocess"] = {**multi,
                                  "start_method": {"forkserver": {"preload_modules": preload}}}
    default = dg.multi_or_in_process_executor
    return default.executor_creation_fn(init_context._replace(executor_config=config))


executor = dg.ExecutorDefinition(
    name="multi_or_in_process_executor",
    config_schema=dg.multi_or_in_process_executor.config_schema,
    executor_creation_fn=_warm_multiprocess,
    requirements=dg.multi_or_in_process_executor.get_requirements,
    description="Dagster's default (multiprocess or in_process), multiprocess forking warm steps.")

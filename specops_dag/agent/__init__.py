"""One agent call and what it is told: the prompt assembled from repository files in the fixed
order, the evaluator's prompt and verdict, the codex CLI invocation and the replay agent. It
never decides a step's status (that is `execution`) and never imports Dagster."""

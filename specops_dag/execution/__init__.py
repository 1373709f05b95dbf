"""One step of one delivery, end to end: claiming it under the lock, running an attempt
(agent, validation, review), recording the verdict and committing. The one place that composes
the packages below it; it never imports Dagster or click."""

"""specops-dag: run Codex agent deliveries on C#/.NET repositories (net8.0, net10.0) as Dagster
DAGs.

The package root imports nothing heavy: `specops status`, `dry-run` and `hook` must start fast and
must never pull in dagster.
"""

__version__ = "0.1.0"

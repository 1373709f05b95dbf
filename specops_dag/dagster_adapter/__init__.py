"""The Dagster front-end, and the only package that imports Dagster: every workflow node as an
asset with its checks, the jobs, the nightly schedule and gate sensor, the resource, the warm
executor, instance helpers and the `dg` component. Every decision is delegated to `execution`."""

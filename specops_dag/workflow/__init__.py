"""The YAML a workflow author writes — workflows, phases, skills, the skill graph and
`validation.yaml` — read with caps, validated and cross-checked into a `Catalog`. It never
writes a file and never imports Dagster, the delivery state or anything that runs."""

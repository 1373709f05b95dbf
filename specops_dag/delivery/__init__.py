"""A delivery's state on disk and its life cycle: the records and step transitions, the store
(locks, atomic transactions), creating, reopening, resuming and pushing a delivery, gates,
budgets and the read-only questions `status` asks. No Dagster, and no agent or build of its own."""

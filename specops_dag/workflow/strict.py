"""The base of every model read from a file a person writes (workflow and phase definitions,
`prices.yaml`, a replay scenario): unknown keys are errors, values are frozen, and the validator
is built on first use, so importing a module of such models costs little. Its own module so
that pricing the state (`specops status`) needs no workflow model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

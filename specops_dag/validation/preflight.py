"""The preflight (issue 16): before the first agent call of a step with `full` validation, the
base tree is validated once per base commit and layout, so a repository that cannot pass is a
person's problem (the step is blocked with the fix), never an agent's. A passing result is cached
under `.specops/preflight/` of the harness root; it is also the baseline of `judge: regressions`.
It never writes delivery state: the executor records what it returns.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path

from specops_dag.files import now_iso, write_json_atomic
from specops_dag.validation.dotnet import DEADLINE_S, ValidationReport, validate_full
from specops_dag.workflow.model import ValidationConfig

CACHE_VERSION = 1
# What a person changes, per stage the base stopped at (the report's message names the file;
# an `sdk` message carries its own fix).
ADVICE = {
    "restore": "fix the package sources, the network or the packages the base references",
    "build": "fix the warning or error on the base branch, or set `validation.judge: "
             "regressions` in workflow_defs/validation.yaml (or the phase) to judge attempts "
             "only on what they add",
    "test": "fix the base's tests, or set `validation.judge: regressions` in "
            "workflow_defs/validation.yaml (or the phase) to judge attempts only on what they add",
}
# The keys of a record (delivery.model.PreflightRecord holds the same): the report's, then these.
RECORD_KEYS = (*(f.name for f in fields(ValidationReport)), "commit", "checked_at", "cached",
               "cache")


@dataclass(frozen=True)
class Preflight:
    ok: bool
    record: dict  # the base report as metadata, with commit, cached, checked_at
    cached: bool


def cache_key(commit: str, config: ValidationConfig) -> str:
    text = json.dumps({"v": CACHE_VERSION, "commit": commit, "layout": config.model_dump()},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(cache_dir: Path, commit: str | None, config: ValidationConfig) -> Path | None:
    return cache_dir / f"{commit[:12]}-{cache_key(commit, config)}.json" if commit else None


def cached_pass(cache_dir: Path, commit: str | None, config: ValidationConfig) -> dict | None:
    """The cached passing preflight of this commit and layout, or None."""
    path = cache_path(cache_dir, commit, config)
    if path is None or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("passed") is not True or not set(
            record) <= set(RECORD_KEYS):
        return None  # a failure, or not a record this version writes: validate the base again
    return {**record, "cached": True}


def run_preflight(target: Path, commit: str | None, config: ValidationConfig, cache_dir: Path,
                  log_dir: Path, env: dict[str, str], deadline_s: float = DEADLINE_S
                  ) -> Preflight:
    """Validate the base tree at `target` (HEAD = `commit`), or reuse the cached pass of the same
    commit and layout. Only passes are cached: a failure may be the environment's, and the
    person who fixes it resumes the step. Raises ToolMissing without `dotnet`."""
    path = cache_path(cache_dir, commit, config)
    cached = cached_pass(cache_dir, commit, config)
    if cached is not None:
        return Preflight(True, cached, True)
    report = validate_full(target, log_dir, deadline_s, env, config)
    record = {**report.as_metadata(), "commit": commit, "checked_at": now_iso(),
              "cached": False}
    if report.passed and path is not None:
        write_json_atomic(path, {**record, "cache": str(path)})
    return Preflight(report.passed, record, False)


def block_reason(record: dict, delivery: str, node: str) -> str:
    """Why the step cannot start, for the person: stage, what the base lacks, what to change."""
    commit = (record.get("commit") or "")[:12] or "the target folder"
    advice = ADVICE.get(record.get("stage", ""), "")
    return (f"preflight: the base tree ({commit}) cannot pass `full` validation, so no agent "
            f"call was made: stage `{record.get('stage')}`: {record.get('message')}"
            + (f"; {advice}" if advice else "")
            + f"; then `specops resume {delivery} {node}`")


"""`specops status` and `specops dry-run` answered without click, pydantic, yaml or dagster.

`answer` takes the command line when it is a plain `status [DELIVERY] [--json]` or `dry-run
DELIVERY [NODE] [--json]` (after an optional `--root PATH`), reads the state through
`shape.canonical` (and a dry-run's snapshot through the delivery's `catalog.json`, see
`shape.read_compiled`) and prints what the full CLI prints, from the same `reading` and `prompt`
functions. Whenever it is not sure it would say exactly the same
— another option, a bad id, a missing, hand-edited or unreadable file, any error at all — it
returns None without printing, and `entry` hands the command line to the click CLI, whose
answer (or exact error and exit code) is the reference. `tests/test_quick.py` compares the two.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from . import reading, shape

MOST_ARGS = {"status": (0, 1), "dry-run": (1, 2)}


def parse(argv: list[str]) -> tuple[Path, str, list[str], bool] | None:
    """(root, command, positional arguments, --json) of `[--root PATH] status [DELIVERY]
    [--json]` or `[--root PATH] dry-run DELIVERY [NODE] [--json]`, else None."""
    root = os.environ.get("SPECOPS_ROOT", ".")
    if argv[:1] == ["--root"] and len(argv) > 1:
        root, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--root="):
        root, argv = argv[0].removeprefix("--root="), argv[1:]
    if not argv or argv[0] not in MOST_ARGS or not root:
        return None
    least, most = MOST_ARGS[argv[0]]
    args = [a for a in argv[1:] if a != "--json"]
    if not least <= len(args) <= most or any(a.startswith("-") for a in args) \
            or argv.count("--json") > 1:
        return None
    path = Path(root)
    if not path.is_dir():  # a missing or non-folder root: click says exactly what is wrong
        return None
    return path.resolve(), argv[0], args, "--json" in argv


def answer(argv: list[str]) -> int | None:
    """Print the answer and return the exit code, or return None having printed nothing."""
    parsed = parse(argv)
    if parsed is None:
        return None
    root, command, args, as_json = parsed
    try:
        if command == "status":
            text = status_text(root, args[0] if args else None, as_json)
        else:
            text = dry_run_text(root, args[0], args[1] if len(args) > 1 else None, as_json)
    except Exception:  # noqa: BLE001 — whatever it is, the full CLI reports it exactly
        return None
    if text is None or "\x1b" in text:  # click strips terminal escapes when piped; leave it that
        return None
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


def read_canonical(path: Path, kind: str) -> tuple[dict, object] | None:
    data = json.loads(path.read_bytes().decode("utf-8"))
    if type(data) is not dict or data.get("schema_version") != shape.schemas()["schema_version"]:
        return None
    return data, shape.canonical(data, kind)


def status_text(root: Path, delivery: str | None, as_json: bool) -> str | None:
    phases = root / "phases"
    if delivery is None:
        if not (phases / "index.json").is_file():
            if as_json:
                return json.dumps({"schema_version": shape.schemas()["schema_version"],
                                   "deliveries": []}, indent=2)
            return reading.render_index([])
        read = read_canonical(phases / "index.json", "index")
        if read is None:
            return None
        data, index = read
        return json.dumps(data, indent=2) if as_json else reading.render_index(index.deliveries)
    if reading.delivery_id_problem(delivery) or not (phases / delivery / "index.json").is_file():
        return None
    read = read_canonical(phases / delivery / "index.json", "delivery")
    if read is None:
        return None
    data, state = read
    if reading.state_problem(state, delivery):
        return None
    report = reading.status_report(root, state)
    if as_json:
        return json.dumps({**data, **report}, indent=2)
    return reading.render_status(state, report)


def dry_run_text(root: Path, delivery: str, node: str | None, as_json: bool) -> str | None:
    folder = root / "phases" / delivery
    if reading.delivery_id_problem(delivery) or not (folder / "index.json").is_file():
        return None
    read = read_canonical(folder / "index.json", "delivery")
    if read is None:
        return None
    catalog = shape.read_compiled(folder / "catalog.json", folder / "snapshot")
    if catalog is None:
        return None
    from .prompt import pick_step, render_dry_run

    state = read[1]
    if reading.state_problem(state, delivery):
        return None
    return render_dry_run(root, state, pick_step(state, node), catalog, as_json)

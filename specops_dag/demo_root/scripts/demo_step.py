"""One deterministic demo step. Reads upstream handoffs from SPECOPS_INPUTS (paths + sha256,
relative to SPECOPS_ROOT) and writes its artifact into SPECOPS_NODE_DIR."""

import hashlib
import json
import os
import sys
from pathlib import Path

root = Path(os.environ["SPECOPS_ROOT"])
out = Path(os.environ["SPECOPS_NODE_DIR"])
inputs = json.loads(os.environ["SPECOPS_INPUTS"])
target = Path(os.environ["SPECOPS_TARGET"])


def read_input(key: str) -> str:
    ref = inputs[key]
    data = (root / ref["path"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != ref["sha256"]:
        sys.exit(f"{ref['path']} changed since it was registered")
    return data.decode()


step = sys.argv[1]
if step == "inventory":
    files = sorted(p.relative_to(target).as_posix() for p in (target / "src").rglob("*")
                   if p.is_file())
    (out / "inventory.txt").write_text("".join(f"{f}\n" for f in files))
elif step == "measure":
    files = read_input("inventory/inventory").split()
    rows = [f"{f}\t{len((target / f).read_text().splitlines())}\n" for f in files]
    (out / "sizes.tsv").write_text("".join(rows))
elif step == "todos":
    files = read_input("inventory/inventory").split()
    hits = [f"{f}:{i}: {line.strip()}\n" for f in files
            for i, line in enumerate((target / f).read_text().splitlines(), 1) if "TODO" in line]
    (out / "todos.txt").write_text("".join(hits))
elif step == "report":
    sizes = read_input("measure/sizes").splitlines()
    todos = read_input("todos/todos").splitlines()
    total = sum(int(row.split("\t")[1]) for row in sizes)
    lines = [f"# Demo report for {os.environ['SPECOPS_DELIVERY']}", "",
             f"- files: {len(sizes)}", f"- lines: {total}", f"- TODOs: {len(todos)}", ""]
    (out / "report.md").write_text("\n".join(lines + [f"  - {t}" for t in todos]) + "\n")
else:
    sys.exit(f"unknown demo step {step!r}")
print(f"{step}: ok")

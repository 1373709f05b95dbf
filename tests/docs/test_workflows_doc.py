"""The documentation pages against the code. docs/workflows.md has one field table per file kind
(`### Workflow fields`, `### Phase fields`, `### Skill graph fields`, `### Task list fields`),
one row `| `path` | … |` per key of the JSON Schema `specops schema` prints (the task list's
from its model), so no field goes undocumented and no row outlives its field. A path reads as
YAML: `nodes[].review.phase`, `inputs.<name>.contract` (`[]` an item of a list, `<name>` a key
the author chooses).

Every whole file a page shows must load: a ```yaml block that starts with `kind: workflow` or
`kind: phase` is that definition, one whose first line is `# <path>` (`# prices.yaml`,
`# workflow_defs/skills/graph.yaml`) the file at that path, a block right under a line
`<!-- <path> -->` (a SKILL.md) that file; they go into one scratch harness root per page and
`specops check` must pass on it. A `kind: task-list` block must load as a task list. Any other
```yaml block is a fragment and must still parse."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

import pytest
import yaml

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.workflow.catalog import load_catalog
from specops_dag.workflow.tasks import TaskList, load_task_list

from ..support.cli import specops, specops_at
from ..support.harness import REPO

DOCS = REPO / "docs"
WORKFLOWS_MD = "docs/workflows.md"
TABLES = {"workflow": "### Workflow fields", "phase": "### Phase fields",
          "skill-graph": "### Skill graph fields", "task-list": "### Task list fields"}
PAGES = ["workflows.md", "validation.md", "security.md"]
ROW = re.compile(r"^\| `([^`]+)` \|")
HEADING = re.compile(r"^#{1,6} ")
FENCE = re.compile(r"^```(\S*)")
FILE_COMMENT = re.compile(r"^# ((?:workflow_defs/\S+|prices)\.yaml)$")
FILE_ABOVE = re.compile(r"^<!-- (workflow_defs/\S+) -->$")
DEFINITION = re.compile(r"^kind: (workflow|phase|task-list)$")


def field_paths(schema: dict) -> list[str]:
    """Every property of a JSON Schema as a YAML path, following `$ref`s into `$defs`,
    `anyOf`/`oneOf`/`allOf`, list items (`[]`) and maps keyed by the author (`.<name>`)."""
    defs, out = schema.get("$defs", {}), []

    def walk(node: dict, prefix: str, seen: frozenset[str]) -> None:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(defs[name], prefix, seen | {name})
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                walk(sub, prefix, seen)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{prefix}[]", seen)
        values = list(node.get("patternProperties", {}).values())
        if isinstance(node.get("additionalProperties"), dict):
            values.append(node["additionalProperties"])
        for sub in values:
            walk(sub, f"{prefix}.<name>", seen)
        for name, sub in node.get("properties", {}).items():
            path = f"{prefix}.{name}" if prefix else name
            out.append(path)
            walk(sub, path, seen)

    walk(schema, "", frozenset())
    return list(dict.fromkeys(out))


def sections(text: str) -> dict[str, list[str]]:
    """Each heading line and the lines under it up to the next heading; a `#` line inside a
    fenced block is no heading."""
    found: dict[str, list[str]] = {}
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and HEADING.match(line):
            current = found.setdefault(line.strip(), [])
            continue
        current.append(line)
    return found


def table_problems(text: str, page: str, heading: str, fields: list[str]) -> list[str]:
    """One line per field without its row under `heading`, then per row naming no field."""
    table = sections(text).get(heading)
    if table is None:
        return [f"{page}: no `{heading}` section; add it with a table row per field"]
    rows = [m[1] for line in table if (m := ROW.match(line))]
    missing = [f"{page}: field `{f}` is not documented; add the row `| `{f}` | … |` under "
               f"`{heading}`" for f in fields if f not in rows]
    stale = [f"{page}: `{heading}` has a row for `{r}`, which is no field of the schema; "
             "remove the row or fix its path" for r in rows if r not in fields]
    return missing + stale


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """What `specops schema` prints, and the task list's schema beside it."""
    result = specops_at(tmp_path_factory.mktemp("root"), "schema")
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout), "task-list": TaskList.model_json_schema()}


def test_every_field_of_the_workflow_and_phase_schemas_is_documented_in_workflows_md(
        schemas: dict[str, dict]) -> None:
    assert sorted(schemas) == sorted(TABLES)
    text = (REPO / WORKFLOWS_MD).read_text(encoding="utf-8")
    problems = [p for kind, heading in TABLES.items()
                for p in table_problems(text, WORKFLOWS_MD, heading, field_paths(schemas[kind]))]
    assert problems == [], "\n".join(problems)


def test_the_field_paths_cover_nested_lists_maps_and_choices(schemas: dict[str, dict]) -> None:
    workflow, phase = field_paths(schemas["workflow"]), field_paths(schemas["phase"])
    assert {"inputs.<name>.contract", "nodes[].inputs.<name>.node",
            "nodes[].review.platforms"} <= set(workflow)
    assert {"execution.fan_out.max_parallel", "execution.qa.probes[].body_contains",
            "validation", "validation.target.newer_runtime"} <= set(phase)
    assert field_paths(schemas["skill-graph"]) == ["edges", "edges[].from", "edges[].to",
                                                   "edges[].type", "edges[].reason"]


def test_the_check_names_each_missing_field_and_each_stale_row(
        tmp_path: Path, schemas: dict[str, dict]) -> None:
    page = tmp_path / "workflows.md"
    text = (REPO / WORKFLOWS_MD).read_text(encoding="utf-8")
    row = next(line for line in text.splitlines()
               if line.startswith("| `execution.fan_out.max_parallel` |"))
    page.write_text(text.replace(row + "\n", "").replace(
        "### Skill graph fields\n", "### Skill graph fields\n\n| `edges[].weight` | int | x |\n"),
        encoding="utf-8")
    edited = page.read_text(encoding="utf-8")
    assert table_problems(edited, "workflows.md", TABLES["phase"],
                          field_paths(schemas["phase"])) == [
        "workflows.md: field `execution.fan_out.max_parallel` is not documented; add the row "
        "`| `execution.fan_out.max_parallel` | … |` under `### Phase fields`"]
    assert table_problems(edited, "workflows.md", TABLES["skill-graph"],
                          field_paths(schemas["skill-graph"])) == [
        "workflows.md: `### Skill graph fields` has a row for `edges[].weight`, which is no field "
        "of the schema; remove the row or fix its path"]
    assert table_problems("# Nothing\n", "workflows.md", TABLES["workflow"], ["id"]) == [
        "workflows.md: no `### Workflow fields` section; add it with a table row per field"]


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, the line above the fence, body) of every fenced block."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        found.append((m[1], lines[i - 1] if i else "", "\n".join(lines[i + 1:end]) + "\n"))
        i = end + 1
    return found


def whole_files(text: str) -> tuple[dict[str, str], list[str]]:
    """The whole files a page shows, by path under the harness root, and its task lists."""
    files: dict[str, str] = {}
    task_lists: list[str] = []
    for lang, above, body in blocks(text):
        first = body.splitlines()[0] if body.strip() else ""
        path = None
        if (m := FILE_ABOVE.match(above)):
            path = m[1]
        elif lang == "yaml" and (m := FILE_COMMENT.match(first)):
            path = m[1]
        elif lang == "yaml" and (m := DEFINITION.match(first)):
            if m[1] == "task-list":
                task_lists.append(body)
                continue
            path = f"workflow_defs/{m[1]}s/{yaml.safe_load(body)['id']}.yaml"
        if path is not None:
            assert path not in files, f"two examples are the whole file {path}"
            files[path] = body
    return files, task_lists


def bound_skills(files: dict[str, str]) -> dict[str, str]:
    """Skill id -> its path under the harness root, for every skill the example phases bind."""
    found = {}
    for path, body in files.items():
        if path.startswith("workflow_defs/phases/"):
            for skill in yaml.safe_load(body)["execution"].get("skills", []):
                found[skill["id"]] = f"workflow_defs/{skill['path']}"
    return found


@pytest.mark.parametrize("page", ["workflows.md", "validation.md"])
def test_every_whole_file_example_of_the_page_passes_specops_check(
        tmp_path: Path, clean_env: dict[str, str], page: str) -> None:
    files, task_lists = whole_files((DOCS / page).read_text(encoding="utf-8"))
    assert files, f"docs/{page} shows no whole file"
    root = tmp_path / "harness"
    skills = bound_skills(files)
    stubs = {path: f"# {sid}\n" for sid, path in skills.items() if path not in files}
    for rel, body in {**files, **stubs}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    (root / "workflow_defs").mkdir(parents=True, exist_ok=True)
    for i, body in enumerate(task_lists):
        (root / f"tasks-{i}.yaml").write_text(body, encoding="utf-8")
        assert load_task_list(root / f"tasks-{i}.yaml", f"docs/{page}").tasks

    result = specops(clean_env, root, "check")

    built_in = load_catalog([BUILTIN_DEFS])
    count = {kind: sum(p.startswith(f"workflow_defs/{kind}s/") for p in files)
             for kind in ("workflow", "phase")}
    prices = yaml.safe_load(files["prices.yaml"]) if "prices.yaml" in files else None
    priced = f"; prices as of {prices['as_of']} from prices.yaml" if prices else ""
    skills_loaded = sum(1 for kind, _ in built_in.sources if kind == "skill") + len(skills)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        f"ok: {len(built_in.workflows) + count['workflow']} workflows, "
        f"{len(built_in.phases) + count['phase']} phases, {skills_loaded} skills from "
        f"{BUILTIN_DEFS}, {root.resolve() / 'workflow_defs'}{priced}\n")


@pytest.mark.parametrize("page", PAGES)
def test_every_yaml_block_of_the_page_parses(page: str) -> None:
    bad = []
    for lang, _, body in blocks((DOCS / page).read_text(encoding="utf-8")):
        if lang == "yaml":
            try:
                yaml.safe_load(body)
            except yaml.YAMLError as err:
                bad.append(f"docs/{page}: a yaml block does not parse ({err}):\n{body}")
    assert bad == [], "\n".join(bad)


@pytest.mark.parametrize("page", PAGES)
def test_every_repository_path_the_page_names_exists(page: str) -> None:
    named = re.findall(r"`((?:tests|specops_dag|benchmarks|dotnet_fixtures)/[\w./-]+)`",
                       (DOCS / page).read_text(encoding="utf-8"))
    missing = sorted({p for p in named if "<" not in p and not (REPO / p).exists()
                      and not PurePosixPath(p).name.startswith("*")})
    assert missing == [], f"docs/{page} names paths that do not exist: {missing}"

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.agent.prompt import assemble_prompt, failure_summary, preview, target_line
from specops_dag.delivery.lifecycle import new_delivery, snapshot_catalog
from specops_dag.delivery.model import TargetRecord
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import agentic_root, completed_write, new, set_context
from ..support.cli import specops_at
from ..support.dotnet import copy_fixture
from ..support.git import commit_all
from ..support.harness import tree_state, write_tree


def test_the_prompt_parts_come_in_the_seed_order(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    write_tree(root, {"docs/arch.md": "# Architecture\n", "docs/phase/d1/handoff.md": "# H\n"})
    store = new(root)
    completed_write(root)
    set_context(root, "d1", "review", ["docs/arch.md"])
    with store.transaction("d1") as state:
        state.get_step("review").last_failure = "exit 0 but required artifacts are missing"
    state = store.read("d1")
    prompt = assemble_prompt(root, state, state.get_step("review"),
                             snapshot_catalog(store, state), root)
    assert [(p.label, p.path) for p in prompt.parts] == [
        ("AGENTS.md", "AGENTS.md"),
        ("common work rules", "phases/d1/snapshot/work-rules.md"),
        ("context", "docs/arch.md"),
        ("delivery handoff", "docs/phase/d1/handoff.md"),
        ("previous failure", None),
        ("current step", None)]
    assert prompt.parts[0].text == "# Agents\nBe precise.\n"
    assert prompt.parts[2].text == ("# Context file docs/arch.md (the step's context_files)\n\n"
                                    "# Architecture\n")
    assert prompt.parts[3].text == ("# Delivery handoff docs/phase/d1/handoff.md (as the last "
                                    "completed step left it)\n\n# H\n")
    assert prompt.parts[4].text == ("# Previous attempt failed\n\nexit 0 but required artifacts "
                                    "are missing")
    assert prompt.text == "\n\n".join(p.text for p in prompt.parts)
    assert prompt.total_chars == len(prompt.text)


def test_the_current_step_names_paths_and_hashes_never_bodies(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    completed_write(root)
    state = store.read("d1")
    catalog = snapshot_catalog(store, state)
    current = assemble_prompt(root, state, state.get_step("review"), catalog, root).parts[-1]
    skill = state.snapshot.skills["c-review"][0]
    notes_sha = sha256_file(root / "phases/d1/write/notes.md")
    assert current.text == (
        "# Current step: `review` (step 1 of delivery `d1`, phase `c-review`, attempt 1 of 3)\n"
        "\n"
        f"Working directory: {root.resolve()}. Every path below is absolute or relative to it.\n"
        "\n"
        "READ (in order):\n"
        f"1. phases/d1/write/notes.md (sha256 {notes_sha}) — input `notes`: `write` output "
        "`notes`, artifact `notes`\n"
        "\n"
        "SKILLS (from the delivery snapshot):\n"
        f"- entry: `c-review-skill` phases/d1/snapshot/skills/c-review-skill/SKILL.md (sha256 "
        f"{skill.sha256})\n"
        "\n"
        "TASK:\n"
        "Produce review.md for the next step.\n"
        "\n"
        "WRITE:\n"
        "- phases/d1/review/review.md (required)\n"
        "- docs/phase/d1/review.md (step record: what you did, commands, evidence)\n"
        "- docs/phase/d1/handoff.md (delivery handoff for the next step: paths and decisions)\n"
        "\n"
        "Node folder: phases/d1/review/ — your WRITE artifacts live there; put any other file "
        "this step produces (TRX results, logs) under it too.\n"
        "\n"
        "RISK: phases/d1/review/risk.md — a risk or question a person must decide (an assumption "
        "you could not check, evidence you could not produce, a test you had to weaken, input "
        "you lack): what it is, why, and the file that shows it. Writing it makes the delivery "
        "wait at the `risk` gate until a person decides; leave it unwritten when there is none.\n"
        "\n"
        "REPORT: end with a final message of at most 1,000 characters that summarizes what you "
        "did and names the files you wrote.")
    assert "the notes" not in current.text


def test_without_a_handoff_only_the_latest_earlier_summary_is_injected_capped(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    store = new(root)
    completed_write(root, summary="s" * 1500)
    state = store.read("d1")
    parts = assemble_prompt(root, state, state.get_step("review"),
                            snapshot_catalog(store, state), root).parts
    [summary] = [p for p in parts if p.label.startswith("summary")]
    assert summary.label == "summary of step 0 (write)"
    assert summary.text == "# Summary of the previous step `write`\n\n" + "s" * 1000


@pytest.mark.parametrize("size", [4000, 4001, 4999, 100_000])
def test_the_failure_summary_keeps_head_and_tail_within_4000_chars(size: int) -> None:
    text = "".join(chr(65 + i % 26) for i in range(size))
    summary = failure_summary(text)
    if size <= 4000:
        assert summary == text
        return
    assert len(summary) == 4000
    cut = int(summary[1500:].split("[... ", 1)[1].split(" ", 1)[0])
    marker = f"\n[... {cut} characters elided ...]\n"
    assert summary == text[:1500] + marker + text[1500 + cut:]
    assert len(text) - 1500 - cut <= 2500


CONTEXT_ERRORS = [
    pytest.param("not-a-list", "phases/d1/index.json: steps[0].context_files: Input should be a "
                 "valid list; fix the file or restore it from a backup",
                 id="malformed"),
    pytest.param(["docs/none.md"], "phases/d1/index.json: steps[0].context_files[0]: "
                 "`docs/none.md` not found in {root}; fix the path or remove it", id="missing"),
    pytest.param(["/etc/hostname"], "phases/d1/index.json: steps[0].context_files[0]: "
                 "`/etc/hostname` is absolute; use a path relative to the repository {root}",
                 id="absolute"),
    pytest.param(["../outside.md"], "phases/d1/index.json: steps[0].context_files[0]: "
                 "`../outside.md` is outside the repository {root}; use a path inside it",
                 id="outside"),
    pytest.param(["docs/escape.md"], "phases/d1/index.json: steps[0].context_files[0]: "
                 "`docs/escape.md` resolves to {outside}, outside the repository {root} (a "
                 "symlink); use a file inside the repository", id="symlink-escape"),
    pytest.param(["docs/latin1.md"], "phases/d1/index.json: steps[0].context_files[0]: "
                 "`docs/latin1.md`: not UTF-8 text; save it as UTF-8 or remove it",
                 id="not-utf8"),
]


@pytest.mark.e2e
@pytest.mark.parametrize(("files", "message"), CONTEXT_ERRORS)
def test_a_bad_context_path_exits_2_before_anything_changes(
        tmp_path: Path, files: object, message: str) -> None:
    root = agentic_root(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    write_tree(root, {"docs/ok.md": "ok\n"})
    (root / "docs/escape.md").symlink_to(outside)
    (root / "docs/latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    new(root)
    set_context(root, "d1", "write", files)  # type: ignore[arg-type]
    before = tree_state(root)
    result = specops_at(root, "dry-run", "d1")
    assert (result.returncode, result.stderr) == (
        2, "error: " + message.format(root=root, outside=outside) + "\n")
    assert tree_state(root) == before
    if files != "not-a-list":
        from specops_dag.delivery.store import Store
        with pytest.raises(UsageError):
            run_step(Store(root), "d1", "write")
        assert Store(root).read("d1").get_step("write").attempts == 0


def test_context_paths_differing_only_in_notation_or_case_are_included_once(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    write_tree(root, {"docs/arch.md": "# Architecture\n"})
    (root / "docs/alias.md").symlink_to(root / "docs/arch.md")
    new(root)
    set_context(root, "d1", "write", ["docs/arch.md", "./docs/arch.md", "docs//arch.md",
                                      "DOCS/ARCH.md", "docs/../docs/arch.md", "docs/alias.md"])
    result = json.loads(specops_at(root, "dry-run", "d1", "--json").stdout)
    assert [p["path"] for p in result["parts"] if p["label"] == "context"] == ["docs/arch.md"]


def test_dry_run_prints_each_path_with_its_chars_and_changes_nothing(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    write_tree(root, {"docs/arch.md": "# Architecture\n"})
    new(root)
    set_context(root, "d1", "write", ["docs/arch.md"])
    before = tree_state(root)
    text = specops_at(root, "dry-run", "d1")
    as_json = json.loads(specops_at(root, "dry-run", "d1", "--json").stdout)
    via_run = specops_at(root, "run", "d1", "--dry-run")
    assert tree_state(root) == before
    assert text.returncode == 0 and via_run.stdout == text.stdout
    lines = text.stdout.splitlines()
    assert lines[0] == "dry-run of d1 / write (step 0, phase c-write): nothing is changed"
    parts = as_json["parts"]
    assert [p["label"] for p in parts] == ["AGENTS.md", "common work rules", "context",
                                           "current step"]
    assert lines[1:-1] == [f"  {p['chars']:>8}  " + (f"{p['path']}  ({p['label']})" if p["path"]
                           else f"({p['label']})") for p in parts]
    assert lines[-1] == f"total prompt: {as_json['total_chars']} chars"
    assert parts[0]["chars"] == len("# Agents\nBe precise.\n")
    assert parts[2]["chars"] == len("# Context file docs/arch.md (the step's context_files)\n\n"
                                    "# Architecture\n")


def test_dry_run_reads_only_its_steps_phase_so_a_broken_later_phase_fails_only_its_own_dry_run(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    new(root)
    broken = root / "phases/d1/snapshot/phases/c-review.yaml"
    broken.write_text("kind: phase\nid: c-review\n")
    before = tree_state(root)
    first = specops_at(root, "dry-run", "d1")
    later = specops_at(root, "dry-run", "d1", "review")
    assert tree_state(root) == before
    assert first.returncode == 0
    assert first.stdout.splitlines()[0] == ("dry-run of d1 / write (step 0, phase c-write): "
                                            "nothing is changed")
    assert later.returncode == 2
    assert later.stderr == ("phases/d1/snapshot/phases/c-review.yaml: execution: missing "
                            "required key `execution`; add it\n"
                            "error: 1 problem(s) in the definitions; nothing was changed\n")


def test_dry_run_with_push_is_a_usage_error(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    new(root)
    result = specops_at(root, "run", "d1", "--dry-run", "--push")
    assert result.returncode == 2
    assert result.stderr.endswith("Error: --dry-run and --push cannot be combined: a dry run "
                                  "changes nothing, a push writes to origin\n")


# -- the TARGET line (issue 42): the frozen target policy, the one place a prompt names a version --

NET10_LINE = ("TARGET: net10.0 — every project targets exactly net10.0; the SDK is the one "
              "global.json selects in the repository root (SDK 10.0 or newer; never edit "
              "global.json). Where the 10.0 runtime is missing, run the tests on a newer one with "
              "DOTNET_ROLL_FORWARD=Major.")
NET8_LINE = ("TARGET: net8.0 — every project targets exactly net8.0; the SDK is the one "
             "global.json selects in the repository root (SDK 8.0 or newer; never edit "
             "global.json). Where the 8.0 runtime is missing, run the tests on a newer one with "
             "DOTNET_ROLL_FORWARD=Major.")
NET8_OWN_SDK = ("TARGET: net8.0 — every project targets exactly net8.0; the SDK is the one "
                "global.json selects in the repository root (SDK 8.0 only; never edit "
                "global.json).")


def policy(framework: str, newer_sdk: bool = True, newer_runtime: bool = True) -> TargetRecord:
    return TargetRecord(framework=framework, newer_sdk=newer_sdk, newer_runtime=newer_runtime,
                        origin="validation.target.framework; frozen at `specops new`")


@pytest.mark.parametrize(("record", "line"), [
    pytest.param(policy("net10.0"), NET10_LINE, id="net10.0"),
    pytest.param(policy("net8.0"), NET8_LINE, id="net8.0 on a newer SDK and runtime"),
    pytest.param(policy("net8.0", newer_runtime=False),
                 NET8_LINE.removesuffix(" Where the 8.0 runtime is missing, run the tests on a "
                                        "newer one with DOTNET_ROLL_FORWARD=Major.")
                 + " Tests run on the 8.0 runtime only; never set DOTNET_ROLL_FORWARD.",
                 id="net8.0 on a newer SDK, its own runtime only"),
    pytest.param(policy("net8.0", newer_sdk=False), NET8_OWN_SDK, id="net8.0 on its own SDK"),
    pytest.param(policy("net8.0", newer_sdk=False, newer_runtime=False), NET8_OWN_SDK,
                 id="net8.0 on its own SDK and runtime"),
    pytest.param(None, None, id="no frozen target"),
])
def test_the_target_line_says_what_the_frozen_policy_allows(
        record: TargetRecord | None, line: str | None) -> None:
    assert target_line(record) == line


def test_a_frozen_target_is_one_paragraph_between_the_task_and_write(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic", "d1",
                 "Write release notes.", target_policy=policy("net10.0"))
    state = store.read("d1")
    current = assemble_prompt(root, state, state.get_step("write"),
                              snapshot_catalog(store, state), root).parts[-1].text
    assert (f"TASK:\nProduce notes.md for the next step.\n\n{NET10_LINE}\n\nWRITE:\n"
            in current)
    assert current.count("TARGET:") == 1


def test_a_delivery_that_builds_no_dotnet_has_no_target_line(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)  # every phase validates `none`: `new` freezes no target
    result = specops_at(root, "new", "agentic", "d1", "--request", "Write release notes.")
    assert result.returncode == 0, result.stderr
    store = Store(root)
    state = store.read("d1")
    assert state.snapshot.target is None
    prompt = assemble_prompt(root, state, state.get_step("write"),
                             snapshot_catalog(store, state), root)
    assert [ln for ln in prompt.text.splitlines() if ln.startswith("TARGET")] == []


BUILTIN_NODES = ["full-delivery/requirements", "full-delivery/design", "full-delivery/develop",
                 "full-delivery/integrate", "full-delivery/verify", "full-delivery/delivery",
                 "quick-delivery/develop",
                 "quick-delivery/verify", "quick-delivery/delivery", "plan-build-review/plan",
                 "plan-build-review/build"]
DOTNET_8 = ("net8.0", ".NET 8", "8.0.x")


def builtin_prompts(tmp_path: Path, fixture: str) -> dict[str, str]:
    """`workflow/node` -> the prompt `specops dry-run` previews for it, for a delivery of each
    built-in workflow that `specops new` created on `fixture` committed as the harness root."""
    root = copy_fixture(tmp_path, fixture)
    commit_all(root)
    store = Store(root)
    prompts: dict[str, str] = {}
    for i, workflow in enumerate(["full-delivery", "quick-delivery", "plan-build-review"]):
        result = specops_at(root, "new", workflow, f"d{i}", "--request", "Document Add.")
        assert result.returncode == 0, result.stderr
        state = store.read(f"d{i}")
        catalog = snapshot_catalog(store, state)
        for step in state.steps:
            prompt = preview(root, state, step, catalog)
            assert prompt is not None and prompt.parts[-1].label == "current step"
            assert prompt.parts[-1].text.splitlines().count(target_line(
                state.snapshot.target)) == 1, (workflow, step.name)
            prompts[f"{workflow}/{step.name}"] = prompt.text
    return prompts


@pytest.mark.e2e
@pytest.mark.parametrize(("fixture", "line"), [
    pytest.param("all-pass-net10", NET10_LINE, id="net10.0"),
    pytest.param("all-pass", NET8_LINE, id="net8.0"),
])
def test_every_built_in_node_names_its_frozen_target_once_and_no_dotnet_8_text_besides(
        tmp_path: Path, fixture: str, line: str) -> None:
    prompts = builtin_prompts(tmp_path, fixture)
    assert list(prompts) == BUILTIN_NODES
    for node, text in prompts.items():
        assert text.splitlines().count(line) == 1, node
        assert [v for v in DOTNET_8 if v in text.replace(line, "")] == [], node

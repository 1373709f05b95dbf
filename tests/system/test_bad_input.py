"""The malformed-input corpus (issue #8, item 5): bad definitions, delivery ids, context paths and
hook payloads each get their exact error and exit code from the real `specops` console script,
and the whole tree under tmp_path (harness, DAGSTER_HOME, HOME) is byte-identical afterwards."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import AGENTIC
from ..support.harness import (
    DIAMOND,
    VENV_BIN,
    WF,
    WRITE_OUT,
    command_phase,
    tree_digest,
    write_files,
    write_tree,
)

Setup = Callable[[Path], None]
PHASE_A = "workflow_defs/phases/p-a.yaml"
DONE = "error: {n} problem(s) in the definitions; nothing was changed\n"
USE_ID = "; use e.g. `rss-cache` or `2026-11-rss-cache`\n"
ID_RULE = ("must be 1-64 characters of letters, digits, `.`, `_` or `-`, starting with a letter "
           "or digit")
UNKNOWN = ("error: unknown delivery `{d}`: phases/{d}/index.json not found; list deliveries with "
           "`specops status` or create one with `specops new`\n")
WHERE = "error: phases/d1/index.json: steps[0].context_files"
ABSOLUTE = "is absolute; use a path relative to the repository {root}\n"


def create(root: Path, workflow: str, request: str) -> None:
    catalog = load_catalog(definition_roots(root), display_base=root)
    new_delivery(Store(root), catalog, workflow, "d1", request)


def loop_at(rel: str) -> Setup:
    """The diamond harness with a symlink to itself at `rel`."""
    def setup(root: Path) -> None:
        diamond()(root)
        (root / rel).symlink_to((root / rel).name)
    return setup


def folder_at(rel: str) -> Setup:
    def setup(root: Path) -> None:
        diamond()(root)
        (root / rel).mkdir()
    return setup


def diamond(files: dict[str, str | bytes] | None = None) -> Setup:
    """The diamond harness with delivery `d1`, then `files` written over it (raw, not dedented)."""
    def setup(root: Path) -> None:
        write_tree(root, DIAMOND)
        create(root, "diamond", "Add an RSS cache.")
        write_files(root, files or {})
    return setup


def agentic(context_files: object) -> Setup:
    """The codex harness with delivery `d1` whose first step's `context_files` in index.json
    are `context_files` (as a hand edit would leave them: `specops check` already rejects
    absolute and escaping paths in definitions), a symlink out of the repository and a Latin-1
    file."""
    def setup(root: Path) -> None:
        write_tree(root, AGENTIC)
        write_files(root, {"docs/arch.md": "# Architecture\n",
                           "docs/latin1.md": "caf\xe9\n".encode("latin-1")})
        (root.parent / "outside.md").write_text("secret\n")
        (root / "docs/escape.md").symlink_to(root.parent / "outside.md")
        create(root, "agentic", "Write release notes.")
        index = root / "phases/d1/index.json"
        state = json.loads(index.read_text())
        state["steps"][0]["context_files"] = context_files
        index.write_text(json.dumps(state, indent=2))
    return setup


Case = tuple[str, tuple[Setup, list[str], int, str, str, bytes | None, dict[str, str]]]


def case(cid: str, setup: Setup, argv: list[str], code: int, stderr: str = "",
         stdout: str = "", stdin: bytes | None = None, env: dict[str, str] | None = None) -> Case:
    """One input: how the harness is built, the command, its exit code and exact output."""
    return cid, (setup, argv, code, stderr, stdout, stdin, env or {})


def hook_answer(event: str, **fields: str) -> str:
    """The exact line a hook prints: codex's `hookSpecificOutput` JSON."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, **fields}}) + "\n"


def deny(reason: str) -> str:
    return hook_answer("PreToolUse", permissionDecision="deny", permissionDecisionReason=reason)


def fail_open(event: str, name: str, error: str) -> str:
    return hook_answer(name, additionalContext=(
        f"<workflow-state>\nspecops hook {event} could not read the workflow state ({error}). "
        "Continue the step your prompt names; do not guess the current step from the chat "
        "history or from other deliveries.\n"
        "</workflow-state>"))


def tool_call(command: object, **extra: object) -> bytes:
    return json.dumps({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": command}, **extra}).encode()


def nodes(*lines: str) -> str:
    return ("kind: workflow\nid: diamond\ninputs: {request: {contract: req}}\nnodes:\n"
            + "".join(f"  - {line}\n" for line in lines))


NODE_A = "{id: a, phase: p-a, inputs: {request: {input: request}}}"
NODE_B = "{id: b, phase: p-b, needs: [a], inputs: {up: {node: a, output: out}}}"
BUILT_IN_PHASES = ["full-contract", "full-delivery", "full-design", "full-develop",
                   "full-evaluate", "full-integrate", "full-integrate-contract", "full-qa",
                   "full-requirements",
                   "full-verify", "pbr-build", "pbr-contract", "pbr-evaluate", "pbr-plan",
                   "pbr-qa", "quick-delivery", "quick-develop", "quick-verify"]


def phases(*harness: str) -> str:
    """How `unknown phase` lists the known ones: built-in and harness ids, sorted."""
    return ", ".join(sorted([*BUILT_IN_PHASES, *harness]))


CODEX_PHASE = ("kind: phase\nid: p-x\nexecution:\n  goal: Think.\n  executor: {{kind: codex}}\n"
               "  skills:\n    - {{id: one, path: {path}, load: entry, required: true}}\n"
               "output: {{ports: {{out: {{contract: x-out}}}}}}\n")
CYCLE = nodes("{id: a, phase: p-b, needs: [c], inputs: {up: {node: c, output: out}}}",
              "{id: b, phase: p-b, needs: [a], inputs: {up: {node: a, output: out}}}",
              "{id: c, phase: p-b, needs: [b], inputs: {up: {node: b, output: out}}}")
CYCLE_ERR = f"{WF}: nodes: cycle a -> c -> b -> a; remove one of these needs\n" + DONE.format(n=1)
BAD_YAML_ERR = (f"{WF}: invalid YAML at line 4, column 1: expected the node content, but found "
                "'<stream end>'; fix the syntax\n" + DONE.format(n=1))
NO_SKILL_ERR = ("workflow_defs/phases/p-x.yaml: execution.skills[0].path: skill file not found: "
                "workflow_defs/skills/one/SKILL.md; create it or fix the path\n" + DONE.format(n=1))

DEFINITIONS = [
    case("invalid-yaml", diamond({WF: "kind: workflow\nid: diamond\nnodes: [\n"}), ["check"], 2,
         BAD_YAML_ERR),
    case("yaml-with-a-tab-indent", diamond({WF: "kind: workflow\n\tid: diamond\n"}), ["check"], 2,
         f"{WF}: invalid YAML at line 2, column 1: found character '\\t' that cannot start any "
         "token; fix the syntax\n" + DONE.format(n=1)),
    case("non-utf8-workflow", diamond({WF: nodes(NODE_A).encode() + b"description: caf\xe9\n"}),
         ["check"], 2, f"{WF}: not UTF-8 text; save the file as UTF-8\n" + DONE.format(n=1)),
    case("non-utf8-phase", diamond({PHASE_A: b"kind: phase\nid: p-a\n# caf\xe9\n"}), ["check"], 2,
         f"{PHASE_A}: not UTF-8 text; save the file as UTF-8\n"
         f"{WF}: nodes[0].phase: unknown phase `p-a` (known: {phases('p-b', 'p-c', 'p-d')}); add "
         "workflow_defs/phases/p-a.yaml or fix the id\n" + DONE.format(n=2)),
    case("non-utf8-skill-graph", diamond({"workflow_defs/skills/graph.yaml": b"edges: caf\xe9\n"}),
         ["check"], 2, "workflow_defs/skills/graph.yaml: not UTF-8 text; save the file as UTF-8\n"
         + DONE.format(n=1)),
    case("top-level-list", diamond({WF: "- kind: workflow\n- id: diamond\n"}), ["check"], 2,
         f"{WF}: (top level): expected a mapping of keys, got a list; start the file with "
         "`kind: ...`\n" + DONE.format(n=1)),
    case("empty-file", diamond({WF: ""}), ["check"], 2,
         f"{WF}: (top level): expected a mapping of keys, got an empty file; start the file with "
         "`kind: ...`\n" + DONE.format(n=1)),
    case("wrong-kind", diamond({WF: nodes(NODE_A).replace("kind: workflow", "kind: phase")}),
         ["check"], 2, f"{WF}: kind: expected `workflow` in workflows/, got `phase`; move the "
         "file or fix `kind`\n" + DONE.format(n=1)),
    case("unknown-top-level-key", diamond({WF: nodes(NODE_A) + "owner: me\n"}), ["check"], 2,
         f"{WF}: owner: unknown key `owner`; remove it or fix the spelling (allowed: kind, id, "
         "description, inputs, gates, budget, nodes, outputs)\n" + DONE.format(n=1)),
    case("unknown-node-key", diamond({WF: nodes(NODE_A.replace("inputs", "nedds: [], inputs"))}),
         ["check"], 2, f"{WF}: nodes[0].nedds: unknown key `nedds`; remove it or fix the spelling "
         "(allowed: id, phase, needs, inputs, gates, review, context_files)\n" + DONE.format(n=1)),
    case("missing-required-key", diamond({WF: "kind: workflow\nid: diamond\n"}), ["check"], 2,
         f"{WF}: nodes: missing required key `nodes`; add it\n" + DONE.format(n=1)),
    case("uppercase-node-id", diamond({WF: nodes(NODE_A.replace("id: a", "id: A"))}), ["check"],
         2, f"{WF}: nodes[0].id: `A` is not a valid id; use lowercase letters, digits, `-` and "
         "`_`, starting with a letter or digit\n" + DONE.format(n=1)),
    case("context-files-not-a-list",
         diamond({WF: nodes(NODE_A.replace("inputs", "context_files: docs/a.md, inputs"))}),
         ["check"], 2, f"{WF}: nodes[0].context_files: Input should be a valid list, got text "
         "`docs/a.md`; fix the value\n" + DONE.format(n=1)),
    case("id-does-not-match-file-name",
         diamond({"workflow_defs/workflows/other.yaml": nodes(NODE_A)}), ["check"], 2,
         "workflow_defs/workflows/other.yaml: id: `diamond` does not match the file name `other`; "
         "change the id to `other`\n" + DONE.format(n=1)),
    case("id-matches-a-file-name-only-in-case",
         diamond({"workflow_defs/workflows/Diamond.yaml": nodes(NODE_A)}), ["check"], 2,
         "workflow_defs/workflows/Diamond.yaml: id: `diamond` does not match the file name "
         "`Diamond`; `diamond.yaml` already exists and `Diamond` is not a valid id; remove this "
         "file or give it a new id and a file name to match\n" + DONE.format(n=1)),
    case("id-not-matching-a-free-file-name",
         diamond({"workflow_defs/workflows/Other.yaml": nodes(NODE_A).replace(
             "id: diamond", "id: other")}), ["check"], 2,
         "workflow_defs/workflows/Other.yaml: id: `other` does not match the file name `Other`; "
         "rename the file to `other.yaml`\n" + DONE.format(n=1)),
    case("phase-file-is-a-symlink-loop", loop_at("workflow_defs/phases/p-loop.yaml"), ["check"],
         2, "workflow_defs/phases/p-loop.yaml: cannot be read (Too many levels of symbolic "
         "links); make it a readable YAML file or remove it\n" + DONE.format(n=1)),
    case("phase-file-is-a-folder", folder_at("workflow_defs/phases/p-dir.yaml"), ["check"], 2,
         "workflow_defs/phases/p-dir.yaml: cannot be read (Is a directory); make it a readable "
         "YAML file or remove it\n" + DONE.format(n=1)),
    case("duplicate-id-yaml-and-yml",
         diamond({"workflow_defs/workflows/diamond.yml": nodes(NODE_A)}), ["check"], 2,
         f"workflow_defs/workflows/diamond.yml: id: duplicate workflow id `diamond` (also defined "
         f"in {WF}); rename one of them\n" + DONE.format(n=1)),
    case("duplicate-id-with-a-built-in", diamond({
        "workflow_defs/workflows/quick-delivery.yaml":
            nodes(NODE_A).replace("id: diamond", "id: quick-delivery")}), ["check"], 2,
         "workflow_defs/workflows/quick-delivery.yaml: id: duplicate workflow id `quick-delivery` "
         "(also defined in built-in:workflow_defs/workflows/quick-delivery.yaml); rename one of "
         "them\n" + DONE.format(n=1)),
    case("duplicate-node-id", diamond({WF: nodes(NODE_A, NODE_A)}), ["check"], 2,
         f"{WF}: nodes[1].id: duplicate node id `a` (first at nodes[0]); give each node a unique "
         "id\n" + DONE.format(n=1)),
    case("needs-cycle", diamond({WF: CYCLE}), ["check"], 2, CYCLE_ERR),
    case("unknown-phase", diamond({WF: nodes(NODE_A.replace("p-a", "p-zz"))}), ["check"], 2,
         f"{WF}: nodes[0].phase: unknown phase `p-zz` (known: "
         f"{phases('p-a', 'p-b', 'p-c', 'p-d')}); add workflow_defs/phases/p-zz.yaml or fix the "
         "id\n" + DONE.format(n=1)),
    case("unknown-needs",
         diamond({WF: nodes(NODE_A, NODE_B.replace("needs: [a]", "needs: [zz]"))}), ["check"], 2,
         f"{WF}: nodes[1].needs[0]: unknown node `zz` (known: a, b)\n"
         f"{WF}: nodes[1].inputs.up.node: `a` is not upstream of `b` (upstream: none); add `a` to "
         "nodes[1].needs or take the input from an upstream node\n" + DONE.format(n=2)),
    case("input-from-an-unknown-output",
         diamond({WF: nodes(NODE_A, NODE_B.replace("output: out", "output: nope"))}), ["check"], 2,
         f"{WF}: nodes[1].inputs.up.output: node `a` (phase `p-a`) has no output port `nope` "
         "(has: out)\n" + DONE.format(n=1)),
    case("input-with-node-but-no-output",
         diamond({WF: nodes(NODE_A, NODE_B.replace(", output: out", ""))}), ["check"], 2,
         f"{WF}: nodes[1].inputs.up: give either `input: <workflow input>` or `node: <id>, "
         "output: <port>`\n" + DONE.format(n=1)),
    case("input-from-an-unknown-node",
         diamond({WF: nodes(NODE_A, NODE_B.replace("node: a", "node: zz"))}), ["check"], 2,
         f"{WF}: nodes[1].inputs.up.node: unknown node `zz` (known: a, b); name an upstream node "
         "of this workflow\n" + DONE.format(n=1)),
    case("workflow-output-from-an-unknown-node",
         diamond({WF: nodes(NODE_A) + "outputs: {result: {node: zz, output: out}}\n"}), ["check"],
         2, f"{WF}: outputs.result.node: unknown node `zz` (known: a)\n" + DONE.format(n=1)),
    case("skill-file-missing",
         diamond({"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(
             path="skills/one/SKILL.md")}), ["check"], 2, NO_SKILL_ERR),
    case("skill-path-absolute",
         diamond({"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(path="/etc/passwd")}),
         ["check"], 2, "workflow_defs/phases/p-x.yaml: execution.skills[0].path: `/etc/passwd` is "
         "absolute; use a path under skills/ of the same workflow_defs folder\n"
         + DONE.format(n=1)),
    case("context-file-absolute-in-a-phase",
         diamond({PHASE_A: command_phase("p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"})
                  + "context_files: [/etc/passwd, ~/notes.md]\n"}), ["check"], 2,
         f"{PHASE_A}: context_files[0]: `/etc/passwd` is absolute; use a path relative to the "
         f"target repository\n{PHASE_A}: context_files[1]: `~/notes.md` is absolute; use a path "
         "relative to the target repository\n" + DONE.format(n=2)),
    case("context-file-outside-or-empty-on-a-node",
         diamond({WF: nodes(NODE_A.replace(
             "inputs", "context_files: ['../x.md', 'docs/..', ' '], inputs"))}), ["check"], 2,
         f"{WF}: nodes[0].context_files[0]: `../x.md` leaves the target repository; use a path "
         f"inside it\n{WF}: nodes[0].context_files[1]: `docs/..` names no file; name a file of "
         f"the target repository or remove the entry\n{WF}: nodes[0].context_files[2]: ` ` is "
         "empty; name a file of the target repository or remove the entry\n" + DONE.format(n=3)),
    case("new-on-invalid-yaml", diamond({WF: "kind: workflow\nid: diamond\nnodes: [\n"}),
         ["new", "diamond", "d2", "--request", "x"], 2, BAD_YAML_ERR),
    case("new-on-a-cycle", diamond({WF: CYCLE}), ["new", "diamond", "d2", "--request", "x"], 2,
         CYCLE_ERR),
    case("new-on-a-missing-skill",  # of a phase the workflow uses: another's would only warn
         diamond({"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(
             path="skills/one/SKILL.md"), "workflow_defs/workflows/xwf.yaml":
             "kind: workflow\nid: xwf\nnodes:\n  - {id: x, phase: p-x}\n"}),
         ["new", "xwf", "d2", "--request", "x"], 2, NO_SKILL_ERR),
]


def bad_id(delivery: str, problem: str) -> str:
    return f"error: delivery id `{delivery}` {problem}{USE_ID}"


def new_d(delivery: str) -> list[str]:
    return ["new", "diamond", "--request", "x", "--", delivery]


DELIVERY_IDS = [
    case("new-empty", diamond(), new_d(""), 2, bad_id("", "is empty")),
    case("new-dotdot", diamond(), new_d(".."), 2, bad_id("..", "contains `..`")),
    case("new-parent-path", diamond(), new_d("../evil"), 2,
         bad_id("../evil", "contains a path separator")),
    case("new-slash", diamond(), new_d("a/b"), 2, bad_id("a/b", "contains a path separator")),
    case("new-backslash", diamond(), new_d("a\\b"), 2,
         bad_id("a\\b", "contains a path separator")),
    case("new-leading-dash", diamond(), new_d("-rf"), 2, bad_id("-rf", ID_RULE)),
    case("new-leading-dot", diamond(), new_d(".hidden"), 2, bad_id(".hidden", ID_RULE)),
    case("new-65-chars", diamond(), new_d("a" * 65), 2, bad_id("a" * 65, ID_RULE)),
    case("new-unicode", diamond(), new_d("délivery"), 2, bad_id("délivery", ID_RULE)),
    case("new-inner-space", diamond(), new_d("rss cache"), 2, bad_id("rss cache", ID_RULE)),
    case("new-leading-space", diamond(), new_d(" d1"), 2, bad_id(" d1", ID_RULE)),
    case("new-ends-with-lock", diamond(), new_d("d1.lock"), 2, bad_id(
        "d1.lock", "ends with `.` or `.lock`, which git refuses in a branch name")),
    case("new-trailing-newline", diamond(), new_d("d1\n"), 2, bad_id("d1\n", ID_RULE)),
    case("new-other-case-of-an-existing-id", diamond(), new_d("D1"), 2,
         "error: delivery `D1` differs only in case from the existing delivery `d1` (phases/d1/); "
         "their folders and `feat-` branches would collide on a case-insensitive file system, "
         "pick another id\n"),
    case("new-already-exists", diamond(), new_d("d1"), 2,
         "error: delivery `d1` already exists (phases/d1/); pick another id or see "
         "`specops status d1`\n"),
    case("new-unknown-workflow", diamond(), ["new", "nope", "d2", "--request", "x"], 2,
         "error: unknown workflow `nope` (known: diamond, full-delivery, plan-build-review, "
         "quick-delivery); see `specops check`\n"),
    case("status-empty", diamond(), ["status", ""], 2, bad_id("", "is empty")),
    case("status-parent-path", diamond(), ["status", "../d1"], 2,
         bad_id("../d1", "contains a path separator")),
    case("status-leading-dash", diamond(), ["status", "--", "-rf"], 2, bad_id("-rf", ID_RULE)),
    case("status-unknown", diamond(), ["status", "ghost"], 2, UNKNOWN.format(d="ghost")),
    case("status-other-case-of-an-existing-id", diamond(), ["status", "D1"], 2,
         UNKNOWN.format(d="D1")),
    case("dry-run-run-dotdot", diamond(), ["run", "..", "--dry-run"], 2,
         bad_id("..", "contains `..`")),
    case("dry-run-run-unknown", diamond(), ["run", "ghost", "--dry-run"], 2,
         UNKNOWN.format(d="ghost")),
    case("dry-run-with-push", diamond(), ["run", "d1", "--dry-run", "--push"], 2,
         "Usage: specops run [OPTIONS] DELIVERY\nTry 'specops run --help' for help.\n\nError: "
         "--dry-run and --push cannot be combined: a dry run changes nothing, a push writes to "
         "origin\n"),
    case("dry-run-unknown-node", diamond(), ["dry-run", "d1", "zz"], 2,
         "error: delivery `d1` has no node `zz` (nodes: a, b, c, d)\n"),
    case("reopen-slash", diamond(), ["reopen", "a/b", "a"], 2,
         bad_id("a/b", "contains a path separator")),
    case("reopen-unknown", diamond(), ["reopen", "ghost", "a"], 2, UNKNOWN.format(d="ghost")),
    case("reopen-unknown-node", diamond(), ["reopen", "d1", "zz"], 2,
         "error: delivery `d1` has no node `zz` (nodes: a, b, c, d)\n"),
    case("resume-a-pending-step", diamond(), ["resume", "d1", "a"], 2,
         "error: step `a` of `d1` is `pending`; resume takes an `error` or `blocked` step\n"),
    case("approve-a-gate-the-workflow-lacks", diamond(), ["approve", "d1", "scope"], 2,
         "error: delivery `d1` has no `scope` gate (its gates: external-write)\n"),
    case("resume-trailing-space", diamond(), ["resume", "d1 ", "a"], 2, bad_id("d1 ", ID_RULE)),
    case("approve-unknown-delivery", diamond(), ["approve", "ghost", "scope"], 2,
         UNKNOWN.format(d="ghost")),
    case("approve-bad-id", diamond(), ["approve", "d1/..", "scope"], 2,
         bad_id("d1/..", "contains a path separator")),
    case("approve-unknown-gate", diamond(), ["approve", "d1", "nope"], 2,
         "error: unknown gate `nope` (gates: scope, requirements, design, target-write, risk, "
         "external-write)\n"),
]


def symlink_loop(root: Path) -> None:
    agentic(["docs/loop.md"])(root)
    (root / "docs/loop.md").symlink_to("loop.md")


def dangling_symlink(root: Path) -> None:
    agentic(["docs/dangling.md"])(root)
    (root / "docs/dangling.md").symlink_to("nowhere.md")


CONTEXT_PATHS = [
    case("absolute", agentic(["/etc/passwd"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `/etc/passwd` " + ABSOLUTE),
    case("home-relative", agentic(["~/notes.md"]), ["run", "d1", "--dry-run"], 2,
         f"{WHERE}[0]: `~/notes.md` " + ABSOLUTE),
    case("absolute-second-entry", agentic(["docs/arch.md", "/etc/passwd"]), ["dry-run", "d1"], 2,
         f"{WHERE}[1]: `/etc/passwd` " + ABSOLUTE),
    case("dotdot", agentic(["../outside.md"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `../outside.md` is outside the repository {{root}}; use a path inside it\n"),
    case("dotdot-inside-a-path", agentic(["docs/../../outside.md"]), ["run", "d1", "--dry-run"],
         2, f"{WHERE}[0]: `docs/../../outside.md` is outside the repository {{root}}; use a path "
         "inside it\n"),
    case("symlink-out", agentic(["docs/escape.md"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `docs/escape.md` resolves to {{tmp}}/outside.md, outside the repository "
         "{root} (a symlink); use a file inside the repository\n"),
    case("non-utf8", agentic(["docs/latin1.md"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `docs/latin1.md`: not UTF-8 text; save it as UTF-8 or remove it\n"),
    case("missing", agentic(["docs/none.md"]), ["run", "d1", "--dry-run"], 2,
         f"{WHERE}[0]: `docs/none.md` not found in {{root}}; fix the path or remove it\n"),
    case("other-case-of-an-existing-file", agentic(["DOCS/ARCH.md"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `DOCS/ARCH.md` not found in {{root}}; fix the path or remove it\n"),
    case("name-too-long", agentic(["docs/" + "a" * 300 + ".md"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `docs/{'a' * 300}.md` cannot be used (File name too long); fix the path "
         "or remove it\n"),
    case("symlink-loop", symlink_loop, ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `docs/loop.md` is a symlink loop; point the link at a file or remove it\n"),
    case("a-folder", agentic(["docs"]), ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `docs` is not a file; name a file\n"),
    case("dangling-symlink", dangling_symlink, ["dry-run", "d1"], 2,
         f"{WHERE}[0]: `docs/dangling.md` is not a file; name a file\n"),
    case("empty", agentic([""]), ["dry-run", "d1"], 2, f"{WHERE}[0]: `` is empty; remove it\n"),
    case("blank", agentic(["  "]), ["run", "d1", "--dry-run"], 2,
         f"{WHERE}[0]: `  ` is empty; remove it\n"),
]


HOOKS = [
    case("not-json", diamond(), ["hook", "pre-tool-use"], 0, stdin=b"not json", stdout=deny(
        "the PreToolUse payload on stdin is not JSON (Expecting value: line 1 column 1 (char 0));"
        " specops denies calls it cannot check")),
    case("empty-payload", diamond(), ["hook", "pre-tool-use"], 0, stdin=b"", stdout=deny(
        "the PreToolUse payload on stdin is not JSON (Expecting value: line 1 column 1 (char 0));"
        " specops denies calls it cannot check")),
    case("truncated-json", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=b'{"tool_name": "Bash", "tool_input": {"command": "ls"', stdout=deny(
             "the PreToolUse payload on stdin is not JSON (Expecting ',' delimiter: line 1 column "
             "53 (char 52)); specops denies calls it cannot check")),
    case("binary-garbage", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=b'{"tool_input": "\xff\xfe\x80"}', stdout=deny(
             "the PreToolUse payload on stdin is not JSON ('utf-8' codec can't decode byte 0xff "
             "in position 16: invalid start byte); specops denies calls it cannot check")),
    case("json-array", diamond(), ["hook", "pre-tool-use"], 0, stdin=b"[1, 2]", stdout=deny(
        "the PreToolUse payload on stdin is not a JSON object; specops denies calls it cannot "
        "check")),
    case("tool-input-not-an-object", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=b'{"tool_name": "Bash", "tool_input": "rm -rf /"}', stdout=deny(
             "tool_input is not a JSON object; specops denies calls it cannot check")),
    case("command-is-a-number", diamond(), ["hook", "pre-tool-use"], 0, stdin=tool_call(7),
         stdout=deny("tool_input.command is int, not a string; specops denies calls it cannot "
                     "check")),
    case("command-argv-with-a-number", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=tool_call(["rm", 7]), stdout=deny(
             "tool_input.command is list, not a string; specops denies calls it cannot check")),
    case("no-tool-input-is-a-tool-without-a-command", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=b'{"tool_name": "mcp__docs__search"}', stdout=""),
    case("deeply-nested", diamond(), ["hook", "pre-tool-use"], 0, stdin=b"[" * 100_000,
         stdout=deny("specops hook pre-tool-use could not check this call (RecursionError: "
                     "maximum recursion depth exceeded while decoding a JSON array from a unicode "
                     "string), so it is denied; retry with a simpler command")),
    case("oversized-command", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=tool_call("echo " + "a" * 2_000_000), stdout=deny(
             "the command is 2,000,005 characters long, more than the 200,000 the hook checks; "
             "split it, or write file contents with apply_patch")),
    case("rm-rf-root", diamond(), ["hook", "pre-tool-use"], 0, stdin=tool_call("rm -rf /"),
         stdout=deny("`rm -rf /` deletes the filesystem root /; delete single files by name "
                     "(`rm <file>`, or apply_patch `*** Delete File: <file>`) and build output "
                     "by folder (`rm -r bin`)")),
    case("rm-rf-root-as-argv", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=tool_call(["rm", "-rf", "/"]), stdout=deny(
             "`rm -rf /` deletes the filesystem root /; delete single files by name (`rm <file>`, "
             "or apply_patch `*** Delete File: <file>`) and build output by folder (`rm -r bin`)")),
    case("force-push", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=tool_call("git push --force"), stdout=deny(
             "`git push --force` force-pushes (`--force`), which rewrites remote history; the "
             "product commits and pushes after validation: push nothing")),
    case("hard-reset", diamond(), ["hook", "pre-tool-use"], 0,
         stdin=tool_call("git reset --hard"), stdout=deny(
             "`git reset --hard` discards uncommitted changes; to keep a file's changes, copy it "
             "aside (`cp <file> /tmp/`); to undo a file's changes, run "
             "`git show HEAD:<file> > <file>`")),
    case("unknown-event", diamond(), ["hook", "post-tool-use"], 2, stdin=tool_call("ls"),
         stderr="usage: specops hook {pre-tool-use|session-start|user-prompt-submit} < "
                "payload.json\n"),
    case("no-event", diamond(), ["hook"], 2, stdin=b"",
         stderr="usage: specops hook {pre-tool-use|session-start|user-prompt-submit} < "
                "payload.json\n"),
    case("session-start-not-json", diamond(), ["hook", "session-start"], 0, stdin=b"{oops",
         stdout=fail_open("session-start", "SessionStart", "JSONDecodeError: Expecting property "
                          "name enclosed in double quotes: line 1 column 2 (char 1)")),
    case("session-start-not-an-object", diamond(), ["hook", "session-start"], 0,
         stdin=b'["compact"]', stdout=""),
    case("prompt-submit-bad-delivery-id", diamond(), ["hook", "user-prompt-submit"], 0,
         stdin=b"{}", env={"SPECOPS_DELIVERY": "../d1"}, stdout=fail_open(
             "user-prompt-submit", "UserPromptSubmit",
             "UsageError: SPECOPS_DELIVERY `../d1` contains a path separator")),
    case("prompt-submit-unknown-delivery", diamond(), ["hook", "user-prompt-submit"], 0,
         stdin=b"{}", env={"SPECOPS_DELIVERY": "ghost"}, stdout=fail_open(
             "user-prompt-submit", "UserPromptSubmit", "UsageError: " + UNKNOWN.format(
                 d="ghost").removeprefix("error: ").strip())),
    case("prompt-submit-unknown-node", diamond(), ["hook", "user-prompt-submit"], 0,
         stdin=b"{}", env={"SPECOPS_DELIVERY": "d1", "SPECOPS_NODE": "zz"}, stdout=fail_open(
             "user-prompt-submit", "UserPromptSubmit",
             "UsageError: delivery `d1` has no node `zz` (nodes: a, b, c, d)")),
]


def tagged(cases: list[Case], category: str) -> list:
    return [pytest.param(*values, id=f"{category}/{cid}") for cid, values in cases]


CORPUS = (tagged(DEFINITIONS, "definitions") + tagged(DELIVERY_IDS, "delivery-id")
          + tagged(CONTEXT_PATHS, "context-path") + tagged(HOOKS, "hook"))


@pytest.fixture
def env(tmp_path: Path, clean_env: dict[str, str]) -> dict[str, str]:
    """clean_env with HOME inside tmp_path too, so a stray write there shows in the digest."""
    (tmp_path / "home").mkdir()
    base = {k: v for k, v in clean_env.items() if not k.startswith("SPECOPS_")}
    return {**base, "HOME": str(tmp_path / "home")}


def run_specops(root: Path, env: dict[str, str], argv: list[str],
                stdin: bytes | None) -> subprocess.CompletedProcess:
    if argv[0] == "hook":  # the hook takes no options: the root comes from SPECOPS_ROOT
        command, env = [str(VENV_BIN / "specops"), *argv], {**env, "SPECOPS_ROOT": str(root)}
    else:
        command = [str(VENV_BIN / "specops"), "--root", str(root), *argv]
    return subprocess.run(command, env=env, cwd=root, capture_output=True, timeout=60,
                          input=stdin, stdin=subprocess.DEVNULL if stdin is None else None)


@pytest.mark.e2e
@pytest.mark.parametrize(("setup", "argv", "code", "stderr", "stdout", "stdin", "extra_env"),
                         CORPUS)
def test_every_malformed_input_gets_its_exact_error_and_leaves_the_tree_byte_identical(
        tmp_path: Path, env: dict[str, str], setup: Setup, argv: list[str], code: int,
        stderr: str, stdout: str, stdin: bytes | None, extra_env: dict[str, str]) -> None:
    root = tmp_path / "harness"
    setup(root)
    before = tree_digest(tmp_path)
    result = run_specops(root, {**env, **extra_env}, argv, stdin)
    places = {"{root}": str(root.resolve()), "{tmp}": str(tmp_path.resolve())}
    for token, value in places.items():
        stderr, stdout = stderr.replace(token, value), stdout.replace(token, value)
    assert (result.returncode, result.stderr.decode(), result.stdout.decode()) == (
        code, stderr, stdout)
    assert tree_digest(tmp_path) == before


def test_context_paths_differing_only_in_case_or_notation_are_read_once_and_change_nothing(
        tmp_path: Path, env: dict[str, str]) -> None:
    root = tmp_path / "harness"
    for order, files in enumerate([
            ["docs/arch.md", "DOCS/ARCH.md", "./docs/arch.md", "docs//Arch.md"],
            ["DOCS/ARCH.md", "docs//Arch.md", "docs/arch.md"]]):  # the existing one read, wherever
        root = tmp_path / f"harness-{order}"
        agentic(files)(root)
        before = tree_digest(tmp_path)
        result = run_specops(root, env, ["dry-run", "d1", "--json"], None)
        assert (result.returncode, result.stderr) == (0, b"")
        parts = json.loads(result.stdout)["parts"]
        assert [p for p in parts if p["label"] == "context"] == [
            {"label": "context", "path": "docs/arch.md", "chars": len(
                "# Context file docs/arch.md (the step's context_files)\n\n# Architecture\n")}]
        assert tree_digest(tmp_path) == before

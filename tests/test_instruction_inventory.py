"""The instruction inventory (issue 43): one line per instruction the product gives an agent, with
the end-to-end test in which an agent does exactly that and the product keeps the promise.

What is inventoried is read from the code that says it, not kept by hand:
- every section of a session's current step: each line head (`READ`, `CONTRACT FIRST`, `Step
  details`, ...) that a string literal of `agent/prompt.py` starts with, and of the evaluator's
  and the contract reviewer's steps in `agent/review.py`;
- every numbered rule of the built-in `work-rules.md`;
- every message of the state hooks (`hooks/context.py`): each next action, each folder line and
  every other sentence of four words or more, unless it is listed as data the hook shows.
Commands the skills and goals name are inventoried in `agent/test_instruction_commands.py`, deny
reasons' alternatives in `hooks/test_deny_alternatives.py`. A section, rule or message without a
line here, a line whose section or message is gone, or a line whose test is gone fails this
suite."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from specops_dag.agent import prompt as prompt_module
from specops_dag.agent import review as review_module
from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.execution.step import run_step
from specops_dag.hooks import context as context_module

from .support.agents import agentic_git_harness, attempts, create, replay, settings_for

TESTS = Path(__file__).parent

# "<section>[ (variant)]: the promise" -> "file::test" that exercises it end to end. A section of
# the evaluator's step is prefixed `evaluator `, of the contract reviewer's `contract review `.
SECTIONS = {
    "Working directory: every path the prompt names resolves from it, in every target mode":
        "agent/test_agent_world.py::test_a_literal_agent_completes_the_chain_in_every_target_mode",
    "READ: every path under READ is readable, in order":
        "agent/test_replay_literal.py::test_the_literal_agent_reads_every_read_path_and_writes_every_write_path",
    "SKILLS: the entry skill is read from the snapshot":
        "agent/test_agent_world.py::test_an_agent_that_knows_only_its_prompt_raises_a_risk_a_person_decides",
    "TASK: a session that does the TASK red-green lands it and validation holds it":
        "workflow/test_quick_delivery_real_sdk.py::test_quick_delivery_on_net10_lands_a_real_method_and_test_proven_red_at_the_base",
    "TASK of the build that follows: a contract session writes only its contract, the build follows":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "This session does ONE task of the node's task list: each task does its own and they merge":
        "execution/test_fanout.py::test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff",
    "Step details: the step details file it names is read":
        "test_instruction_inventory.py::test_the_step_details_file_a_prompt_names_is_read_by_the_literal_agent",
    "TARGET: the frozen target framework is what validation holds the work to":
        "workflow/test_quick_delivery_real_sdk.py::test_quick_delivery_on_net10_lands_a_real_method_and_test_proven_red_at_the_base",
    "CHANGES: the command shows the product change and no delivery record":
        "agent/test_changes_line.py::test_a_later_nodes_changes_command_lists_the_product_change_and_no_delivery_record",
    "CHANGES (evaluator): the command shows the generator's uncommitted work":
        "agent/test_changes_line.py::test_the_evaluators_changes_command_shows_the_generators_uncommitted_work",
    "CHANGES (plain folder): no git history; the command lists the files written, no record":
        "agent/test_changes_line.py::test_a_plain_folder_prompts_changes_command_lists_the_product_change_and_no_delivery_record",
    "CONTRACT: the build is judged against the agreed contract":
        "execution/test_contract.py::test_a_build_whose_contract_test_did_not_run_fails_its_attempt",
    "CONTRACT FIRST: writing contract.md alone gets it reviewed before any build":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "The evaluator did not agree with your previous contract: round 2 hears why and is agreed":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "REVIEW: a score under its threshold blocks the round and the next round is told why":
        "execution/test_review_loop.py::test_a_block_then_a_pass_completes_in_round_two_with_the_review_as_feedback",
    "QA: a failed QA of the running application blocks the round whatever the scores":
        "validation/test_qa.py::test_a_failed_qa_overrules_the_evaluators_pass_and_the_generator_gets_its_evidence",
    "QA (evaluator): the evaluator is told the QA result and reads its evidence":
        "validation/test_qa.py::test_the_review_loop_runs_qa_before_the_evaluator_who_reads_its_evidence",
    "Scores of the earlier rounds: round 2 is told round 1's scores":
        "execution/test_evaluator_rounds.py::test_the_generator_knows_the_criteria_from_round_one_and_the_score_trend_after",
    "WRITE: every file WRITE names is writable and registered":
        "workflow/test_builtin_workflows.py::test_quick_delivery_completes_end_to_end_with_the_literal_agent_on_a_git_fixture",
    "WRITE (fan-out task): the task's files are writable and merge without conflict":
        "execution/test_fanout.py::test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff",
    "WRITE (contract): the contract is the one file the contract session writes":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "Node folder: TRX results written under it stay the step's":
        "agent/test_instruction_commands.py::test_every_command_the_built_in_texts_tell_an_agent_to_run_runs_in_its_sandbox",
    "Task folder: a task's own files go to its own folder, not the node's":
        "execution/test_fanout.py::test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff",
    "RISK: writing only the risk file parks the step at the risk gate":
        "agent/test_agent_world.py::test_an_agent_that_writes_only_its_risk_file_parks_the_step_until_a_person_decides",
    "RISK (fan-out task): the task's risk file parks the delivery":
        "execution/test_fanout.py::test_a_task_agent_raises_a_risk_through_its_prompts_risk_line_and_the_delivery_waits",
    "REPORT: the final message is the step's summary":
        "agent/test_agent_world.py::test_an_agent_that_knows_only_its_prompt_raises_a_risk_a_person_decides",
    "evaluator READ: the evaluator reads the generator's artifacts and its skill":
        "execution/test_review_loop.py::test_a_block_then_a_pass_completes_in_round_two_with_the_review_as_feedback",
    "evaluator SKILLS: the evaluator phase's own skill, not the generator's":
        "execution/test_evaluator_rounds.py::test_the_evaluator_gets_its_own_goal_criteria_skills_and_report_not_the_generators_rules",
    "evaluator TASK: the evaluator phase's own goal":
        "execution/test_evaluator_rounds.py::test_the_evaluator_gets_its_own_goal_criteria_skills_and_report_not_the_generators_rules",
    "evaluator Read-only: a write is stopped by the sandbox and recorded":
        "execution/test_review_loop.py::test_an_evaluator_that_tries_to_write_is_stopped_by_the_sandbox",
    "evaluator Criteria: one SCORE per criterion is read back from the saved block":
        "agent/test_replay_literal.py::test_an_evaluator_prompt_gets_a_pass_block_with_a_score_per_criterion",
    "evaluator REPORT: the verdict is read from the saved block of the last message":
        "agent/test_replay_literal.py::test_a_review_override_is_the_evaluators_last_message_verbatim",
    "evaluator VERDICT: a BLOCK verdict blocks the round":
        "execution/test_review_loop.py::test_a_block_then_a_pass_completes_in_round_two_with_the_review_as_feedback",
    "evaluator FINDINGS: a block without its format is asked for again, never charged":
        "execution/test_review_loop.py::test_a_malformed_report_is_asked_for_again_in_the_same_round_and_never_charged",
    "contract review READ: the proposed contract is the last file read":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review TASK: the reviewer judges the contract, nothing built":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review Nothing is built yet: the review runs before any build":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review Agree with VERDICT: PASS agrees, BLOCK sends the findings back":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review The work the contract is for: each task's contract is judged for its task":
        "execution/test_contract.py::test_each_fan_out_task_agrees_its_own_contract_before_it_builds",
    "contract review Read-only: the reviewer writes nothing, the caller saves its report":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review REPORT: the verdict is read from the saved block":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review VERDICT: the verdict alone decides":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
    "contract review FINDINGS: what to change reaches the next contract round":
        "execution/test_contract.py::test_a_contract_round_trip_agrees_in_round_two_and_the_build_is_judged_against_it",
}

RULES = {
    "rule 1: read, then follow the entry skill":
        "agent/test_replay_literal.py::test_the_literal_agent_reads_every_read_path_and_writes_every_write_path",
    "rule 2: writing exactly the WRITE files, reading the READ ones, completes the step":
        "agent/test_replay_literal.py::test_the_literal_agent_reads_every_read_path_and_writes_every_write_path",
    "rule 3: `dotnet build -warnaserror --no-restore` and `dotnet test --no-restore` run":
        "agent/test_agent_dotnet.py::test_the_agent_builds_and_tests_the_restored_worktree_with_the_real_sdk_in_the_sandbox",
    "rule 4: `.git` is read-only, the executor commits":
        "agent/test_agent_dotnet.py::test_in_the_writing_sandbox_the_network_and_the_worktrees_git_stay_closed",
    "rule 5: a question for a person goes to the RISK file and parks the step":
        "agent/test_agent_world.py::test_an_agent_that_changes_no_product_and_raises_a_risk_parks_the_step",
}

# Each message of the state hooks as its code spells it (`{…}` for what is filled in, white space
# folded) -> the test in which what it tells is done and the product keeps the promise.
HOOK = {
    "review the work of `{…}` read-only as evaluator `{…}`: read its READ paths, judge each "
    "criterion of your prompt, end with its REPORT block; write no file":
        "execution/test_review_loop.py::test_a_block_then_a_pass_completes_in_round_two_with_the_review_as_feedback",
    "continue task `{…}` of `{…}`: do its TASK, write its WRITE files ({…}, "
    "docs/phase/{…}/{…}-{…}.md), then end with a final summary":
        "execution/test_fanout.py::test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff",
    "continue the attempt of `{…}`: do its TASK, write its WRITE files ({…}, "
    "docs/phase/{…}/{…}.md), then end with a final summary":
        "agent/test_agent_world.py::test_a_literal_agent_completes_the_chain_in_every_target_mode",
    "fix the cause of the error, then `specops resume {…} {…}`":
        "execution/test_feedback_and_recovery.py::test_a_resumed_step_goes_on_from_its_own_leftover_changes_instead_of_a_write_conflict",
    "a person decides the `{…}` gate (`specops approve {…} {…} --note ...`)":
        "cli/test_first_hour.py::test_a_gate_approved_on_the_cli_is_run_by_the_sensor_of_the_printed_ui_with_the_replay_agent",
    "remove the cause of the block, then `specops resume {…} {…}`":
        "agent/test_agent_world.py::test_an_agent_that_writes_only_its_risk_file_parks_the_step_until_a_person_decides",
    "`specops run {…}` runs it":
        "cli/test_cli.py::test_run_goes_through_a_dagster_run_and_reports_the_steps",
    "it waits for {…}; see `specops status {…}`":
        "cli/test_cli.py::test_status_lists_deliveries_and_shows_steps_with_next_actions",
    "see `specops status {…}`":
        "cli/test_cli.py::test_status_lists_deliveries_and_shows_steps_with_next_actions",
    "`{…}` is completed and is not redone; `specops run {…}` runs {…}":
        "cli/test_cli.py::test_run_goes_through_a_dagster_run_and_reports_the_steps",
    "`{…}` is completed and is not redone; no step is runnable":
        "system/test_faults.py::test_runs_killed_at_random_points_never_lose_work_or_redo_completed_nodes",
    "task folder: {…} (task `{…}` of the node)":
        "execution/test_fanout.py::test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff",
    "node folder: {…}":
        "agent/test_agent_world.py::test_a_literal_agent_completes_the_chain_in_every_target_mode",
    "<workflow-state> specops hook {…} could not read the workflow state ({…}: {…}). Continue "
    "the step your prompt names; do not guess the current step from the chat history or from "
    "other deliveries. </workflow-state>":
        "hooks/test_context.py::test_the_state_hooks_fail_open_when_the_budget_runs_out",
    "No delivery is bound to this session (SPECOPS_DELIVERY is not set) and phases/index.json "
    "lists {…}. Run `specops status`, then ask the user which delivery to work on; do not guess.":
        "hooks/test_context.py::test_without_the_env_and_no_single_open_delivery_the_hook_does_not_guess",
    "sub-agent read list (give sub-agents these paths; never paste the files):":
        "agent/test_agent_world.py::test_a_literal_agent_completes_the_chain_in_every_target_mode",
    "The context was compacted. Recover only from the files of this delivery, not from the chat "
    "history or other deliveries; completed nodes are never redone.":
        "hooks/test_context.py::test_session_start_after_compaction_injects_the_recovery_index",
    "Read the entry skill completely after the READ files (work rule 1) and follow it; load an "
    "on-demand skill only when the entry skill calls for it along an edge above.":
        "agent/test_replay_literal.py::test_the_literal_agent_reads_every_read_path_and_writes_every_write_path",
    "The workflow context is {…} characters, over the {…}-character hook limit; read all of it "
    "in {…}. Preview (first {…} characters):":
        "hooks/test_context.py::test_a_context_over_the_total_cap_becomes_a_path_and_a_preview",
    "[... cut at {…} characters; the full context is in {…}] {…}":
        "hooks/test_context.py::test_an_oversized_section_is_cut_and_written_whole_to_the_node_folder",
}

# What the state hooks show that tells the agent nothing to do: data, and the error a fail-open
# warning quotes (the warning itself is in HOOK).
HOOK_DATA = {
    "SPECOPS_TASK `{…}`: node `{…}` has no such task (tasks: {…})": "an error the warning quotes",
    "{…} (step {…}, phase {…}, status {…}, {…} of {…} attempts used)": "the node's state",
    "delivery: {…} (workflow {…}, status {…}; state {…})": "the delivery's state",
    "- (none: this node starts from the request)": "the node's upstream",
    "on-demand skills (skill-graph edges from the entry skill):": "the heading of a list",
}

ELSEWHERE = {
    "skills and goals: every command they name runs in the sandbox":
        "agent/test_instruction_commands.py::test_every_command_the_built_in_texts_tell_an_agent_to_run_runs_in_its_sandbox",
    "deny reasons: every suggested alternative is allowed and runs":
        "hooks/test_deny_alternatives.py::test_every_alternative_runs_in_the_agents_sandbox_unblocked_and_unrejected",
}

INVENTORY = {**SECTIONS, **RULES, **HOOK, **ELSEWHERE}

# A line head: capitalized words up to a `:` or a ` (` (`READ (in order):`, `Step details: …`).
HEAD = re.compile(r"^([A-Z][\w'-]*(?: [\w'-]+)*?)(?=:(?:\s|$)| \()")
PLACEHOLDER = "{…}"


def functions_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def parsed(module: object) -> ast.Module:
    return ast.parse(Path(module.__file__).read_text(encoding="utf-8"))


def docstrings(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def literals(tree: ast.AST) -> list[ast.Constant | ast.JoinedStr]:
    """Every string literal of `tree` (an f-string whole, not its parts), docstrings left out."""
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    skip = inner | docstrings(tree)
    return [n for n in ast.walk(tree) if id(n) not in skip and (
        isinstance(n, ast.JoinedStr) or isinstance(n, ast.Constant) and isinstance(n.value, str))]


def spelled(node: ast.AST) -> list[str]:
    """A string expression as its code spells it, `{…}` for each value filled in: one text per
    way it can come out (`a if c else b` gives both), white space folded."""
    return [" ".join(text.split()) for text in raw(node)]


def raw(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return ["".join(v.value if isinstance(v, ast.Constant) else PLACEHOLDER
                        for v in node.values)]
    if isinstance(node, ast.IfExp):
        return raw(node.body) + raw(node.orelse)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in raw(node.left) for b in raw(node.right)]
    return [PLACEHOLDER]


def heads(tree: ast.AST, functions: tuple[str, ...] | None = None) -> set[str]:
    """The line heads of the string literals of `tree` (of `functions` only, when given)."""
    scopes = [tree] if functions is None else [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in functions]
    found = set()
    for scope in scopes:
        for node in literals(scope):
            first = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else node
            text = first.value if isinstance(first, ast.Constant) else ""
            if isinstance(text, str) and (m := HEAD.match(text)):
                found.add(m.group(1))
    return found


def prompt_sections() -> set[str]:
    """Every section head a session's current step can have, read from the code that writes it:
    the generator's and the contract session's (agent/prompt.py), the evaluator's and the
    contract reviewer's (agent/review.py)."""
    review = parsed(review_module)
    return (heads(parsed(prompt_module))
            | {f"evaluator {h}" for h in heads(review, ("evaluator_prompt_section",))}
            | {f"contract review {h}" for h in heads(review, ("contract_prompt_section",))})


ACTIONS = ("next_action", "folder_line")  # whatever these return is an instruction


def hook_messages() -> set[str]:
    """Every message of the state hooks: what `next_action` and `folder_line` can return, and
    every other string of four words or more (tags like `<workflow-state>` are no words) in
    hooks/context.py."""
    tree = parsed(context_module)
    found: set[str] = set()
    taken: set[int] = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in ACTIONS):
        taken |= {id(n) for n in ast.walk(fn)}
        for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value):
            found |= set(spelled(ret.value))
    for node in literals(tree):
        text = spelled(node)[0]
        words = re.findall(r"[A-Za-z]{2,}", re.sub(r"</?[\w-]+>", "", text))  # tags are no words
        if id(node) not in taken and len(words) >= 4:
            found.add(text)
    return found


def test_every_inventoried_instruction_names_a_test_that_exists() -> None:
    missing = []
    for instruction, target in INVENTORY.items():
        file, name = target.split("::")
        if not (TESTS / file).is_file() or name not in functions_of(TESTS / file):
            missing.append(f"{instruction}: {target}")
    assert missing == []


def section_of(line: str) -> str:
    """The section an inventory line is for: its text up to ` (` or `: `."""
    return re.split(r" \(|: ", line, maxsplit=1)[0]


def test_every_section_a_prompt_can_have_is_inventoried_and_every_line_is_one_it_has() -> None:
    emitted = prompt_sections()
    assert {"READ", "CHANGES", "CONTRACT", "REVIEW", "QA", "Step details",
            "evaluator Criteria", "contract review TASK"} <= emitted  # the reading works
    listed = {section_of(line) for line in SECTIONS}
    assert sorted(emitted - listed) == []  # a new section: add its line with its test
    assert sorted(listed - emitted) == []  # a section the code no longer writes leaves


def test_every_work_rule_is_inventoried() -> None:
    rules = re.findall(r"^(\d+)\. ", (BUILTIN_DEFS / "work-rules.md").read_text(), re.M)
    assert [line.split(":")[0] for line in RULES] == [f"rule {n}" for n in rules]


def test_every_message_of_the_state_hooks_is_inventoried_or_data() -> None:
    emitted = hook_messages()
    assert len(emitted) > 15  # the reading works
    listed = set(HOOK) | set(HOOK_DATA)
    assert sorted(emitted - listed) == []  # a new or changed message: add its line here
    assert sorted(listed - emitted) == []  # a message the hook no longer says leaves
    assert not set(HOOK) & set(HOOK_DATA)


def test_the_reading_catches_a_new_section_and_a_changed_hook_message() -> None:
    code = ast.parse('def f(x):\n    out = ["NEW SECTION: do it", f"Later (when {x}): go"]\n'
                     '    return "fix it now, then `specops resume` at once" if x else "done"\n')
    assert heads(code) == {"NEW SECTION", "Later"}
    [ret] = [n for n in ast.walk(code) if isinstance(n, ast.Return)]
    assert spelled(ret.value) == ["fix it now, then `specops resume` at once", "done"]


@pytest.mark.e2e
def test_the_step_details_file_a_prompt_names_is_read_by_the_literal_agent(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = create(root, None)
    details = root / "phases/d1/step0.md"  # a person's notes for step 0, `write`
    details.write_text("# Details\n\nName the release.\n")
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    shown = str(details.resolve())  # outside the worktree the agent works in: absolute
    assert f"\nStep details: {shown}\n" in (root / "phases/d1/write/prompt.md").read_text()
    [thread] = attempts(tmp_path, "write")
    read = thread[0]["literal"]
    assert read["action"] == "read" and read["paths"][-1] == shown
    assert thread[-1]["literal"]["action"] == "done"

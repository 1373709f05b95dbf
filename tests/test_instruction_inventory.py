"""The instruction inventory (issue 43): one line per instruction the product gives an agent (a
section of the current step, a work rule, a hook's next action) with the end-to-end test in which
an agent does exactly that and the product keeps the promise. Commands the skills and goals name
are inventoried in `agent/test_instruction_commands.py`, deny reasons' alternatives in
`hooks/test_deny_alternatives.py`. A section or rule without a line here, or a line whose test is
gone, fails this suite."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from specops_dag.builtin import BUILTIN_DEFS

TESTS = Path(__file__).parent

# instruction -> "file::test" that exercises it end to end
INVENTORY = {
    "READ: every path under READ is readable, in order":
        "agent/test_replay_literal.py::test_the_literal_agent_reads_every_read_path_and_writes_every_write_path",
    "SKILLS: the entry skill is read from the snapshot":
        "agent/test_agent_world.py::test_an_agent_that_knows_only_its_prompt_raises_a_risk_a_person_decides",
    "TARGET: the frozen target framework is what validation holds the work to":
        "workflow/test_quick_delivery_real_sdk.py::test_quick_delivery_on_net10_lands_a_real_method_and_test_proven_red_at_the_base",
    "CHANGES: the command shows the product change and no delivery record":
        "agent/test_changes_line.py::test_the_evaluators_changes_command_shows_the_generators_uncommitted_work",
    "WRITE: every file WRITE names is writable and registered":
        "workflow/test_builtin_workflows.py::test_quick_delivery_completes_end_to_end_with_the_literal_agent_on_a_git_fixture",
    "WRITE (fan-out task): the task's files are writable and merge without conflict":
        "execution/test_fanout.py::test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff",
    "RISK: writing only the risk file parks the step at the risk gate":
        "agent/test_agent_world.py::test_an_agent_that_writes_only_its_risk_file_parks_the_step_until_a_person_decides",
    "RISK (fan-out task): the task's risk file parks the delivery":
        "execution/test_fanout.py::test_a_task_agent_raises_a_risk_through_its_prompts_risk_line_and_the_delivery_waits",
    "REPORT: the final message is the step's summary":
        "agent/test_agent_world.py::test_an_agent_that_knows_only_its_prompt_raises_a_risk_a_person_decides",
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
    "hook: a task session is told its own task folder and record":
        "hooks/test_context.py::test_a_fan_out_task_session_is_told_the_task_folder_and_record_its_prompts_write_names",
    "skills and goals: every command they name runs in the sandbox":
        "agent/test_instruction_commands.py::test_every_command_the_built_in_texts_tell_an_agent_to_run_runs_in_its_sandbox",
    "deny reasons: every suggested alternative is allowed and runs":
        "hooks/test_deny_alternatives.py::test_every_alternative_runs_in_the_agents_sandbox_unblocked_and_unrejected",
}

SECTIONS = ("READ", "SKILLS", "TARGET", "CHANGES", "WRITE", "RISK", "REPORT")


def functions_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_every_inventoried_instruction_names_a_test_that_exists() -> None:
    missing = []
    for instruction, target in INVENTORY.items():
        file, name = target.split("::")
        if not (TESTS / file).is_file() or name not in functions_of(TESTS / file):
            missing.append(f"{instruction}: {target}")
    assert missing == []


def test_every_section_of_the_current_step_and_every_work_rule_is_inventoried() -> None:
    rules = re.findall(r"^(\d+)\. ", (BUILTIN_DEFS / "work-rules.md").read_text(), re.M)
    needed = [*SECTIONS, *(f"rule {n}" for n in rules)]
    covered = [n for n in needed if any(i.startswith((f"{n}:", f"{n} (")) for i in INVENTORY)]
    assert covered == needed

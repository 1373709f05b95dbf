from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specops_dag.agent.codex import CodexRun, codex_argv, find_codex, run_codex
from specops_dag.agent.replay import (
    LiteralPlay,
    ReplayServer,
    ReplayState,
    Scenario,
    StepPrompt,
    exit_code,
    literal_turn,
    load_scenario,
    parse_prompt,
    read_command,
)
from specops_dag.agent.review import (
    Criterion,
    evaluator_prompt_section,
    extract_review_block,
    read_review,
    save_report,
)
from specops_dag.errors import UsageError

from ..support.agents import replay, requests, settings_for
from ..support.harness import REPO, write_tree

HEADER = ("# Current step: `write` (step 0 of delivery `d1`, phase `c-write`, attempt 1 of 3)")


def generator_prompt(cwd: Path, reads: list[str], writes: list[str],
                     skill: str | None = "skills/c-write-skill/SKILL.md",
                     details: str | None = "steps/step0.md", risk: str | None = None) -> str:
    """A prompt in the product's current-step format, its paths as given."""
    read = [f"{i}. {p} (sha256 {'ab' * 32}) — input `in{i}`: the delivery request"
            for i, p in enumerate(reads, 1)] or ["(no upstream handoffs)"]
    skills = ["SKILLS (from the delivery snapshot):",
              f"- entry: `c-write-skill` {skill} (sha256 {'cd' * 32})", ""] if skill else []
    return "\n".join([
        "# AGENTS.md", "Be precise.", "", HEADER, "",
        f"Working directory: {cwd}. Every path below is absolute or relative to it.", "",
        "READ (in order):", *read, "", *skills,
        "TASK:", "Produce notes.md for the next step.",
        *([f"Step details: {details}"] if details else []), "",
        "WRITE:", *(f"- {p} (required)" for p in writes[:1]),
        *(f"- {p} (step record: what you did, commands, evidence)" for p in writes[1:]), "",
        *([f"RISK: {risk} — write it only to raise a risk a person must decide.", ""]
          if risk else []),
        "REPORT: end with a final message of at most 1,000 characters that summarizes what you "
        "did and names the files you wrote."])


EVALUATOR_PROMPT = """# Current step: review of `write` (review round 1 of 2; evaluator, read-only)

Working directory: /srv/repo. Every path below is absolute or relative to it.

READ (in order):
1. /srv/harness/phases/d1/request.md (sha256 aa) — input `request`: the delivery request
2. phases/d1/write/notes.md (sha256 bb) — the generator's artifact `notes`
3. phases/d1/write/validation/ — the validation logs and TRX

SKILLS (from the delivery snapshot):
- entry: `c-review-skill` phases/d1/skills/c-review-skill/SKILL.md (sha256 cc)

TASK:
Evaluate the work of `write` against each criterion below.
Read-only: do not modify, create or delete any file.

Criteria (a criterion passes at or above its threshold):
- `tests-pass` (threshold 7/10): the related tests pass
- `no-stubs` (threshold 8/10): nothing is stubbed

REPORT: your LAST message must contain exactly one block in this format.
<<<REVIEW
VERDICT: PASS|BLOCK
SCORE tests-pass: <0-10> — <one-line evidence>
SCORE no-stubs: <0-10> — <one-line evidence>
FINDINGS:
- <path:line — what is wrong and what would fix it>
>>>"""

CRITERIA = [Criterion("tests-pass", "the related tests pass", 7),
            Criterion("no-stubs", "nothing is stubbed", 8)]


def decisions(tmp_path: Path, node: str) -> list[dict | None]:
    return [e.get("literal") for e in requests(tmp_path) if e["node"] == node]


def tool_outputs(tmp_path: Path, node: str) -> list[str]:
    last = [e for e in requests(tmp_path) if e["node"] == node][-1]
    return [i["output"] for i in last["input"] if i.get("type") == "function_call_output"]


def run_literal(server: ReplayServer, tmp_path: Path, workdir: Path, prompt: str, *,
                node: str = "write", sandbox: str = "workspace-write",
                add_dirs: tuple[Path, ...] = ()) -> CodexRun:
    """One real `codex exec` attempt against the replay agent, as the executor runs it."""
    settings = settings_for(server, tmp_path)
    home = Path(settings.codex_home or "")
    home.mkdir(parents=True, exist_ok=True)
    argv = codex_argv(find_codex(settings, REPO), sandbox=sandbox, workdir=workdir,
                      last_message=tmp_path / f"{node}-last.txt", settings=settings,
                      delivery="d1", node=node, idle_timeout_s=30, add_dirs=add_dirs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    run = run_codex(argv, prompt, workdir=workdir, env={**env, "CODEX_HOME": str(home)},
                    timeout_s=90, idle_timeout_s=30,
                    stdout_path=tmp_path / f"{node}-stdout.jsonl",
                    stderr_path=tmp_path / f"{node}-stderr.txt")
    assert run.ok, run.process.stderr
    return run


def repo_with_inputs(tmp_path: Path) -> tuple[Path, Path]:
    """A git-less working folder with the relative READ files, and an absolute input file."""
    repo = write_tree(tmp_path / "repo", {
        "notes/upstream.md": "upstream notes body\n",
        "skills/c-write-skill/SKILL.md": "---\nname: c-write-skill\n---\nWrite notes.\n",
        "steps/step0.md": "step zero details\n"})
    request = write_tree(tmp_path / "inputs", {"request.md": "the request body\n"})
    return repo, request / "request.md"


# -- the prompt parser ------------------------------------------------------------------------

def test_the_parser_takes_paths_from_read_skills_step_details_and_write_of_a_generator_prompt(
        tmp_path: Path) -> None:
    text = generator_prompt(tmp_path / "repo", ["/abs/inputs/request.md", "notes/upstream.md",
                                                "phases/d1/write/validation/"],
                            ["out/notes.md", "/abs/outside/record.md"])
    assert parse_prompt(text) == StepPrompt(
        header=HEADER,
        reads=("/abs/inputs/request.md", "notes/upstream.md", "phases/d1/write/validation/"),
        skills=("skills/c-write-skill/SKILL.md",), step_details="steps/step0.md",
        writes=("out/notes.md", "/abs/outside/record.md"), criteria=(), evaluator=False)


def test_the_parser_takes_criteria_ids_and_the_review_format_of_an_evaluator_prompt() -> None:
    parsed = parse_prompt(EVALUATOR_PROMPT)
    assert parsed == StepPrompt(
        header="# Current step: review of `write` (review round 1 of 2; evaluator, read-only)",
        reads=("/srv/harness/phases/d1/request.md", "phases/d1/write/notes.md",
               "phases/d1/write/validation/"),
        skills=("phases/d1/skills/c-review-skill/SKILL.md",), step_details=None, writes=(),
        criteria=("tests-pass", "no-stubs"), evaluator=True)
    assert parsed.to_read == ["/srv/harness/phases/d1/request.md", "phases/d1/write/notes.md",
                              "phases/d1/write/validation/",
                              "phases/d1/skills/c-review-skill/SKILL.md"]


def test_the_parser_reads_the_products_own_evaluator_section_the_same_way() -> None:
    text = evaluator_prompt_section(CRITERIA, "write", ["a.md (sha256 1) — artifact `notes`"],
                                    1, 2, skill_lines=["entry: `r` s/SKILL.md (sha256 2)"])
    parsed = parse_prompt(text)
    assert (parsed.reads, parsed.skills, parsed.writes, parsed.criteria, parsed.evaluator) == (
        ("a.md",), ("s/SKILL.md",), (), ("tests-pass", "no-stubs"), True)


def test_the_parser_reads_the_last_current_step_when_earlier_context_quotes_one() -> None:
    quoted = "# Current step: old\n\nREAD (in order):\n1. old.md\n\nWRITE:\n- old-out.md\n\n"
    parsed = parse_prompt(quoted + generator_prompt(Path("/r"), [], ["new.md"]))
    assert (parsed.header, parsed.reads, parsed.writes) == (HEADER, (), ("new.md",))


def test_exit_codes_are_read_from_codex_s_header_not_from_the_command_output() -> None:
    output = ("Chunk ID: 4475ae\nWall time: 0.0000 seconds\nProcess exited with code 1\n"
              "Original token count: 14\nOutput:\nProcess exited with code 0\n")
    assert exit_code(output) == 1
    assert exit_code("Chunk ID: 1\nProcess running with session ID 7\nOutput:\n") is None


def test_the_read_command_cats_files_lists_folders_and_fails_naming_each_path() -> None:
    assert read_command(["a b.md", "docs/"]) == "\n".join([
        "# replay literal: read", "failed=''",
        "printf '\\n==> %s <==\\n' 'a b.md'", "cat -- 'a b.md'",
        "[ $? -eq 0 ] || failed=\"$failed\nCANNOT READ: \"'a b.md'",
        "printf '\\n==> %s <==\\n' docs/", "ls -la -- docs/",
        "[ $? -eq 0 ] || failed=\"$failed\nCANNOT READ: \"docs/",
        "if [ -n \"$failed\" ]; then printf '%s\\n' \"$failed\"; exit 1; fi"])


def user_message(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_files_take_the_longest_matching_suffix_and_skip_leaves_paths_unwritten() -> None:
    play = LiteralPlay(files={".md": "any markdown\n", "notes.md": "the notes"},
                       skip=["record.md"])
    prompt = generator_prompt(Path("/r"), [], ["out/notes.md", "out/other.md", "record.md"],
                              skill=None, details=None)
    chosen = literal_turn(play, [user_message("# AGENTS.md instructions for /r"),
                                 user_message(prompt)])
    assert chosen.decision == {"action": "write", "paths": ["out/notes.md", "out/other.md"],
                               "skipped": ["record.md"]}
    assert chosen.turn is not None and chosen.turn.shell is not None
    assert "cat > out/notes.md <<'SPECOPS_EOF'\nthe notes\nSPECOPS_EOF\n" in chosen.turn.shell
    assert "cat > out/other.md <<'SPECOPS_EOF'\nany markdown\nSPECOPS_EOF\n" in chosen.turn.shell


def test_the_prompts_risk_file_is_written_only_by_a_play_that_raises_a_risk() -> None:
    prompt = generator_prompt(Path("/r"), [], ["out/notes.md"], skill=None, details=None,
                              risk="phases/d1/write/risk.md")
    assert parse_prompt(prompt).risk == "phases/d1/write/risk.md"
    messages = [user_message("# AGENTS.md instructions for /r"), user_message(prompt)]
    quiet = literal_turn(LiteralPlay(), messages)
    assert quiet.decision == {"action": "write", "paths": ["out/notes.md"], "skipped": []}
    raised = literal_turn(LiteralPlay(risk="# Risk: no rollback\n"), messages)
    assert raised.decision == {"action": "write", "skipped": [],
                               "paths": ["out/notes.md", "phases/d1/write/risk.md"]}
    assert raised.turn is not None and raised.turn.shell is not None
    assert ("cat > phases/d1/write/risk.md <<'SPECOPS_EOF'\n# Risk: no rollback\nSPECOPS_EOF\n"
            in raised.turn.shell)


def test_a_command_that_reports_no_exit_code_counts_as_failed_for_every_path() -> None:
    prompt = generator_prompt(Path("/r"), ["a.md"], ["out.md"], skill=None, details="b.md")
    call = {"type": "function_call", "call_id": "c1", "name": "exec_command",
            "arguments": json.dumps({"cmd": read_command(["a.md", "b.md"])})}
    output = {"type": "function_call_output", "call_id": "c1",
              "output": "Chunk ID: 1\nWall time: 30.0 seconds\nProcess running with session ID 3"
                        "\nOutput:\n"}
    chosen = literal_turn(LiteralPlay(), [user_message(prompt), call, output])
    assert chosen.turn is not None and chosen.turn.message == (
        "BLOCKED: cannot read a.md, b.md\nno `Process exited with code` in the tool output:\n"
        "Chunk ID: 1\nWall time: 30.0 seconds\nProcess running with session ID 3\nOutput:")
    assert chosen.decision == {"action": "blocked", "step": "read", "failed": ["a.md", "b.md"]}


def test_without_the_products_prompt_the_literal_agent_blocks_instead_of_guessing() -> None:
    play = literal_turn(LiteralPlay(), [user_message("<environment_context>…")])
    assert play.turn is not None
    assert play.turn.message == ("BLOCKED: no prompt with a `READ (in order):` line; nothing to "
                                 "act on")


# -- the scenario syntax ----------------------------------------------------------------------

def test_a_node_falls_back_from_delivery_node_to_node_to_the_star_key() -> None:
    literal = {"literal": {}}
    scenario = Scenario.model_validate({"nodes": {"d1/write": [literal], "write": [literal],
                                                  "*": [literal]}})
    state = ReplayState(scenario, None)
    assert [state.script_key("d1", "write"), state.script_key("d2", "write"),
            state.script_key("d1", "other")] == ["d1/write", "write", "*"]
    assert ReplayState(Scenario.model_validate({"nodes": {"write": [literal]}}),
                       None).script_key("d1", "other") is None


@pytest.mark.parametrize(("text", "message"), [
    ("nodes:\n  n:\n    - 5\n", "nodes.n.0: an attempt is a list of turns or `{literal: {...}}`"),
    ("nodes:\n  n:\n    - literal: {bogus: 1}\n",
     "nodes.n.0.literal.bogus: Extra inputs are not permitted"),
    ("nodes:\n  n:\n    - {literal: {}, other: 1}\n", "nodes.n.0.other: Extra inputs are not "
     "permitted"),
    ("nodes:\n  n:\n    - literal: {before: [{message: hi}]}\n",
     "nodes.n.0.literal.before: item 0 is not a tool call: `before` holds `shell` or "
     "`apply_patch` turns only, since a message, failure or hang ends the codex turn before the "
     "literal agent acts"),
    ("nodes:\n  n:\n    - literal: {before: [{shell: ls, message: hi}]}\n",
     "nodes.n.0.literal.before.0: a turn has exactly one of `shell`, `apply_patch`, `message`, "
     "`fail` or `hang: true`"),
    ("nodes:\n  n:\n    - literal: {files: {a.md: x}, skip: [a.md]}\n",
     "nodes.n.0.literal: path suffix `a.md` is in both `files` and `skip`; keep one"),
    ("nodes:\n  n:\n    - literal: {skip: ['']}\n",
     "nodes.n.0.literal: an empty path suffix matches every WRITE path; name the suffix"),
    ("nodes:\n  n:\n    - - {message: hi, shell: ls}\n",
     "nodes.n.0.0: a turn has exactly one of `shell`, `apply_patch`, `message`, `fail` or "
     "`hang: true`"),
], ids=["not-an-attempt", "unknown-literal-field", "unknown-attempt-key", "message-before",
        "bad-before-turn", "files-and-skip", "empty-suffix", "scripted-turn-unchanged"])
def test_a_bad_literal_attempt_is_refused_with_its_yaml_path(tmp_path: Path, text: str,
                                                            message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_scenario(path)
    assert err.value.message == f"{path}: {message}; see `specops replay-server --help`"


def test_scripted_and_literal_attempts_load_side_by_side(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("nodes:\n  write:\n    - - {shell: ls}\n      - {message: done}\n"
                    "    - literal: {before: [{shell: ls}], files: {notes.md: hi}, skip: [x.md],"
                    " review: ok, usage: {input_tokens: 5}}\n  '*':\n    - literal: {}\n")
    nodes = load_scenario(path).nodes
    assert [t.message for t in nodes["write"][0]] == [None, "done"]
    literal = nodes["write"][1].literal
    assert (literal.files, literal.skip, literal.review, literal.usage.input_tokens) == (
        {"notes.md": "hi"}, ["x.md"], "ok", 5)
    assert nodes["*"][0].literal == LiteralPlay()


# -- end to end, the real codex CLI -----------------------------------------------------------

@pytest.mark.e2e
def test_the_literal_agent_reads_every_read_path_and_writes_every_write_path(
        tmp_path: Path) -> None:
    repo, request = repo_with_inputs(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    prompt = generator_prompt(repo, [str(request), "notes/upstream.md"],
                              ["out/notes.md", f"{outside}/record.md"])
    nodes = {"write": [{"literal": {"files": {"notes.md": "# Notes\n\nliteral content $HOME\n"}}}]}
    with replay(tmp_path, nodes) as server:
        run = run_literal(server, tmp_path, repo, prompt, add_dirs=(outside,))
    reads = [str(request), "notes/upstream.md", "skills/c-write-skill/SKILL.md", "steps/step0.md"]
    assert run.last_message == f"Wrote: out/notes.md, {outside}/record.md"
    assert (repo / "out/notes.md").read_text() == "# Notes\n\nliteral content $HOME\n"
    assert (outside / "record.md").read_text() == (
        f"# {outside}/record.md\n\nWritten by the replay agent (literal mode) for:\n\n{HEADER}\n\n"
        "Read:\n" + "".join(f"- {p}\n" for p in reads))
    assert decisions(tmp_path, "write") == [
        {"action": "read", "paths": reads},
        {"action": "write", "paths": ["out/notes.md", f"{outside}/record.md"], "skipped": []},
        {"action": "done", "wrote": ["out/notes.md", f"{outside}/record.md"], "skipped": []}]
    read_output, write_output = tool_outputs(tmp_path, "write")
    assert "Process exited with code 0" in read_output
    for body in ("the request body", "upstream notes body", "name: c-write-skill",
                 "step zero details"):
        assert body in read_output
    assert "Process exited with code 0" in write_output


@pytest.mark.e2e
def test_an_unreadable_read_path_blocks_the_attempt_and_nothing_is_written(
        tmp_path: Path) -> None:
    repo, request = repo_with_inputs(tmp_path)
    (repo / "docs").mkdir()
    prompt = generator_prompt(repo, [str(request), "missing.md", "docs/"], ["out/notes.md"])
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        run = run_literal(server, tmp_path, repo, prompt)
    assert run.last_message == ("BLOCKED: cannot read missing.md\n"
                                "cat: missing.md: No such file or directory")
    assert not (repo / "out").exists()
    assert decisions(tmp_path, "write")[-1] == {"action": "blocked", "step": "read",
                                                "failed": ["missing.md"]}
    [read_output] = tool_outputs(tmp_path, "write")
    assert "Process exited with code 1" in read_output and "==> docs/ <==" in read_output


@pytest.mark.e2e
def test_a_write_the_sandbox_refuses_blocks_with_the_path_named(tmp_path: Path) -> None:
    repo, request = repo_with_inputs(tmp_path)
    prompt = generator_prompt(repo, [str(request)], ["out/notes.md"])
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        run = run_literal(server, tmp_path, repo, prompt, sandbox="read-only")
    # the host's shell start-up may add its own noise inside the read-only sandbox (pyenv's
    # "cannot rehash" lines); the agent's message is the rest, verbatim
    said = "\n".join(line for line in run.last_message.splitlines()
                     if not line.startswith("pyenv: "))
    assert said in {  # GNU mkdir quotes by locale
        f"BLOCKED: cannot write out/notes.md\nmkdir: cannot create directory {q}: Read-only "
        "file system" for q in ("‘out’", "'out'")}
    assert not (repo / "out").exists()
    assert decisions(tmp_path, "write")[-1] == {"action": "blocked", "step": "write",
                                                "failed": ["out/notes.md"]}


@pytest.mark.e2e
def test_an_evaluator_prompt_gets_a_pass_block_with_a_score_per_criterion(
        tmp_path: Path) -> None:
    repo, request = repo_with_inputs(tmp_path)
    prompt = evaluator_prompt_section(CRITERIA, "write", [
        f"{request} (sha256 aa) — input `request`: the delivery request",
        "notes/upstream.md (sha256 bb) — the generator's artifact `notes`"], 1, 2,
        skill_lines=["entry: `c-review-skill` skills/c-write-skill/SKILL.md (sha256 cc)"])
    with replay(tmp_path, {"write.review": [{"literal": {}}]}) as server:
        run = run_literal(server, tmp_path, repo, prompt, node="write.review",
                          sandbox="read-only")
    evidence = f"read {request}, notes/upstream.md, skills/c-write-skill/SKILL.md"
    assert run.last_message == "\n".join([
        "<<<REVIEW", "VERDICT: PASS", f"SCORE tests-pass: 10 — {evidence}",
        f"SCORE no-stubs: 10 — {evidence}", "FINDINGS:", "- none", ">>>"])
    report = save_report(tmp_path / "node", "write", 1, extract_review_block(run.last_message),
                         run.last_message)
    review = read_review(report, CRITERIA)
    assert (review.verdict, review.scores, review.reason) == (
        "PASS", {"tests-pass": 10, "no-stubs": 10}, "all criteria met")
    assert decisions(tmp_path, "write.review")[-1] == {
        "action": "review", "criteria": ["tests-pass", "no-stubs"], "verbatim": False}


@pytest.mark.e2e
def test_a_review_override_is_the_evaluators_last_message_verbatim(tmp_path: Path) -> None:
    repo, request = repo_with_inputs(tmp_path)
    prompt = evaluator_prompt_section(CRITERIA, "write", [f"{request} (sha256 aa)"], 1, 2)
    verdict = ("Checked the tests.\n<<<REVIEW\nVERDICT: BLOCK\nSCORE tests-pass: 3 — "
               "tests/NotesTests.cs:12 fails\nSCORE no-stubs: 9 — none\nFINDINGS:\n"
               "- tests/NotesTests.cs:12 — fix the date format\n>>>")
    with replay(tmp_path, {"write.review": [{"literal": {"review": verdict}}]}) as server:
        run = run_literal(server, tmp_path, repo, prompt, node="write.review",
                          sandbox="read-only")
    assert run.last_message == verdict
    assert decisions(tmp_path, "write.review") == [
        {"action": "read", "paths": [str(request)]},
        {"action": "review", "criteria": ["tests-pass", "no-stubs"], "verbatim": True}]


@pytest.mark.e2e
def test_the_star_key_plays_for_unnamed_nodes_and_before_turns_run_first(
        tmp_path: Path) -> None:
    repo, request = repo_with_inputs(tmp_path)
    prompt = generator_prompt(repo, [str(request)], ["out/notes.md"])
    change = "mkdir -p src && printf 'public class App {}\\n' > src/App.txt"
    nodes = {"named": [[{"message": "not me"}]],
             "*": [{"literal": {"before": [{"shell": change}],
                                "usage": {"input_tokens": 7, "output_tokens": 3}}}]}
    with replay(tmp_path, nodes) as server:
        run = run_literal(server, tmp_path, repo, prompt, node="develop")
    assert run.last_message == "Wrote: out/notes.md"
    assert (repo / "src/App.txt").read_text() == "public class App {}\n"
    assert (repo / "out/notes.md").is_file()
    log = [e for e in requests(tmp_path) if e["node"] == "develop"]
    assert [e["turn"].get("shell") for e in log][:1] == [change]
    assert [e.get("literal", {}).get("action") for e in log] == [None, "read", "write", "done"]
    assert log[1]["turn"]["usage"] == {"input_tokens": 7, "output_tokens": 3}
    assert run.usage["input_tokens"] == 1000 + 3 * 7
